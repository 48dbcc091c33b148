"""ClusterPolicy and node labelling on a simulated GPU cluster (localcluster), through real HTTP.

Each test starts a cluster from a GPU node profile, runs the whole operator
in-process (``OPERATOR_NAMESPACE=gpu-operator``) and applies NVIDIA's sample
ClusterPolicy (docs/examples/clusterpolicy-defaults.yaml) as a user would.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from nimctl_runtime.client import Client
from tests.integration.controllers.harness import (
    Operator,
    cluster_with_crds,
    reconciles,
    settle,
    start_operator,
    wait_for,
)

pytestmark = pytest.mark.timeout(240)

CP = "nvidia.com/v1"
NS = "gpu-operator"
SAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "clusterpolicy-defaults.yaml"
GPU_NODES = ("gpu-node-0", "gpu-node-1")


def sample(name: str = "cluster-policy") -> dict[str, Any]:
    obj: dict[str, Any] = YAML(typ="safe").load(SAMPLE.read_text())
    obj["metadata"]["name"] = name
    return obj


class Env:
    def __init__(self, cluster: Any, admin: Client, operator: Operator) -> None:
        self.cluster = cluster
        self.admin = admin
        self.operator = operator

    async def policy(self, name: str = "cluster-policy") -> dict[str, Any]:
        return await self.admin.get(CP, "ClusterPolicy", name)

    async def state(self, name: str = "cluster-policy") -> str:
        return str(((await self.policy(name)).get("status") or {}).get("state", ""))

    async def wait_state(self, want: str, name: str = "cluster-policy", timeout: float = 90) -> Any:
        async def check() -> dict[str, Any] | None:
            obj = await self.policy(name)
            return obj if (obj.get("status") or {}).get("state") == want else None

        return await wait_for(check, timeout=timeout, interval=0.2)

    async def daemonsets(self) -> list[str]:
        items = (await self.admin.list("apps/v1", "DaemonSet", NS))["items"]
        return sorted(d["metadata"]["name"] for d in items)

    async def operand_pods(self, node: str) -> list[str]:
        items = (await self.admin.list("v1", "Pod", NS))["items"]
        return sorted(
            p["metadata"]["name"] for p in items if (p.get("spec") or {}).get("nodeName") == node
        )

    async def node(self, name: str) -> dict[str, Any]:
        return await self.admin.get("v1", "Node", name)


async def _has_label(env: Env, node: str, label: str) -> bool:
    return label in (await env.node(node))["metadata"]["labels"]


def condition(policy: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (policy.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}


def gpus(node: dict[str, Any]) -> str:
    return str(((node.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", ""))


@contextlib.asynccontextmanager
async def running_env(tmp_path: Path, profile: str) -> AsyncIterator[Env]:
    previous = os.environ.get("OPERATOR_NAMESPACE")
    os.environ["OPERATOR_NAMESPACE"] = NS
    try:
        async with cluster_with_crds(tmp_path, profile=profile) as (cluster, admin):
            await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            kubeconfig = cluster.write_kubeconfig(tmp_path / "operator.kubeconfig")
            operator = await start_operator(kubeconfig)
            try:
                yield Env(cluster, admin, operator)
            finally:
                await operator.shutdown()
    finally:
        if previous is None:
            os.environ.pop("OPERATOR_NAMESPACE", None)
        else:
            os.environ["OPERATOR_NAMESPACE"] = previous


async def test_sample_policy_brings_bare_gpu_nodes_up(tmp_path: Path) -> None:
    """NVIDIA's sample, unchanged: notReady -> ready, GPUs advertised; then the day-2 changes."""
    async with running_env(tmp_path, "gpu-bare") as env:
        admin = env.admin
        for bare in GPU_NODES:
            assert gpus(await env.node(bare)) == "", "bare nodes advertise no GPUs"
        await admin.create(sample())

        not_ready = await env.wait_state("notReady", timeout=30)
        assert condition(not_ready, "Error")["reason"] == "OperandNotReady"
        assert condition(not_ready, "Error")["message"].startswith("ClusterPolicy is not ready;")
        ready = await env.wait_state("ready")
        assert condition(ready, "Ready")["reason"] == "Reconciled"
        assert ready["status"]["namespace"] == NS

        async def mig_configured() -> bool:
            for name in GPU_NODES:
                labels = (await env.node(name))["metadata"]["labels"]
                if labels.get("nvidia.com/mig.config.state") != "success":
                    return False
            return True

        # GFD reports MIG capability, node labelling then deploys the MIG manager.
        await wait_for(mig_configured, timeout=60)
        await env.wait_state("ready")
        for name in GPU_NODES:
            node = await env.node(name)
            labels = node["metadata"]["labels"]
            assert gpus(node) == "8", name
            assert labels["nvidia.com/gpu.present"] == "true"
            assert labels["nvidia.com/gpu.deploy.driver"] == "true"
            assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
            assert labels["nvidia.com/mig.config"] == "all-disabled"
            assert labels["nvidia.com/gpu.deploy.mig-manager"] == "true"
        cpu_labels = (await env.node("cpu-node-0"))["metadata"]["labels"]
        assert "nvidia.com/gpu.present" not in cpu_labels
        assert await env.operand_pods("cpu-node-0") == []
        assert "nvidia-driver-daemonset" in await env.daemonsets()

        # Nothing changed: nothing is written (ClusterPolicy, operands, nodes, status),
        # even when both controllers are woken up (an operand DaemonSet and a node touched).
        before = len(env.operator.client.object_writes())
        await admin.patch(
            "apps/v1",
            "DaemonSet",
            "nvidia-device-plugin-daemonset",
            {"metadata": {"annotations": {"example.com/touched": "yes"}}},
            namespace=NS,
        )
        await admin.patch(
            "v1", "Node", "gpu-node-0", {"metadata": {"labels": {"example.com/rack": "r1"}}}
        )
        await admin.patch(
            "v1",
            "Node",
            "gpu-node-1",
            {"metadata": {"labels": {"nvidia.com/gpu.deploy.client": None}}},
        )
        # The deploy label removed by hand comes back: exactly one node patch, then quiet.
        await wait_for(
            lambda: _has_label(env, "gpu-node-1", "nvidia.com/gpu.deploy.client"), timeout=30
        )
        await settle(env.operator)
        writes = env.operator.client.object_writes()[before:]
        assert writes == [("PATCH", "/api/v1/nodes/gpu-node-1")], writes

        # A second ClusterPolicy is ignored; the first stays active.
        await admin.create(sample("second-policy"))
        await env.wait_state("ignored", name="second-policy", timeout=30)
        assert await env.state() == "ready"

        # dcgmExporter.enabled: false removes its DaemonSet.
        await admin.patch(
            CP, "ClusterPolicy", "cluster-policy", {"spec": {"dcgmExporter": {"enabled": False}}}
        )

        async def exporter_gone() -> bool:
            return "nvidia-dcgm-exporter" not in await env.daemonsets()

        await wait_for(exporter_gone, timeout=30)

        # The operands kill switch empties a node.
        await admin.patch(
            "v1",
            "Node",
            "gpu-node-1",
            {"metadata": {"labels": {"nvidia.com/gpu.deploy.operands": "false"}}},
        )

        async def node_empty() -> bool:
            return await env.operand_pods("gpu-node-1") == []

        await wait_for(node_empty, timeout=30)
        labels = (await env.node("gpu-node-1"))["metadata"]["labels"]
        assert not [
            k for k in labels if k.startswith("nvidia.com/gpu.deploy.") and "operands" not in k
        ]
        assert await env.operand_pods("gpu-node-0") != []

        # A GPU node that joins later is labelled and served.
        new = copy.deepcopy(await env.node("gpu-node-0"))
        new["metadata"] = {
            "name": "gpu-node-9",
            "labels": {
                k: v
                for k, v in new["metadata"]["labels"].items()
                if not k.startswith("nvidia.com/")
            }
            | {"kubernetes.io/hostname": "gpu-node-9"},
            "annotations": new["metadata"]["annotations"],
        }
        for field in ("capacity", "allocatable"):
            new["status"][field].pop("nvidia.com/gpu", None)
        await admin.create(new)

        async def joined() -> bool:
            # Served means the MIG manager too: it comes only after GFD labels the node
            # MIG-capable, so a "ready" seen before that is a passing state.
            node = await env.node("gpu-node-9")
            labels = node["metadata"]["labels"]
            return gpus(node) == "8" and labels.get("nvidia.com/mig.config.state") == "success"

        await wait_for(joined, timeout=60)
        await env.wait_state("ready")

        # A driver that never gets ready keeps the policy notReady, naming the state.
        await admin.patch(
            "v1",
            "Node",
            "gpu-node-0",
            {"metadata": {"annotations": {"localcluster.nimctl.io/driver-install": "fail"}}},
        )
        pods = (
            await admin.list(
                "v1", "Pod", NS, label_selector="app.kubernetes.io/component=nvidia-driver"
            )
        )["items"]
        for pod in pods:
            if pod["spec"]["nodeName"] == "gpu-node-0":
                await admin.delete("v1", "Pod", pod["metadata"]["name"], NS)
        stuck = await env.wait_state("notReady", timeout=30)
        message = condition(stuck, "Error")["message"]
        assert "state-driver" in message, message
        passes = reconciles("clusterpolicy-controller")

        async def looked_again() -> bool:  # another pass saw the failing driver
            return reconciles("clusterpolicy-controller") > passes

        await wait_for(looked_again, timeout=60)
        await settle(env.operator)
        stuck = await env.policy()
        assert stuck["status"]["state"] == "notReady"
        assert "state-driver" in condition(stuck, "Error")["message"]


