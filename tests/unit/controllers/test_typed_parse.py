"""NIMService and NIMCache are parsed into their typed models at the edge.

What a user sees: a stored object that does not fit its model is ``Failed`` with
the field path (and nothing is created) until it is fixed; a spec edit is
rendered from the new spec; rendering never changes the parsed model (a second
pass writes nothing).
"""

from __future__ import annotations

import copy
from typing import Any

from controllers.nimcache import NIMCacheKind
from controllers.nimservice import NIMServiceReconciler
from controllers.reconciler import KindReconciler
from nimctl_runtime.meta import find_condition
from nimctl_runtime.reconcile import Request
from platforms.nimservice import NIMServiceContract
from platforms.parsing import spec_json
from platforms.standalone.context import Capabilities, RenderContext
from tests.unit.controllers.fakes import FakeAPI, FakeRecorder
from tests.unit.controllers.test_nimcache_reconciler import nimcache as caching_nimcache
from tests.unit.controllers.test_nimservice_reconciler import nimcache, nimservice

API = "apps.nvidia.com/v1alpha1"
REQ = Request("default", "llm")


def _service_reconciler(api: FakeAPI) -> tuple[NIMServiceReconciler, FakeRecorder]:
    rec = FakeRecorder()
    r = NIMServiceReconciler(
        cache=api, client=api, api_reader=api, recorder=rec, capabilities=Capabilities.nothing()
    )
    return r, rec


def _status(api: FakeAPI, kind: str, name: str) -> dict[str, Any]:
    obj = api.obj(API, kind, name)
    assert obj is not None
    return dict(obj.get("status") or {})


def _owned_kinds(api: FakeAPI) -> set[str]:
    return {kind for (_, kind, _, _) in api.objects if kind not in ("NIMService", "NIMCache")}


async def test_an_invalid_nimservice_is_failed_with_the_field_path_until_fixed() -> None:
    api = FakeAPI()
    api.put(nimcache())
    svc = nimservice(expose={"service": {"port": 70000}})
    api.put(svc)
    r, rec = _service_reconciler(api)

    await r.reconcile(REQ)

    status = _status(api, "NIMService", "llm")
    assert status["state"] == "Failed"
    failed = find_condition(status["conditions"], "Failed")
    assert failed is not None and failed["status"] == "True"
    assert failed["reason"] == "ValidationFailed"
    assert "spec.expose.service.port" in failed["message"]
    assert _owned_kinds(api) == set()
    assert any(e[:2] == ("Warning", "ValidationFailed") for e in rec.events)

    live = api.obj(API, "NIMService", "llm")
    assert live is not None
    live["spec"]["expose"] = {"service": {"port": 8000}}
    live["metadata"]["generation"] = 2
    await r.reconcile(REQ)

    assert _status(api, "NIMService", "llm")["state"] != "Failed"
    assert {"Service", "Deployment"} <= _owned_kinds(api)


async def test_a_spec_edit_is_rendered_from_the_new_spec() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice(replicas=1))
    r, _ = _service_reconciler(api)
    await r.reconcile(REQ)

    live = api.obj(API, "NIMService", "llm")
    assert live is not None
    live["spec"]["replicas"] = 3
    live["metadata"]["generation"] = 2
    await r.reconcile(REQ)

    deployment = api.obj("apps/v1", "Deployment", "llm")
    assert deployment is not None and deployment["spec"]["replicas"] == 3


async def test_a_nimservice_whose_nimcache_is_invalid_says_which_field() -> None:
    api = FakeAPI()
    cache = nimcache()
    del cache["spec"]["source"]
    api.put(cache)
    api.put(nimservice())
    r, _ = _service_reconciler(api)

    await r.reconcile(REQ)

    failed = find_condition(_status(api, "NIMService", "llm")["conditions"], "Failed")
    assert failed is not None and failed["reason"] == "NIMCacheFailed"
    assert "spec.source" in failed["message"]


async def test_an_invalid_nimcache_is_failed_with_the_field_path() -> None:
    api = FakeAPI()
    cache = caching_nimcache()
    cache["spec"]["storage"]["pvc"]["volumeAccessMode"] = 7
    api.put(cache)

    async def pod_logs(namespace: str, pod: str, container: str) -> str:
        return ""

    r: KindReconciler[Any, Any] = KindReconciler(
        kind=NIMCacheKind(api_reader=api, pod_logs=pod_logs),
        cache=api,
        client=api,
        api_reader=api,
        recorder=FakeRecorder(),
    )
    await r.reconcile(Request("default", "cache"))

    status = _status(api, "NIMCache", "cache")
    assert status["state"] == "Failed"
    cond = find_condition(status["conditions"], "NIM_CACHE_RECONCILE_FAILED")
    assert cond is not None and cond["status"] == "True"
    assert "spec.storage.pvc.volumeAccessMode" in cond["message"]
    assert _owned_kinds(api) == set()


def _scribble(value: Any) -> None:
    """Empty every list and dict inside ``value`` (a caller editing what it got)."""
    items = value.values() if isinstance(value, dict) else value
    for item in list(items):
        if isinstance(item, dict | list):
            _scribble(item)
    value.clear()


def test_rendering_leaves_the_parsed_model_unchanged() -> None:
    contract = NIMServiceContract()
    svc = nimservice(
        env=[{"name": "A", "value": "1"}],
        resources={"limits": {"nvidia.com/gpu": 1}},
        tolerations=[{"key": "k", "operator": "Exists"}],
        nodeSelector={"gpu": "yes"},
        scale={"enabled": True, "hpa": {"maxReplicas": 3}},
    )
    del svc["spec"]["replicas"]
    svc["spec"]["storage"] = {"pvc": {"name": "model"}}
    cr = contract.parse(svc)
    before = copy.deepcopy(spec_json(cr.spec))
    ctx = RenderContext()

    first = contract.render(cr, ctx)
    expected = copy.deepcopy(first)
    for obj in first:
        _scribble(obj)

    assert spec_json(cr.spec) == before
    assert contract.render(cr, ctx) == expected
