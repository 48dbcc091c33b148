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

Everything here is pure and reads the typed models (``NIMBuild``, ``NIMCache``;
a stored dict given instead is parsed once on the way in); the input profile
and the rendered pods are dicts. ``controllers.nimbuild`` does the I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from api.apps.v1alpha1.nimbuild import NIMBuild
from api.apps.v1alpha1.nimcache import NIMCache
from manifests.hashing import stamp_hash
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from manifests.meta import owner_reference
from nimctl_runtime.meta import ObjView
from platforms.parsing import parse, spec_json
from platforms.standalone import sources
from platforms.standalone.context import ORCHESTRATOR_OPENSHIFT, ORCHESTRATOR_TKGS
from platforms.standalone.errors import RenderError
from platforms.standalone.nimcache_profiles import Manifest, ManifestError, parse_manifest
from platforms.standalone.podspec import image_of

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

DEFAULT_USER_ID = 1000
DEFAULT_GROUP_ID = 2000
"""The NIMCache's ``userID``/``groupID`` CRD defaults (a stored NIMCache has them set)."""


BuildInput = NIMBuild | ObjView
"""A NIMBuild model, or a stored NIMBuild (parsed once on the way in)."""
CacheInput = NIMCache | ObjView
"""A NIMCache model, or a stored NIMCache (parsed once on the way in)."""


def engine_build_pod_name(name: str) -> str:
    return f"{name}-engine-build-pod"


def local_manifest_pod_name(name: str) -> str:
    return f"{name}-local-manifest-pod"


def model_name(build: BuildInput) -> str:
    """``spec.modelName``, else the NIMBuild's name."""
    cr = parse(NIMBuild, build)
    return cr.spec.model_name or cr.metadata.name or ""


def buildable_profiles(nimcache: CacheInput) -> list[dict[str, Any]]:
    """The cache's ``status.profiles`` tagged ``trtllm_buildable: "true"``, as stored."""
    cache = parse(NIMCache, nimcache)
    profiles = (cache.status.profiles if cache.status is not None else None) or []
    return [
        spec_json(p) for p in profiles if str((p.config or {}).get(BUILDABLE_TAG, "")) == "true"
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


def select_profile(build: BuildInput, nimcache: CacheInput) -> ProfileChoice:
    """The buildable profile to build: the named one, else the only one."""
    single = "NIM_BUILD_SINGLE_BUILDABLE_PROFILE_FOUND"
    none = "NIM_BUILD_NO_BUILDABLE_PROFILE_FOUND"
    candidates = buildable_profiles(nimcache)
    wanted = parse(NIMBuild, build).spec.nim_cache.profile
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


def _labels(build: NIMBuild, *, user: bool) -> dict[str, str]:
    standard = {
        "app": "k8s-nim-operator",
        "app.kubernetes.io/name": build.metadata.name or "",
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
    }
    extra = dict(build.spec.labels or {}) if user else {}
    return {**extra, **standard}  # the standard labels win, as NVIDIA's MergeMaps


def _owner(build: NIMBuild) -> dict[str, Any]:
    meta = {"name": build.metadata.name or "", "uid": build.metadata.uid or ""}
    return owner_reference({"apiVersion": build.api_version, "kind": build.kind, "metadata": meta})


def _ids(nimcache: NIMCache) -> tuple[int, int]:
    spec = nimcache.spec
    user = DEFAULT_USER_ID if spec.user_id is None else spec.user_id
    group = DEFAULT_GROUP_ID if spec.group_id is None else spec.group_id
    return user, group


def _pod_security_context(nimcache: NIMCache, orchestrator: str) -> dict[str, Any]:
    user, group = _ids(nimcache)
    ctx: dict[str, Any] = {"runAsUser": user, "fsGroup": group, "runAsNonRoot": True}
    if orchestrator == ORCHESTRATOR_TKGS:
        ctx["seccompProfile"] = {"type": "RuntimeDefault"}
    return ctx


def _container_security_context(nimcache: NIMCache) -> dict[str, Any]:
    user, group = _ids(nimcache)
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsGroup": group,
        "runAsUser": user,
    }


def _cache_volume(nimcache: NIMCache) -> tuple[dict[str, Any], dict[str, Any]]:
    status_pvc = nimcache.status.pvc if nimcache.status is not None else None
    claim = status_pvc or sources.cache_pvc_name(nimcache)
    volume = {"name": "nim-cache-volume", "persistentVolumeClaim": {"claimName": claim}}
    mount: dict[str, Any] = {"name": "nim-cache-volume", "mountPath": "/model-store"}
    sub_path = nimcache.spec.storage.pvc.sub_path
    if sub_path:
        mount["subPath"] = sub_path
    return volume, mount


