"""NIMPipeline and NIMBuild are parsed into their typed models at the edge.

What a user sees: a stored NIMPipeline or NIMBuild that does not fit its model
is ``Failed`` with the field path (and nothing is created) until it is fixed;
a NIMBuild whose NIMCache does not fit the NIMCache model is ``Failed`` naming
that field; a valid pipeline deploys the same NIMServices as before.
"""

from __future__ import annotations

import copy
from typing import Any

from nimctl_runtime.meta import find_condition
from nimctl_runtime.reconcile import Request
from tests.unit.controllers.fakes import FakeAPI, FakeRecorder
from tests.unit.platforms_pipeline.test_nimbuild import (
    BUILDABLE,
    nimbuild,
    nimcache,
)
from tests.unit.platforms_pipeline.test_nimbuild import _reconciler as build_reconciler
from tests.unit.platforms_pipeline.test_nimpipeline import _reconciler as pipeline_reconciler
from tests.unit.platforms_pipeline.test_nimpipeline import _svc_spec, pipeline

API = "apps.nvidia.com/v1alpha1"
NS = "default"


def _status(api: FakeAPI, kind: str, name: str) -> dict[str, Any]:
    obj = api.obj(API, kind, name)
    assert obj is not None
    return dict(obj.get("status") or {})


def _owned(api: FakeAPI, kind: str) -> list[str]:
    return sorted(name for (_, k, _, name) in api.objects if k == kind)


async def test_an_invalid_nimpipeline_is_failed_with_the_field_path_until_fixed() -> None:
    api, rec = FakeAPI(), FakeRecorder()
    bad = pipeline({"name": "llm", "enabled": True, "spec": _svc_spec(replicas="two")})
    api.put(bad)
    r = pipeline_reconciler(api, rec)

    await r.reconcile(Request(NS, "rag"))

    status = _status(api, "NIMPipeline", "rag")
    assert status["state"] == "Failed"
    failed = find_condition(status["conditions"], "Failed")
    assert failed is not None and failed["status"] == "True"
    assert failed["reason"] == "InvalidSpec"
    assert "spec.services[0].spec.replicas" in failed["message"]
    assert _owned(api, "NIMService") == [], "nothing is deployed from an invalid pipeline"
    assert any(
        kind == "Warning" and reason == "InvalidSpec" and "spec.services[0].spec.replicas" in msg
        for kind, reason, msg in rec.events
    )

    fixed = copy.deepcopy(api.obj(API, "NIMPipeline", "rag"))
    assert fixed is not None
    fixed["spec"]["services"][0]["spec"]["replicas"] = 2
    fixed["metadata"]["generation"] = 2
    api.objects[(API, "NIMPipeline", NS, "rag")] = fixed
    await r.reconcile(Request(NS, "rag"))

    assert _status(api, "NIMPipeline", "rag")["state"] == "NotReady"
    svc = api.obj(API, "NIMService", "llm")
    assert svc is not None and svc["spec"]["replicas"] == 2


async def test_an_invalid_nimbuild_is_failed_with_the_field_path_and_runs_no_pod() -> None:
    api, rec = FakeAPI(), FakeRecorder()
    api.put(nimcache(BUILDABLE))
    api.put(nimbuild(image={"repository": "nvcr.io/nim/meta/llama-3.2-3b-instruct"}))
    r = build_reconciler(api, rec)

    await r.reconcile(Request(NS, "engine"))

    status = _status(api, "NIMBuild", "engine")
    assert status["state"] == "Failed"
    failed = find_condition(status["conditions"], "NIM_BUILD_RECONCILE_FAILED")
    assert failed is not None and failed["status"] == "True"
    assert "spec.image.tag: Required value" in failed["message"]
    assert _owned(api, "Pod") == []


async def test_a_nimbuild_whose_nimcache_does_not_fit_its_model_is_failed_naming_it() -> None:
    api, rec = FakeAPI(), FakeRecorder()
    cache = nimcache(BUILDABLE)
    cache["spec"]["storage"]["pvc"]["create"] = "yes"
    api.put(cache)
    api.put(nimbuild())
    r = build_reconciler(api, rec)

    await r.reconcile(Request(NS, "engine"))

    status = _status(api, "NIMBuild", "engine")
    assert status["state"] == "Failed"
    cond = find_condition(status["conditions"], "NIM_BUILD_NIM_CACHE_FAILED")
    assert cond is not None and cond["status"] == "True"
    assert "NIMCache cache" in cond["message"] and "spec.storage.pvc.create" in cond["message"]
    assert _owned(api, "Pod") == []
