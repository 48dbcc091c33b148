"""NIMBuild's objects and pure decisions: buildable profile, engine build pod, local manifest pod.

A NIMBuild turns a cached ``trtllm_buildable`` profile of a NIMCache into a
TensorRT-LLM engine (nim-operator.md §1.5 and NVIDIA's NIMBuild controller):

1. :func:`select_profile` picks the input profile: the one named in
   ``spec.nimCache.profile``, else the only buildable profile of the cache;
2. :func:`engine_build_pod` (``<name>-engine-build-pod``, container
   ``nim-build-ctr``) runs the NIM image with ``NIM_CUSTOM_MODEL_NAME`` and
   ``NIM_MODEL_PROFILE``: the NIM builds the engine into the cache PVC, then
   serves; Ready means built;
3. :func:`local_manifest_pod` (``<name>-local-manifest-pod``, container
   ``nim-build-manifest-ctr``) prints ``/model-store/local_cache/local_manifest.yaml``;
   :func:`built_profile` finds there the profile whose ``model_name`` tag is
   the build's model name: that profile is added to the NIMCache's
   ``status.profiles`` and becomes the NIMBuild's ``status.outputProfile``.

Everything here is pure; ``controllers.nimbuild`` does the I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from manifests.hashing import stamp_hash
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from manifests.meta import owner_reference
from platforms.objects import dig
from platforms.standalone import sources
from platforms.standalone.context import ORCHESTRATOR_OPENSHIFT, ORCHESTRATOR_TKGS
from platforms.standalone.errors import RenderError
from platforms.standalone.nimcache_profiles import Manifest, ManifestError, parse_manifest

__all__ = [
    "BUILDABLE_TAG",
    "BUILD_CONTAINER",
    "LOCAL_MANIFEST_PATH",
    "MANIFEST_CONTAINER",
    "ProfileChoice",
    "buildable_profiles",
    "built_profile",
    "engine_build_pod",
    "engine_build_pod_name",
    "local_manifest_pod",
    "local_manifest_pod_name",
    "model_name",
    "select_profile",
]

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMBuild"
BUILD_CONTAINER = "nim-build-ctr"
MANIFEST_CONTAINER = "nim-build-manifest-ctr"
BUILDABLE_TAG = "trtllm_buildable"
LOCAL_MANIFEST_PATH = "/model-store/local_cache/local_manifest.yaml"
GPU = "nvidia.com/gpu"
API_PORT = 8000

Obj = Mapping[str, Any]


def engine_build_pod_name(name: str) -> str:
    return f"{name}-engine-build-pod"


def local_manifest_pod_name(name: str) -> str:
    return f"{name}-local-manifest-pod"


def model_name(build: Obj) -> str:
    """``spec.modelName``, else the NIMBuild's name."""
    return str(dig(build, "spec", "modelName") or dig(build, "metadata", "name", default=""))


def buildable_profiles(nimcache: Obj) -> list[dict[str, Any]]:
    """The cache's ``status.profiles`` tagged ``trtllm_buildable: "true"``."""
    return [
        dict(p)
        for p in dig(nimcache, "status", "profiles", default=[]) or []
        if str((p.get("config") or {}).get(BUILDABLE_TAG, "")) == "true"
    ]


@dataclass(frozen=True)
class ProfileChoice:
    """The outcome of picking the input profile: the profile, or why there is none.

    ``condition`` is NVIDIA's condition type for the outcome, ``reason`` and
    ``message`` its words.
    """

    profile: dict[str, Any] | None
    condition: str
    reason: str
    message: str


def select_profile(build: Obj, nimcache: Obj) -> ProfileChoice:
    """The buildable profile to build: the named one, else the only one."""
    single = "NIM_BUILD_SINGLE_BUILDABLE_PROFILE_FOUND"
    none = "NIM_BUILD_NO_BUILDABLE_PROFILE_FOUND"
    candidates = buildable_profiles(nimcache)
    wanted = dig(build, "spec", "nimCache", "profile")
    if wanted:
        for p in candidates:
            if p.get("name") == wanted:
                return ProfileChoice(
                    p, single, "BuildableProfileFound", "Single buildable profile found"
                )
        return ProfileChoice(
            None,
            none,
            "NoBuildableProfilesFound",
            "No buildable profiles found, please select a valid profile from the NIM cache",
        )
    if len(candidates) == 1:
        return ProfileChoice(
            candidates[0],
            single,
            "BuildableProfileFound",
            "Single buildable profile cached in NIM Cache",
        )
    if len(candidates) > 1:
        return ProfileChoice(
            None,
            "NIM_BUILD_MULTIPLE_BUILDABLE_PROFILES_FOUND",
            "MultipleBuildableProfilesFound",
            "Multiple buildable profiles found in NIM Cache, please select one profile to build",
        )
    return ProfileChoice(
        None, none, "NoBuildableProfilesFound", "No buildable profiles found for NIM Cache"
    )