async def test_nfd_labels_missing_and_no_gpu_nodes(tmp_path: Path) -> None:
    async with running_env(tmp_path, "no-gpu") as env:
        policy = sample()
        policy["spec"]["psa"] = {"enabled": True}
        await env.admin.create(policy)
        ready = await env.wait_state("ready", timeout=30)
        assert condition(ready, "Ready")["reason"] == "NoGPUNodes"
        assert await env.daemonsets() == []

        # psa.enabled: the operator namespace admits the privileged operands.
        async def privileged() -> bool:
            ns = await env.admin.get("v1", "Namespace", NS)
            labels = ns["metadata"].get("labels") or {}
            return all(
                labels.get(f"pod-security.kubernetes.io/{m}") == "privileged"
                for m in ("enforce", "audit", "warn")
            )

        await wait_for(privileged, timeout=30)
        for node in (await env.admin.list("v1", "Node"))["items"]:
            strip = {k: None for k in node["metadata"]["labels"] if k.startswith("feature.node.")}
            await env.admin.patch(
                "v1", "Node", node["metadata"]["name"], {"metadata": {"labels": strip}}
            )

        async def nfd_missing() -> bool:
            policy = await env.policy()
            return condition(policy, "Ready").get("reason") == "NFDLabelsMissing"

        await wait_for(nfd_missing, timeout=30)
        assert await env.state() == "ready"


