"""Driver upgrades on a simulated cluster of 10 GPU nodes with workloads behind a PDB.

Changing ``driver.version`` in NVIDIA's sample ClusterPolicy rolls every node
through NVIDIA's states to ``upgrade-done``, sampled throughout for the slot
limits; a PDB that forbids eviction holds a node in drain and the node says
so; a skip-labelled node is left alone; a node cordoned beforehand stays
cordoned; a driver that cannot load fails the node, which recovers when a
fixed driver is published.

As in NVIDIA's operator, GPU pods are deleted in ``pod-deletion-required`` and
a node is drained only when some cannot be (here: GPU pods with an
``emptyDir``, which ``podDeletion`` may not delete but ``drain`` may evict).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from nimctl_runtime.client import Client
from tests.integration.controllers.harness import quiet, reconciles, wait_for
from tests.integration.gpu_upgrade.env import IN_PROGRESS_EXCLUDED, UpgradeEnv, upgrade_env

pytestmark = pytest.mark.timeout(300)

NEW_VERSION = "595.91.08"
SKIP = "nvidia.com/gpu-driver-upgrade.skip"
DRAIN_POLICY = {
    "maxParallelUpgrades": 3,
    "maxUnavailable": "30%",
    "drain": {"enable": True, "timeoutSeconds": 0, "deleteEmptyDir": True},
}
GPU = {"limits": {"nvidia.com/gpu": "1"}}


def deployment(
    name: str, replicas: int, resources: dict[str, Any], *, scratch: bool = False
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": f"example.com/{name}:1",
                                         "resources": resources}]},
            },
        },
    }  # fmt: skip
    if scratch:
        obj["spec"]["template"]["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return obj


def pdb(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {**spec, "selector": {"matchLabels": {"app": name}}},
    }


async def ready_pods(admin: Client, app: str) -> list[dict[str, Any]]:
    items = (await admin.list("v1", "Pod", "default", label_selector=f"app={app}"))["items"]
    return [
        p
        for p in items
        if not p["metadata"].get("deletionTimestamp")
        and any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or [])
    ]  # fmt: skip


async def wait_ready(admin: Client, app: str, count: int, timeout: float = 60) -> list[Any]:
    async def check() -> list[Any] | None:
        pods = await ready_pods(admin, app)
        return pods if len(pods) == count else None

    result: list[Any] = await wait_for(check, timeout=timeout, interval=0.2)
    return result


class Sampler:
    """Samples the nodes every 0.1 s: in-progress and unavailable counts, states seen."""

    def __init__(self, env: UpgradeEnv) -> None:
        self.env = env
        self.max_in_progress = 0
        self.max_unavailable = 0
        self.seen: dict[str, list[str]] = {}

    async def run(self) -> None:
        while True:
            nodes = await self.env.nodes()
            in_progress = unavailable = 0
            for node in nodes:
                name = node["metadata"]["name"]
                state = (
                    node["metadata"]
                    .get("labels", {})
                    .get("nvidia.com/gpu-driver-upgrade-state", "")
                )
                path = self.seen.setdefault(name, [])
                if not path or path[-1] != state:
                    path.append(state)
                in_progress += state not in IN_PROGRESS_EXCLUDED
                unavailable += bool((node.get("spec") or {}).get("unschedulable"))
            self.max_in_progress = max(self.max_in_progress, in_progress)
            self.max_unavailable = max(self.max_unavailable, unavailable)
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def sampling(env: UpgradeEnv) -> AsyncIterator[Sampler]:
    sampler = Sampler(env)
    task = asyncio.create_task(sampler.run())
    try:
        yield sampler
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.timeout(480)
async def test_rollout_through_the_states_within_the_slot_limits(tmp_path: Path) -> None:
    async with upgrade_env(tmp_path, 10, DRAIN_POLICY) as env:
        admin = env.admin
        await admin.create(deployment("train", 6, GPU, scratch=True))
        await admin.create(pdb("train", maxUnavailable=1))
        await admin.create(deployment("web", 10, {"requests": {"cpu": "100m"}}))
        await wait_ready(admin, "train", 6)
        before = {p["metadata"]["name"]: p["spec"]["nodeName"]
                  for app in ("train", "web") for p in await ready_pods(admin, app)}  # fmt: skip
        await admin.patch("v1", "Node", "gpu-node-9", {"metadata": {"labels": {SKIP: "true"}}})
        await admin.patch("v1", "Node", "gpu-node-8", {"spec": {"unschedulable": True}})

        async with sampling(env) as sampler:
            await env.set_driver_version(NEW_VERSION)
            upgraded = {f"gpu-node-{i}": "upgrade-done" for i in range(9)}
            await env.wait_states({**upgraded, "gpu-node-9": "upgrade-required"}, timeout=360)

        for name, state in (await env.states()).items():  # the samples end with the wait
            if sampler.seen[name][-1] != state:
                sampler.seen[name].append(state)
        assert sampler.max_in_progress <= 3, sampler.seen
        assert sampler.max_unavailable <= 3, "maxUnavailable 30% of 10"
        assert sampler.max_in_progress >= 2, "upgrades ran side by side"
        order = ["upgrade-required", "cordon-required", "wait-for-jobs-required",
                 "pod-deletion-required", "drain-required", "pod-restart-required",
                 "validation-required", "uncordon-required", "upgrade-done"]  # fmt: skip
        covered: set[str] = set()
        drained: set[str] = set()
        for i in range(9):
            node = f"gpu-node-{i}"
            events = [e["message"].rsplit(" -> ", 1)[1] for e in await env.node_events(node)
                      if e["reason"] == "DriverUpgradeState"]  # fmt: skip
            sampled = sampler.seen[node]
            assert sampled[-1] == "upgrade-done", (node, sampled)
            visited: set[str] = set()
            # Events are best-effort (the last may lag) and 0.1 s samples miss short states:
            # each must be in NVIDIA's order, together they show the node's whole way.
            for path in (events, sampled):
                start = next((i for i, s in enumerate(path) if s != "upgrade-done"), len(path))
                tail = path[start:]
                steps = [order.index(s) for s in tail]
                assert steps == sorted(steps), f"{node} moved in NVIDIA's order: {path}"
                visited.update(tail)
            assert {"upgrade-required", "pod-restart-required"} <= visited, (node, events, sampled)
            covered.update(visited)
            if "drain-required" in visited:
                drained.add(node)
        assert covered == set(order), f"every state of NVIDIA's order was visited: {covered}"

        nodes = {n["metadata"]["name"]: n for n in await env.nodes()}
        assert nodes["gpu-node-8"]["spec"].get("unschedulable") is True, "cordoned before: stays"
        assert not any(nodes[f"gpu-node-{i}"]["spec"].get("unschedulable") for i in range(8))
        assert sampler.seen["gpu-node-9"] == ["upgrade-done", "upgrade-required"], "skipped"
        skip_message = (await env.upgrade_condition())["message"]
        assert "gpu-node-9" in skip_message and "skipped" in skip_message, skip_message

        train = await wait_ready(admin, "train", 6)
        web = await wait_ready(admin, "web", 10)
        after = {p["metadata"]["name"] for p in train + web}
        # GPU pods are deleted on every upgraded node; a node is drained (its other pods
        # evicted) only when GPU pod deletion refused some (their emptyDir), as NVIDIA's.
        gone = {n: node for n, node in before.items()
                if node in drained or (n.startswith("train") and node != "gpu-node-9")}  # fmt: skip
        survivors = {n: node for n, node in gone.items() if n in after}
        assert gone and not survivors, (
            f"pods on upgraded nodes were deleted or evicted: {survivors}"
        )
        idle = await quiet(env.operator.client, 3.0)
        assert not [w for w in idle if "/nodes/" in w[1]], (
            f"an idle cluster gets no node writes: {idle}"
        )


async def test_pdb_that_forbids_eviction_holds_the_drain_and_says_so(tmp_path: Path) -> None:
    policy = {"maxParallelUpgrades": 1, "maxUnavailable": 1,
              "drain": {"enable": True, "timeoutSeconds": 0, "deleteEmptyDir": True}}  # fmt: skip
    async with upgrade_env(tmp_path, 3, policy) as env:
        admin = env.admin
        await admin.create(deployment("db", 3, GPU, scratch=True))
        await admin.create(pdb("db", minAvailable=3))
        pods = await wait_ready(admin, "db", 3)
        held = sorted(p["spec"]["nodeName"] for p in pods)[0]
        await env.set_driver_version(NEW_VERSION)

        async def blocked() -> str | None:
            message = str((await env.upgrade_condition()).get("message", ""))
            return message if "blocked by PodDisruptionBudget default/db" in message else None

        message = await wait_for(blocked, timeout=60, interval=0.5)
        assert f"{held} drain-required" in message, message
        assert (await env.states())[held] == "drain-required"
        waiting = [e["message"] for e in await env.node_events(held)
                   if e["reason"] == "DriverUpgradeWaiting"]  # fmt: skip
        assert any("PodDisruptionBudget default/db" in m for m in waiting), waiting
        passes = reconciles("upgrade-controller")

        async def retried() -> bool:  # another pass looked at the held drain
            return reconciles("upgrade-controller") > passes

        await wait_for(retried, timeout=60, interval=0.1)
        assert (await env.states())[held] == "drain-required", "the PDB holds the node"

        await admin.patch("policy/v1", "PodDisruptionBudget", "db", {"spec": {"minAvailable": 2}},
                          namespace="default")  # fmt: skip
        await env.wait_states({held: "upgrade-done"}, timeout=120)
        await wait_ready(admin, "db", 3)


async def test_failing_driver_fails_the_node_which_recovers_once_fixed(tmp_path: Path) -> None:
    # speed 120: the crash-looping driver reaches NVIDIA's 10 restarts in about 15 s.
    async with upgrade_env(tmp_path, 3, {"maxParallelUpgrades": 1, "maxUnavailable": 1},
                           speed=120) as env:  # fmt: skip
        await env.annotate_node(
            "gpu-node-0", {"localcluster.nimctl.io/driver-fail-versions": NEW_VERSION}
        )
        await env.set_driver_version(NEW_VERSION)
        await env.wait_states({"gpu-node-0": "upgrade-failed"}, timeout=150)
        condition = await env.upgrade_condition()
        assert condition["reason"] == "UpgradeFailed", condition
        assert "gpu-node-0 upgrade-failed" in condition["message"], condition
        assert "restarts" in condition["message"], condition

        async def failed_events() -> list[dict[str, Any]]:
            # Events are sent by the recorder's queue, after the state label: wait for it
            return [e for e in await env.node_events("gpu-node-0")
                    if e["reason"] == "DriverUpgradeFailed"]  # fmt: skip

        failed = await wait_for(failed_events, timeout=30)
        assert failed[0]["type"] == "Warning"
        states = await env.states()
        assert states["gpu-node-1"] == states["gpu-node-2"] == "upgrade-required", (
            "a failed node keeps its slot (NVIDIA counts it in progress)"
        )

        await env.set_driver_version("595.91.09")  # the fixed driver
        await env.wait_states(dict.fromkeys(("gpu-node-0", "gpu-node-1", "gpu-node-2"),
                                            "upgrade-done"), timeout=200)  # fmt: skip
        nodes = await env.nodes()
        assert not any((n.get("spec") or {}).get("unschedulable") for n in nodes)

        async def upgrade_done() -> bool:  # the status follows the node labels: wait for it
            return (await env.upgrade_condition()).get("reason") == "UpgradeDone"

        await wait_for(upgrade_done, timeout=30)
