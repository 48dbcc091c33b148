"""Benchmark localcluster: writes/s from one client, a 10,000-object list, watch
fan-out to 20 watchers, and memory against the stored JSON.

Run: ``.venv/bin/python -m tests.bench.localcluster_bench [--objects 10000] [--simulator]``.
The server runs in its own process (``nimctl localcluster``, ``--no-simulator``
unless ``--simulator``) so client and server do not share one event loop; its CPU
per request (read from ``/proc/<pid>/stat``) is printed beside each rate. Memory
is measured in process with tracemalloc. With ``NIMCTL_BENCH_PROFILE_SERVER=1``
py-spy samples the server over the write phases and the top frames are printed.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import ssl
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import aiohttp
from ruamel.yaml import YAML

from localcluster.registry import Registry
from localcluster.storage import Storage
from tests.bench._separate import (
    print_server_profile,
    proc_cpu,
    server_profiling_requested,
    spy_record,
    spy_stop,
)


def _cm(name: str, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "bench", "shard": str(i % 10)},
            "annotations": {"bench/index": str(i)},
        },
        "data": {"config.yaml": "x" * 200, "index": str(i)},
    }


async def _start_server(
    tmp: Path, simulator: bool = False
) -> tuple[subprocess.Popen[bytes], str, str, ssl.SSLContext]:
    kubeconfig = tmp / "kubeconfig"
    flags = [] if simulator else ["--no-simulator"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "nimctl", "localcluster", *flags,
         "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    while True:
        line = await asyncio.to_thread(proc.stdout.readline)
        if not line:
            raise RuntimeError("nimctl localcluster exited early")
        if b"kubeconfig written" in line:
            break
    doc = YAML(typ="safe").load(kubeconfig.read_text())
    import base64

    ca = base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"])
    ctx = ssl.create_default_context(cadata=ca.decode())
    return proc, doc["clusters"][0]["cluster"]["server"], doc["users"][0]["user"]["token"], ctx


async def _writes(
    session: aiohttp.ClientSession, base: str, n: int, concurrency: int, pid: int
) -> dict[str, tuple[float, float]]:
    """Per verb: (requests/s, server CPU ms per request)."""
    url = f"{base}/api/v1/namespaces/default/configmaps"
    sem = asyncio.Semaphore(concurrency)
    out: dict[str, tuple[float, float]] = {}

    async def create(i: int) -> None:
        async with sem, session.post(url, json=_cm(f"w{concurrency}-{i}", i)) as r:
            assert r.status == 201, await r.text()
            await r.read()

    async def update(i: int) -> None:
        body = {"data": {"index": f"u{i}"}}
        headers = {"Content-Type": "application/merge-patch+json"}
        async with (
            sem,
            session.patch(f"{url}/w{concurrency}-{i}", data=json.dumps(body), headers=headers) as r,
        ):
            assert r.status == 200, await r.text()
            await r.read()

    async def delete(i: int) -> None:
        async with sem, session.delete(f"{url}/w{concurrency}-{i}") as r:
            assert r.status == 200, await r.text()
            await r.read()

    for name, fn in (("create", create), ("patch", update), ("delete", delete)):
        t0, cpu0 = time.perf_counter(), proc_cpu(pid)
        await asyncio.gather(*(fn(i) for i in range(n)))
        dt = time.perf_counter() - t0
        out[name] = (n / dt, 1000 * (proc_cpu(pid) - cpu0) / n)
    return out


async def _list(session: aiohttp.ClientSession, base: str, n: int) -> tuple[float, int]:
    url = f"{base}/api/v1/namespaces/default/configmaps"
    sem = asyncio.Semaphore(16)

    async def create(i: int) -> None:
        async with sem, session.post(url, json=_cm(f"l{i}", i)) as r:
            await r.read()

    await asyncio.gather(*(create(i) for i in range(n)))
    best = float("inf")
    count = 0
    for _ in range(3):
        t0 = time.perf_counter()
        async with session.get(url) as r:
            body = await r.read()
        doc = json.loads(body)
        best = min(best, time.perf_counter() - t0)
        count = len(doc["items"])
    return best, count


async def _fanout(
    session: aiohttp.ClientSession, base: str, watchers: int, writes: int, pid: int
) -> tuple[float, float]:
    url = f"{base}/api/v1/namespaces/bench-watch/configmaps"
    async with session.post(
        f"{base}/api/v1/namespaces",
        json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-watch"}},
    ) as r:
        await r.read()
    async with session.get(url) as r:
        rv = (await r.json())["metadata"]["resourceVersion"]
    done = asyncio.Event()
    remaining = [watchers]

    async def watch() -> None:
        seen = 0
        async with session.get(url, params={"watch": "true", "resourceVersion": rv}) as r:
            async for _line in r.content:
                seen += 1
                if seen >= writes:
                    break
        remaining[0] -= 1
        if remaining[0] == 0:
            done.set()

    tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
    await asyncio.sleep(0.5)
    t0, cpu0 = time.perf_counter(), proc_cpu(pid)
    sem = asyncio.Semaphore(16)

    async def create(i: int) -> None:
        body = _cm(f"f{i}", i)
        body["metadata"]["namespace"] = "bench-watch"
        async with sem, session.post(url, json=body) as r:
            await r.read()

    await asyncio.gather(*(create(i) for i in range(writes)))
    await asyncio.wait_for(done.wait(), 120)
    dt, cpu = time.perf_counter() - t0, proc_cpu(pid) - cpu0
    for t in tasks:
        t.cancel()
    return dt, cpu


def _memory(n: int) -> tuple[int, int]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for i in range(n):
        storage.create(_cm(f"m{i}", i))
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    used = sum(s.size_diff for s in after.compare_to(before, "filename"))
    info = storage.resolve("v1", "ConfigMap")
    entries, _, _ = storage.list_entries(info)
    stored_json = sum(len(e.data) for e in entries)
    return used, stored_json


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument(
        "--simulator", action="store_true", help="run the server with its simulator (as tests do)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        proc, base, token, ctx = await _start_server(Path(tmp), args.simulator)
        spy_out = Path(tmp) / "server.spy"
        spy = spy_record(proc.pid, spy_out) if server_profiling_requested() else None
        try:
            conn = aiohttp.TCPConnector(ssl=ctx, limit=200)
            headers = {"Authorization": f"Bearer {token}"}
            timeout = aiohttp.ClientTimeout(total=600)
            async with aiohttp.ClientSession(
                connector=conn, headers=headers, timeout=timeout
            ) as session:
                for conc in (1, 8, 32):
                    rates = await _writes(session, base, args.writes, conc, proc.pid)
                    figures = ", ".join(
                        f"{k} {v:,.0f}/s ({cpu:.2f} ms server CPU each)"
                        for k, (v, cpu) in rates.items()
                    )
                    print(f"writes, one client, {conc} in flight: {figures}")
                if spy is not None:
                    spy_stop(spy)
                    print_server_profile(spy_out, "writes")
                best, count = await _list(session, base, args.objects)
                print(f"list of {count:,} objects: {best * 1000:.0f} ms (aim < 300 ms)")
                dt, cpu = await _fanout(session, base, args.watchers, args.writes, proc.pid)
                print(
                    f"watch fan-out: {args.writes:,} writes to {args.watchers} watchers in "
                    f"{dt:.2f} s ({args.writes * args.watchers / dt:,.0f} events/s delivered, "
                    f"{1000 * cpu / args.writes:.2f} ms server CPU per write)"
                )
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    used, stored = _memory(args.objects)
    print(
        f"memory for {args.objects:,} objects: {used / 1e6:.1f} MB vs {stored / 1e6:.1f} MB of "
        f"stored JSON = {used / stored:.2f}x (aim <= 3x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
