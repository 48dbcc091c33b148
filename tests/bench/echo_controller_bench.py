"""Echo controller benchmark: converge 1,000 objects, then restart and converge again.

Each source ConfigMap gets one copy ConfigMap. Prints objects/s and API
writes per object for the first run, and the same after a restart (a
level-based, idempotent controller must write nothing the second time).

Run: .venv/bin/python -m tests.bench.echo_controller_bench [N]
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from nimctl_runtime.client import Client, load_config
from nimctl_runtime.localcluster.cluster import LocalCluster
from nimctl_runtime.logsetup import configure_logging
from nimctl_runtime.manager import Manager
from tests.integration.runtime_controller.echo import EchoReconciler, add_echo_controller, source_cm

WRITE_VERBS = {"create", "update", "patch", "delete"}


async def converge(
    kubeconfig: str, n: int, server_writes: list[int]
) -> tuple[float, EchoReconciler, int]:
    """Run a manager until ``n`` copies exist and the queue is idle; return seconds and counts."""
    client = Client(load_config(kubeconfig))
    manager = Manager(client)
    rec, ctrl = add_echo_controller(manager, workers=8)
    before = server_writes[0]
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
    elapsed = (idle_since or time.perf_counter()) - t0
    stop.set()
    await task
    await client.close()
    return elapsed, rec, server_writes[0] - before


async def main(n: int) -> None:
    configure_logging("console", "warning")
    with TemporaryDirectory() as tmp:
        async with LocalCluster(simulator=False, workdir=Path(tmp)) as cluster:
            writes = [0]

            async def count(request, info, handler):  # type: ignore[no-untyped-def]
                response = await handler(request)
                if info.user == "bench" and info.verb in WRITE_VERBS and response.status < 300:
                    writes[0] += 1
                return response

            cluster.request_hooks.append(count)
            kubeconfig = str(cluster.write_kubeconfig(Path(tmp) / "kc", user="bench"))
            async with Client(load_config(str(cluster.kubeconfig_path))) as admin:
                t0 = time.perf_counter()
                sem = asyncio.Semaphore(32)

                async def make(i: int) -> None:
                    async with sem:
                        await admin.create(source_cm(f"src-{i:05d}"))

                await asyncio.gather(*(make(i) for i in range(n)))
                print(f"created {n} source objects in {time.perf_counter() - t0:.2f} s")
            for label in ("first run", "after restart"):
                elapsed, rec, server = await converge(kubeconfig, n, writes)
                print(
                    f"{label:>14}: {n} objects in {elapsed:.2f} s = {n / elapsed:,.0f} objects/s, "
                    f"{rec.reconciles} reconciles, API writes {server} "
                    f"({server / n:.2f} per object)"
                )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
