"""Where an operator's memory goes: per-informer store figures and tracemalloc's top lines.

Used by the benchmarks' ``--memory`` option (``nimservice_bench``,
``clusterpolicy_bench``). Not a benchmark itself: ``python -m tests.bench`` does
not list it.

* :func:`informer_table` prints, for every informer of every cache the manager
  runs: the objects held, the stored (pickled) bytes, the label-index and the
  other indexes' entries, so a cache that holds what nobody reads shows up;
* :func:`traced_top` prints the ``tracemalloc`` statistics grouped by file and
  line (start ``tracemalloc`` before the operator, so its caches are traced);
* :func:`object_census` counts live objects by type (``gc``), per cached object.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections import Counter
from typing import Any


def _count(keys: Any) -> int:
    """Keys under one index value: a set, or the key itself (a str) when it is the only one."""
    return 1 if isinstance(keys, str) else len(keys)


def caches_of(manager: Any) -> list[Any]:
    """The manager's own cache and any other cache it runs (the GPU controllers' own)."""
    out = [manager.cache]
    for slot in (*manager._other_runnables, *manager._leader_runnables):
        runnable = slot.runnable
        if hasattr(runnable, "informers") and runnable not in out:
            out.append(runnable)
    return out


def informer_table(manager: Any) -> int:
    """Print one line per informer; returns the number of objects cached in all."""
    total_objects = 0
    total_bytes = 0
    print(f"  {'informer':<52} {'objects':>8} {'stored B':>10} {'B/obj':>7} {'idx':>6} {'lbl':>6}")
    for cache in caches_of(manager):
        for (api_version, kind), informer in sorted(cache.informers().items()):
            store = informer.store
            n = len(store)
            size = store.size_bytes()
            index_entries = sum(
                _count(keys) for index in store._indices.values() for keys in index.values()
            )
            label_entries = sum(
                _count(keys) for by_value in store._labels.values() for keys in by_value.values()
            )
            total_objects += n
            total_bytes += size
            name = f"{api_version}/{kind}"
            if cache is not manager.cache:
                name += " (own cache)"
            print(
                f"  {name:<52} {n:8d} {size:10d} {size // max(n, 1):7d}"
                f" {index_entries:6d} {label_entries:6d}"
            )
    print(f"  {'all informers':<52} {total_objects:8d} {total_bytes:10d}")
    return total_objects


def connections(client: Any, label: str) -> None:
    """Open connections of a Client: the watches (aiohttp's session) and the unary
    requests (the HTTP/1.1 pool, ``client._pool``), each in use and idle.

    Each TLS connection holds asyncio's 256 KiB read buffer.
    """
    session = getattr(client, "_session", None)
    connector = getattr(session, "connector", None)
    pool = getattr(client, "_pool", None)
    if connector is None and pool is None:
        print(f"  {label}: no session, no request pool")
        return
    if connector is not None:
        in_use = len(getattr(connector, "_acquired", ()))
        idle = sum(len(v) for v in getattr(connector, "_conns", {}).values())
        print(f"  {label}: watches {in_use} connections in use, {idle} idle")
    if pool is not None:
        opened = len(getattr(pool, "_open", ()))
        idle = pool.idle
        print(
            f"  {label}: requests {opened - idle} connections in use, {idle} idle "
            f"({pool.connections_made} made)"
        )
    print(f"  {label}: (256 KiB TLS read buffer per connection)")


def traced_top(limit: int = 25, per: int = 1, unit: str = "") -> int:
    """Print tracemalloc's top lines (sizes divided by *per*); returns the traced total."""
    if not tracemalloc.is_tracing():
        print("  (tracemalloc is not running)")
        return 0
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
        ]
    )
    stats = snapshot.statistics("lineno")
    total = sum(s.size for s in stats)
    suffix = f" per {unit}" if unit else ""
    print(f"  traced Python memory {total / 1e6:8.1f} MB; top lines{suffix}:")
    for stat in stats[:limit]:
        frame = stat.traceback[0]
        where = f"{_short(frame.filename)}:{frame.lineno}"
        print(f"  {stat.size / per:10.0f} B {stat.count / per:8.1f} blocks  {where}")
    if tracemalloc.get_traceback_limit() > 1:
        print("  where the top lines were called from:")
        for stat in snapshot.statistics("traceback")[: limit // 3]:
            print(f"  {stat.size / per:10.0f} B{suffix}")
            for line in stat.traceback.format(limit=tracemalloc.get_traceback_limit())[::2]:
                print(f"      {_short(line.strip())}")
    by_file = snapshot.statistics("filename")
    print(f"  by file{suffix}:")
    for stat in by_file[: limit // 2]:
        frame = stat.traceback[0]
        print(f"  {stat.size / per:10.0f} B  {_short(frame.filename)}")
    return total


def object_census(per: int, limit: int = 15) -> None:
    """Live objects by type, per cached object (what a cached object keeps alive)."""
    counts = Counter(type(o).__name__ for o in gc.get_objects())
    print(f"  live gc-tracked objects {sum(counts.values())}; top types per cached object:")
    for name, n in counts.most_common(limit):
        print(f"  {n / max(per, 1):10.2f}  {name}")


def _short(filename: str) -> str:
    for marker in ("/site-packages/", "/work/main/", "/lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename
