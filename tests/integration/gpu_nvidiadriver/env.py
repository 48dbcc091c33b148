"""A simulated GPU cluster with two node pools and the operator running, for NVIDIADriver.

``driver_env`` starts localcluster with two pools of bare GPU nodes (NFD
labels, no driver): ``gpu-a-*`` on Ubuntu 22.04 labelled ``pool=a`` and
``gpu-b-*`` on Ubuntu 24.04 labelled ``pool=b``. It runs the whole operator
in-process with ``OPERATOR_NAMESPACE=gpu-operator`` and applies NVIDIA's
sample ClusterPolicy, handing the driver to NVIDIADriver
(``driver.useNvidiaDriverCRD: true``) unless asked not to.
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
ND = "nvidia.com/v1alpha1"
STATE = "nvidia.com/gpu-driver-upgrade-state"
OWNER = "nvidia.com/gpu-operator.driver.owner"
EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"
POLICY_SAMPLE = EXAMPLES / "clusterpolicy-defaults.yaml"
DRIVER_SAMPLE = EXAMPLES / "nvidiadriver-sample.yaml"


def _pool(prefix: str, count: int, pool: str, version: str) -> dict[str, Any]:
    return {
        "namePrefix": prefix,
        "count": count,
        "cpu": "32",
        "memory": "256Gi",
        "osVersionID": version,
        "labels": {"feature.node.kubernetes.io/pci-10de.present": "true", "pool": pool},
        "annotations": {
            "localcluster.nimctl.io/gpus": "2",
            "localcluster.nimctl.io/gpu-product": "NVIDIA-L40S",
            "localcluster.nimctl.io/driver-install-seconds": "1",
        },
    }


def profile(per_pool: int) -> dict[str, Any]:
    return {
        "name": "gpu-nvidiadriver",
        "pools": [_pool("gpu-a", per_pool, "a", "22.04"), _pool("gpu-b", per_pool, "b", "24.04")],
    }


def sample_policy(use_driver_crd: bool) -> dict[str, Any]:
    obj: dict[str, Any] = YAML(typ="safe").load(POLICY_SAMPLE.read_text())
    obj["spec"]["driver"]["useNvidiaDriverCRD"] = use_driver_crd
    obj["spec"]["driver"]["upgradePolicy"]["autoUpgrade"] = True
    return obj


def sample_driver() -> dict[str, Any]:
    obj: dict[str, Any] = YAML(typ="safe").load(DRIVER_SAMPLE.read_text())
    return obj


def nvidia_driver(
    name: str, selector: Mapping[str, str], *, version: str = "570.148.08", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": ND,
        "kind": "NVIDIADriver",
        "metadata": {"name": name},
        "spec": {
            "repository": "nvcr.io/nvidia",
            "image": "driver",
            "version": version,
            "nodeSelector": dict(selector),
            **spec,
        },
    }


class DriverEnv:
    def __init__(self, cluster: LocalCluster, admin: Client, operator: Operator) -> None:
        self.cluster = cluster
        self.admin = admin
        self.operator = operator

    async def nodes(self, prefix: str = "gpu-") -> list[dict[str, Any]]:
        items = (await self.admin.list("v1", "Node"))["items"]
        return [n for n in items if n["metadata"]["name"].startswith(prefix)]

    async def labels(self, key: str, prefix: str = "gpu-") -> dict[str, str]:
        return {
            n["metadata"]["name"]: n["metadata"].get("labels", {}).get(key, "")
            for n in await self.nodes(prefix)
        }

    async def driver(self, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = await self.admin.get(ND, "NVIDIADriver", name)
        return obj

    async def daemonsets(self, owner: str | None = None) -> list[dict[str, Any]]:
        items = (await self.admin.list("apps/v1", "DaemonSet", NS))["items"]
        out = [
            d
            for d in items
            if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "nvidia-driver"
        ]
        if owner is not None:
            out = [
                d
                for d in out
                if any(r.get("name") == owner for r in d["metadata"].get("ownerReferences", []))
            ]
        return out

    async def pods_by_node(self) -> dict[str, list[dict[str, Any]]]:
        """Node -> its driver pods (not terminating)."""
        items = (
            await self.admin.list(
                "v1", "Pod", NS, label_selector="app.kubernetes.io/component=nvidia-driver"
            )
        )["items"]
        out: dict[str, list[dict[str, Any]]] = {}
        for p in items:
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"):
                out.setdefault(p["spec"]["nodeName"], []).append(p)
        return out

    async def driver_pods(self) -> dict[str, dict[str, Any]]:
        """Node -> its driver pod, where it runs exactly one (not terminating)."""
        return {n: ps[0] for n, ps in (await self.pods_by_node()).items() if len(ps) == 1}

    async def wait_driver_state(
        self, name: str, state: str, reason: str | None = None, timeout: float = 90
    ) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            obj = await self.driver(name)
            status = obj.get("status") or {}
            if status.get("state") != state:
                return None
            if reason is not None:
                reasons = {c.get("reason") for c in status.get("conditions") or []}
                if reason not in reasons:
                    return None
            return obj

        result: dict[str, Any] = await wait_for(check, timeout=timeout, interval=0.25)
        return result

    async def wait_labels(
        self, key: str, want: Mapping[str, str], timeout: float = 120
    ) -> dict[str, str]:
        async def check() -> dict[str, str] | None:
            labels = await self.labels(key)
            return labels if all(labels.get(k) == v for k, v in want.items()) else None

        result: dict[str, str] = await wait_for(check, timeout=timeout, interval=0.25)
        return result

    async def set_version(self, name: str, version: str) -> None:
        await self.admin.patch(ND, "NVIDIADriver", name, {"spec": {"version": version}})


@contextlib.asynccontextmanager
async def driver_env(
    tmp_path: Path, per_pool: int = 3, *, use_driver_crd: bool = True
) -> AsyncIterator[DriverEnv]:
    previous = os.environ.get("OPERATOR_NAMESPACE")
    os.environ["OPERATOR_NAMESPACE"] = NS
    cluster = LocalCluster(workdir=tmp_path)
    cluster.simulator_options = {"profile": profile(per_pool), "speed": 1.0}
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
                env = DriverEnv(cluster, admin, operator)
                try:
                    await admin.create(sample_policy(use_driver_crd))
                    names = [n["metadata"]["name"] for n in await env.nodes()]
                    await env.wait_labels("nvidia.com/gpu.present", dict.fromkeys(names, "true"))
                    yield env
                finally:
                    await operator.shutdown()
    finally:
        if previous is None:
            os.environ.pop("OPERATOR_NAMESPACE", None)
        else:
            os.environ["OPERATOR_NAMESPACE"] = previous
