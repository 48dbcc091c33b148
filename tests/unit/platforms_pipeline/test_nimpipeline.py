"""NIMPipeline: the contract's render and readiness, and the reconciler on a fake API.

What a user would notice: which NIMServices exist, what env they get, what the
pipeline's ``status`` says, and that a NIMService someone else created is never
touched.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controllers.nimpipeline import NIMPipelineKind, go_map
from controllers.reconciler import KindReconciler
from manifests.hashing import LAST_APPLIED_HASH_ANNOTATION
from nimctl_runtime.client.errors import ApiError, NotFound
from nimctl_runtime.meta import find_condition
from nimctl_runtime.reconcile import Request
from platforms.contract import Observed, ReconcileError
from platforms.nimpipeline import NIMPipelineContract, merge_env, pipeline_services
from tests.unit.controllers.fakes import FakeAPI, FakeRecorder

API = "apps.nvidia.com/v1alpha1"
NS = "default"


def _svc_spec(**extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"image": {"repository": "nvcr.io/nim/x", "tag": "1"}}
    spec.update(extra)
    return spec


def pipeline(*services: dict[str, Any], uid: str = "pipe-uid") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "NIMPipeline",
        "metadata": {"name": "rag", "namespace": NS, "uid": uid, "generation": 1},
        "spec": {"services": list(services)},
    }


def test_only_services_with_enabled_true_are_deployed() -> None:
    p = pipeline(
        {"name": "on", "enabled": True, "spec": _svc_spec()},
        {"name": "off", "enabled": False, "spec": _svc_spec()},
        {"name": "omitted", "spec": _svc_spec()},
    )
    out = NIMPipelineContract().render(p, None)
    assert [o["metadata"]["name"] for o in out] == ["on"]
    svc = out[0]
    assert svc["kind"] == "NIMService" and svc["metadata"]["namespace"] == NS
    ref = svc["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "NIMPipeline",
        "rag",
        "pipe-uid",
        True,
    )
    assert LAST_APPLIED_HASH_ANNOTATION in svc["metadata"]["annotations"]
    assert svc["spec"] == _svc_spec()


def test_dependency_env_wins_and_merges_one_dependency_at_a_time() -> None:
    entry: dict[str, Any] = {
        "name": "llm",
        "enabled": True,
        "spec": _svc_spec(env=[{"name": "A", "value": "user"}, {"name": "KEEP", "value": "k"}]),
        "dependencies": [
            {"name": "emb", "port": 8000, "envName": "A", "envValue": "emb.svc:8000"},
            {"name": "rr", "port": 9090, "envName": "B", "envValue": "rr.svc:9090"},
            {"name": "nothing", "port": 1},  # no env: ignored
        ],
    }
    (svc,) = pipeline_services(pipeline(entry))
    # NVIDIA's MergeEnvVars per dependency: the newest dependency first.
    assert svc["spec"]["env"] == [
        {"name": "B", "value": "rr.svc:9090"},
        {"name": "A", "value": "emb.svc:8000"},
        {"name": "KEEP", "value": "k"},
    ]
    assert entry["spec"]["env"][0]["value"] == "user", "the pipeline's own spec is not mutated"
    assert merge_env([{"name": "X", "value": "1"}], []) == [{"name": "X", "value": "1"}]


def _live(name: str, state: str, owner_uid: str = "pipe-uid") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "NIMService",
        "metadata": {
            "name": name,
            "ownerReferences": [{"uid": owner_uid, "controller": True, "kind": "NIMPipeline"}],
        },
        "status": {"state": state},
    }


@pytest.mark.parametrize(
    ("live_states", "state", "ready", "failed"),
    [
        ({"a": "Ready", "b": "Ready"}, "Ready", True, False),
        ({"a": "Ready", "b": "NotReady"}, "NotReady", False, False),
        ({"a": "Ready"}, "NotReady", False, False),  # b does not exist yet
        ({"a": "Failed", "b": "NotReady"}, "Failed", False, True),
    ],
)
def test_pipeline_state_follows_its_services(
    live_states: dict[str, str], state: str, ready: bool, failed: bool
) -> None:
    p = pipeline(
        {"name": "a", "enabled": True, "spec": _svc_spec()},
        {"name": "b", "enabled": True, "spec": _svc_spec()},
    )
    observed = Observed.of(_live(n, s) for n, s in live_states.items())
    r = NIMPipelineContract().readiness(p, None, observed)
    assert (r.state, r.ready, r.failed) == (state, ready, failed)
    expected = {"a": live_states.get("a", "NotReady"), "b": live_states.get("b", "NotReady")}
    assert r.details["states"] == expected


def test_no_enabled_service_is_ready_as_in_nvidia() -> None:
    r = NIMPipelineContract().readiness(pipeline(), None, Observed())
    assert r.ready and r.details["states"] == {}


def test_a_foreign_nimservice_is_reported_with_nvidias_words() -> None:
    p = pipeline({"name": "a", "enabled": True, "spec": _svc_spec()})
    observed = Observed.of([_live("a", "Ready", owner_uid="someone-else")])
    r = NIMPipelineContract().readiness(p, None, observed)
    assert r.state == "NotReady" and not r.ready
    assert r.reason == "NIMServiceNotOwned"
    assert r.message == "NIMservice a already exists and is not owned by the NIMPipeline rag"
    assert r.details["states"] == {"a": "NotReady"}


def test_go_map_prints_like_go() -> None:
    assert go_map({"b": "NotReady", "a": "Ready"}) == "map[a:Ready b:NotReady]"
    assert go_map({}) == "map[]"


# -- the reconciler on a fake API -------------------------------------------------------------


def _reconciler(api: FakeAPI, recorder: FakeRecorder) -> KindReconciler[Any, None]:
    return KindReconciler(
        kind=NIMPipelineKind(),
        cache=api,
        client=api,
        api_reader=api,
        recorder=recorder,  # type: ignore[arg-type]
    )


async def test_reconcile_creates_enabled_services_then_writes_nothing() -> None:
    api, rec = FakeAPI(), FakeRecorder()
    api.put(
        pipeline(
            {"name": "llm", "enabled": True, "spec": _svc_spec()},
            {"name": "emb", "spec": _svc_spec()},
        )
    )
    r = _reconciler(api, rec)
    await r.reconcile(Request(NS, "rag"))
    assert api.obj(API, "NIMService", "llm") is not None
    assert api.obj(API, "NIMService", "emb") is None
    status = api.obj(API, "NIMPipeline", "rag")["status"]  # type: ignore[index]
    assert status["state"] == "NotReady" and status["states"] == {"llm": ""}
    ready = find_condition(status["conditions"], "Ready")
    assert ready is not None and ready["status"] == "False"
    assert ("Normal", "NotReady", "NIMPipeline rag status NotReady, service states map[llm:]") in (
        rec.events
    )

    api.set_status(API, "NIMService", "llm", {"state": "Ready"})
    await r.reconcile(Request(NS, "rag"))
    status = api.obj(API, "NIMPipeline", "rag")["status"]  # type: ignore[index]
    assert status["state"] == "Ready" and status["states"] == {"llm": "Ready"}
    ready = find_condition(status["conditions"], "Ready")
    assert ready is not None and ready["status"] == "True"

    before = len(api.writes)
    await r.reconcile(Request(NS, "rag"))
    assert api.writes[before:] == [], "a second reconcile writes nothing"


async def test_disabling_a_service_deletes_its_nimservice() -> None:
    api, rec = FakeAPI(), FakeRecorder()
    api.put(pipeline({"name": "llm", "enabled": True, "spec": _svc_spec()}))
    r = _reconciler(api, rec)
    await r.reconcile(Request(NS, "rag"))
    assert api.obj(API, "NIMService", "llm") is not None
    p = copy.deepcopy(api.obj(API, "NIMPipeline", "rag"))
    assert p is not None
    p["spec"]["services"][0]["enabled"] = False
    p["metadata"]["generation"] = 2
    api.objects[(API, "NIMPipeline", NS, "rag")] = p
    await r.reconcile(Request(NS, "rag"))
    assert api.obj(API, "NIMService", "llm") is None


async def test_a_same_named_nimservice_not_owned_is_never_written() -> None:
    api, rec = FakeAPI(), FakeRecorder()
    theirs = api.put(_live("llm", "Ready", owner_uid="") | {"spec": {"replicas": 3}})
    theirs_rv = theirs["metadata"]["resourceVersion"]
    api.put(pipeline({"name": "llm", "enabled": True, "spec": _svc_spec()}))
    r = _reconciler(api, rec)
    for _ in range(2):
        await r.reconcile(Request(NS, "rag"))
    live = api.obj(API, "NIMService", "llm")
    assert live is not None and live["metadata"]["resourceVersion"] == theirs_rv
    assert live["spec"] == {"replicas": 3}
    assert not [w for w in api.writes if w[1] == "NIMService"]
    status = api.obj(API, "NIMPipeline", "rag")["status"]  # type: ignore[index]
    assert status["state"] == "NotReady"
    ready = find_condition(status["conditions"], "Ready")
    assert ready is not None and ready["reason"] == "NIMServiceNotOwned"
    warning = (
        "Warning",
        "NIMServiceNotOwned",
        "NIMservice llm already exists and is not owned by the NIMPipeline rag",
    )
    assert rec.events.count(warning) == 1, "reported once, not on every pass"


async def test_the_foreign_nimservice_is_not_overwritten_when_the_cache_lags() -> None:
    """The cache does not show it yet: create gets AlreadyExists and the owner is checked."""
    api, rec = FakeAPI(), FakeRecorder()
    api.put(pipeline({"name": "llm", "enabled": True, "spec": _svc_spec()}))
    r = _reconciler(api, rec)
    theirs = _live("llm", "Ready", owner_uid="") | {"spec": {"replicas": 3}}
    real_get = api.get

    async def lagging_get(av: str, kind: str, name: str, ns: str | None = None) -> Any:
        if kind == "NIMService" and len([w for w in api.writes if w[0] == "create"]) == 0:
            raise NotFound(404, "NotFound", "not in cache")
        return await real_get(av, kind, name, ns)

    api.put(theirs)
    r.cache = type("Lag", (), {"get": staticmethod(lagging_get), "list": api.list})()
    await r.reconcile(Request(NS, "rag"))
    live = api.obj(API, "NIMService", "llm")
    assert live is not None and live["spec"] == {"replicas": 3}
    assert not [w for w in api.writes if w[0] == "update" and w[1] == "NIMService"]


async def test_an_enabled_service_without_a_name_fails_with_where() -> None:
    api, rec = FakeAPI(), FakeRecorder()
    api.put(pipeline({"enabled": True, "spec": _svc_spec()}))
    await _reconciler(api, rec).reconcile(Request(NS, "rag"))
    status = api.obj(API, "NIMPipeline", "rag")["status"]  # type: ignore[index]
    assert status["state"] == "Failed"
    failed = find_condition(status["conditions"], "Failed")
    assert failed is not None and failed["status"] == "True"
    assert failed["message"].startswith("spec.services[0].name")


async def test_a_refused_service_fails_the_pipeline_but_not_the_other_services() -> None:
    class Refusing(FakeAPI):
        async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
            if obj["metadata"]["name"] == "bad":
                self.writes.append(("create", obj["kind"], "bad"))
                raise ApiError(
                    422, "Invalid", 'NIMService "bad" is invalid: spec.image.tag: Required'
                )
            return await super().create(obj)

    api, rec = Refusing(), FakeRecorder()
    api.put(
        pipeline(
            {"name": "bad", "enabled": True, "spec": _svc_spec()},
            {"name": "good", "enabled": True, "spec": _svc_spec()},
        )
    )
    with pytest.raises(ReconcileError):
        await _reconciler(api, rec).reconcile(Request(NS, "rag"))
    assert api.obj(API, "NIMService", "good") is not None, "the next service is still created"
    status = api.obj(API, "NIMPipeline", "rag")["status"]  # type: ignore[index]
    assert status["state"] == "Failed"
    failed = find_condition(status["conditions"], "Failed")
    assert failed is not None and "spec.image.tag: Required" in failed["message"]
    assert any(t == "Warning" and r == "ReconcileFailed" for t, r, _ in rec.events)