def _pod(
    build: NIMBuild,
    nimcache: NIMCache,
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
    if nimcache.spec.runtime_class_name:
        spec["runtimeClassName"] = nimcache.spec.runtime_class_name
    pull_secrets = build.spec.image.pull_secrets or []
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    if build.spec.tolerations:
        spec["tolerations"] = copy.deepcopy(build.spec.tolerations)
    if build.spec.node_selector:
        spec["nodeSelector"] = dict(build.spec.node_selector)
    namespace = build.metadata.namespace
    return stamp_hash(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "default" if namespace is None else namespace,
                "labels": _labels(build, user=user_labels),
                "annotations": annotations,
                "ownerReferences": [_owner(build)],
            },
            "spec": spec,
        }
    )


def _gpu_resources(build: NIMBuild, profile: ObjView) -> dict[str, Any]:
    """``spec.resources`` with ``nvidia.com/gpu`` = the profile's tensor parallelism."""
    res = build.spec.resources
    requests: dict[str, Any] = dict((res.requests if res is not None else None) or {})
    limits: dict[str, Any] = dict((res.limits if res is not None else None) or {})
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


def _merge_env(base: Sequence[ObjView], extra: Sequence[ObjView]) -> list[dict[str, Any]]:
    names = {e.get("name") for e in extra}
    return [dict(e) for e in extra] + [dict(e) for e in base if e.get("name") not in names]


def engine_build_pod(
    build: BuildInput, nimcache: CacheInput, profile: ObjView, *, orchestrator: str = "Kubernetes"
) -> dict[str, Any]:
    """The pod that builds the engine: the NIM image, pointed at the input profile."""
    cr, cache = parse(NIMBuild, build), parse(NIMCache, nimcache)
    env: list[dict[str, Any]] = [
        {"name": "NIM_CACHE_PATH", "value": "/model-store"},
        {"name": "NIM_SERVER_PORT", "value": str(API_PORT)},
        {"name": "NIM_HTTP_API_PORT", "value": str(API_PORT)},
        {"name": "NIM_CUSTOM_MODEL_NAME", "value": model_name(cr)},
        {"name": "NIM_MODEL_PROFILE", "value": str(profile.get("name", ""))},
    ]
    if str((profile.get("config") or {}).get("feat_lora", "")) == "true":
        env.append({"name": "NIM_PEFT_SOURCE", "value": "/tmp"})
    ngc = cache.spec.source.ngc
    if ngc is not None and ngc.auth_secret:
        env.append(
            {
                "name": "NGC_API_KEY",
                "valueFrom": {"secretKeyRef": {"name": ngc.auth_secret, "key": "NGC_API_KEY"}},
            }
        )
    env = _merge_env(env, cr.spec.env or [])
    container: dict[str, Any] = {
        "name": BUILD_CONTAINER,
        "image": image_of(cr.spec.image),
        "env": env,
        "resources": _gpu_resources(cr, profile),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "ports": [{"name": "api", "containerPort": API_PORT, "protocol": "TCP"}],
        "readinessProbe": _probe("/v1/health/ready", 15, 3),
        "livenessProbe": _probe("/v1/health/live", 15, 3),
        "startupProbe": _probe("/v1/health/ready", 30, 30),
        "securityContext": _container_security_context(cache),
    }
    if cr.spec.image.pull_policy:
        container["imagePullPolicy"] = cr.spec.image.pull_policy
    annotations = {**(cr.spec.annotations or {}), "sidecar.istio.io/inject": "false"}
    if orchestrator == ORCHESTRATOR_OPENSHIFT:
        annotations["openshift.io/scc"] = "nonroot"
    return _pod(
        cr,
        cache,
        engine_build_pod_name(cr.metadata.name or ""),
        container,
        annotations=annotations,
        orchestrator=orchestrator,
        user_labels=True,
    )


def local_manifest_pod(
    build: BuildInput, nimcache: CacheInput, *, orchestrator: str = "Kubernetes"
) -> dict[str, Any]:
    """The pod that prints the local manifest the engine build wrote into the cache PVC."""
    cr, cache = parse(NIMBuild, build), parse(NIMCache, nimcache)
    container: dict[str, Any] = {
        "name": MANIFEST_CONTAINER,
        "image": image_of(cr.spec.image),
        "command": ["sh", "-c", f"cat {LOCAL_MANIFEST_PATH}; sleep infinity"],
        "securityContext": _container_security_context(cache),
    }
    annotations = {"sidecar.istio.io/inject": "false"}
    if orchestrator == ORCHESTRATOR_OPENSHIFT:
        annotations = {"openshift.io/required-scc": "nonroot"}
    return _pod(
        cr,
        cache,
        local_manifest_pod_name(cr.metadata.name or ""),
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


def built_profile(
    manifest: Manifest, build: BuildInput, input_profile: str
) -> dict[str, Any] | None:
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
