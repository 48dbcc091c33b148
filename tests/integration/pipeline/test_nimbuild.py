"""NIMBuild against a LocalCluster with the operator and the simulated engine build.

What a user sees: the build's states and NVIDIA's conditions, the built profile
on the NIMCache, the pods coming and going, and nothing written once it is done.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from nimctl.demo import apply_objects, demo_objects
from nimctl_runtime.client import ApiError, Client, NotFound
from tests.integration.controllers.harness import API, wait_for, writes_of_reconcile
from tests.integration.pipeline.conftest import Env

pytestmark = pytest.mark.asyncio(loop_scope="module")

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "nimbuild-engine.yaml"


def _example(namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    docs = [d for d in YAML(typ="safe").load_all(EXAMPLE.read_text()) if d]
    for d in docs:
        d["metadata"]["namespace"] = namespace
    cache = next(d for d in docs if d["kind"] == "NIMCache")
    build = next(d for d in docs if d["kind"] == "NIMBuild")
    return cache, build


def _prereqs(namespace: str) -> list[dict[str, Any]]:
    return [o for o in demo_objects(namespace) if o["kind"] in ("Namespace", "Secret")]


async def _build_status(admin: Client, name: str, namespace: str) -> dict[str, Any]:
    obj = await admin.get(API, "NIMBuild", name, namespace)
    return dict(obj.get("status") or {})


def _cond(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == type_)


async def _gone(admin: Client, name: str, namespace: str) -> bool:
    try:
        await admin.get("v1", "Pod", name, namespace)
    except NotFound:
        return True
    return False


async def test_a_build_goes_to_ready_and_the_nimcache_lists_the_built_profile(env: Env) -> None:
    ns = "build-ok"
    cache, build = _example(ns)
    name = build["metadata"]["name"]
    await apply_objects(env.admin, [*_prereqs(ns), cache, build])

    seen: list[str] = []

    async def ready() -> bool:
        state = str((await _build_status(env.admin, name, ns)).get("state", ""))
        if not seen or seen[-1] != state:
            seen.append(state)
        return state == "Ready"

    await wait_for(ready, timeout=60, interval=0.05)
    assert "InProgress" in seen, seen
    assert seen.index("InProgress") < seen.index("Ready")

    st = await _build_status(env.admin, name, ns)
    for type_ in (
        "NIM_BUILD_SINGLE_BUILDABLE_PROFILE_FOUND",
        "NIM_BUILD_ENGINE_BUILD_POD_CREATED",
        "NIM_BUILD_ENGINE_BUILD_POD_COMPLETED",
        "NIM_BUILD_MODEL_MANIFEST_POD_COMPLETED",
    ):
        assert _cond(st, type_)["status"] == "True", type_
    assert st["inputProfile"]["config"]["trtllm_buildable"] == "true"
    output = st["outputProfile"]
    assert output["config"]["model_name"] == build["spec"]["modelName"]
    assert output["config"]["input_profile"] == st["inputProfile"]["name"]

    nimcache = await env.admin.get(API, "NIMCache", cache["metadata"]["name"], ns)
    names = [p["name"] for p in nimcache["status"]["profiles"]]
    assert names == [st["inputProfile"]["name"], output["name"]]
    assert nimcache["status"]["state"] == "Ready"
    manifest_cm = await env.admin.get(
        "v1", "ConfigMap", f"{cache['metadata']['name']}-manifest", ns
    )
    assert output["name"] in manifest_cm["data"]["local_model_manifest.yaml"]

    await wait_for(lambda: _gone(env.admin, f"{name}-engine-build-pod", ns))
    await wait_for(lambda: _gone(env.admin, f"{name}-local-manifest-pod", ns))

    # Done: a change to the NIMCache wakes the build, which writes nothing.
    async def touch() -> None:
        await env.admin.patch(
            API,
            "NIMCache",
            cache["metadata"]["name"],
            {"metadata": {"labels": {"seen": "1"}}},
            namespace=ns,
        )

    writes = await writes_of_reconcile(env.operator, "nimbuild", touch)
    assert [w for w in writes if f"/namespaces/{ns}/" in w[1]] == []


async def test_no_buildable_profile_fails_with_nvidias_condition(env: Env) -> None:
    ns = "build-none"
    objs = demo_objects(ns)  # llama-3.1-8b cached by engine/tp: prebuilt profiles only
    cache = next(o for o in objs if o["kind"] == "NIMCache")
    _, build = _example(ns)
    build["spec"]["nimCache"]["name"] = cache["metadata"]["name"]
    await apply_objects(env.admin, [o for o in objs if o["kind"] != "NIMService"] + [build])

    async def failed() -> dict[str, Any] | None:
        st = await _build_status(env.admin, build["metadata"]["name"], ns)
        return st if st.get("state") == "Failed" else None

    st = await wait_for(failed, timeout=60)
    cond = _cond(st, "NIM_BUILD_NO_BUILDABLE_PROFILE_FOUND")
    assert (cond["status"], cond["reason"]) == ("True", "NoBuildableProfilesFound")
    assert cond["message"] == "No buildable profiles found for NIM Cache"
    assert await _gone(env.admin, f"{build['metadata']['name']}-engine-build-pod", ns)


async def test_a_build_told_to_fail_fails(env: Env) -> None:
    ns = "build-fail"
    cache, build = _example(ns)
    build = copy.deepcopy(build)
    build["spec"]["annotations"] = {"localcluster.nimctl.io/simulate": "fail"}
    await apply_objects(env.admin, [*_prereqs(ns), cache, build])

    async def failed() -> dict[str, Any] | None:
        st = await _build_status(env.admin, build["metadata"]["name"], ns)
        return st if st.get("state") == "Failed" else None

    st = await wait_for(failed, timeout=60)
    cond = _cond(st, "NIM_BUILD_ENGINE_BUILD_POD_COMPLETED")
    assert (cond["status"], cond["reason"]) == ("False", "PodFailed")
    nimcache = await env.admin.get(API, "NIMCache", cache["metadata"]["name"], ns)
    assert len(nimcache["status"]["profiles"]) == 1, "a failed build adds no profile"


async def test_the_spec_is_immutable(env: Env) -> None:
    ns = "build-immutable"
    cache, build = _example(ns)
    await apply_objects(env.admin, [*_prereqs(ns), cache, build])
    live = await env.admin.get(API, "NIMBuild", build["metadata"]["name"], ns)
    live["spec"]["modelName"] = "another-name"
    with pytest.raises(ApiError) as err:
        await env.admin.update(live)
    assert err.value.status == 422
    assert "spec is immutable" in str(err.value.message)