def _labels(build: Obj, *, user: bool) -> dict[str, str]:
    name = str(dig(build, "metadata", "name", default=""))
    standard = {
        "app": "k8s-nim-operator",
        "app.kubernetes.io/name": name,
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
    }
    extra = dict(dig(build, "spec", "labels", default={}) or {}) if user else {}
    return {**extra, **standard}  # the standard labels win, as NVIDIA's MergeMaps


def _owner(build: Obj) -> dict[str, Any]:
    return owner_reference(
        {
            "apiVersion": build.get("apiVersion", API_VERSION),
            "kind": build.get("kind", KIND),
            "metadata": build.get("metadata") or {},
        }
    )


def _ids(nimcache: Obj) -> tuple[int, int]:
    spec = nimcache.get("spec") or {}
    return int(spec.get("userID", 1000)), int(spec.get("groupID", 2000))


def _pod_security_context(nimcache: Obj, orchestrator: str) -> dict[str, Any]:
    user, group = _ids(nimcache)
    ctx: dict[str, Any] = {"runAsUser": user, "fsGroup": group, "runAsNonRoot": True}
    if orchestrator == ORCHESTRATOR_TKGS:
        ctx["seccompProfile"] = {"type": "RuntimeDefault"}
    return ctx


def _container_security_context(nimcache: Obj) -> dict[str, Any]:
    user, group = _ids(nimcache)
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsGroup": group,
        "runAsUser": user,
    }


def _cache_volume(nimcache: Obj) -> tuple[dict[str, Any], dict[str, Any]]:
    claim = str(dig(nimcache, "status", "pvc") or sources.cache_pvc_name(nimcache))
    volume = {"name": "nim-cache-volume", "persistentVolumeClaim": {"claimName": claim}}
    mount: dict[str, Any] = {"name": "nim-cache-volume", "mountPath": "/model-store"}
    sub_path = dig(nimcache, "spec", "storage", "pvc", "subPath")
    if sub_path:
        mount["subPath"] = sub_path
    return volume, mount


def _pod(
    build: Obj,
    nimcache: Obj,
    name: str,
    container: dict[str, Any],
    *,
    annotations: dict[str, str],
    orchestrator: str,
    user_labels: bool,
) -> dict[str, Any]:
    volume, mount = _cache_volume(nimcache)
    container["volumeMounts"] = [mount]
    spec: dict[str, Any] = {
        "securityContext": _pod_security_context(nimcache, orchestrator),
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [volume],
    }
    runtime_class = dig(nimcache, "spec", "runtimeClassName")
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    pull_secrets = dig(build, "spec", "image", "pullSecrets", default=[]) or []
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    tolerations = dig(build, "spec", "tolerations")
    if tolerations:
        spec["tolerations"] = copy.deepcopy(list(tolerations))
    node_selector = dig(build, "spec", "nodeSelector")
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return stamp_hash(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": dig(build, "metadata", "namespace", default="default"),
                "labels": _labels(build, user=user_labels),
                "annotations": annotations,
                "ownerReferences": [_owner(build)],
            },
            "spec": spec,
        }
    )


def _gpu_resources(build: Obj, profile: Obj) -> dict[str, Any]:
    """``spec.resources`` with ``nvidia.com/gpu`` = the profile's tensor parallelism."""
    res = dig(build, "spec", "resources", default={}) or {}
    requests = dict(res.get("requests") or {})
    limits = dict(res.get("limits") or {})
    config = profile.get("config") or {}
    tp = str(config.get("tensorParallelism") or config.get("tp") or "")
    if not tp:
        if GPU not in requests:
            raise RenderError("tensorParallelism is not set in the profile tags or resources")
    elif GPU in requests:
        raise RenderError(
            "tensorParallelism is set in the profile tags, but nvidia.com/gpu is already set "
            "in resources"
        )
    else:
        if not tp.isdigit():
            raise RenderError(f"failed to parse tensorParallelism: {tp!r} is not a whole number")
        requests[GPU] = int(tp)
        limits[GPU] = int(tp)
    out: dict[str, Any] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def _probe(path: str, initial_delay: int, failure_threshold: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "api"},
        "initialDelaySeconds": initial_delay,
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": failure_threshold,
    }


def _merge_env(base: Sequence[Obj], extra: Sequence[Obj]) -> list[dict[str, Any]]:
    names = {e.get("name") for e in extra}
    return [dict(e) for e in extra] + [dict(e) for e in base if e.get("name") not in names]


