"""Benchmark the localcluster simulator: how fast big workloads become ready.

Run: ``.venv/bin/python -m tests.bench.simulator_bench [--replicas 1000] [--profile many-nodes]``.
The simulator runs on the in-process storage (no HTTP), on a fast scaled clock,
so the figures measure the simulator's own work: scheduling, kubelet status,
ReplicaSet/Deployment/DaemonSet reconciles and storage writes. Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from localcluster.registry import Registry
from localcluster.simulator.engine import Simulator
from localcluster.simulator.kubelet import KubeletTiming
from localcluster.storage import Storage


def deployment(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "bench"}},
            "template": {
                "metadata": {"labels": {"app": "bench"}},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "app:1", "resources": {"requests": {"cpu": "100m"}}}
                    ]
                },
            },
        },
    }


def daemonset() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "c", "image": "agent:1"}],
                },
            },
        },
    }


async def wait_for(check: Any, timeout: float = 600.0) -> float:
    start = time.perf_counter()
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)
    return time.perf_counter() - start


async def main(replicas: int, profile: str) -> None:
    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    writes = 0

    def count(_event: Any) -> None:
        nonlocal writes
        writes += 1

    storage.subscribe(count)
    sim = Simulator(
        storage,
        profile=profile,
        speed=100.0,
        emit_events=False,
        timing=KubeletTiming(start_delay=0.1, ready_delay=0.1),
    )
    await sim.start()
    nodes = len(storage.list("v1", "Node"))
    storage.create(deployment(replicas))

    def available() -> bool:
        status = storage.get("apps/v1", "Deployment", "bench", "default").get("status") or {}
        return bool(status.get("availableReplicas") == replicas)

    writes_before = writes
    took = await wait_for(available)
    dep_writes = writes - writes_before
    print(
        f"deployment of {replicas} pods on {nodes} nodes: Available in {took:.2f} s "
        f"({replicas / took:.0f} pods/s, {dep_writes} storage writes, "
        f"{dep_writes / replicas:.1f} writes/pod)"
    )

    storage.create(daemonset())

    def ds_ready() -> bool:
        status = storage.get("apps/v1", "DaemonSet", "agent", "default").get("status") or {}
        return bool(status.get("numberReady") == nodes)

    took = await wait_for(ds_ready)
    print(f"daemonset on {nodes} nodes: all ready in {took:.2f} s")

    dep = storage.get("apps/v1", "Deployment", "bench", "default")
    dep["spec"]["template"]["spec"]["containers"][0]["image"] = "app:2"
    storage.update(dep)

    def rolled() -> bool:
        status = storage.get("apps/v1", "Deployment", "bench", "default").get("status") or {}
        return bool(
            status.get("observedGeneration") == 2
            and status.get("updatedReplicas") == replicas
            and status.get("availableReplicas") == replicas
            and status.get("replicas") == replicas
        )

    took = await wait_for(rolled)
    print(
        f"rolling update of {replicas} pods (25% surge/unavailable): done in {took:.2f} s "
        f"({replicas / took:.0f} pods/s replaced)"
    )
    await sim.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--replicas", type=int, default=1000)
    parser.add_argument("--profile", default="many-nodes")
    args = parser.parse_args()
    asyncio.run(main(args.replicas, args.profile))