async def test_host_driver_then_precompiled(tmp_path: Path) -> None:
    async with running_env(tmp_path, "gpu-host-driver") as env:
        policy = sample()
        policy["spec"]["driver"]["enabled"] = False
        await env.admin.create(policy)

        async def advertised() -> bool:
            return all([gpus(await env.node(n)) == "4" for n in GPU_NODES])

        await wait_for(advertised, timeout=60)
        ready = await env.wait_state("ready")
        assert condition(ready, "Ready")["reason"] == "Reconciled"
        assert not [d for d in await env.daemonsets() if d.startswith("nvidia-driver-daemonset")]
        for name in GPU_NODES:
            node = await env.node(name)
            assert gpus(node) == "4"
            assert node["metadata"]["labels"]["nvidia.com/cuda.driver.major"] == "550"

        # Precompiled drivers: one DaemonSet per kernel the GPU nodes run.
        kernel = "feature.node.kubernetes.io/kernel-version.full"
        await env.admin.patch(
            "v1", "Node", "gpu-node-1", {"metadata": {"labels": {kernel: "6.8.0-1015-nvidia"}}}
        )
        await env.admin.patch(
            CP,
            "ClusterPolicy",
            "cluster-policy",
            {"spec": {"driver": {"enabled": True, "usePrecompiled": True, "version": "595"}}},
        )

        async def per_kernel() -> list[str]:
            names = [d for d in await env.daemonsets() if d.startswith("nvidia-driver-daemonset")]
            return names if len(names) == 2 else []

        names = await wait_for(per_kernel, timeout=30)
        assert any("6.8.0-1015-nvidia" in n for n in names), names
        assert any("5.15.0-122-generic" in n for n in names), names
        for name in names:
            ds = await env.admin.get("apps/v1", "DaemonSet", name, NS)
            selector = ds["spec"]["template"]["spec"]["nodeSelector"]
            assert selector[kernel] in name

        # NVIDIADriver takes over the drivers: the driver DaemonSets go, their pods stay.
        async def driver_pods() -> list[str]:
            items = (
                await env.admin.list(
                    "v1", "Pod", NS, label_selector="app.kubernetes.io/component=nvidia-driver"
                )
            )["items"]
            return sorted(p["metadata"]["name"] for p in items)

        await wait_for(driver_pods, timeout=30)
        running = await driver_pods()
        await env.admin.patch(
            CP,
            "ClusterPolicy",
            "cluster-policy",
            {"spec": {"driver": {"useNvidiaDriverCRD": True}}},
        )

        async def no_driver_daemonsets() -> bool:
            return not [d for d in await env.daemonsets() if d.startswith("nvidia-driver")]

        await wait_for(no_driver_daemonsets, timeout=30)
        await settle(env.operator)
        assert await driver_pods() == running

        # Deleting the ClusterPolicy removes its objects through owner references.
        await env.admin.delete(CP, "ClusterPolicy", "cluster-policy")

        async def all_gone() -> bool:
            runtime_classes = (await env.admin.list("node.k8s.io/v1", "RuntimeClass"))["items"]
            return await env.daemonsets() == [] and not runtime_classes

        await wait_for(all_gone, timeout=30)

        async def metric_says_no_policy() -> bool:
            from nimctl_runtime.metrics import REGISTRY

            return REGISTRY.get_sample_value("gpu_operator_reconciliation_status") == -1

        await wait_for(metric_says_no_policy, timeout=30)


