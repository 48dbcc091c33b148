"""Echo controller benchmark: converge 1,000 objects, then restart and converge again.

Each source ConfigMap gets one copy ConfigMap. Prints objects/s and API
writes per object (counted from ``rest_client_requests_total``: POST, PUT,
PATCH and DELETE sent by the operator) for the first run, and the same after a
restart: a level-based, idempotent controller must write nothing the second
time.

Run: .venv/bin/python -m tests.bench.echo_controller_bench [N] [--server-process]

By default localcluster runs in the benchmark's own process and event loop,
so the API server's work is counted against the controller; with
``--server-process`` it runs as ``nimctl localcluster`` in its own process.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from localcluster.cluster import LocalCluster
from nimctl_runtime import metrics
from nimctl_runtime.client import Client, load_config
from nimctl_runtime.logsetup import configure_logging
from nimctl_runtime.manager import Manager
from tests.integration.runtime_controller.echo import EchoReconciler, add_echo_controller, source_cm

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def writes_sent() -> float:
    total = 0.0
    for metric in metrics.rest_client_requests_total.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels.get("method") in WRITE_METHODS:
                total += sample.value
    return total


async def converge(kubeconfig: str, n: int) -> tuple[float, EchoReconciler, float]:
    """Run a manager until every source was reconciled and the queue is idle."""
    client = Client(load_config(kubeconfig))
    manager = Manager(client)
    rec, ctrl = add_echo_controller(manager, workers=8)
    before = writes_sent()
    stop = asyncio.Event()
    t0 = time.perf_counter()
    task = asyncio.create_task(manager.start(stop))
    await manager.elected.wait()
    idle_since: float | None = None
    while True:
        await asyncio.sleep(0.01)
        busy = len(ctrl.queue) or ctrl.in_flight() or ctrl.queue.waiting()
        if len(rec.seen) >= n and not busy and ctrl.has_synced():
            idle_since = idle_since or time.perf_counter()
            if time.perf_counter() - idle_since > 0.2:
                break
        else:
            idle_since = None
    elapsed = idle_since - t0
    writes = writes_sent() - before
    stop.set()
    await task
    await client.close()
    return elapsed, rec, writes


async def create_sources(kubeconfig: str, n: int) -> None:
    async with Client(load_config(kubeconfig)) as admin:
        t0 = time.perf_counter()
        sem = asyncio.Semaphore(32)

        async def make(i: int) -> None:
            async with sem:
                await admin.create(source_cm(f"src-{i:05d}"))

        await asyncio.gather(*(make(i) for i in range(n)))
        print(f"created {n} source objects in {time.perf_counter() - t0:.2f} s")


async def measure(kubeconfig: str, n: int) -> None:
    await create_sources(kubeconfig, n)
    for label in ("first run", "after restart"):
        elapsed, rec, writes = await converge(kubeconfig, n)
        print(
            f"{label:>14}: {n} objects converged in {elapsed:.2f} s = {n / elapsed:,.0f} objects/s, "
            f"{rec.reconciles} reconciles, {writes:.0f} API writes ({writes / n:.2f} per object)"
        )


async def main(n: int, server_process: bool) -> None:
    configure_logging("console", "warning")
    with TemporaryDirectory() as tmp:
        if not server_process:
            print("localcluster in this process (shares the event loop with the controller)")
            async with LocalCluster(simulator=False, workdir=Path(tmp)) as cluster:
                await measure(str(cluster.kubeconfig_path), n)
            return
        print("localcluster in its own process")
        kubeconfig = Path(tmp) / "kubeconfig"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "nimctl", "--log-level", "warning",
            "localcluster", "--no-simulator", "--kubeconfig", str(kubeconfig),
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            async with asyncio.timeout(60):
                while b"kubeconfig written" not in await proc.stdout.readline():
                    pass
            await measure(str(kubeconfig), n)
        finally:
            proc.terminate()
            await proc.wait()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    asyncio.run(main(int(args[0]) if args else 1000, "--server-process" in sys.argv))
