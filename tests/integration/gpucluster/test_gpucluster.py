"""GPUCluster on a simulated GPU cluster (localcluster), through real HTTP.

Two GPU nodes with a host driver (profile ``gpu-host-driver``), the whole
operator in-process (``OPERATOR_NAMESPACE=gpu-operator``), and our copy of
NVIDIA's sample GPUCluster (docs/examples/gpucluster-sample.yaml) applied as a
user would. The simulated nodes publish their ResourceSlices once the DRA
kubelet plugin runs on them, so the admin-access claims of the validator and
the exporter get allocated.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from localcluster.extensions import extensions_of
from nimctl_runtime.client import Client
from nimctl_runtime.client.errors import ApiError, NotFound
from tests.integration.controllers.harness import (
    Operator,
    cluster_with_crds,
    reconciled_and_settled,
    reconciles,
    settle,
    start_operator,
    wait_for,
)

pytestmark = pytest.mark.timeout(240)

GC = "nvidia.com/v1alpha1"
CP = "nvidia.com/v1"
NS = "gpu-operator"
OPERATOR_USER = "nimctl-operator"
EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"
SAMPLE = EXAMPLES / "gpucluster-sample.yaml"
POLICY = EXAMPLES / "clusterpolicy-defaults.yaml"
DRIVER = EXAMPLES / "nvidiadriver-sample.yaml"
GPU_NODES = ("gpu-node-0", "gpu-node-1")
PLUGIN = "nvidia-dra-driver-kubelet-plugin"


def _load(path: Path) -> dict[str, Any]:
    obj: dict[str, Any] = YAML(typ="safe").load(path.read_text())
    return obj


class Env:
    def __init__(self, cluster: Any, admin: Client, operator: Operator) -> None:
        self.cluster = cluster
        self.admin = admin
        self.operator = operator

    async def gc(self) -> dict[str, Any]:
        obj: dict[str, Any] = await self.admin.get(GC, "GPUCluster", "gpu-cluster")
        return obj

    async def wait_gc(self, state: str, reason: str | None = None, timeout: float = 90) -> Any:
        async def check() -> dict[str, Any] | None:
            try:
                obj = await self.gc()
            except NotFound:
                return None
            status = obj.get("status") or {}
            if status.get("state") != state:
                return None
            if reason is not None and condition(obj, "Error").get("reason") != reason:
                return None
            return obj

        return await wait_for(check, timeout=timeout, interval=0.2)

    async def daemonsets(self) -> list[str]:
        items = (await self.admin.list("apps/v1", "DaemonSet", NS))["items"]
        return sorted(d["metadata"]["name"] for d in items)

    async def slices(self) -> list[str]:
        items = (await self.admin.list("resource.k8s.io/v1", "ResourceSlice"))["items"]
        return sorted(s["metadata"]["name"] for s in items)


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}


@contextlib.asynccontextmanager
async def running_env(tmp_path: Path, profile: str = "gpu-host-driver") -> AsyncIterator[Env]:
    previous = os.environ.get("OPERATOR_NAMESPACE")
    os.environ["OPERATOR_NAMESPACE"] = NS
    try:
        async with cluster_with_crds(tmp_path, profile=profile) as (cluster, admin):
            await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            kubeconfig = cluster.write_kubeconfig(
                tmp_path / "operator.kubeconfig", user=OPERATOR_USER
            )
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


async def test_sample_goes_ready_publishes_slices_and_idles_without_writes(tmp_path: Path) -> None:
    async with running_env(tmp_path) as env:
        await env.admin.create(_load(SAMPLE))
        not_ready = await env.wait_gc("notReady", timeout=30)
        assert condition(not_ready, "Ready")["status"] == "False"
        assert condition(not_ready, "Error")["reason"] in ("OperandNotReady", "ReconcileFailed")

        ready = await env.wait_gc("ready", timeout=120)
        assert ready["status"]["namespace"] == NS
        assert condition(ready, "Ready")["reason"] == "Reconciled"
        assert condition(ready, "Error")["status"] == "False"
        assert ready["metadata"]["finalizers"] == ["gpucluster.nvidia.com/dra-resourceclaim"]
        # DCGM off in the sample: the exporter runs its embedded engine.
        assert await env.daemonsets() == [
            "nvidia-dcgm-exporter-dra", PLUGIN, "nvidia-dra-validator",
        ]  # fmt: skip
        assert {f"{n}-gpu.nvidia.com" for n in GPU_NODES} <= set(await env.slices())
        ns = await env.admin.get("v1", "Namespace", NS)
        assert ns["metadata"]["labels"]["resource.kubernetes.io/admin-access"] == "true"
        node = await env.admin.get("v1", "Node", GPU_NODES[0])
        labels = node["metadata"]["labels"]
        for component in ("driver", "dra-driver", "dra-validator", "dcgm-dra",
                          "dcgm-exporter-dra"):  # fmt: skip
            assert labels[f"nvidia.com/gpu.deploy.{component}"] == "true"
        assert "nvidia.com/gpu.deploy.device-plugin" not in labels
        deployment = await env.admin.get("apps/v1", "Deployment", "nvidia-dra-driver-controller", NS)
        assert deployment["spec"]["replicas"] == 1

        # Re-reconciling the ready GPUCluster (an owned DaemonSet touched) writes nothing.
        await settle(env.operator)
        reconciled = reconciles("gpucluster-controller")
        audit = extensions_of(env.cluster).audit
        seq_before = max((r.seq for r in audit.records()), default=0)
        writes_before = len(env.operator.client.object_writes())
        await env.admin.patch(
            "apps/v1", "DaemonSet", PLUGIN,
            {"metadata": {"annotations": {"example.com/touched": "yes"}}}, namespace=NS,
        )  # fmt: skip
        await reconciled_and_settled(env.operator, "gpucluster-controller", reconciled)
        assert env.operator.client.object_writes()[writes_before:] == []
        operator_writes = [
            r.call
            for r in audit.records(user=OPERATOR_USER)
            if r.seq > seq_before
            and r.verb in ("create", "update", "patch", "delete")
            and r.resource != "events"
        ]
        assert operator_writes == []


async def test_a_gpucluster_named_otherwise_is_refused(tmp_path: Path) -> None:
    async with running_env(tmp_path) as env:
        obj = _load(SAMPLE)
        obj["metadata"]["name"] = "my-gpus"
        with pytest.raises(ApiError) as err:
            await env.admin.create(obj)
        assert err.value.status == 422
        assert "GPUCluster is a singleton, metadata.name must be 'gpu-cluster'" in str(err.value)


async def test_beside_a_clusterpolicy_both_say_why_and_neither_deploys(tmp_path: Path) -> None:
    async with running_env(tmp_path) as env:
        await env.admin.create(_load(POLICY))
        await env.admin.create(_load(SAMPLE))
        blocked = await env.wait_gc("notReady", "PrerequisiteNotMet", timeout=30)
        assert condition(blocked, "Error")["message"] == (
            'A ClusterPolicy CR "cluster-policy" exists; a ClusterPolicy CR and GPUCluster CR '
            "may not exist at the same time"
        )

        async def policy_conflict() -> dict[str, Any] | None:
            cp = await env.admin.get(CP, "ClusterPolicy", "cluster-policy")
            error = condition(cp, "Error")
            return cp if "conflicting GPUCluster" in error.get("message", "") else None

        cp = await wait_for(policy_conflict, timeout=30, interval=0.2)
        assert cp["status"]["state"] == "notReady"
        assert condition(cp, "Error")["message"] == (
            'conflicting GPUCluster resource "gpu-cluster" detected; ClusterPolicy and '
            "GPUCluster cannot co-exist"
        )
        # Whichever reconciled first may have deployed; the GPUCluster deployed nothing.
        assert PLUGIN not in await env.daemonsets()

        # The ClusterPolicy goes: the GPUCluster deploys.
        await env.admin.delete(CP, "ClusterPolicy", "cluster-policy")
        await env.wait_gc("ready", timeout=120)


async def test_dcgm_on_then_off(tmp_path: Path) -> None:
    async with running_env(tmp_path) as env:
        await env.admin.create(_load(SAMPLE))
        await env.wait_gc("ready", timeout=120)
        await env.admin.patch(GC, "GPUCluster", "gpu-cluster", {"spec": {"dcgm": {"enabled": True}}})

        async def dcgm_wired() -> bool:
            names = await env.daemonsets()
            if "nvidia-dcgm-dra" not in names:
                return False
            ds = await env.admin.get("apps/v1", "DaemonSet", "nvidia-dcgm-exporter-dra", NS)
            env_vars = ds["spec"]["template"]["spec"]["containers"][0]["env"]
            return {"name": "DCGM_REMOTE_HOSTENGINE_INFO", "value": "nvidia-dcgm-dra:5555"} in (
                env_vars
            )

        await wait_for(dcgm_wired, timeout=30, interval=0.2)
        await env.admin.get("v1", "Service", "nvidia-dcgm-dra", NS)
        await env.wait_gc("ready", timeout=120)

        await env.admin.patch(GC, "GPUCluster", "gpu-cluster", {"spec": {"dcgm": {"enabled": False}}})

        async def dcgm_gone() -> bool:
            return "nvidia-dcgm-dra" not in await env.daemonsets()

        await wait_for(dcgm_gone, timeout=30, interval=0.2)
        with pytest.raises(NotFound):
            await env.admin.get("v1", "Service", "nvidia-dcgm-dra", NS)


async def test_deletion_removes_claim_consumers_first(tmp_path: Path) -> None:
    async with running_env(tmp_path) as env:
        await env.admin.create(_load(SAMPLE))
        await env.wait_gc("ready", timeout=120)
        await env.admin.delete(GC, "GPUCluster", "gpu-cluster")

        # While the claim consumers drain, the kubelet plugin is still there.
        seen_plugin_while_draining = False

        async def drained() -> bool:
            nonlocal seen_plugin_while_draining
            names = await env.daemonsets()
            consumers = {"nvidia-dcgm-exporter-dra", "nvidia-dra-validator"} & set(names)
            if consumers and PLUGIN in names:
                seen_plugin_while_draining = True
            try:
                await env.gc()
            except NotFound:
                return not names
            return False

        await wait_for(drained, timeout=60, interval=0.05)
        assert seen_plugin_while_draining
        events = (await env.admin.list("v1", "Event", "default"))["items"] + (
            await env.admin.list("v1", "Event", NS)
        )["items"]
        reasons = {e.get("reason") for e in events}
        assert "DrainingClaimConsumers" in reasons

        # The kubelet plugin went: the nodes withdraw their GPUs' slices.
        async def withdrawn() -> bool:
            return not [s for s in await env.slices() if s.endswith("-gpu.nvidia.com")]

        await wait_for(withdrawn, timeout=30, interval=0.2)


async def test_bare_nodes_get_their_driver_from_an_nvidiadriver_without_a_clusterpolicy(
    tmp_path: Path,
) -> None:
    """No host driver: NVIDIA's NVIDIADriver sample installs it (no ClusterPolicy exists),
    the DRA kubelet plugin waits for it, then the GPUCluster is ready."""
    async with running_env(tmp_path, profile="gpu-bare") as env:
        await env.admin.create(_load(SAMPLE))
        await env.admin.create(_load(DRIVER))

        async def driver_ready() -> bool:
            obj = await env.admin.get(GC, "NVIDIADriver", "nvidiadriver-sample")
            return (obj.get("status") or {}).get("state") == "ready"

        await wait_for(driver_ready, timeout=120, interval=0.2)
        await env.wait_gc("ready", timeout=120)
        node = await env.admin.get("v1", "Node", GPU_NODES[0])
        labels = node["metadata"]["labels"]
        assert labels["nvidia.com/gpu-operator.driver.owner"] == "nvidiadriver-sample"
        assert labels["nvidia.com/gpu.deploy.driver"] == "true"
        assert {f"{n}-gpu.nvidia.com" for n in GPU_NODES} <= set(await env.slices())
