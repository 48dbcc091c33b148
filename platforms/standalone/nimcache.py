"""Pure builders of the objects a NIMCache needs (nim-operator.md §3.2-§3.3).

The NIMCache reconciler decides *when* each is needed (state machine, what
already exists) and calls these for *what* to create:

- ``service_account``/``role``/``role_binding``: shared per namespace
  (``nim-cache-sa``, ``nim-cache-role``, ``nim-cache-rolebinding``), no owner.
- ``pvc``: the cache PVC when ``storage.pvc.create`` is true.
- ``manifest_pod``: ``<name>-pod``, prints the NIM's model manifest and sleeps;
  ``manifest_config_map``: ``<name>-manifest`` holding what it printed.
- ``caching_job``: ``<name>-job`` for the active source (NGC optimized or
  universal, Hugging Face, NeMo DataStore, native).

Every builder takes the typed ``NIMCache`` (status included); a dict is parsed
first (``as_nimcache``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from api.apps.v1alpha1.common import ProxySpec
from api.apps.v1alpha1.nimcache import (
    HuggingFaceHubSource,
    NemoDataStoreSource,
    NGCSource,
    NIMCache,
    NIMCacheSpec,
)
from manifests import configmap, job, pod, pvc, rolebinding, serviceaccount
from manifests import role as role_builder
from manifests.hashing import stamp_hash
from manifests.labels import (
    APP_LABEL,
    APP_LABEL_OPERATOR_VALUE,
    INSTANCE_LABEL,
    ISTIO_INJECT_ANNOTATION,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NAME_LABEL,
    PART_OF_LABEL,
    PART_OF_NIM_CACHE,
    REQUIRED_SCC_ANNOTATION,
    SCC_ANNOTATION,
    managed_by,
)
from manifests.meta import object_meta, owner_reference
from platforms.parsing import parse
from platforms.standalone import sources
from platforms.standalone.context import ORCHESTRATOR_OPENSHIFT, ORCHESTRATOR_TKGS
from platforms.standalone.errors import RenderError
from platforms.standalone.podspec import CA_INIT_CONTAINER, CA_INIT_SCRIPT, image_of, proxy_env

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMCache"

SERVICE_ACCOUNT = "nim-cache-sa"
ROLE = "nim-cache-role"
ROLE_BINDING = "nim-cache-rolebinding"
CONTAINER = "nim-cache-ctr"
MODEL_STORE = "/model-store"
MANIFEST_KEY = "model_manifest.yaml"
MANIFEST_NOT_FOUND = "model_manifest.yaml not found"
DEFAULT_NODE_SELECTOR = {"feature.node.kubernetes.io/pci-10de.present": "true"}
JOB_BACKOFF_LIMIT = 5
JOB_TTL_SECONDS = 600
PROFILES_ALL = "all"

MANIFEST_COMMAND = [
    "sh",
    "-c",
    "if [ -f /opt/nim/etc/default/model_manifest.yaml ]; then "
    "cat /opt/nim/etc/default/model_manifest.yaml; "
    "elif [ -f /etc/nim/config/model_manifest.yaml ]; then "
    "cat /etc/nim/config/model_manifest.yaml; "
    f'else echo "{MANIFEST_NOT_FOUND}"; fi; sleep infinity',
]


def job_name(name: str) -> str:
    return f"{name}-job"


def manifest_pod_name(name: str) -> str:
    return f"{name}-pod"


def manifest_config_map_name(name: str) -> str:
    return f"{name}-manifest"


def standard_labels(name: str) -> dict[str, str]:
    """Labels of a NIMCache's PVC and manifest ConfigMap."""
    return {
        APP_LABEL: APP_LABEL_OPERATOR_VALUE,
        NAME_LABEL: name,
        INSTANCE_LABEL: name,
        PART_OF_LABEL: PART_OF_NIM_CACHE,
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
    }


def pod_labels(name: str) -> dict[str, str]:
    """Labels of the manifest pod and the caching Job's pods (the filtered cache's key)."""
    return {
        APP_LABEL: APP_LABEL_OPERATOR_VALUE,
        NAME_LABEL: name,
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
    }


# -- shared RBAC ----------------------------------------------------------------------


def service_account(namespace: str) -> dict[str, Any]:
    """The caching pods' ServiceAccount, shared by every NIMCache in ``namespace``."""
    return stamp_hash(
        serviceaccount.build(object_meta(SERVICE_ACCOUNT, namespace, labels=managed_by()))
    )


def role(namespace: str, *, proxy: bool = False) -> dict[str, Any]:
    """The shared Role: ``use`` of SCC ``anyuid`` when a proxy CA is installed, else ``nonroot``."""
    labels = {APP_LABEL: APP_LABEL_OPERATOR_VALUE, **managed_by()}
    rules = [role_builder.scc_rule("anyuid" if proxy else "nonroot")]
    return stamp_hash(role_builder.build(object_meta(ROLE, namespace, labels=labels), rules))


