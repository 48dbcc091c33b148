"""The GPUCluster controller on an in-memory API: status words, the ClusterPolicy
conflict, the namespace label, the drain of claim consumers, the DRA node labels."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controllers.gpu.config import GPUConfig
from controllers.gpu.gpucluster import (
    ADMIN_ACCESS_LABEL,
    FINALIZER,
    REASON_DRAINING,
    GPUClusterKind,
    claim_consumers,
)
from controllers.gpu.nodelabels import dra_node_patch
from controllers.reconciler import KindReconciler
from nimctl_runtime.reconcile import Request
from platforms.capabilities import Capabilities
from tests.unit.controllers.fakes import FakeRecorder
from tests.unit.gpu_nvidiadriver.test_reconciler import MergeAPI

NS = "gpu-operator"
GC = "nvidia.com/v1alpha1"
ENV = {"VALIDATOR_IMAGE": "v:1", "DCGM_EXPORTER_IMAGE": "e:1", "DRA_DRIVER_IMAGE": "d:1"}


CLUSTER_KINDS = {"Namespace", "GPUCluster", "DeviceClass", "ValidatingAdmissionPolicy",
                 "ValidatingAdmissionPolicyBinding"}  # fmt: skip


class API(MergeAPI):
    """MergeAPI with the GPUCluster's cluster-scoped kinds, delete options and the
    finalizers' JSON patch."""

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] in CLUSTER_KINDS:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": ""}}
        return super().put(obj)

    async def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None,
        *, propagation_policy: str | None = None,
    ) -> Any:  # fmt: skip
        return await super().delete(
            api_version, kind, name, namespace, propagation_policy=propagation_policy
        )

    async def patch(
        self, api_version: str, kind: str, name: str, body: Any, *,
        namespace: str | None = None, patch_type: str = "merge", subresource: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        if patch_type == "json":  # patch_finalizers: test the version, set the finalizers
            value = next(op["value"] for op in body if op["path"] == "/metadata/finalizers")
            body = {"metadata": {"finalizers": value}}
        return await super().patch(
            api_version, kind, name, body, namespace=namespace, subresource=subresource
        )


def _api(*objs: dict[str, Any]) -> API:
    api = API()
    api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    gc = {
        "apiVersion": GC, "kind": "GPUCluster",
        "metadata": {"name": "gpu-cluster", "uid": "gc-uid", "generation": 1},
        "spec": {"draDriver": {}, "dcgmExporter": {}},
    }  # fmt: skip
    api.put(gc)
    for obj in objs:
        api.put(obj)
    return api


def _reconciler(api: API, versions: frozenset[str] = frozenset({"resource.k8s.io/v1"})) -> Any:
    async def dra_versions() -> frozenset[str]:
        return versions

    kind = GPUClusterKind(
        config=GPUConfig(operator_namespace=NS, operator_env=ENV),
        capabilities=Capabilities.nothing(),
        dra_versions=dra_versions,
    )
    return KindReconciler(
        kind=kind, cache=api, client=api, api_reader=api, recorder=FakeRecorder()
    )


def _gc(api: API) -> dict[str, Any]:
    obj = api.obj(GC, "GPUCluster", "gpu-cluster", "")
    assert obj is not None
    return obj


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj["status"]["conditions"]}


async def test_first_pass_adds_finalizer_labels_namespace_and_waits_for_operands() -> None:
    api = _api()
    result = await _reconciler(api).reconcile(Request("", "gpu-cluster"))
    gc = _gc(api)
    assert gc["metadata"]["finalizers"] == [FINALIZER]
    ns = api.obj("v1", "Namespace", NS, "")
    assert ns is not None and ns["metadata"]["labels"][ADMIN_ACCESS_LABEL] == "true"
    assert gc["status"]["state"] == "notReady" and gc["status"]["namespace"] == NS
    assert _conditions(gc)["Error"]["reason"] == "OperandNotReady"
    assert result.requeue_after == 5.0
    names = {k[3] for k in api.objects if k[1] == "DaemonSet"}
    assert names == {"nvidia-dra-driver-kubelet-plugin", "nvidia-dcgm-exporter-dra",
                     "nvidia-dra-validator"}  # fmt: skip


