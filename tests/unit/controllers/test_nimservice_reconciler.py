"""The NIMService reconciler on an in-memory API: objects, status, events and write counts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controllers.nimservice import FINALIZER, NIMServiceReconciler
from nimctl_runtime.client.errors import Forbidden
from nimctl_runtime.reconcile import Request
from platforms.standalone.context import Capabilities
from tests.unit.controllers.fakes import FakeAPI, FakeRecorder

API = "apps.nvidia.com/v1alpha1"
REQ = Request("default", "llm")


def nimcache(state: str = "Ready") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "NIMCache",
        "metadata": {"name": "cache", "namespace": "default"},
        "spec": {
            "source": {"ngc": {"modelPuller": "nvcr.io/nim/meta/llama:1", "authSecret": "ngc"}},
            "storage": {
                "pvc": {"create": True, "size": "50Gi", "volumeAccessMode": "ReadWriteOnce"}
            },
        },
        "status": {
            "state": state,
            "pvc": "cache-pvc" if state == "Ready" else "",
            "profiles": [{"name": "p1", "model": "meta/llama", "release": "1", "config": {}}],
        },
    }


def nimservice(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "image": {"repository": "nvcr.io/nim/meta/llama", "tag": "1"},
        "authSecret": "ngc",
        "storage": {"nimCache": {"name": "cache"}},
        "replicas": 1,
        "expose": {"service": {"type": "ClusterIP", "port": 8000}},
    }
    base.update(spec)
    return {
        "apiVersion": API,
        "kind": "NIMService",
        "metadata": {"name": "llm", "namespace": "default", "generation": 1},
        "spec": base,
    }


async def _model(obj: dict[str, Any], endpoint: str) -> str:
    return "meta/llama-served"


def make(
    api: FakeAPI, caps: Capabilities | None = None
) -> tuple[NIMServiceReconciler, FakeRecorder]:
    rec = FakeRecorder()
    r = NIMServiceReconciler(
        cache=api,
        client=api,
        api_reader=api,
        recorder=rec,
        capabilities=caps or Capabilities.nothing(),
        model_query=_model,
    )
    return r, rec


def roll_out(api: FakeAPI) -> None:
    dep = api.obj("apps/v1", "Deployment", "llm")
    assert dep is not None
    n = dep["spec"].get("replicas", 1)
    api.set_status(
        "apps/v1",
        "Deployment",
        "llm",
        {"updatedReplicas": n, "availableReplicas": n, "readyReplicas": n},
    )
    svc = api.obj("v1", "Service", "llm")
    assert svc is not None
    svc["spec"]["clusterIP"] = "10.0.0.9"


def status(api: FakeAPI) -> dict[str, Any]:
    obj = api.obj(API, "NIMService", "llm")
    assert obj is not None
    return obj.get("status") or {}


async def test_first_reconcile_creates_objects_then_nothing_is_written_again() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice())
    r, rec = make(api)
    result = await r.reconcile(REQ)
    assert result.requeue_after == 30
    created = sorted(k for v, k, _ in api.writes if v == "create")
    assert created == ["Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"]
    # NVIDIA's finalizer cleans nothing up: nimctl adds none (issue 18).
    assert not api.obj(API, "NIMService", "llm")["metadata"].get("finalizers")  # type: ignore[index]
    st = status(api)
    assert st["state"] == "NotReady"
    assert [e[1] for e in rec.events] == ["NotReady"]
    writes = len(api.writes)
    # A requeue that finds nothing changed writes nothing and sends no Event.
    assert (await r.reconcile(REQ)).requeue_after == 30
    assert len(api.writes) == writes and len(rec.events) == 1

    roll_out(api)
    assert (await r.reconcile(REQ)).is_zero()
    st = status(api)
    assert st["state"] == "Ready"
    assert st["model"] == {
        "name": "meta/llama-served",
        "clusterEndpoint": "10.0.0.9:8000",
        "externalEndpoint": "",
    }
    assert [e[1] for e in rec.events] == ["NotReady", "Ready"]
    # Writes per NIMService: 5 objects, 2 status writes.
    assert len(api.writes) == 7
    assert (await r.reconcile(REQ)).is_zero()
    assert len(api.writes) == 7 and len(rec.events) == 2


async def test_stale_cache_does_not_cause_duplicate_writes() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice())
    r, _ = make(api)
    # the NIMService's resourceVersion each status write was made over
    status_base: list[str] = []
    orig_patch = api.patch

    async def recording_patch(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("subresource") == "status" and args[1] == "NIMService":
            live = api.obj(API, "NIMService", "llm")
            assert live is not None
            status_base.append(live["metadata"]["resourceVersion"])
        return await orig_patch(*args, **kwargs)

    api.patch = recording_patch  # type: ignore[method-assign]
    await r.reconcile(REQ)
    writes = len(api.writes)
    # The cache still shows the NIMService as it was before our status write.
    stale = copy.deepcopy(api.obj(API, "NIMService", "llm"))
    assert stale is not None
    orig_get = api.get

    async def stale_get(
        api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Any:
        if kind == "NIMService":
            s = copy.deepcopy(stale)
            s["status"] = {}
            s["metadata"]["resourceVersion"] = status_base[-1]
            return s
        return await orig_get(api_version, kind, name, namespace)

    r.cache = type("C", (), {"get": staticmethod(stale_get), "list": api.list})()
    await r.reconcile(REQ)
    assert len(api.writes) == writes


async def test_spec_change_updates_the_deployment_once() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice())
    r, _ = make(api)
    await r.reconcile(REQ)
    roll_out(api)
    await r.reconcile(REQ)
    obj = api.obj(API, "NIMService", "llm")
    assert obj is not None
    obj["spec"]["env"] = [{"name": "EXTRA", "value": "1"}]
    obj["metadata"]["generation"] += 1
    api.writes.clear()
    await r.reconcile(REQ)
    assert [w for w in api.writes if w[1] == "Deployment"] == [("update", "Deployment", "llm")]
    env = api.obj("apps/v1", "Deployment", "llm")["spec"]["template"]["spec"]["containers"][0][
        "env"
    ]  # type: ignore[index]
    assert {"name": "EXTRA", "value": "1"} in env
    api.writes.clear()
    await r.reconcile(REQ)
    assert [w for w in api.writes if w[0] in ("update", "create")] == []


async def test_missing_nimcache_fails_then_recovers() -> None:
    api = FakeAPI()
    api.put(nimservice())
    r, rec = make(api)
    result = await r.reconcile(REQ)
    assert result.is_zero()  # no requeue: the NIMCache watch brings it back
    st = status(api)
    assert st["state"] == "Failed"
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True",
        "NIMCacheNotFound",
        "NIMCache cache not found",
    )
    assert rec.events == [("Warning", "NIMCacheNotFound", "NIMCache cache not found")]
    writes = len(api.writes)
    await r.reconcile(REQ)
    assert len(api.writes) == writes and len(rec.events) == 1
    assert api.obj("apps/v1", "Deployment", "llm") is None

    api.put(nimcache("InProgress"))
    await r.reconcile(REQ)
    assert status(api)["state"] == "NotReady"
    ready = next(c for c in status(api)["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "NIMCacheNotReady"
    api.set_status(API, "NIMCache", "cache", nimcache()["status"])
    await r.reconcile(REQ)
    assert api.obj("apps/v1", "Deployment", "llm") is not None


async def test_router_ingress_to_gateway_swaps_ingress_for_httproute() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(
        nimservice(
            expose={
                "service": {"port": 8000},
                "router": {"hostDomainName": "example.com", "ingress": {"ingressClass": "nginx"}},
            }
        )
    )
    r, _ = make(api, Capabilities.everything())
    await r.reconcile(REQ)
    assert api.obj("networking.k8s.io/v1", "Ingress", "llm") is not None
    obj = api.obj(API, "NIMService", "llm")
    assert obj is not None
    obj["metadata"]["generation"] += 1
    obj["spec"]["expose"]["router"] = {
        "hostDomainName": "example.com",
        "gateway": {"namespace": "gw", "name": "gw", "httpRoutesEnabled": True},
    }
    await r.reconcile(REQ)
    assert api.obj("networking.k8s.io/v1", "Ingress", "llm") is None
    assert api.obj("gateway.networking.k8s.io/v1", "HTTPRoute", "llm") is not None


async def test_servicemonitor_is_deleted_when_metrics_turned_off() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice(metrics={"enabled": True, "serviceMonitor": {}}))
    r, _ = make(api, Capabilities.everything())
    await r.reconcile(REQ)
    assert api.obj("monitoring.coreos.com/v1", "ServiceMonitor", "llm") is not None
    obj = api.obj(API, "NIMService", "llm")
    assert obj is not None
    obj["spec"]["metrics"] = {"enabled": False}
    obj["metadata"]["generation"] += 1
    await r.reconcile(REQ)
    assert api.obj("monitoring.coreos.com/v1", "ServiceMonitor", "llm") is None


async def test_absent_crds_never_break_a_reconcile() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice(metrics={"enabled": True}))
    r, _ = make(api, Capabilities.nothing())
    await r.reconcile(REQ)
    assert status(api)["state"] == "NotReady"
    assert api.obj("monitoring.coreos.com/v1", "ServiceMonitor", "llm") is None


async def test_persistent_failure_writes_status_once() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice())
    api.fail_create["Service"] = Forbidden(403, "Forbidden", "services is forbidden")
    r, rec = make(api)
    with pytest.raises(Exception, match="forbidden"):
        await r.reconcile(REQ)
    st = status(api)
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert st["state"] == "Failed" and failed["reason"] == "ServiceFailed"
    status_writes = [w for w in api.writes if w[0] == "patch/status"]
    assert len(status_writes) == 1 and len(rec.events) == 1
    with pytest.raises(Exception, match="forbidden"):
        await r.reconcile(REQ)
    assert len([w for w in api.writes if w[0] == "patch/status"]) == 1
    assert len(rec.events) == 1


async def test_hpa_owns_the_replica_count() -> None:
    api = FakeAPI()
    api.put(nimcache())
    ns = nimservice(scale={"enabled": True, "hpa": {"minReplicas": 1, "maxReplicas": 4}})
    del ns["spec"]["replicas"]
    api.put(ns)
    r, _ = make(api)
    await r.reconcile(REQ)
    dep = api.obj("apps/v1", "Deployment", "llm")
    assert dep is not None
    assert dep["spec"]["replicas"] == 1  # created at hpa.minReplicas
    dep["spec"]["replicas"] = 3  # the HPA scaled up
    api.writes.clear()
    await r.reconcile(REQ)
    assert [w for w in api.writes if w[1] == "Deployment"] == []
    assert api.obj("apps/v1", "Deployment", "llm")["spec"]["replicas"] == 3  # type: ignore[index]


async def test_deletion_removes_finalizer_and_creates_nothing() -> None:
    api = FakeAPI()
    api.put(nimcache())
    ns = nimservice()
    ns["metadata"]["finalizers"] = [FINALIZER]
    ns["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    api.put(ns)
    r, _ = make(api)
    await r.reconcile(REQ)
    assert api.writes == [("patch", "NIMService", "llm")]
    assert api.obj(API, "NIMService", "llm")["metadata"]["finalizers"] == []  # type: ignore[index]


async def test_nvidias_finalizer_is_removed_from_an_adopted_nimservice() -> None:
    api = FakeAPI()
    api.put(nimcache())
    ns = nimservice()
    ns["metadata"]["finalizers"] = [FINALIZER, "example.com/keep"]
    api.put(ns)
    r, _ = make(api)
    await r.reconcile(REQ)
    assert api.obj(API, "NIMService", "llm")["metadata"]["finalizers"] == ["example.com/keep"]  # type: ignore[index]
    assert [w for w in api.writes if w[1] == "NIMService" and w[0] == "patch"] == [
        ("patch", "NIMService", "llm")
    ]


async def test_a_message_only_change_is_not_written_twice_inside_the_interval() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice(replicas=4))
    now = [1000.0]
    r, _ = make(api)
    r.clock = lambda: now[0]

    def progress(available: int) -> None:
        api.set_status(
            "apps/v1", "Deployment", "llm",
            {"updatedReplicas": 4, "availableReplicas": available, "readyReplicas": available},
        )

    await r.reconcile(REQ)  # NotReady, first status write
    status_writes = lambda: [w for w in api.writes if w[0] == "patch/status"]  # noqa: E731
    assert len(status_writes()) == 1
    progress(1)
    result = await r.reconcile(REQ)
    progress(2)
    await r.reconcile(REQ)
    assert len(status_writes()) == 1, "rewording within NotReady waits for the interval"
    assert result.requeue_after is not None and result.requeue_after <= 30
    now[0] += 31
    await r.reconcile(REQ)
    assert len(status_writes()) == 2
    cond = next(c for c in status(api)["conditions"] if c["type"] == "Ready")
    assert "2 of 4 updated replicas are available" in cond["message"]
    progress(4)
    roll_out(api)
    await r.reconcile(REQ)  # a state change is written at once
    assert len(status_writes()) == 3 and status(api)["state"] == "Ready"


def _pod(waiting: dict[str, str] | None) -> dict[str, Any]:
    state = {"waiting": waiting} if waiting else {"running": {}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llm-abc", "namespace": "default", "labels": {"app": "llm"}},
        "status": {
            "phase": "Pending" if waiting else "Running",
            "containerStatuses": [{"name": "llm-ctr", "ready": False, "state": state}],
        },
    }


async def test_a_blocker_is_named_and_written_at_once_its_progress_text_is_throttled() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice())
    r, _ = make(api)
    now = [0.0]
    r.clock = lambda: now[0]
    status_writes = lambda: [w for w in api.writes if w[0] == "patch/status"]  # noqa: E731
    await r.reconcile(REQ)
    assert len(status_writes()) == 1
    api.put(
        _pod(
            {
                "reason": "ImagePullBackOff",
                "message": 'Back-off pulling image "nvcr.io/nim/meta/llama:1"',
            }
        )
    )
    await r.reconcile(REQ)  # a new blocker: written at once, no interval
    assert len(status_writes()) == 2
    cond = next(c for c in status(api)["conditions"] if c["type"] == "Ready")
    assert status(api)["state"] == "NotReady", "Pending is not Failed"
    assert cond["reason"] == "ImagePullFailed"
    assert cond["message"] == (
        'pod llm-abc cannot pull image "nvcr.io/nim/meta/llama:1": ImagePullBackOff'
    )
    # Another cause on the same pod: a different blocker, written at once.
    api.put(_pod({"reason": "CreateContainerConfigError", "message": 'secret "ngc" not found'}))
    await r.reconcile(REQ)
    assert len(status_writes()) == 3
    cond = next(c for c in status(api)["conditions"] if c["type"] == "Ready")
    assert cond["reason"] == "SecretNotFound"
    assert cond["message"] == 'pod llm-abc cannot start: secret "ngc" not found'
    # Progress text within the same blocker waits for the interval.
    api.put(_pod({"reason": "CreateContainerConfigError", "message": 'secret "ngc2" not found'}))
    await r.reconcile(REQ)
    assert len(status_writes()) == 3
    # The blocker goes away: written at once, back to the rollout words.
    api.put(_pod(None))
    await r.reconcile(REQ)
    assert len(status_writes()) == 4
    cond = next(c for c in status(api)["conditions"] if c["type"] == "Ready")
    assert cond["reason"] == "NotReady"
