"""A simulated GPU cluster with the operator running, for the driver upgrade tests.

``upgrade_env`` starts localcluster with N bare GPU nodes (NFD labels, no
driver; the simulator installs the driver the ClusterPolicy deploys), runs the
whole operator in-process with ``OPERATOR_NAMESPACE=gpu-operator`` and applies
NVIDIA's sample ClusterPolicy with the given ``upgradePolicy`` changes, then
waits until every node carries ``upgrade-done``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from localcluster import LocalCluster
from nimctl.operator import install_crds
from nimctl_runtime.client import Client
from tests.integration.controllers.harness import Operator, start_operator, wait_for

NS = "gpu-operator"
CP = "nvidia.com/v1"
STATE = "nvidia.com/gpu-driver-upgrade-state"
SAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "clusterpolicy-defaults.yaml"
IN_PROGRESS_EXCLUDED = frozenset({"", "upgrade-done", "upgrade-required"})


def profile(gpu_nodes: int) -> dict[str, Any]:
    return {
        "name": "gpu-upgrade",
        "pools": [
            {
                "namePrefix": "gpu-node",
                "count": gpu_nodes,
                "cpu": "32",
                "memory": "256Gi",
                "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
                "annotations": {
                    "localcluster.nimctl.io/gpus": "2",
                    "localcluster.nimctl.io/gpu-product": "NVIDIA-L40S",
                    "localcluster.nimctl.io/driver-install-seconds": "1",
                },
            }
        ],
    }


def sample_policy(upgrade_policy: Mapping[str, Any]) -> dict[str, Any]:
    obj: dict[str, Any] = YAML(typ="safe").load(SAMPLE.read_text())
    obj["spec"]["driver"]["upgradePolicy"].update(upgrade_policy)
    return obj


class UpgradeEnv:
    def __init__(self, cluster: LocalCluster, admin: Client, operator: Operator) -> None:
        self.cluster = cluster
        self.admin = admin
        self.operator = operator

    async def nodes(self) -> list[dict[str, Any]]:
        items = (await self.admin.list("v1", "Node"))["items"]
        return [n for n in items if n["metadata"]["name"].startswith("gpu-node")]

    async def states(self) -> dict[str, str]:
        return {
            n["metadata"]["name"]: n["metadata"].get("labels", {}).get(STATE, "")
            for n in await self.nodes()
        }

    async def wait_states(self, want: Mapping[str, str], timeout: float = 120) -> dict[str, str]:
        async def check() -> dict[str, str] | None:
            states = await self.states()
            return states if all(states.get(k) == v for k, v in want.items()) else None

        result: dict[str, str] = await wait_for(check, timeout=timeout, interval=0.25)
        return result

    async def set_driver_version(self, version: str) -> None:
        await self.admin.patch(CP, "ClusterPolicy", "cluster-policy",
                               {"spec": {"driver": {"version": version}}})  # fmt: skip

    async def annotate_node(self, node: str, annotations: Mapping[str, str | None]) -> None:
        await self.admin.patch("v1", "Node", node, {"metadata": {"annotations": dict(annotations)}})

    async def node_events(self, node: str) -> list[dict[str, Any]]:
        items = (await self.admin.list("v1", "Event", "default",
                                       field_selector=f"involvedObject.name={node}"))["items"]  # fmt: skip
        return [e for e in items if str(e.get("reason", "")).startswith("DriverUpgrade")]

    async def upgrade_condition(self) -> dict[str, Any]:
        cp = await self.admin.get(CP, "ClusterPolicy", "cluster-policy")
        for cond in (cp.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "DriverUpgrade":
                return dict(cond)
        return {}


@contextlib.asynccontextmanager
async def upgrade_env(
    tmp_path: Path, gpu_nodes: int, upgrade_policy: Mapping[str, Any], *, speed: float = 1.0
) -> AsyncIterator[UpgradeEnv]:
    previous = os.environ.get("OPERATOR_NAMESPACE")
    os.environ["OPERATOR_NAMESPACE"] = NS
    cluster = LocalCluster(workdir=tmp_path)
    cluster.simulator_options = {"profile": profile(gpu_nodes), "speed": speed}
    try:
        async with cluster:
            kubeconfig = cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
            async with Client(str(kubeconfig)) as admin:
                await install_crds(admin)
                await admin.create({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": NS}})  # fmt: skip
                operator = await start_operator(
                    cluster.write_kubeconfig(tmp_path / "op.kubeconfig")
                )
                env = UpgradeEnv(cluster, admin, operator)
                try:
                    await admin.create(sample_policy(upgrade_policy))
                    names = [n["metadata"]["name"] for n in await env.nodes()]
                    await env.wait_states(dict.fromkeys(names, "upgrade-done"), timeout=120)
                    yield env
                finally:
                    await operator.shutdown()
    finally:
        if previous is None:
            os.environ.pop("OPERATOR_NAMESPACE", None)
        else:
            os.environ["OPERATOR_NAMESPACE"] = previous
