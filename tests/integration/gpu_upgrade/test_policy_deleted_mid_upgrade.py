"""A ClusterPolicy deleted mid-upgrade leaves no node cordoned or marked (issue 26).

Four GPU nodes upgrade at most two at a time; a PodDisruptionBudget that allows
no eviction holds the upgrading nodes in ``drain-required``, cordoned. Then the
ClusterPolicy is deleted. NVIDIA's operator leaves those nodes cordoned with
their upgrade labels and annotations; nimctl uncordons the nodes it cordoned
(not one an administrator cordoned before), and removes the state label and
the upgrade's annotations from every node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade.plan import UPGRADE_ANNOTATIONS
from tests.integration.controllers.harness import wait_for
from tests.integration.gpu_upgrade.env import upgrade_env
from tests.integration.gpu_upgrade.test_upgrade_rollout import (
    GPU,
    NEW_VERSION,
    deployment,
    pdb,
    wait_ready,
)

pytestmark = pytest.mark.timeout(300)

POLICY = {
    "maxParallelUpgrades": 2,
    "maxUnavailable": "50%",
    "drain": {"enable": True, "timeoutSeconds": 0, "deleteEmptyDir": True},
}


async def test_deleting_the_policy_mid_upgrade_uncordons_what_it_cordoned(tmp_path: Path) -> None:
    async with upgrade_env(tmp_path, 4, POLICY) as env:
        admin = env.admin
        await admin.create(deployment("train", 4, GPU, scratch=True))
        await admin.create(pdb("train", maxUnavailable=0))  # no eviction: drain waits
        await wait_ready(admin, "train", 4)
        await admin.patch("v1", "Node", "gpu-node-3", {"spec": {"unschedulable": True}})
        await env.set_driver_version(NEW_VERSION)

        async def stuck() -> list[str] | None:
            nodes = await env.nodes()
            held = [n["metadata"]["name"] for n in nodes
                    if n["metadata"].get("labels", {}).get(c.STATE_LABEL) == c.DRAIN_REQUIRED
                    and n["spec"].get("unschedulable")]  # fmt: skip
            # the pre-cordoned gpu-node-3 counts as unavailable, so how many other
            # nodes drain at once depends on where the scheduler put the PDB's pods
            return held if [n for n in held if n != "gpu-node-3"] else None

        held = await wait_for(stuck, timeout=120, interval=0.25)
        await admin.delete("nvidia.com/v1", "ClusterPolicy", "cluster-policy")

        async def released() -> list[dict[str, Any]] | None:
            nodes = await env.nodes()
            for n in nodes:
                meta = n["metadata"]
                if c.STATE_LABEL in meta.get("labels", {}):
                    return None
                if any(k in meta.get("annotations", {}) for k in UPGRADE_ANNOTATIONS):
                    return None
            return nodes

        nodes = {n["metadata"]["name"]: n for n in await wait_for(released, timeout=60, interval=0.25)}
        assert held and all(not nodes[name]["spec"].get("unschedulable") for name in held
                            if name != "gpu-node-3"), "the nodes the upgrade cordoned"  # fmt: skip
        assert nodes["gpu-node-3"]["spec"].get("unschedulable") is True, "cordoned before: stays"
        assert not [name for name, n in nodes.items()
                    if n["spec"].get("unschedulable") and name != "gpu-node-3"]  # fmt: skip
