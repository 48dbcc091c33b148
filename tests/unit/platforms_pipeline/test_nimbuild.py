"""NIMBuild: profile choice, the pods it runs, its phases on a fake API, and the simulated build.

What a user would notice: the state and NVIDIA's conditions, the pods that
exist in each phase, the built profile on the NIMCache, and that a finished
build writes nothing more.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controllers.nimbuild import NIMBuildKind
from controllers.reconciler import KindReconciler
from localcluster.simulator import enginebuild
from nimctl_runtime.meta import find_condition
from nimctl_runtime.reconcile import Request
from platforms.standalone import nimbuild as objects
from platforms.standalone.errors import RenderError
from tests.unit.controllers.fakes import FakeAPI, FakeRecorder

API = "apps.nvidia.com/v1alpha1"
NS = "default"
BUILDABLE: dict[str, Any] = {
    "name": "buildable-bf16-tp1",
    "model": "meta/llama-3.2-3b-instruct",
    "release": "1.10.0",
    "config": {"trtllm_buildable": "true", "tp": "1", "llm_engine": "tensorrt_llm"},
}
PREBUILT = {"name": "h100-tp1", "config": {"llm_engine": "tensorrt_llm", "tp": "1"}}


def nimcache(*profiles: dict[str, Any], state: str = "Ready") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "NIMCache",
        "metadata": {"name": "cache", "namespace": NS},
        "spec": {
            "source": {"ngc": {"modelPuller": "img:1", "authSecret": "ngc-api-secret"}},
            "storage": {"pvc": {"create": True, "size": "50Gi", "subPath": "models"}},
        },
        "status": {"state": state, "pvc": "cache-pvc", "profiles": list(profiles)},
    }


def nimbuild(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "nimCache": {"name": "cache"},
        "image": {"repository": "nvcr.io/nim/meta/llama-3.2-3b-instruct", "tag": "1.10.0"},
    }
    body.update(spec)
    return {
        "apiVersion": API,
        "kind": "NIMBuild",
        "metadata": {"name": "engine", "namespace": NS, "generation": 1},
        "spec": body,
    }


# -- pure parts ----------------------------------------------------------------------------


def test_the_only_buildable_profile_is_chosen_else_nvidias_condition() -> None:
    choice = objects.select_profile(nimbuild(), nimcache(PREBUILT, BUILDABLE))
    assert choice.profile == BUILDABLE
    assert choice.condition == "NIM_BUILD_SINGLE_BUILDABLE_PROFILE_FOUND"
    none = objects.select_profile(nimbuild(), nimcache(PREBUILT))
    assert (none.profile, none.condition, none.reason) == (
        None,
        "NIM_BUILD_NO_BUILDABLE_PROFILE_FOUND",
        "NoBuildableProfilesFound",
    )
    other = {**BUILDABLE, "name": "buildable-2"}
    many = objects.select_profile(nimbuild(), nimcache(BUILDABLE, other))
    assert many.profile is None
    assert many.condition == "NIM_BUILD_MULTIPLE_BUILDABLE_PROFILES_FOUND"
    named = objects.select_profile(
        nimbuild(nimCache={"name": "cache", "profile": "buildable-2"}), nimcache(BUILDABLE, other)
    )
    assert named.profile == other
    missing = objects.select_profile(
        nimbuild(nimCache={"name": "cache", "profile": "h100-tp1"}), nimcache(PREBUILT)
    )
    assert missing.profile is None and "select a valid profile" in missing.message


def test_engine_build_pod_runs_the_nim_on_the_cache_with_nvidias_env() -> None:
    pod = objects.engine_build_pod(
        nimbuild(modelName="my-llama", env=[{"name": "NIM_SERVER_PORT", "value": "9000"}]),
        nimcache(BUILDABLE),
        BUILDABLE,
    )
    assert pod["metadata"]["name"] == "engine-engine-build-pod"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "NIMBuild"
    assert pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-nim-operator"
    (ctr,) = pod["spec"]["containers"]
    assert ctr["name"] == "nim-build-ctr"
    assert ctr["image"] == "nvcr.io/nim/meta/llama-3.2-3b-instruct:1.10.0"
    env = {e["name"]: e.get("value") for e in ctr["env"]}
    assert env["NIM_CUSTOM_MODEL_NAME"] == "my-llama"
    assert env["NIM_MODEL_PROFILE"] == "buildable-bf16-tp1"
    assert env["NIM_CACHE_PATH"] == "/model-store"
    assert env["NIM_SERVER_PORT"] == "9000", "the user's env wins"
    assert ctr["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert ctr["volumeMounts"] == [
        {"name": "nim-cache-volume", "mountPath": "/model-store", "subPath": "models"}
    ]
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "cache-pvc"
    assert pod["spec"]["restartPolicy"] == "Never"


def test_a_profile_without_tp_needs_gpus_in_resources() -> None:
    no_tp = {**BUILDABLE, "config": {"trtllm_buildable": "true"}}
    with pytest.raises(RenderError, match="tensorParallelism is not set"):
        objects.engine_build_pod(nimbuild(), nimcache(no_tp), no_tp)
    with pytest.raises(RenderError, match="already set in resources"):
        objects.engine_build_pod(
            nimbuild(resources={"requests": {"nvidia.com/gpu": 2}}), nimcache(BUILDABLE), BUILDABLE
        )


def test_the_simulated_build_leaves_the_profile_the_manifest_pod_prints() -> None:
    """The operator's pods and localcluster's engine build agree on the local manifest."""
    build, cache = nimbuild(modelName="my-llama"), nimcache(BUILDABLE)
    pod = objects.engine_build_pod(build, cache, BUILDABLE)
    volumes = enginebuild.VolumeFiles()
    assert enginebuild.simulated(pod)["metadata"]["annotations"][
        "localcluster.nimctl.io/ready-after"
    ] == str(enginebuild.BUILD_SECONDS)
    running = {"containerStatuses": [{"name": "nim-build-ctr", "ready": False}]}
    enginebuild.observe(pod, running, volumes)
    assert volumes.files == {}, "nothing is written before the build is done"
    done = {"containerStatuses": [{"name": "nim-build-ctr", "ready": True}]}
    enginebuild.observe(pod, done, volumes)
    log = enginebuild.logs({**pod, "status": done}, "nim-build-ctr", volumes, started=True)
    assert log is not None and "Building TensorRT-LLM engine for my-llama" in log

    reader = objects.local_manifest_pod(build, cache)
    printed = enginebuild.logs(reader, "nim-build-manifest-ctr", volumes, started=True)
    assert printed
    manifest = objects.parse_local_manifest(printed)
    assert manifest is not None
    built = objects.built_profile(manifest, build, BUILDABLE["name"])
    assert built is not None
    assert built["config"]["model_name"] == "my-llama"
    assert built["config"]["input_profile"] == "buildable-bf16-tp1"
    # Before any build, the reader prints cat's error, which is no manifest.
    empty = enginebuild.logs(
        reader, "nim-build-manifest-ctr", enginebuild.VolumeFiles(), started=True
    )
    assert empty == f"cat: {objects.LOCAL_MANIFEST_PATH}: No such file or directory\n"
    assert objects.parse_local_manifest(empty) is None


# -- the reconciler on a fake API ----------------------------------------------------------


class Logs:
    def __init__(self) -> None:
        self.text = ""

    async def __call__(self, namespace: str, pod: str, container: str) -> str:
        return self.text


def _reconciler(api: FakeAPI, rec: FakeRecorder, logs: Logs | None = None) -> KindReconciler[Any, Any]:
    return KindReconciler(
        kind=NIMBuildKind(client=api, api_reader=api, pod_logs=logs, orchestrator="Kubernetes"),
        cache=api,
        client=api,
        api_reader=api,
        recorder=rec,  # type: ignore[arg-type]
    )


def _status(api: FakeAPI) -> dict[str, Any]:
    obj = api.obj(API, "NIMBuild", "engine")
    assert obj is not None
    return dict(obj.get("status") or {})


def _cond(status: dict[str, Any], type_: str) -> dict[str, Any]:
    c = find_condition(status.get("conditions"), type_)
    assert c is not None, f"{type_} not set: {status.get('conditions')}"
    return c


async def test_waiting_for_the_cache_then_failing_without_a_buildable_profile() -> None:
    api, rec = FakeAPI(), FakeRecorder()
    api.put(nimbuild())
    r = _reconciler(api, rec)
    await r.reconcile(Request(NS, "engine"))
    st = _status(api)
    assert st["state"] == "Failed"
    assert _cond(st, "NIM_BUILD_NIM_CACHE_NOT_FOUND")["status"] == "True"

    api.put(nimcache(PREBUILT, state="InProgress"))
    await r.reconcile(Request(NS, "engine"))
    st = _status(api)
    assert st["state"] == "Pending"
    assert _cond(st, "NIM_BUILD_WAIT_FOR_NIM_CACHE_READY")["message"] == (
        "Waiting for NIMCache to be ready before building engines"
    )

    api.set_status(API, "NIMCache", "cache", nimcache(PREBUILT)["status"])
    await r.reconcile(Request(NS, "engine"))
    st = _status(api)
    assert st["state"] == "Failed"
    assert _cond(st, "NIM_BUILD_NO_BUILDABLE_PROFILE_FOUND")["reason"] == "NoBuildableProfilesFound"
    assert _cond(st, "NIM_BUILD_WAIT_FOR_NIM_CACHE_READY")["status"] == "False", "no longer waiting"
    assert _cond(st, "NIM_BUILD_NIM_CACHE_NOT_FOUND")["status"] == "False"
    assert api.obj("v1", "Pod", "engine-engine-build-pod") is None


async def test_a_build_goes_through_its_phases_and_extends_the_nimcache() -> None:
    api, rec, logs = FakeAPI(), FakeRecorder(), Logs()
    api.put(nimcache(PREBUILT, BUILDABLE))
    api.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cache-manifest", "namespace": NS},
            "data": {"model_manifest.yaml": "{}"},
        }
    )
    api.put(nimbuild())
    r = _reconciler(api, rec, logs)
    req = Request(NS, "engine")

    await r.reconcile(req)
    st = _status(api)
    assert st["state"] == "InProgress"
    assert st["inputProfile"] == BUILDABLE
    assert _cond(st, "NIM_BUILD_ENGINE_BUILD_POD_CREATED")["status"] == "True"
    assert _cond(st, "NIM_BUILD_SINGLE_BUILDABLE_PROFILE_FOUND")["status"] == "True"
    engine_pod = api.obj("v1", "Pod", "engine-engine-build-pod")
    assert engine_pod is not None

    # The engine pod becomes Ready: the build is done, the next pass reads the manifest.
    api.set_status("v1", "Pod", "engine-engine-build-pod", _pod_status(ready=True))
    result = await r.reconcile(req)
    assert result.requeue_after
    assert _cond(_status(api), "NIM_BUILD_ENGINE_BUILD_POD_COMPLETED")["status"] == "True"
    await r.reconcile(req)
    assert api.obj("v1", "Pod", "engine-engine-build-pod") is None, "the engine pod is deleted"
    reader = api.obj("v1", "Pod", "engine-local-manifest-pod")
    assert reader is not None
    assert _status(api)["state"] == "InProgress"

    # The manifest pod runs and prints the local manifest the build wrote.
    volumes = enginebuild.VolumeFiles()
    enginebuild.observe(
        engine_pod, {"containerStatuses": [{"name": "nim-build-ctr", "ready": True}]}, volumes
    )
    logs.text = enginebuild.logs(reader, "nim-build-manifest-ctr", volumes, started=True) or ""
    api.set_status("v1", "Pod", "engine-local-manifest-pod", _pod_status(ready=True))
    await r.reconcile(req)
    st = _status(api)
    assert st["state"] == "Ready"
    assert _cond(st, "NIM_BUILD_MODEL_MANIFEST_POD_COMPLETED")["status"] == "True"
    built_id = enginebuild.built_profile_id("engine", BUILDABLE["name"])
    assert st["outputProfile"]["name"] == built_id
    cache = api.obj(API, "NIMCache", "cache")
    assert cache is not None
    assert [p["name"] for p in cache["status"]["profiles"]] == [
        "h100-tp1",
        BUILDABLE["name"],
        built_id,
    ]
    cm = api.obj("v1", "ConfigMap", "cache-manifest")
    assert cm is not None and built_id in cm["data"]["local_model_manifest.yaml"]
    assert cm["data"]["model_manifest.yaml"] == "{}"

    await r.reconcile(req)
    assert api.obj("v1", "Pod", "engine-local-manifest-pod") is None
    before = len(api.writes)
    await r.reconcile(req)
    assert api.writes[before:] == [], "a finished build writes nothing"
    assert _status(api)["state"] == "Ready"


async def test_a_failed_build_pod_fails_the_build() -> None:
    api, rec = FakeAPI(), FakeRecorder()
    api.put(nimcache(BUILDABLE))
    api.put(nimbuild())
    r = _reconciler(api, rec)
    await r.reconcile(Request(NS, "engine"))
    failed = copy.deepcopy(_pod_status(ready=False))
    failed["phase"] = "Failed"
    api.set_status("v1", "Pod", "engine-engine-build-pod", failed)
    await r.reconcile(Request(NS, "engine"))
    st = _status(api)
    assert st["state"] == "Failed"
    done = _cond(st, "NIM_BUILD_ENGINE_BUILD_POD_COMPLETED")
    assert (done["status"], done["reason"]) == ("False", "PodFailed")
    assert ("Warning", "PodFailed") in {(t, r) for t, r, _ in rec.events}


def _pod_status(*, ready: bool) -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
