"""The simulator on a manual clock: nothing happens until time is advanced, then exactly it."""

from __future__ import annotations

import asyncio
from typing import Any

from localcluster.registry import Registry
from localcluster.simulator.clock import ManualClock
from localcluster.simulator.engine import Simulator
from localcluster.simulator.kubelet import KubeletTiming
from localcluster.storage import Storage


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "app:1"}], **spec},
    }


def phase_and_ready(storage: Storage, name: str) -> tuple[str, str]:
    p = storage.get("v1", "Pod", name, "default")
    ready = next(
        (c["status"] for c in p["status"].get("conditions", []) if c["type"] == "Ready"), "-"
    )
    return p["status"].get("phase", ""), ready


async def test_pod_lifecycle_follows_the_manual_clock() -> None:
    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    clock = ManualClock()
    sim = Simulator(
        storage, clock=clock, timing=KubeletTiming(start_delay=5, ready_delay=10), emit_events=False
    )
    await sim.start()
    try:
        storage.create(pod("p"))
        assert await sim.wait_idle()
        assert storage.get("v1", "Pod", "p", "default")["spec"]["nodeName"]
        assert phase_and_ready(storage, "p") == ("Pending", "False")
        clock.advance(5)
        assert await sim.wait_idle()
        assert phase_and_ready(storage, "p") == ("Running", "False")
        clock.advance(9)
        assert await sim.wait_idle()
        assert phase_and_ready(storage, "p") == ("Running", "False")
        clock.advance(1)
        assert await sim.wait_idle()
        assert phase_and_ready(storage, "p") == ("Running", "True")
    finally:
        await sim.stop()


async def test_stalled_simulator_binds_nothing_until_resumed() -> None:
    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    sim = Simulator(storage, clock=ManualClock(), emit_events=False)
    await sim.start()
    try:
        sim.stall()
        storage.create(pod("q"))
        await asyncio.sleep(0.05)
        assert not storage.get("v1", "Pod", "q", "default")["spec"].get("nodeName")
        sim.resume()
        assert await sim.wait_idle()
        assert storage.get("v1", "Pod", "q", "default")["spec"]["nodeName"]
    finally:
        await sim.stop()


async def test_profile_without_gpus_leaves_gpu_pods_pending() -> None:
    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    sim = Simulator(storage, profile="no-gpu", clock=ManualClock(), emit_events=False)
    await sim.start()
    try:
        gpu = pod("g")
        gpu["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        storage.create(gpu)
        assert await sim.wait_idle()
        p = storage.get("v1", "Pod", "g", "default")
        cond = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
        assert cond["message"].startswith("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
        assert len(storage.list("v1", "Node")) == 3
    finally:
        await sim.stop()


async def test_pods_of_a_deleted_node_are_garbage_collected() -> None:
    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    sim = Simulator(storage, clock=ManualClock(), emit_events=False, profile="no-gpu")
    await sim.start()
    try:
        for i in range(6):
            storage.create(pod(f"p{i}"))
        assert await sim.wait_idle()
        nodes = {storage.get("v1", "Pod", f"p{i}", "default")["spec"]["nodeName"] for i in range(6)}
        assert nodes == {"cpu-node-0", "cpu-node-1", "cpu-node-2"}  # spread over the nodes
        storage.delete("v1", "Node", "cpu-node-1")
        assert await sim.wait_idle()
        left = {p["spec"]["nodeName"] for p in storage.list("v1", "Pod", "default")}
        assert left == {"cpu-node-0", "cpu-node-2"}
        assert len(storage.list("v1", "Pod", "default")) == 4
    finally:
        await sim.stop()


async def test_noexecute_taint_evicts_pods_that_do_not_tolerate_it() -> None:
    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    sim = Simulator(storage, clock=ManualClock(), emit_events=False, profile="no-gpu")
    await sim.start()
    try:
        tolerant = pod(
            "tolerant",
            nodeName="cpu-node-0",
            tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}],
        )
        storage.create(tolerant)
        storage.create(pod("plain", nodeName="cpu-node-0"))
        assert await sim.wait_idle()
        node = storage.get("v1", "Node", "cpu-node-0")
        node["spec"]["taints"] = [{"key": "maintenance", "value": "now", "effect": "NoExecute"}]
        storage.update(node)
        assert await sim.wait_idle()
        # the eviction is a graceful delete: Terminating until the kubelet stopped it
        plain = storage.get("v1", "Pod", "plain", "default")
        assert plain["metadata"]["deletionGracePeriodSeconds"] == 30
        clock = sim.clock
        assert isinstance(clock, ManualClock)
        clock.advance(1.0)
        assert await sim.wait_idle()
        assert [p["metadata"]["name"] for p in storage.list("v1", "Pod", "default")] == ["tolerant"]
    finally:
        await sim.stop()
