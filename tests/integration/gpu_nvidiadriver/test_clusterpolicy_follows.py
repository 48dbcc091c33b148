"""The ClusterPolicy and node labelling follow the NVIDIADrivers, as NVIDIA's do.

Two NVIDIADrivers (``pool=a``, ``pool=b``) under a ClusterPolicy with
``useNvidiaDriverCRD: true``:

- each node's ``nvidia.com/gpu-driver-upgrade-enabled`` annotation (what
  k8s-driver-manager reads) follows its owner's ``upgradePolicy.autoUpgrade``:
  turning it off on pool-b removes it from pool-b's nodes only;
- while pool-a's nodes upgrade to a new version, the ClusterPolicy says
  ``notReady`` with NVIDIA's words and names the nodes, then ``ready`` again
  once every node is ``upgrade-done``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.controllers.harness import wait_for
from tests.integration.gpu_nvidiadriver.env import CP, ND, STATE, driver_env, nvidia_driver

pytestmark = pytest.mark.timeout(300)

ANNOTATION = "nvidia.com/gpu-driver-upgrade-enabled"
NVIDIA_WORDS = (
    "NVIDIADriver upgrade has not completed; one or more NVIDIADriver-owned Nodes are "
    "marked pending, in-progress, or failed"
)


async def test_annotation_and_readiness_follow_the_nvidiadrivers(tmp_path: Path) -> None:
    async with driver_env(tmp_path, per_pool=2) as env:
        await env.admin.create(nvidia_driver("pool-a", {"pool": "a"}))
        await env.admin.create(nvidia_driver("pool-b", {"pool": "b"}))
        nodes = sorted(n["metadata"]["name"] for n in await env.nodes())
        await env.wait_labels(STATE, dict.fromkeys(nodes, "upgrade-done"))

        async def annotations() -> dict[str, str]:
            return {
                n["metadata"]["name"]: n["metadata"].get("annotations", {}).get(ANNOTATION, "")
                for n in await env.nodes()
            }

        async def annotated(want: dict[str, str]) -> bool:
            return await annotations() == want

        await wait_for(lambda: annotated(dict.fromkeys(nodes, "true")), timeout=60)

        # pool-b turns auto upgrade off: its nodes lose the annotation, pool-a's keep it.
        await env.admin.patch(ND, "NVIDIADriver", "pool-b",
                              {"spec": {"upgradePolicy": {"autoUpgrade": False}}})  # fmt: skip
        want = {n: "true" if n.startswith("gpu-a") else "" for n in nodes}
        await wait_for(lambda: annotated(want), timeout=60)

        async def policy_status() -> dict[str, Any]:
            cp = await env.admin.get(CP, "ClusterPolicy", "cluster-policy")
            status: dict[str, Any] = cp.get("status") or {}
            return status

        async def ready() -> bool:
            return (await policy_status()).get("state") == "ready"

        await wait_for(ready, timeout=60, interval=0.25)

        # pool-a upgrades: the ClusterPolicy is notReady meanwhile, in NVIDIA's words.
        await env.set_version("pool-a", "580.95.05")

        async def held() -> dict[str, Any] | None:
            status = await policy_status()
            conds = {c["type"]: c for c in status.get("conditions", [])}
            error = conds.get("Error", {})
            if status.get("state") == "notReady" and NVIDIA_WORDS in error.get("message", ""):
                return conds
            return None

        conds = await wait_for(held, timeout=60, interval=0.1)
        assert (conds["Ready"]["status"], conds["Error"]["reason"]) == ("False", "OperandNotReady")
        assert conds["Error"]["message"].startswith(f"ClusterPolicy is not ready; {NVIDIA_WORDS}; ")
        assert "node(s) mid-upgrade" in conds["Error"]["message"]

        # (pool-b's nodes carry no state: auto upgrade is off there.)
        done = {n: "upgrade-done" if n.startswith("gpu-a") else "" for n in nodes}
        await env.wait_labels(STATE, done, timeout=180)
        await wait_for(ready, timeout=60, interval=0.25)