async def test_gpu_controllers_need_operator_namespace() -> None:
    from controllers.gpu.config import GPUConfig, MissingOperatorNamespace

    with pytest.raises(MissingOperatorNamespace, match="OPERATOR_NAMESPACE is not set"):
        GPUConfig.from_env({})
    assert GPUConfig.from_env({"OPERATOR_NAMESPACE": NS}).operator_namespace == NS


async def test_a_crashing_driver_pod_is_named_with_its_node(tmp_path: Path) -> None:
    """NVIDIA's reason and words, then ours: the pod, its container's last exit, its node."""
    async with running_env(tmp_path, "gpu-bare") as env:
        await env.admin.patch(
            "v1",
            "Node",
            "gpu-node-0",
            {"metadata": {"annotations": {"localcluster.nimctl.io/driver-fail-versions": "595.91.07"}}},
        )  # fmt: skip
        await env.admin.create(sample())

        async def named() -> dict[str, Any] | None:
            found = condition(await env.policy(), "Error")
            return found if "keeps crashing" in found.get("message", "") else None

        error = await wait_for(named, timeout=90, interval=0.2)
        assert error["reason"] == "OperandNotReady"
        message = error["message"]
        assert message.startswith("ClusterPolicy is not ready; states not ready: [state-driver")
        assert "state-driver: DaemonSet nvidia-driver-daemonset: " in message
        assert " of pod nvidia-driver-daemonset-" in message
        assert "(on node gpu-node-0)" in message
        assert (await env.policy())["status"]["state"] == "notReady"

        # Fixed: the node loads the driver again; the user deletes the crashing pod.
        await env.admin.patch(
            "v1",
            "Node",
            "gpu-node-0",
            {"metadata": {"annotations": {"localcluster.nimctl.io/driver-fail-versions": None}}},
        )
        for pod in (await env.admin.list("v1", "Pod", NS))["items"]:
            if (
                pod["metadata"]["name"].startswith("nvidia-driver-daemonset-")
                and (pod.get("spec") or {}).get("nodeName") == "gpu-node-0"
            ):
                await env.admin.delete("v1", "Pod", pod["metadata"]["name"], NS)
        await env.wait_state("ready", timeout=120)