async def test_ready_once_daemonsets_settle_then_passes_write_nothing() -> None:
    api = _api()
    reconciler = _reconciler(api)
    await reconciler.reconcile(Request("", "gpu-cluster"))
    # The fake has no nodes: the DaemonSets want no pods, which NVIDIA counts as ready.
    result = await reconciler.reconcile(Request("", "gpu-cluster"))
    gc = _gc(api)
    assert gc["status"]["state"] == "ready" and result.requeue_after == 60.0
    assert _conditions(gc)["Ready"]["reason"] == "Reconciled"
    before = len(api.writes)
    await reconciler.reconcile(Request("", "gpu-cluster"))
    assert api.writes[before:] == []


async def test_a_clusterpolicy_blocks_it_with_nvidias_words_and_nothing_is_deployed() -> None:
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
              "metadata": {"name": "cluster-policy"}, "spec": {}}  # fmt: skip
    api = _api(policy)
    result = await _reconciler(api).reconcile(Request("", "gpu-cluster"))
    gc = _gc(api)
    error = _conditions(gc)["Error"]
    assert (gc["status"]["state"], error["reason"]) == ("notReady", "PrerequisiteNotMet")
    assert error["message"].startswith('A ClusterPolicy CR "cluster-policy" exists;')
    assert result.requeue_after == 60.0
    assert not [k for k in api.objects if k[1] == "DaemonSet"]
    ns = api.obj("v1", "Namespace", NS, "")
    assert ns is not None and ADMIN_ACCESS_LABEL not in (ns["metadata"].get("labels") or {})


async def test_no_dra_api_fails_with_reconcile_failed() -> None:
    api = _api()
    with pytest.raises(Exception, match="DeviceClass API is not served"):
        await _reconciler(api, frozenset()).reconcile(Request("", "gpu-cluster"))
    error = _conditions(_gc(api))["Error"]
    assert error["reason"] == "ReconcileFailed"
    assert error["message"].startswith("Error syncing state state-dra-driver: ")


async def test_deletion_drains_claim_consumers_before_releasing_the_finalizer() -> None:
    api = _api()
    reconciler = _reconciler(api)
    await reconciler.reconcile(Request("", "gpu-cluster"))
    gc = copy.deepcopy(_gc(api))
    gc["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    api.put(gc)
    result = await reconciler.reconcile(Request("", "gpu-cluster"))
    # The consumers (exporter, validator) are deleted first; the plugin stays.
    deleted = {w[2] for w in api.writes if w[0] == "delete"}
    assert deleted == {"nvidia-dcgm-exporter-dra", "nvidia-dra-validator"}
    assert {api.propagation[("DaemonSet", n)] for n in deleted} == {"Foreground"}
    assert result.requeue_after == 5.0
    assert _gc(api)["metadata"]["finalizers"] == [FINALIZER]
    (event,) = reconciler.recorder.events
    assert event[1] == REASON_DRAINING and "nvidia-dra-validator" in event[2]
    # None left: the finalizer goes.
    await reconciler.reconcile(Request("", "gpu-cluster"))
    assert not _gc(api)["metadata"].get("finalizers")


def test_claim_consumers_are_the_controlled_daemonsets_with_claims() -> None:
    def ds(name: str, uid: str, claims: bool) -> dict[str, Any]:
        pod: dict[str, Any] = {"resourceClaims": [{"name": "x"}]} if claims else {}
        return {"metadata": {"name": name, "ownerReferences": [{"uid": uid, "controller": True}]},
                "spec": {"template": {"spec": pod}}}  # fmt: skip

    found = claim_consumers([ds("b", "u", True), ds("a", "u", True), ds("c", "u", False),
                             ds("d", "other", True)], "u")  # fmt: skip
    assert [d["metadata"]["name"] for d in found] == ["a", "b"]


def test_dra_node_labels_keep_pauses_and_sweep_device_plugin_labels() -> None:
    labels = {
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.dra-driver": "paused-for-driver-upgrade",
        "nvidia.com/gpu.deploy.dcgm-dra": "",
    }
    patch = dra_node_patch(labels)
    assert patch == {"metadata": {"labels": {
        "nvidia.com/gpu.deploy.device-plugin": None,
        "nvidia.com/gpu.deploy.driver": "true",
        "nvidia.com/gpu.deploy.dra-validator": "true",
        "nvidia.com/gpu.deploy.dcgm-dra": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter-dra": "true",
    }}}  # fmt: skip
    done = {**labels, **{k: v for k, v in patch["metadata"]["labels"].items() if v}}
    del done["nvidia.com/gpu.deploy.device-plugin"]
    assert dra_node_patch(done) is None
    killed = dra_node_patch({**done, "nvidia.com/gpu.deploy.operands": "false"})
    assert killed is not None and "nvidia.com/gpu.deploy.dra-driver" in killed["metadata"]["labels"]
