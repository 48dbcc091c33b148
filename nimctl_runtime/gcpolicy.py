"""The cyclic garbage collector's policy for a long-running operator process.

An operator allocates a large, long-lived heap at start (imported modules,
pydantic models and their validators, CRD schemas, informer indexes) and then
many short-lived dicts per watch event and reconcile. With CPython's default
thresholds (700, 10, 10) every few hundred decoded objects start a young
collection, and every full collection walks the whole start-up heap again: in
``tests/bench/nim_scale`` (docs/benchmarks.md, issue 30) full collections of
~150,000 start-up objects took about a fifth of the operator's CPU, charged to
whichever line happened to allocate (mostly JSON decoding of watch events).

:class:`GCPolicy` is a manager Runnable (on every replica, no leader election):
once the caches have synced it collects once and freezes what survived
(``gc.freeze``: moved to a permanent generation the collector never walks
again; nothing is freed by it and nothing becomes uncollectable that was
collectable) and raises the young generation's threshold, so the collector
runs over the objects born since, and less often. Cycles are still collected.
Then, every ``trim_interval`` seconds, glibc's ``malloc_trim(0)`` hands the C
heap's free pages back to the OS (:func:`trim_heap`), so memory freed after a
burst of work does not stay resident.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from nimctl_runtime.logsetup import get_logger

__all__ = ["DEFAULT_THRESHOLDS", "DEFAULT_TRIM_INTERVAL", "GCPolicy", "settle", "trim_heap"]

#: gen0 allocations before a young collection, then the gen1 and gen2 multipliers.
DEFAULT_THRESHOLDS = (10_000, 20, 20)
DEFAULT_TRIM_INTERVAL = 60.0


def _libc_trim() -> object:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc (musl, macOS): nothing to trim
        return None


_MALLOC_TRIM = _libc_trim()


def trim_heap() -> bool:
    """glibc's ``malloc_trim(0)``: give the C heap's free pages back to the OS.

    Freed memory inside glibc's heaps (decoded watch events, request buffers,
    the threads' arenas) otherwise stays resident. False where there is no
    glibc."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)  # type: ignore[operator]
    return True


_log = get_logger("nimctl.gc")


def settle(thresholds: tuple[int, int, int] = DEFAULT_THRESHOLDS) -> int:
    """Collect, freeze the survivors and set ``thresholds``; returns how many were frozen."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)
    return gc.get_freeze_count()


@dataclass
class GCPolicy:
    """Runs :func:`settle` once ``synced()`` returns (the manager's caches)."""

    synced: Callable[[], Awaitable[object]]
    thresholds: tuple[int, int, int] = DEFAULT_THRESHOLDS
    needs_leader_election: bool = False
    name: str = "gc-policy"
    #: Seconds between returns of the C heap's free pages to the OS (0: never).
    trim_interval: float = DEFAULT_TRIM_INTERVAL
    frozen: int = field(default=0, init=False)
    trims: int = field(default=0, init=False)

    async def run(self, stop: asyncio.Event) -> None:
        waiting = asyncio.ensure_future(self.synced())
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if waiting.done() and not waiting.cancelled() and waiting.exception() is None:
            self.frozen = settle(self.thresholds)
            _log.info("garbage collector settled", frozen_objects=self.frozen)
        else:
            waiting.cancel()
        while self.trim_interval and not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.trim_interval)
            if not stop.is_set() and trim_heap():
                self.trims += 1
        await stop.wait()
