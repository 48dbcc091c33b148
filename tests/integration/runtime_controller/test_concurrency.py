"""200 concurrent updates to one object: never two workers on one key, last state reconciled."""

from __future__ import annotations

import asyncio

from nimctl_runtime.manager import Manager
from nimctl_runtime.reconcile import Request

from .conftest import Env
from .echo import add_echo_controller, source_cm


async def test_200_concurrent_updates_one_worker_per_key_and_last_state_wins(env: Env) -> None:
    async with env.client() as client:
        await client.create(source_cm("hot", data={"n": "-1"}))
        for i in range(5):
            await client.create(source_cm(f"cold-{i}"))
        manager = Manager(client)
        rec, ctrl = add_echo_controller(manager, workers=8)
        rec.delay = 0.003  # widen the window in which a second worker could sneak in
        stop = asyncio.Event()
        task = asyncio.create_task(manager.start(stop))
        try:
            async with asyncio.timeout(10):
                await manager.elected.wait()

            async def bump(i: int) -> None:
                await client.patch("v1", "ConfigMap", "hot", {"data": {"n": str(i)}},
                                   namespace="default")  # fmt: skip

            await asyncio.gather(*(bump(i) for i in range(200)))
            final = await client.get("v1", "ConfigMap", "hot", "default")
            key = Request("default", "hot")
            async with asyncio.timeout(15):
                while True:
                    echo = None
                    try:
                        echo = await client.get("v1", "ConfigMap", "hot-echo", "default")
                    except Exception:
                        echo = None
                    if rec.seen.get(key) == final["data"] and echo and echo["data"] == final["data"]:
                        break
                    await asyncio.sleep(0.02)
            assert rec.overlaps == 0, "a key was reconciled by two workers at once"
            assert ctrl.queue.num_requeues(key) == 0
            reconciles = rec.reconciles
            assert reconciles < 200 + 12, "updates during a reconcile collapse into one re-run"
        finally:
            stop.set()
            async with asyncio.timeout(10):
                await task
