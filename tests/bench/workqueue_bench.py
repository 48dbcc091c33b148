"""Workqueue benchmark: adds per second and how many adds collapse (dedup ratio).

Run: .venv/bin/python -m tests.bench.workqueue_bench
Prints figures only; never fails on a time.
"""

from __future__ import annotations

import asyncio
import random
import time

from nimctl_runtime.workqueue import ShutDown, WorkQueue


def bench_add_unique(n: int) -> float:
    q: WorkQueue[int] = WorkQueue("bench-unique")
    t0 = time.perf_counter()
    for i in range(n):
        q.add(i)
    return n / (time.perf_counter() - t0)


def bench_add_hot(n: int, keys: int) -> tuple[float, int]:
    q: WorkQueue[int] = WorkQueue("bench-hot")
    t0 = time.perf_counter()
    for i in range(n):
        q.add(i % keys)
    return n / (time.perf_counter() - t0), len(q)


async def bench_with_workers(n: int, keys: int, workers: int, work_s: float) -> dict[str, float]:
    """Events for ``keys`` objects arrive while ``workers`` reconcile; how many runs happen."""
    q: WorkQueue[int] = WorkQueue("bench-workers")
    processed = 0

    async def worker() -> None:
        nonlocal processed
        while True:
            try:
                k = await q.get()
            except ShutDown:
                return
            await asyncio.sleep(work_s)
            processed += 1
            q.done(k)

    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    rnd = random.Random(1)
    t0 = time.perf_counter()
    for i in range(n):
        q.add(rnd.randrange(keys))
        if i % 100 == 0:
            await asyncio.sleep(0)
    add_s = time.perf_counter() - t0
    await q.shut_down_with_drain(60)
    await asyncio.gather(*tasks)
    total_s = time.perf_counter() - t0
    return {"adds_per_s": n / add_s, "processed": processed, "ratio": n / max(processed, 1),
            "total_s": total_s}  # fmt: skip


async def bench_add_after(n: int) -> float:
    q: WorkQueue[int] = WorkQueue("bench-after")
    t0 = time.perf_counter()
    for i in range(n):
        q.add_after(i, 0.001 + (i % 100) * 1e-5)
    rate = n / (time.perf_counter() - t0)
    q.shut_down()
    return rate


def main() -> None:
    n = 200_000
    print(f"add, unique keys:           {bench_add_unique(n):>12,.0f} adds/s")
    rate, depth = bench_add_hot(n, 100)
    print(f"add, 100 hot keys:          {rate:>12,.0f} adds/s  depth {depth} "
          f"(dedup ratio {n / depth:,.0f}:1)")  # fmt: skip
    print(f"add_after (delayed):        {asyncio.run(bench_add_after(50_000)):>12,.0f} adds/s")
    for keys, workers, work in ((1000, 4, 0.0005), (50, 8, 0.001)):
        r = asyncio.run(bench_with_workers(50_000, keys, workers, work))
        print(
            f"with {workers} workers, {keys} keys, {work * 1000:g} ms/reconcile: "
            f"{r['adds_per_s']:,.0f} adds/s, {r['processed']:,.0f} reconciles for 50,000 adds "
            f"(dedup ratio {r['ratio']:.1f}:1), drained in {r['total_s']:.2f} s"
        )


if __name__ == "__main__":
    main()
