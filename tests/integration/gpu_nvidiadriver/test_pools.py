"""NVIDIADriver on a simulated cluster: one DaemonSet per pool, owner labels, conflicts.

Two pools of GPU nodes (Ubuntu 22.04 ``pool=a``, Ubuntu 24.04 ``pool=b``),
NVIDIA's sample ClusterPolicy with ``useNvidiaDriverCRD: true``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.integration.controllers.harness import wait_for
from tests.integration.gpu_nvidiadriver.env import (
    ND,
    OWNER,
    STATE,
    DriverEnv,
    driver_env,
    nvidia_driver,
)

pytestmark = pytest.mark.timeout(300)


async def _settled_writes(env: DriverEnv, seconds: float = 3.0) -> list[tuple[str, str]]:
    """The operator's object writes over ``seconds`` (after they stopped)."""
    before = len(env.operator.client.object_writes())
    await asyncio.sleep(seconds)
    return env.operator.client.object_writes()[before:]


async def test_one_nvidiadriver_over_two_os_pools_runs_two_daemonsets(tmp_path: Path) -> None:
    async with driver_env(tmp_path) as env:
        await env.admin.create(nvidia_driver("all", {}))
        nodes = [n["metadata"]["name"] for n in await env.nodes()]
        await env.wait_labels(OWNER, dict.fromkeys(nodes, "all"))
        cr = await env.wait_driver_state("all", "ready", "Reconciled")
        assert cr["status"]["namespace"] == "gpu-operator"

        daemonsets = await env.daemonsets("all")
        by_os = {d["metadata"]["labels"]["nvidia.com/node.os-version"]: d for d in daemonsets}
        assert sorted(by_os) == ["ubuntu22.04", "ubuntu24.04"]
        for os_tag, ds in by_os.items():
            assert ds["metadata"]["name"].startswith(f"nvidia-gpu-driver-{os_tag}-")
        pods = await env.driver_pods()
        assert sorted(pods) == sorted(nodes)
        for node, pod in pods.items():
            os_tag = "ubuntu22.04" if node.startswith("gpu-a") else "ubuntu24.04"
            owner = pod["metadata"]["ownerReferences"][0]["name"]
            assert owner == by_os[os_tag]["metadata"]["name"]
            image = pod["spec"]["containers"][0]["image"]
            assert image == f"nvcr.io/nvidia/driver:570.148.08-{os_tag}"
        await env.wait_labels(STATE, dict.fromkeys(nodes, "upgrade-done"))

        # Converged: nothing more is written.
        await _settled_writes(env, 2.0)
        assert await _settled_writes(env) == []

        # A node relabelled into another pool moves: it leaves "all" for "a-only".
        await env.admin.create(nvidia_driver("b-only", {"pool": "b"}))
        b_nodes = [n for n in nodes if n.startswith("gpu-b")]

        async def conflict() -> bool:
            reasons = [
                {c["reason"] for c in (await env.driver(n)).get("status", {}).get("conditions", [])}
                for n in ("all", "b-only")
            ]
            return all("ConflictingNodeSelector" in r for r in reasons)

        await wait_for(conflict, timeout=60, interval=0.25)
        cr = await env.driver("b-only")
        message = next(c["message"] for c in cr["status"]["conditions"] if c["type"] == "Error")
        assert message.startswith("multiple NVIDIADrivers match the same node gpu-b-")
        assert message.endswith("[all b-only]")
        assert cr["status"]["state"] == "notReady"
        # Nothing is rendered for the conflicting one; the running drivers stay.
        assert await env.daemonsets("b-only") == []
        assert sorted(await env.driver_pods()) == sorted(nodes)
        assert (await env.labels(OWNER)) == dict.fromkeys(nodes, "all")

        # The conflict resolved (the greedy one narrowed to pool a): each owns its pool.
        await env.admin.patch(ND, "NVIDIADriver", "all", {"spec": {"nodeSelector": {"pool": "a"}}})
        await env.wait_labels(OWNER, {n: ("b-only" if n in b_nodes else "all") for n in nodes})
        await env.wait_driver_state("b-only", "ready", "Reconciled", timeout=120)
        await env.wait_driver_state("all", "ready", "Reconciled", timeout=120)
        # The pool "all" no longer has is pruned; b-only runs its own.
        names = {d["metadata"]["name"] for d in await env.daemonsets("all")}
        assert len(names) == 1 and next(iter(names)).startswith("nvidia-gpu-driver-ubuntu22.04-")
        assert len(await env.daemonsets("b-only")) == 1


async def test_disabled_while_clusterpolicy_manages_the_driver(tmp_path: Path) -> None:
    async with driver_env(tmp_path, per_pool=1, use_driver_crd=False) as env:
        await env.admin.create(nvidia_driver("all", {}))
        cr = await env.wait_driver_state("all", "disabled")
        error = next(c for c in cr["status"]["conditions"] if c["type"] == "Error")
        assert error["message"] == "useNvidiaDriverCRD is not enabled in ClusterPolicy"
        assert await env.daemonsets("all") == []
        assert set((await env.labels(OWNER)).values()) == {""}


async def test_a_crashing_driver_pod_is_named_with_its_node(tmp_path: Path) -> None:
    """NVIDIA's DriverNotReady and words, then ours: which driver pod, why, on which node."""
    async with driver_env(tmp_path, per_pool=1) as env:
        await env.admin.patch(
            "v1",
            "Node",
            "gpu-b-0",
            {"metadata": {"annotations": {"localcluster.nimctl.io/driver-fail-versions": "570.148.08"}}},
        )  # fmt: skip
        await env.admin.create(nvidia_driver("all", {}))

        async def named() -> dict[str, Any] | None:
            status = (await env.driver("all")).get("status") or {}
            error = next((c for c in status.get("conditions") or [] if c["type"] == "Error"), {})
            return error if "keeps crashing" in error.get("message", "") else None

        error = await wait_for(named, timeout=90, interval=0.25)
        assert error["reason"] == "DriverNotReady"
        assert error["message"].startswith(
            "Waiting for driver pod to be ready; DaemonSets not ready: ["
        )
        assert " of pod nvidia-gpu-driver-ubuntu24.04-" in error["message"]
        assert error["message"].endswith("(on node gpu-b-0)")
        assert (await env.driver("all"))["status"]["state"] == "notReady"
