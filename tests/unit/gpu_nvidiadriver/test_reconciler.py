"""The NVIDIADriver reconciler and the driver owner labeller on an in-memory API: what they
write, and that they stop writing."""

from __future__ import annotations

import copy
from typing import Any

from controllers.gpu.config import GPUConfig
from controllers.gpu.nodelabeling import DriverOwnerLabeler
from controllers.gpu.nvidiadriver import NVIDIADriverKind
from controllers.reconciler import KindReconciler
from nimctl_runtime.reconcile import Request
from tests.unit.controllers.fakes import FakeAPI, FakeRecorder
from tests.unit.gpu_nvidiadriver.helpers import NS, node

ND = "nvidia.com/v1alpha1"
OWNER = "nvidia.com/gpu-operator.driver.owner"
SPEC_KEYS = ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd",
             "nodeStatusExporter", "operator", "toolkit")  # fmt: skip


def _merge(live: Any, patch: Any) -> Any:
    if not isinstance(patch, dict) or not isinstance(live, dict):
        return copy.deepcopy(patch)
    out = dict(live)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(live.get(k), v)
    return out


CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "Node", "NVIDIADriver", "ClusterPolicy"}


class MergeAPI(FakeAPI):
    """FakeAPI with RFC 7386 merge patches (labels merge, null removes) and cluster scope."""

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] in CLUSTER_SCOPED:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": ""}}
        return super().put(obj)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        self.writes.append(("patch" + (f"/{subresource}" if subresource else ""), kind, name))
        key = (api_version, kind, namespace or "", name)
        self.objects[key] = self._bump(_merge(self.objects[key], body))
        return copy.deepcopy(self.objects[key])


def _cluster(use_crd: bool | None) -> MergeAPI:
    api = MergeAPI()
    for n in (node("a1", labels={"pool": "a"}), node("b1", labels={"pool": "b"})):
        api.put(n)
    if use_crd is not None:
        spec: dict[str, Any] = {k: {} for k in SPEC_KEYS}
        spec["driver"] = {"useNvidiaDriverCRD": use_crd}
        api.put({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                 "metadata": {"name": "cluster-policy",
                              "creationTimestamp": "2026-01-01T00:00:00Z"},
                 "spec": spec})  # fmt: skip
    return api


def _driver(api: MergeAPI, name: str, selector: dict[str, str]) -> None:
    api.put({"apiVersion": ND, "kind": "NVIDIADriver",
             "metadata": {"name": name, "generation": 1},
             "spec": {"repository": "nvcr.io/nvidia", "image": "driver", "version": "570.1",
                      "nodeSelector": selector}})  # fmt: skip


def _reconciler(api: MergeAPI) -> tuple[KindReconciler[Any, Any], FakeRecorder]:
    recorder = FakeRecorder()
    config = GPUConfig.from_env({"OPERATOR_NAMESPACE": NS})
    reconciler: KindReconciler[Any, Any] = KindReconciler(
        kind=NVIDIADriverKind(config=config, api_reader=api),
        cache=api,
        client=api,
        api_reader=api,
        recorder=recorder,  # type: ignore[arg-type]  # FakeRecorder takes dicts
        use_finalizer=False,
    )
    return reconciler, recorder


async def _label_nodes(api: MergeAPI, labeler: DriverOwnerLabeler | None = None) -> int:
    """One owner-labelling pass over every node (as a Node/NVIDIADriver event enqueues
    them); the number of Node writes it made."""
    labeler = labeler or DriverOwnerLabeler(cache=api, client=api)
    before = len(api.writes)
    for n in await api.list("v1", "Node"):
        await labeler.reconcile(Request(None, n["metadata"]["name"]))
    return sum(1 for _, kind, _ in api.writes[before:] if kind == "Node")


def _status(api: MergeAPI, name: str) -> dict[str, Any]:
    obj = api.obj(ND, "NVIDIADriver", name, "")
    assert obj is not None
    status: dict[str, Any] = obj.get("status") or {}
    return status