def _image_of(image: Obj | None) -> str:
    """``repository:tag`` of a NIMBuild's ``spec.image`` (just the repository without a tag)."""
    repo, tag = str((image or {}).get("repository", "")), str((image or {}).get("tag") or "")
    return f"{repo}:{tag}" if tag else repo


def engine_build_pod(
    build: Obj, nimcache: Obj, profile: Obj, *, orchestrator: str = "Kubernetes"
) -> dict[str, Any]:
    """The pod that builds the engine: the NIM image, pointed at the input profile."""
    name = str(dig(build, "metadata", "name", default=""))
    env: list[dict[str, Any]] = [
        {"name": "NIM_CACHE_PATH", "value": "/model-store"},
        {"name": "NIM_SERVER_PORT", "value": str(API_PORT)},
        {"name": "NIM_HTTP_API_PORT", "value": str(API_PORT)},
        {"name": "NIM_CUSTOM_MODEL_NAME", "value": model_name(build)},
        {"name": "NIM_MODEL_PROFILE", "value": str(profile.get("name", ""))},
    ]
    if str((profile.get("config") or {}).get("feat_lora", "")) == "true":
        env.append({"name": "NIM_PEFT_SOURCE", "value": "/tmp"})
    auth_secret = dig(nimcache, "spec", "source", "ngc", "authSecret")
    if auth_secret:
        env.append(
            {
                "name": "NGC_API_KEY",
                "valueFrom": {"secretKeyRef": {"name": auth_secret, "key": "NGC_API_KEY"}},
            }
        )
    env = _merge_env(env, dig(build, "spec", "env", default=[]) or [])
    container: dict[str, Any] = {
        "name": BUILD_CONTAINER,
        "image": _image_of(dig(build, "spec", "image")),
        "env": env,
        "resources": _gpu_resources(build, profile),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "ports": [{"name": "api", "containerPort": API_PORT, "protocol": "TCP"}],
        "readinessProbe": _probe("/v1/health/ready", 15, 3),
        "livenessProbe": _probe("/v1/health/live", 15, 3),
        "startupProbe": _probe("/v1/health/ready", 30, 30),
        "securityContext": _container_security_context(nimcache),
    }
    pull_policy = dig(build, "spec", "image", "pullPolicy")
    if pull_policy:
        container["imagePullPolicy"] = pull_policy
    user_annotations = dict(dig(build, "spec", "annotations", default={}) or {})
    annotations = {**user_annotations, "sidecar.istio.io/inject": "false"}
    if orchestrator == ORCHESTRATOR_OPENSHIFT:
        annotations["openshift.io/scc"] = "nonroot"
    return _pod(
        build,
        nimcache,
        engine_build_pod_name(name),
        container,
        annotations=annotations,
        orchestrator=orchestrator,
        user_labels=True,
    )


def local_manifest_pod(
    build: Obj, nimcache: Obj, *, orchestrator: str = "Kubernetes"
) -> dict[str, Any]:
    """The pod that prints the local manifest the engine build wrote into the cache PVC."""
    name = str(dig(build, "metadata", "name", default=""))
    container: dict[str, Any] = {
        "name": MANIFEST_CONTAINER,
        "image": _image_of(dig(build, "spec", "image")),
        "command": ["sh", "-c", f"cat {LOCAL_MANIFEST_PATH}; sleep infinity"],
        "securityContext": _container_security_context(nimcache),
    }
    annotations = {"sidecar.istio.io/inject": "false"}
    if orchestrator == ORCHESTRATOR_OPENSHIFT:
        annotations = {"openshift.io/required-scc": "nonroot"}
    return _pod(
        build,
        nimcache,
        local_manifest_pod_name(name),
        container,
        annotations=annotations,
        orchestrator=orchestrator,
        user_labels=False,
    )


def parse_local_manifest(logs: str) -> Manifest | None:
    """The local manifest the manifest pod printed (None while it printed nothing usable)."""
    if not logs.strip():
        return None
    try:
        return parse_manifest(logs)
    except (ManifestError, ValueError):
        return None


def built_profile(manifest: Manifest, build: Obj, input_profile: str) -> dict[str, Any] | None:
    """The NIMCache ``status.profiles`` entry of the engine this build produced, if listed.

    The built profile is the manifest's profile whose ``model_name`` tag is the
    build's model name; its config records ``input_profile``.
    """
    wanted = model_name(build)
    for p in manifest.profiles:
        if p.tags.get("model_name") == wanted:
            entry = p.status_entry()
            entry["config"] = {**entry["config"], "input_profile": input_profile}
            return entry
    return None