def role_binding(namespace: str) -> dict[str, Any]:
    labels = {APP_LABEL: APP_LABEL_OPERATOR_VALUE, **managed_by()}
    return stamp_hash(
        rolebinding.build(
            object_meta(ROLE_BINDING, namespace, labels=labels),
            role_name=ROLE,
            service_account=SERVICE_ACCOUNT,
            namespace=namespace,
        )
    )


# -- storage --------------------------------------------------------------------------


def as_nimcache(nimcache: NIMCache | Mapping[str, Any]) -> NIMCache:
    """The typed NIMCache (a dict, from a test or a file, is parsed here)."""
    return parse(NIMCache, nimcache)


def pvc_name(nimcache: NIMCache | Mapping[str, Any]) -> str:
    return sources.cache_pvc_name(as_nimcache(nimcache))


def build_pvc(nimcache: NIMCache | Mapping[str, Any]) -> dict[str, Any] | None:
    """The cache PVC to create, or None when the user brings their own."""
    cache = as_nimcache(nimcache)
    spec = cache.spec.storage.pvc
    if not spec.create:
        return None
    name = sources.cache_pvc_name(cache)
    if not spec.size:
        raise RenderError(
            f"failed to parse size for pvc creation {name}, err quantities must match the "
            "regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    return stamp_hash(
        pvc.build(
            object_meta(
                name,
                _namespace(cache),
                labels=standard_labels(cache.metadata.name or ""),
                annotations=spec.annotations,
                owner_references=[_owner(cache)],
            ),
            access_modes=[spec.volume_access_mode or "ReadWriteOnce"],
            size=str(spec.size),
            storage_class=spec.storage_class or None,
        )
    )


# -- model manifest -------------------------------------------------------------------


def manifest_pod(
    nimcache: NIMCache | Mapping[str, Any], *, orchestrator: str = "Kubernetes"
) -> dict[str, Any]:
    """``<name>-pod``: cats the NIM's model manifest to its log, then sleeps."""
    cache = as_nimcache(nimcache)
    name = cache.metadata.name or ""
    spec = cache.spec
    _, src = sources.source_of(cache)
    annotations = (
        {REQUIRED_SCC_ANNOTATION: "nonroot"} if orchestrator == ORCHESTRATOR_OPENSHIFT else None
    )
    ctr = pod.container(
        CONTAINER,
        _puller(src),
        command=list(MANIFEST_COMMAND),
        resources=_manifest_pod_resources(spec),
        security_context=_container_security_context(spec, orchestrator),
    )
    pod_spec = pod.pod_spec(
        [ctr],
        service_account_name=SERVICE_ACCOUNT,
        security_context=_pod_security_context(spec, orchestrator),
        image_pull_secrets=_pull_secrets(src),
        node_selector=_node_selector(spec),
        tolerations=spec.tolerations,
        runtime_class_name=spec.runtime_class_name,
    )
    meta = object_meta(
        manifest_pod_name(name),
        _namespace(cache),
        labels=pod_labels(name),
        annotations=annotations,
        owner_references=[_owner(cache)],
    )
    return stamp_hash(pod.build(meta, pod_spec))


def manifest_config_map(
    nimcache: NIMCache | Mapping[str, Any], manifest_yaml: str
) -> dict[str, Any]:
    """``<name>-manifest``: the parsed model manifest, for profile matching later."""
    cache = as_nimcache(nimcache)
    name = cache.metadata.name or ""
    meta = object_meta(
        manifest_config_map_name(name),
        _namespace(cache),
        labels=standard_labels(name),
        owner_references=[_owner(cache)],
    )
    return stamp_hash(configmap.build(meta, {MANIFEST_KEY: manifest_yaml}))


# -- the caching Job ------------------------------------------------------------------


