"""NVIDIADriver upgrades per pool, and the handover from ClusterPolicy's driver.

- Two NVIDIADrivers (``pool=a``, ``pool=b``): a new ``version`` on one rolls
  its nodes through the upgrade states to ``upgrade-done`` on the new image
  while the other's nodes keep their driver pods untouched; then the other.
- ClusterPolicy manages the driver; NVIDIA's NVIDIADriver sample, applied
  unchanged, is ``disabled``; ``useNvidiaDriverCRD: true`` orphans the
  ClusterPolicy's driver DaemonSet (its pods keep running: two nodes that
  skip upgrades show it), and the NVIDIADriver replaces them node by node.
  On the held nodes its pods stay Pending (the driver pods' required
  anti-affinity, kube-scheduler's message) and the NVIDIADriver is not ready.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.controllers.harness import wait_for
from tests.integration.gpu_nvidiadriver.env import (
    CP,
    OWNER,
    STATE,
    DriverEnv,
    driver_env,
    nvidia_driver,
    sample_driver,
)

pytestmark = pytest.mark.timeout(400)

NEW = "580.95.05"
SKIP = "nvidia.com/gpu-driver-upgrade.skip"


@contextlib.asynccontextmanager
async def sampling(env: DriverEnv, seen: dict[str, set[str]]) -> AsyncIterator[None]:
    """Record every upgrade state each node is seen in while the block runs."""

    async def loop() -> None:
        while True:
            for node, state in (await env.labels(STATE)).items():
                seen.setdefault(node, set()).add(state)
            await asyncio.sleep(0.1)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _images(env: DriverEnv) -> dict[str, str]:
    return {n: p["spec"]["containers"][0]["image"] for n, p in (await env.driver_pods()).items()}


async def test_two_nvidiadrivers_upgrade_independently(tmp_path: Path) -> None:
    async with driver_env(tmp_path) as env:
        await env.admin.create(nvidia_driver("pool-a", {"pool": "a"}))
        await env.admin.create(nvidia_driver("pool-b", {"pool": "b"}))
        nodes = [n["metadata"]["name"] for n in await env.nodes()]
        a_nodes = sorted(n for n in nodes if n.startswith("gpu-a"))
        b_nodes = sorted(n for n in nodes if n.startswith("gpu-b"))
        await env.wait_labels(STATE, dict.fromkeys(nodes, "upgrade-done"))
        await env.wait_driver_state("pool-a", "ready", "Reconciled")
        await env.wait_driver_state("pool-b", "ready", "Reconciled")
        b_pods = {n: p["metadata"]["uid"] for n, p in (await env.driver_pods()).items()
                  if n in b_nodes}  # fmt: skip

        seen: dict[str, set[str]] = {}
        async with sampling(env, seen):
            await env.set_version("pool-a", NEW)

            async def a_upgraded() -> bool:
                images = await _images(env)
                states = await env.labels(STATE)
                return all(
                    images.get(n) == f"nvcr.io/nvidia/driver:{NEW}-ubuntu22.04"
                    and states[n] == "upgrade-done"
                    for n in a_nodes
                )

            await wait_for(a_upgraded, timeout=180, interval=0.25)
        # Pool a went through the states; pool b was never touched.
        # (Sampling misses short states; any state besides done shows the node moved.)
        for node in a_nodes:
            assert seen[node] - {"upgrade-done", ""}, seen[node]
        for node in b_nodes:
            assert seen[node] == {"upgrade-done"}, seen[node]
        pods = await env.driver_pods()
        assert {n: pods[n]["metadata"]["uid"] for n in b_nodes} == b_pods
        for node in b_nodes:
            assert pods[node]["spec"]["containers"][0]["image"].endswith("570.148.08-ubuntu24.04")
        await env.wait_driver_state("pool-a", "ready", "Reconciled", timeout=60)

        # The ClusterPolicy's DriverUpgrade condition sums up both NVIDIADrivers' nodes.
        async def upgrade_done() -> dict[str, object] | None:
            cp = await env.admin.get(CP, "ClusterPolicy", "cluster-policy")
            conds = [c for c in cp["status"].get("conditions", []) if c["type"] == "DriverUpgrade"]
            return conds[0] if conds and conds[0]["reason"] == "UpgradeDone" else None

        cond = await wait_for(upgrade_done, timeout=60, interval=0.25)
        assert cond["message"] == f"{len(nodes)} of {len(nodes)} nodes run the current driver"

        # Now pool b, when its own NVIDIADriver changes.
        await env.set_version("pool-b", NEW)

        async def b_upgraded() -> bool:
            images = await _images(env)
            states = await env.labels(STATE)
            return all(
                images.get(n) == f"nvcr.io/nvidia/driver:{NEW}-ubuntu24.04"
                and states[n] == "upgrade-done"
                for n in b_nodes
            )

        await wait_for(b_upgraded, timeout=180, interval=0.25)
        await env.wait_driver_state("pool-b", "ready", "Reconciled", timeout=60)


async def test_clusterpolicy_hands_the_driver_over_to_nvidias_sample(tmp_path: Path) -> None:
    async with driver_env(tmp_path, per_pool=2, use_driver_crd=False) as env:
        nodes = sorted(n["metadata"]["name"] for n in await env.nodes())
        await env.wait_labels(STATE, dict.fromkeys(nodes, "upgrade-done"))
        old = await env.driver_pods()
        assert sorted(old) == nodes
        assert {p["metadata"]["ownerReferences"][0]["name"] for p in old.values()} == {
            "nvidia-driver-daemonset"
        }

        # NVIDIA's sample, unchanged: disabled while the ClusterPolicy owns the driver.
        await env.admin.create(sample_driver())
        await env.wait_driver_state("nvidiadriver-sample", "disabled")
        assert await env.daemonsets("nvidiadriver-sample") == []

        # Two nodes skip upgrades for now: their old pods show the orphaning.
        held = [n for n in nodes if n.startswith("gpu-b")]
        for node in held:
            await env.admin.patch("v1", "Node", node, {"metadata": {"labels": {SKIP: "true"}}})

        # Handover: the ClusterPolicy's driver DaemonSet goes, its pods stay.
        await env.admin.patch(CP, "ClusterPolicy", "cluster-policy",
                              {"spec": {"driver": {"useNvidiaDriverCRD": True}}})  # fmt: skip

        async def orphaned() -> bool:
            names = {d["metadata"]["name"] for d in await env.daemonsets()}
            return "nvidia-driver-daemonset" not in names

        await wait_for(orphaned, timeout=60, interval=0.25)
        # The NVIDIADriver takes the nodes; the others are upgraded onto its driver.
        await env.wait_labels(OWNER, dict.fromkeys(nodes, "nvidiadriver-sample"))
        free = [n for n in nodes if n not in held]

        async def free_replaced() -> bool:
            by_node = await env.pods_by_node()
            return all(
                len(by_node.get(n, [])) == 1
                and by_node[n][0]["metadata"]["uid"] != old[n]["metadata"]["uid"]
                for n in free
            )

        await wait_for(free_replaced, timeout=120, interval=0.25)
        # Orphaned, not cascaded: the held nodes still run their old driver pods
        # (the NVIDIADriver's pod waits beside it, kept off by the anti-affinity).
        alive = {p["metadata"]["uid"]: p for ps in (await env.pods_by_node()).values() for p in ps}
        for node in held:
            pod = alive.get(old[node]["metadata"]["uid"])
            assert pod is not None, node
            assert not pod["metadata"].get("ownerReferences")

        # As on a real cluster, the NVIDIADriver's pod for each held node is Pending, with
        # kube-scheduler's reason, and `kubectl get nvd` does not say ready meanwhile.
        async def waiting() -> dict[str, dict[str, object]] | None:
            pods = (await env.admin.list("v1", "Pod", "gpu-operator",
                                         label_selector="app.kubernetes.io/component=nvidia-driver")
                    )["items"]  # fmt: skip
            pending: dict[str, dict[str, object]] = {}
            for p in pods:
                cond = next((c for c in p.get("status", {}).get("conditions", [])
                             if c["type"] == "PodScheduled"), None)  # fmt: skip
                if p["spec"].get("nodeName") or cond is None or cond["status"] != "False":
                    continue
                target = p["spec"]["affinity"]["nodeAffinity"][
                    "requiredDuringSchedulingIgnoredDuringExecution"
                ]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
                pending[target] = cond
            return pending if sorted(pending) == held else None

        pending = await wait_for(waiting, timeout=60, interval=0.25)
        others = len(nodes) - 1
        for cond in pending.values():
            assert cond["reason"] == "Unschedulable"
            assert cond["message"] == (
                f"0/{len(nodes)} nodes are available: 1 node(s) didn't match pod anti-affinity "
                f"rules, {others} node(s) didn't match Pod's node affinity/selector. preemption: "
                f"0/{len(nodes)} nodes are available: 1 No preemption victims found for incoming "
                f"pod, {others} Preemption is not helpful for scheduling."
            )
        status = (await env.driver("nvidiadriver-sample")).get("status") or {}
        assert status.get("state") == "notReady", status
        for node in held:
            await env.admin.patch("v1", "Node", node, {"metadata": {"labels": {SKIP: None}}})

        async def replaced() -> bool:
            by_node = await env.pods_by_node()
            if sorted(by_node) != nodes or any(len(ps) != 1 for ps in by_node.values()):
                return False
            pods = {n: ps[0] for n, ps in by_node.items()}
            states = await env.labels(STATE)
            return all(
                p["metadata"]["uid"] != old[n]["metadata"]["uid"]
                and p["metadata"]["ownerReferences"][0]["name"].startswith("nvidia-gpu-driver-")
                and states[n] == "upgrade-done"
                for n, p in pods.items()
            )

        await wait_for(replaced, timeout=240, interval=0.5)
        await env.wait_driver_state("nvidiadriver-sample", "ready", "Reconciled", timeout=60)
