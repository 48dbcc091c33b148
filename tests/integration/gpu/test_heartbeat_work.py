"""A Node heartbeat that changes nothing the operator reads costs no reconcile (issue 30).

A kubelet patches its Node's status every 10 s or so (the conditions' heartbeat
times; now and then the image list). On a 1,000-node cluster that is 100 events
a second, none of which matters to a ClusterPolicy, node labelling, NVIDIADriver
or driver-upgrade controller. The test runs the operator against a simulated
GPU cluster with NVIDIA's sample ClusterPolicy ready, sends heartbeats to every
GPU node and counts what reached a work queue: nothing. A change the operator
does read (a kernel-version label NFD would set) reaches the ClusterPolicy's
queue, so the counting itself is shown to work.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nimctl_runtime.cache.cache import Cache
from tests.integration.controllers.harness import wait_for
from tests.integration.gpu.test_clusterpolicy import GPU_NODES, Env, running_env, sample

pytestmark = pytest.mark.timeout(240)


def _controllers(env: Env) -> dict[str, Any]:
    manager: Any = env.operator.manager
    out = {}
    for slot in manager._leader_runnables:
        r = slot.runnable
        if hasattr(r, "queue") and hasattr(r, "name"):
            out[r.name] = r
    return out


def _node_stores(env: Env) -> list[Any]:
    manager: Any = env.operator.manager
    stores = []
    for slot in (*manager._leader_runnables, *manager._other_runnables):
        cache = slot.runnable
        if isinstance(cache, Cache):
            informer = cache._informers.get(("v1", "Node"))
            if informer is not None:
                stores.append(informer)
    return stores


class QueueAdds:
    """Counts every add (now, later, rate limited) into each controller's queue."""

    def __init__(self, controllers: dict[str, Any]) -> None:
        self.adds: dict[str, int] = dict.fromkeys(controllers, 0)
        for name, ctrl in controllers.items():
            queue = ctrl.queue
            for method in ("add", "add_after", "add_rate_limited"):
                setattr(queue, method, self._counting(name, getattr(queue, method)))

    def _counting(self, name: str, real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.adds[name] += 1
            return real(*args, **kwargs)

        return counted


async def _heartbeat(env: Env, node: str, beat: int) -> str:
    live = await env.node(node)
    when = datetime.fromtimestamp(datetime.now(UTC).timestamp() + beat, UTC)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    status = live.get("status") or {}
    patched = await env.admin.patch(
        "v1",
        "Node",
        node,
        {
            "status": {
                "conditions": [
                    {**c, "lastHeartbeatTime": stamp} for c in status.get("conditions") or []
                ],
                "images": [{"names": [f"example.com/cached:{beat}"], "sizeBytes": 1000 + beat}],
            }
        },
        subresource="status",
        patch_type="merge",
    )
    return str(patched["metadata"]["resourceVersion"])


async def _seen_everywhere(env: Env, node: str, rv: str) -> bool:
    """Every Node informer stored ``rv`` and handed all it has to its handlers."""
    for informer in _node_stores(env):
        if informer.store.resource_version(node) != rv:
            return False
        if any(reg._pending for reg in informer._handlers):
            return False
    await asyncio.sleep(0)  # a handler popped last runs to completion first
    return True


async def test_a_node_heartbeat_reaches_no_queue(tmp_path: Path) -> None:
    async with running_env(tmp_path, "gpu-bare") as env:
        await env.admin.create(sample())
        await env.wait_state("ready", timeout=120)
        controllers = _controllers(env)
        assert {"clusterpolicy-controller", "nodelabeling-controller"} <= set(controllers)

        async def idle() -> bool:
            before = len(env.operator.client.object_writes())
            await asyncio.sleep(1.0)
            return len(env.operator.client.object_writes()) == before and all(
                len(c.queue) == 0 for c in controllers.values()
            )

        await wait_for(idle, timeout=120, interval=0.1)
        counter = QueueAdds(controllers)
        writes_before = len(env.operator.client.object_writes())
        assert len(_node_stores(env)) >= 2, "the GPU controllers' Node informers"

        for beat in range(1, 4):
            for node in GPU_NODES:
                rv = await _heartbeat(env, node, beat)
                await wait_for(lambda n=node, v=rv: _seen_everywhere(env, n, v), timeout=30)

        assert counter.adds == dict.fromkeys(controllers, 0), counter.adds
        assert env.operator.client.object_writes()[writes_before:] == []

        # A fact the ClusterPolicy reads (the kernel NFD reports) does reach its queue.
        patched = await env.admin.patch(
            "v1",
            "Node",
            GPU_NODES[0],
            {"metadata": {"labels": {"feature.node.kubernetes.io/kernel-version.full": "6.9.1"}}},
        )
        rv = str(patched["metadata"]["resourceVersion"])
        await wait_for(lambda: _seen_everywhere(env, GPU_NODES[0], rv), timeout=30)
        assert sum(counter.adds.values()) >= 1, counter.adds