def _error(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Error")


def _labels(api: MergeAPI, name: str) -> dict[str, str]:
    obj = api.obj("v1", "Node", name, "")
    assert obj is not None
    labels: dict[str, str] = obj["metadata"]["labels"]
    return labels


async def test_disabled_under_a_clusterpolicy_that_keeps_the_driver() -> None:
    api = _cluster(use_crd=False)
    _driver(api, "a", {"pool": "a"})
    reconciler, _ = _reconciler(api)
    await reconciler.reconcile(Request(None, "a"))
    status = _status(api, "a")
    assert status["state"] == "disabled"
    assert _error(status)["message"] == "useNvidiaDriverCRD is not enabled in ClusterPolicy"
    assert api.writes == [("patch/status", "NVIDIADriver", "a")]
    await reconciler.reconcile(Request(None, "a"))
    assert len(api.writes) == 1


async def test_renders_labels_owners_and_then_writes_nothing() -> None:
    api = _cluster(use_crd=True)
    _driver(api, "a", {"pool": "a"})
    reconciler, _ = _reconciler(api)
    result = await reconciler.reconcile(Request(None, "a"))
    assert not [w for w in api.writes if w[1] == "Node"], "only the node labeller writes Nodes"
    assert await _label_nodes(api) == 1
    assert _labels(api, "a1")[OWNER] == "a"
    assert OWNER not in _labels(api, "b1")
    created = sorted(k for verb, k, _ in api.writes if verb == "create")
    assert created.count("DaemonSet") == 1
    status = _status(api, "a")
    assert (status["state"], _error(status)["reason"]) == ("notReady", "DriverNotReady")
    assert result.requeue_after == 5.0

    (ds,) = [o for (_, k, _, _), o in api.objects.items() if k == "DaemonSet"]
    ds_name = ds["metadata"]["name"]
    api.set_status("apps/v1", "DaemonSet", ds_name, {
        "observedGeneration": 0, "desiredNumberScheduled": 1, "numberAvailable": 1,
        "updatedNumberScheduled": 1}, namespace=NS)  # fmt: skip
    await reconciler.reconcile(Request(None, "a"))
    status = _status(api, "a")
    assert status["state"] == "ready"
    before = len(api.writes)
    await reconciler.reconcile(Request(None, "a"))
    assert api.writes[before:] == []


async def test_an_overlapping_selector_is_refused_and_renders_nothing() -> None:
    api = _cluster(use_crd=None)  # no ClusterPolicy: NVIDIADrivers manage the drivers
    _driver(api, "a", {"pool": "a"})
    _driver(api, "all", {})
    reconciler, recorder = _reconciler(api)
    await reconciler.reconcile(Request(None, "all"))
    status = _status(api, "all")
    assert status["state"] == "notReady"
    error = _error(status)
    assert error["reason"] == "ConflictingNodeSelector"
    assert error["message"] == "multiple NVIDIADrivers match the same node a1: [a all]"
    assert not [w for w in api.writes if w[0] == "create"]
    assert ("Warning", "ConflictingNodeSelector", error["message"]) in recorder.events
    # The node nobody else selects is the non-conflicting driver's.
    await _label_nodes(api)
    assert _labels(api, "b1")[OWNER] == "all"
    assert OWNER not in _labels(api, "a1")


async def test_a_deleted_nvidiadriver_releases_its_nodes() -> None:
    api = _cluster(use_crd=True)
    _driver(api, "a", {"pool": "a"})
    labeler = DriverOwnerLabeler(cache=api, client=api)
    assert await _label_nodes(api, labeler) == 1
    assert _labels(api, "a1")[OWNER] == "a"
    assert await _label_nodes(api, labeler) == 0, "a converged node is not written again"
    del api.objects[(ND, "NVIDIADriver", "", "a")]
    assert await _label_nodes(api, labeler) == 1
    assert OWNER not in _labels(api, "a1")
    assert await _label_nodes(api, labeler) == 0


async def test_owner_labels_are_left_alone_while_the_clusterpolicy_keeps_the_driver() -> None:
    api = _cluster(use_crd=False)
    _driver(api, "a", {"pool": "a"})
    assert await _label_nodes(api) == 0
    assert OWNER not in _labels(api, "a1")


async def test_a_cache_behind_our_own_label_write_gets_no_second_write() -> None:
    api = _cluster(use_crd=None)
    _driver(api, "a", {"pool": "a"})
    stale = copy.deepcopy(api.obj("v1", "Node", "a1", ""))
    orig_get = api.get

    async def lagging_get(
        api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Any:
        if kind == "Node" and name == "a1":
            return copy.deepcopy(stale)  # the cache has not seen the owner label yet
        return await orig_get(api_version, kind, name, namespace)

    labeler = DriverOwnerLabeler(cache=api, client=api)
    api.get = lagging_get  # type: ignore[method-assign]
    await labeler.reconcile(Request(None, "a1"))
    await labeler.reconcile(Request(None, "a1"))
    assert [w for w in api.writes if w[1] == "Node"] == [("patch", "Node", "a1")]
    assert _labels(api, "a1")[OWNER] == "a"