def caching_job(
    nimcache: NIMCache | Mapping[str, Any],
    *,
    selected_profiles: Sequence[str] = (),
    orchestrator: str = "Kubernetes",
) -> dict[str, Any]:
    """``<name>-job`` that fills the cache PVC from the NIMCache's source.

    ``selected_profiles`` is what profile matching chose for an optimized NGC
    cache (``["all"]`` caches every profile); explicit ``model.profiles`` are
    used when it is empty. Raises ``RenderError`` for the deprecated
    ``certConfig`` and for an optimized NGC cache with no profile to cache.
    """
    cache = as_nimcache(nimcache)
    name = cache.metadata.name or ""
    spec = cache.spec
    if spec.cert_config is not None:
        raise RenderError(
            "Deprecated field 'CertConfig' is used. Please migrate to 'Proxy' field on NIMCache.",
            reason="ReconcileFailed",
        )
    _, src = sources.source_of(cache)
    cache_type = sources.cache_type(cache)
    native = cache_type == sources.CACHE_TYPE_NATIVE
    sub_path = spec.storage.pvc.sub_path
    volumes = [
        pod.pvc_volume("nim-cache-volume", sources.cache_pvc_name(cache)),
        pod.empty_dir_volume("scratch"),
    ]
    if native:
        mounts = [
            pod.volume_mount("nim-cache-volume", "/model", sub_path=sub_path),
            pod.volume_mount("nim-cache-volume", "/opt/cache", sub_path=sub_path),
        ]
    else:
        mounts = [pod.volume_mount("nim-cache-volume", MODEL_STORE, sub_path=sub_path)]
    mounts.append(pod.volume_mount("scratch", "/scratch"))

    command: list[str] | None = None
    args: list[str] | None = None
    operator_env: list[dict[str, Any]] = [pod.env_var("NIM_CACHE_PATH", MODEL_STORE)]
    termination: dict[str, str] = {}
    if native:
        operator_env = [
            pod.env_var("NIM_ENGINE_MODEL_DOWNLOAD_ONLY", "1"),
            pod.env_var("NIM_ENGINE_MODEL_PATH", f"/model/{name}"),
        ]
    elif isinstance(src, NGCSource) and src.model_endpoint:
        command = ["create-model-store"]
        args = ["--model-repo", src.model_endpoint, "--model-store", MODEL_STORE]
    elif isinstance(src, NGCSource):
        explicit = (src.model.profiles if src.model is not None else None) or []
        profiles = list(selected_profiles) or list(explicit)
        if not profiles:
            raise RenderError("no profiles are selected for caching", reason="ReconcileFailed")
        command = ["download-to-cache"]
        args = ["--all"] if PROFILES_ALL in profiles else ["--profiles", *profiles]
        termination = {"path": "/dev/termination-log", "policy": "FallbackToLogsOnError"}
    elif isinstance(src, HuggingFaceHubSource | NemoDataStoreSource):
        operator_env = [
            pod.env_var("HF_ENDPOINT", src.endpoint),
            pod.env_var("HF_HUB_OFFLINE", "0"),
            pod.env_var("NIM_CACHE_PATH", MODEL_STORE),
            pod.env_var("HF_HOME", f"{MODEL_STORE}/huggingface/hub"),
        ]
        repo = f"{src.namespace}/{src.model_name or src.dataset_name}"
        if cache_type == sources.CACHE_TYPE_MODEL_FREE:
            command = [
                "download-to-cache",
                "--model-uri",
                sources.hf_uri(cache),
                "--manifest-file",
                f"{MODEL_STORE}/model_manifest.json",
            ]
        else:
            repo_type = "model" if src.model_name else "dataset"
            command = ["huggingface-cli", "download", repo, "--local-dir", MODEL_STORE]
            command += ["--repo-type", repo_type]
            if src.revision:
                command += ["--revision", src.revision]
    else:
        raise RenderError("spec.source: Exactly one of ngc, dataStore, or hf must be defined")

    env = pod.merge_env_vars(operator_env, spec.env or [])
    if native:
        # The download-only switches are the operator's, whatever the user set.
        env = pod.merge_env_vars(env, operator_env)
    proxy = spec.proxy if given(spec.proxy) else None
    if proxy is not None:
        env = pod.merge_env_vars(env, proxy_env(proxy))
    ca_config_map = proxy.cert_config_map if proxy is not None else None
    if ca_config_map:
        mounts.append(pod.volume_mount("ca-cert-volume", "/etc/ssl"))
        volumes.append(pod.empty_dir_volume("ca-cert-volume"))
        volumes.append(pod.config_map_volume("custom-ca", ca_config_map))

    image = _puller(src)
    auth = src.auth_secret if src is not None else None
    main = pod.container(
        CONTAINER,
        image,
        command=command,
        args=args,
        env=env,
        env_from=[{"secretRef": {"name": auth}}] if auth else None,
        resources=_resources(spec),
        volume_mounts=mounts,
        security_context=_container_security_context(spec, orchestrator),
        termination_message_path=termination.get("path"),
        termination_message_policy=termination.get("policy"),
    )
    init_containers: list[dict[str, Any]] = []
    if ca_config_map:
        init_containers.append(
            pod.container(
                CA_INIT_CONTAINER,
                image,
                command=["/bin/sh", "-c", CA_INIT_SCRIPT],
                security_context={"runAsUser": 0, "runAsNonRoot": False},
                volume_mounts=[
                    pod.volume_mount("ca-cert-volume", "/ca-certs"),
                    pod.volume_mount("custom-ca", "/custom"),
                ],
            )
        )
    for user in spec.init_containers or []:
        init_containers.append(
            pod.container(
                user.name,
                image_of(user.image),
                image_pull_policy=user.image.pull_policy,
                command=user.command,
                args=user.args,
                working_dir=user.working_dir,
                # The caching container's env wins here (as in NVIDIA's operator).
                env=pod.merge_env_vars(user.env or [], env),
                volume_mounts=[dict(m) for m in mounts],
            )
        )

    template_annotations = {ISTIO_INJECT_ANNOTATION: "false"}
    if orchestrator == ORCHESTRATOR_OPENSHIFT:
        template_annotations[SCC_ANNOTATION] = "anyuid" if proxy is not None else "nonroot"
    pod_spec = pod.pod_spec(
        [main],
        init_containers=init_containers,
        volumes=volumes,
        service_account_name=SERVICE_ACCOUNT,
        security_context=_pod_security_context(spec, orchestrator),
        image_pull_secrets=_pull_secrets(src),
        node_selector=_node_selector(spec),
        tolerations=spec.tolerations,
        runtime_class_name=spec.runtime_class_name,
        restart_policy="Never",
    )
    # NVIDIA leaves the Job's own labels to API-server defaulting; set them
    # explicitly so the operator's label-filtered cache always sees the Job.
    meta = object_meta(
        job_name(name), _namespace(cache), labels=pod_labels(name), owner_references=[_owner(cache)]
    )
    return stamp_hash(
        job.build(
            meta,
            template=pod.pod_template(
                pod_spec, labels=pod_labels(name), annotations=template_annotations
            ),
            backoff_limit=JOB_BACKOFF_LIMIT,
            ttl_seconds_after_finished=JOB_TTL_SECONDS,
        )
    )


# -- helpers --------------------------------------------------------------------------


def given(proxy: ProxySpec | None) -> bool:
    """Whether a proxy is set to anything (``proxy: {}`` is not)."""
    return proxy is not None and any(
        v is not None
        for v in (proxy.http_proxy, proxy.https_proxy, proxy.no_proxy, proxy.cert_config_map)
    )


def _puller(src: sources.Source | None) -> str:
    return src.model_puller if src is not None else ""


def _pull_secrets(src: sources.Source | None) -> list[str] | None:
    return [src.pull_secret] if src is not None and src.pull_secret else None


def _namespace(cache: NIMCache) -> str:
    return cache.metadata.namespace or "default"


def _owner(cache: NIMCache) -> dict[str, Any]:
    meta = cache.metadata
    return owner_reference(
        {
            "apiVersion": cache.api_version,
            "kind": cache.kind,
            "metadata": {"name": meta.name, "uid": meta.uid},
        }
    )


def _node_selector(spec: NIMCacheSpec) -> dict[str, str]:
    selector = spec.node_selector
    return dict(DEFAULT_NODE_SELECTOR) if selector is None else dict(selector)


def _resources(spec: NIMCacheSpec) -> dict[str, Any] | None:
    res = spec.resources
    wanted = {k: v for k, v in (("cpu", res.cpu), ("memory", res.memory)) if v}
    if not wanted:
        return None
    return {"requests": dict(wanted), "limits": dict(wanted)}


def _manifest_pod_resources(spec: NIMCacheSpec) -> dict[str, Any]:
    """NVIDIA's model-manifest pod always names cpu and memory: ``0`` when unset.

    A LimitRange then treats it as NVIDIA's (explicit zeros, no defaults filled in).
    """
    res = spec.resources
    wanted = {"cpu": str(res.cpu or 0), "memory": str(res.memory or 0)}
    return {"requests": dict(wanted), "limits": dict(wanted)}


def _user_id(spec: NIMCacheSpec) -> int:
    return 1000 if spec.user_id is None else spec.user_id


def _group_id(spec: NIMCacheSpec) -> int:
    return 2000 if spec.group_id is None else spec.group_id


def _pod_security_context(spec: NIMCacheSpec, orchestrator: str) -> dict[str, Any]:
    ctx: dict[str, Any] = {
        "runAsUser": _user_id(spec),
        "fsGroup": _group_id(spec),
        "runAsNonRoot": True,
    }
    if orchestrator == ORCHESTRATOR_TKGS:
        ctx["seccompProfile"] = {"type": "RuntimeDefault"}
    return ctx


def _container_security_context(spec: NIMCacheSpec, orchestrator: str) -> dict[str, Any]:
    ctx: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsGroup": _group_id(spec),
        "runAsUser": _user_id(spec),
    }
    if orchestrator == ORCHESTRATOR_TKGS:
        ctx["seccompProfile"] = {"type": "RuntimeDefault"}
    return ctx
