"""Render a NIMService on the standalone platform: the objects it should own.

``render(nimservice, ctx)`` is pure: it reads the CR and the ``RenderContext``
and returns the desired objects in the order they should be applied
(ServiceAccount, Role, RoleBinding, Service, Ingress, HTTPRoute, GRPCRoute,
HPA, ServiceMonitor, PVC, ResourceClaimTemplates, Deployment). An object that
an option turns off is absent from the list; the reconciler deletes it.
Every object carries the standard labels, a controller ownerReference to the
NIMService and ``nvidia.com/last-applied-hash``; objects that carry
annotations also carry ``nvidia.com/parent-spec-hash``.

The rules follow nim-operator.md §2.3-§2.7 and §11. Where NVIDIA's operator has
a known flaw this renderer does better, and says so inline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manifests import (
    deployment,
    grpcroute,
    hpa,
    httproute,
    ingress,
    pod,
    pvc,
    role,
    rolebinding,
    service,
    serviceaccount,
    servicemonitor,
)
from manifests.hashing import PARENT_SPEC_HASH_ANNOTATION, hash_value, short_hash, stamped_copy
from manifests.labels import (
    APP_LABEL,
    APP_LABEL_OPERATOR_VALUE,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NAME_LABEL,
    OPERATOR_VERSION_LABEL,
    PART_OF_NIM_SERVICE,
    REQUIRED_SCC_ANNOTATION,
    merge_maps,
    selector_labels,
    standard_labels,
)
from manifests.meta import object_meta, owner_reference
from platforms.objects import CRInput, as_dict, dig
from platforms.standalone import multinode, sources
from platforms.standalone.context import (
    COMPUTE_DOMAIN,
    GRPC_ROUTE,
    HTTP_ROUTE,
    INFERENCE_POOL,
    LEADER_WORKER_SET,
    ORCHESTRATOR_TKGS,
    RESOURCE_CLAIM_TEMPLATE,
    SERVICE_MONITOR,
    RenderContext,
)
from platforms.standalone.epp import EPPInputs, render_epp
from platforms.standalone.errors import (
    NIMCacheFailed,
    NIMCacheNotFound,
    NIMCacheNotReady,
    RenderError,
    UnsupportedSpec,
)

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMService"

DEFAULT_API_PORT = 8000
PORT_API = "api"
PORT_GRPC = "grpc"
PORT_METRICS = "metrics"
MODEL_STORE = "/model-store"
DEFAULT_USER_ID = 1000
DEFAULT_GROUP_ID = 2000
GPU_RESOURCE = "nvidia.com/gpu"

CA_INIT_CONTAINER = "update-ca-certificates"
CA_INIT_SCRIPT = (
    "echo 'Copying CA certs from Config Map'; ls -l /custom; "
    "cp /custom/*.crt /usr/local/share/ca-certificates/; "
    'for f in /custom/*.pem; do cp "$f" '
    '"/usr/local/share/ca-certificates/$(basename "${f%.pem}")-pem.crt"; done;'
    "ls -l  /usr/local/share/ca-certificates/;echo 'Updating CA certs'; "
    "update-ca-certificates; echo 'CA certs updated'; cp -r /etc/ssl/certs/ /ca-certs;"
    "echo 'Exiting update-ca-certificates init container'"
)

_SELECTOR_OPS = {
    "Equal": "==",
    "NotEqual": "!=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
}


def render(nimservice: CRInput, ctx: RenderContext | None = None) -> list[dict[str, Any]]:
    """The objects ``nimservice`` should own on the standalone platform.

    Raises ``RenderError`` (with the status reason) when it cannot be rendered
    yet: its NIMCache is missing, failed or not ready, or storage is invalid.
    """
    return NIMServiceRenderer(as_dict(nimservice), ctx or RenderContext()).render()


def spec_hash(nimservice: CRInput) -> str:
    """The ``nvidia.com/parent-spec-hash`` value of a NIMService."""
    return hash_value(as_dict(nimservice).get("spec", {}))


def prunable_objects(name: str) -> list[tuple[str, str, str]]:
    """(apiVersion, kind, name) of every object an option can turn off for NIMService ``name``.

    The reconciler deletes those it owns that the latest render no longer has
    (skipping kinds the cluster does not serve).
    """
    epp = f"{name}-epp"
    return [
        ("networking.k8s.io/v1", "Ingress", name),
        (*HTTP_ROUTE, name),
        (*GRPC_ROUTE, name),
        ("autoscaling/v2", "HorizontalPodAutoscaler", name),
        (*SERVICE_MONITOR, name),
        ("v1", "ServiceAccount", epp),
        ("rbac.authorization.k8s.io/v1", "Role", epp),
        ("rbac.authorization.k8s.io/v1", "RoleBinding", epp),
        ("v1", "ConfigMap", f"{name}-epp-config"),
        ("v1", "Service", epp),
        ("apps/v1", "Deployment", epp),
        (*INFERENCE_POOL, name),
    ]


def is_autoscaling_enabled(spec: Mapping[str, Any]) -> bool:
    return bool(dig(spec, "scale", "enabled", default=False))


def service_port(spec: Mapping[str, Any]) -> int:
    return int(dig(spec, "expose", "service", "port", default=DEFAULT_API_PORT))


def image_of(image: Mapping[str, Any] | None) -> str:
    """``repository:tag`` (or just the repository when there is no tag)."""
    image = image or {}
    repo, tag = str(image.get("repository", "")), str(image.get("tag", "") or "")
    return f"{repo}:{tag}" if tag else repo


class NIMServiceRenderer:
    """One render pass: the CR as a dict plus derived values shared by the builders."""

    def __init__(self, svc: dict[str, Any], ctx: RenderContext) -> None:
        self.svc = svc
        self.ctx = ctx
        meta = svc.get("metadata") or {}
        self.name: str = meta.get("name") or ""
        self.namespace: str = meta.get("namespace") or "default"
        if not self.name:
            raise RenderError("metadata.name: Required value")
        self.spec: dict[str, Any] = svc.get("spec") or {}
        owner = {
            "apiVersion": svc.get("apiVersion", API_VERSION),
            "kind": svc.get("kind", KIND),
            "metadata": {"name": self.name, "uid": meta.get("uid", "")},
        }
        self.owner_refs = [owner_reference(owner)]
        self.spec_hash = hash_value(self.spec)
        self.labels = merge_maps(
            standard_labels(self.name, PART_OF_NIM_SERVICE, ctx.operator_version),
            self.spec.get("labels"),
        )
        self.annotations = merge_maps(
            {
                REQUIRED_SCC_ANNOTATION: self._scc_annotation(),
                PARENT_SPEC_HASH_ANNOTATION: self.spec_hash,
            },
            self.spec.get("annotations"),
        )
        self.port = service_port(self.spec)
        self.grpc_port: int | None = dig(self.spec, "expose", "service", "grpcPort")
        self.metrics_port: int | None = dig(self.spec, "expose", "service", "metricsPort")
        self.nimcache: dict[str, Any] | None = None
        mn = self.spec.get("multiNode") or {}
        self.pipeline = int(dig(mn, "parallelism", "pipeline", default=1))
        self.tensor = int(dig(mn, "parallelism", "tensor", default=1))
        # Only pipeline parallelism > 1 makes a LeaderWorkerSet. (NVIDIA then
        # still uses the LWS selector for a Deployment, which matches no pod.)
        self.multinode = bool(mn) and self.pipeline > 1
        self.selector = (
            multinode.leader_selector(self.name) if self.multinode else selector_labels(self.name)
        )

    # -- metadata -----------------------------------------------------------------

    def _scc_annotation(self) -> str:
        if dig(self.spec, "proxy", "certConfigMap"):
            return "anyuid"
        if dig(self.spec, "storage", "hostPath"):
            return "hostmount-anyuid"
        return "nonroot"

    def _role_scc(self) -> str:
        if self.spec.get("proxy"):
            return "anyuid"
        if dig(self.spec, "storage", "hostPath"):
            return "hostmount-anyuid"
        return "nonroot"

    def _meta(
        self,
        name: str | None = None,
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        with_annotations: bool = True,
    ) -> dict[str, Any]:
        return object_meta(
            name or self.name,
            self.namespace,
            labels=self.labels if labels is None else labels,
            annotations=(self.annotations if annotations is None else annotations)
            if with_annotations
            else None,
            owner_references=self.owner_refs,
        )

    # -- top level ----------------------------------------------------------------

    def render(self) -> list[dict[str, Any]]:
        platform = self.spec.get("inferencePlatform") or "standalone"
        if platform != "standalone":
            raise UnsupportedSpec(
                f"spec.inferencePlatform: {platform!r} is rendered by the {platform} platform, "
                "not standalone"
            )
        if self.multinode and not self.ctx.capabilities.has(LEADER_WORKER_SET):
            raise UnsupportedSpec(
                "spec.multiNode: the LeaderWorkerSet API (leaderworkerset.x-k8s.io/v1) is not "
                "installed in this cluster"
            )
        objs: list[dict[str, Any]] = [
            self.service_account(),
            self.role(),
            self.role_binding(),
            self.service(),
        ]
        for maybe in (
            self.ingress(),
            self.http_route(),
            self.grpc_route(),
            self.hpa(),
            self.service_monitor(),
        ):
            if maybe is not None:
                objs.append(maybe)
        objs.extend(self.epp())
        volume, sub_path, created_pvc = self.model_store()
        if created_pvc is not None:
            objs.append(created_pvc)
        templates, pod_claims, container_claims = self.dra()
        objs.extend(templates)
        if self.multinode:
            objs.extend(self.leader_worker_set(volume, sub_path, pod_claims, container_claims))
        else:
            objs.append(self.deployment(volume, sub_path, pod_claims, container_claims))
        # Independent copies: no dict is shared between objects (or with the input).
        # (A JSON round trip, unlike deepcopy, also unshares within one object.)
        objs = [stamped_copy(obj) for obj in objs]
        current = self.ctx.current_replicas
        if is_autoscaling_enabled(self.spec) and current is not None:
            # The HPA owns the scale: keep the live value, outside the hash.
            objs[-1]["spec"]["replicas"] = current
        return objs

    # -- RBAC ---------------------------------------------------------------------

    def service_account(self) -> dict[str, Any]:
        return serviceaccount.build(self._meta(with_annotations=False))

    def role(self) -> dict[str, Any]:
        return role.build(self._meta(with_annotations=False), [role.scc_rule(self._role_scc())])

    def role_binding(self) -> dict[str, Any]:
        return rolebinding.build(
            self._meta(with_annotations=False),
            role_name=self.name,
            service_account=self.name,
            namespace=self.namespace,
        )

    # -- networking ---------------------------------------------------------------

    def service(self) -> dict[str, Any]:
        svc_spec = dig(self.spec, "expose", "service", default={})
        ports = [service.service_port(PORT_API, self.port, PORT_API)]
        if self.grpc_port:
            ports.append(service.service_port(PORT_GRPC, self.grpc_port, PORT_GRPC))
        if self.metrics_port:
            ports.append(service.service_port(PORT_METRICS, self.metrics_port, PORT_METRICS))
        meta = self._meta(
            labels=self.service_labels(),
            annotations=merge_maps(self.annotations, svc_spec.get("annotations")),
        )
        return service.build(
            meta,
            selector=self.selector,
            ports=ports,
            service_type=svc_spec.get("type"),
        )

    def service_labels(self) -> dict[str, str]:
        """Object labels plus ``expose.service.labels`` (existing keys win).

        NVIDIA labels the Service, Ingress, routes, HPA and ServiceMonitor with
        these; the Deployment carries the plain object labels.
        """
        return merge_maps(self.labels, dig(self.spec, "expose", "service", "labels"))

    def _host(self) -> str:
        domain = dig(self.spec, "expose", "router", "hostDomainName", default="")
        return f"{self.name}.{self.namespace}.{domain}"

    def ingress(self) -> dict[str, Any] | None:
        router = dig(self.spec, "expose", "router", default={})
        ingress_class = dig(router, "ingress", "ingressClass", default="")
        if ingress_class:
            spec = ingress.router_spec(
                host=self._host(),
                service_name=self.name,
                service_port=PORT_API,
                ingress_class=ingress_class,
                tls_secret_name=dig(router, "ingress", "tlsSecretName"),
            )
            annotations = merge_maps(self.annotations, router.get("annotations"))
            return ingress.build(
                self._meta(labels=self.service_labels(), annotations=annotations), spec
            )
        legacy = dig(self.spec, "expose", "ingress", default={})
        if legacy.get("enabled"):
            annotations = merge_maps(self.annotations, legacy.get("annotations"))
            return ingress.build(
                self._meta(labels=self.service_labels(), annotations=annotations),
                legacy.get("spec") or {},
            )
        return None

    def _gateway(self) -> dict[str, Any] | None:
        gw = dig(self.spec, "expose", "router", "gateway")
        return gw if isinstance(gw, dict) else None

    def http_route(self) -> dict[str, Any] | None:
        gw = self._gateway()
        if gw is None or not gw.get("httpRoutesEnabled", True):
            return None
        if not self.ctx.capabilities.has(HTTP_ROUTE):
            return None
        backend = gw.get("backendRef") or httproute.service_backend_ref(self.name, self.port)
        return httproute.build(
            self._route_meta(),
            parent_refs=[httproute.parent_ref(gw["name"], gw["namespace"])],
            hostnames=[self._host()],
            backend_refs=[dict(backend)],
        )

    def grpc_route(self) -> dict[str, Any] | None:
        gw = self._gateway()
        if gw is None or not gw.get("grpcRoutesEnabled", False) or not self.grpc_port:
            return None
        if not self.ctx.capabilities.has(GRPC_ROUTE):
            return None
        return grpcroute.build(
            self._route_meta(),
            parent_refs=[httproute.parent_ref(gw["name"], gw["namespace"])],
            hostnames=[self._host()],
            backend_refs=[httproute.service_backend_ref(self.name, self.grpc_port)],
        )

    def _route_meta(self) -> dict[str, Any]:
        router_annotations = dig(self.spec, "expose", "router", "annotations")
        return self._meta(
            labels=self.service_labels(),
            annotations=merge_maps(self.annotations, router_annotations),
        )

    # -- scaling and monitoring -----------------------------------------------------

    def hpa(self) -> dict[str, Any] | None:
        if not is_autoscaling_enabled(self.spec):
            return None
        scale = self.spec.get("scale") or {}
        spec = scale.get("hpa") or {}
        return hpa.build(
            self._meta(
                labels=self.service_labels(),
                annotations=merge_maps(self.annotations, scale.get("annotations")),
            ),
            scale_target_ref={"apiVersion": "apps/v1", "kind": "Deployment", "name": self.name},
            min_replicas=int(spec.get("minReplicas", 1)),
            max_replicas=int(spec.get("maxReplicas", 1)),
            metrics=spec.get("metrics"),
            behavior=spec.get("behavior"),
        )

    def service_monitor(self) -> dict[str, Any] | None:
        metrics = self.spec.get("metrics") or {}
        if not metrics.get("enabled") or not self.ctx.capabilities.has(SERVICE_MONITOR):
            return None
        sm = metrics.get("serviceMonitor") or {}
        # additionalLabels win over the standard labels here (unlike everywhere else).
        labels = {**self.service_labels(), **(sm.get("additionalLabels") or {})}
        annotations = merge_maps(self.annotations, sm.get("annotations"))
        timing = {"interval": sm.get("interval"), "scrape_timeout": sm.get("scrapeTimeout")}
        endpoints = [servicemonitor.endpoint(PORT_API, "/v1/metrics", **timing)]
        if self.metrics_port:
            endpoints.append(servicemonitor.endpoint(PORT_METRICS, "/metrics", **timing))
        return servicemonitor.build(
            self._meta(labels=labels, annotations=annotations),
            selector=self.service_labels(),
            namespace=self.namespace,
            endpoints=endpoints,
        )

    # -- storage ------------------------------------------------------------------

    def model_store(self) -> tuple[dict[str, Any], str | None, dict[str, Any] | None]:
        """The ``model-store`` volume, its mount subPath, and a PVC to create (if any)."""
        storage = self.spec.get("storage") or {}
        cache_ref = storage.get("nimCache") or {}
        read_only = bool(storage.get("readOnly", False))
        if cache_ref.get("name"):
            cache = self._resolve_nimcache(cache_ref["name"])
            pvc_spec = dig(cache, "spec", "storage", "pvc", default={})
            claim = dig(cache, "status", "pvc", default="")
            if not claim:
                raise RenderError(f"missing PVC for the nimcache instance {cache_ref['name']}")
            volume = pod.pvc_volume("model-store", claim, read_only=read_only)
            return volume, pvc_spec.get("subPath"), None
        pvc_spec = storage.get("pvc") or {}
        if pvc_spec.get("create"):
            claim = pvc_spec.get("name") or f"{self.name}-pvc"
            size = pvc_spec.get("size")
            if not size:
                raise RenderError(
                    f"failed to parse size for pvc creation {claim}, err quantities must match "
                    "the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                )
            created = pvc.build(
                object_meta(
                    claim,
                    self.namespace,
                    labels={
                        APP_LABEL: APP_LABEL_OPERATOR_VALUE,
                        NAME_LABEL: self.name,
                        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
                    },
                    annotations=pvc_spec.get("annotations"),
                    owner_references=self.owner_refs,
                ),
                # NVIDIA renders [""] when volumeAccessMode is unset, which the
                # API server rejects; default to ReadWriteOnce instead.
                access_modes=[pvc_spec.get("volumeAccessMode") or "ReadWriteOnce"],
                size=str(size),
                storage_class=pvc_spec.get("storageClass") or None,
            )
            volume = pod.pvc_volume("model-store", claim, read_only=read_only)
            return volume, pvc_spec.get("subPath"), created
        if pvc_spec.get("name"):
            volume = pod.pvc_volume("model-store", pvc_spec["name"], read_only=read_only)
            return volume, pvc_spec.get("subPath"), None
        if "emptyDir" in storage:
            size_limit = dig(storage, "emptyDir", "sizeLimit")
            return pod.empty_dir_volume("model-store", size_limit=size_limit), None, None
        if storage.get("hostPath"):
            return pod.host_path_volume("model-store", storage["hostPath"]), None, None
        raise RenderError(
            "neither external PVC name, NIMCache volume, empty dir or local host path "
            "should be provided"
        )

    def _resolve_nimcache(self, cache_name: str) -> dict[str, Any]:
        cache = self.ctx.nimcache_dict()
        if cache is None or dig(cache, "metadata", "name", default=cache_name) != cache_name:
            raise NIMCacheNotFound(f"NIMCache {cache_name} not found")
        state = dig(cache, "status", "state", default="")
        if state == "Failed":
            message = ""
            for cond in dig(cache, "status", "conditions", default=[]):
                if cond.get("type") == "Failed" and cond.get("status") == "True":
                    message = cond.get("message", "")
            raise NIMCacheFailed(message or f"NIMCache {cache_name} failed")
        if state != "Ready":
            raise NIMCacheNotReady(f"NIMCache {cache_name} not ready")
        self.nimcache = cache
        return cache

    # -- containers -----------------------------------------------------------------

    def _is_native(self) -> bool:
        if self.nimcache is not None:
            return sources.is_native(self.nimcache)
        return self.ctx.native_image

    def _model_mount_paths(self) -> list[str]:
        return ["/model", "/opt/cache"] if self._is_native() else [MODEL_STORE]

    def env(self) -> list[dict[str, Any]]:
        """The NIM container's env, in NVIDIA's precedence order (§2.5)."""
        standard = [
            pod.env_var("NIM_CACHE_PATH", MODEL_STORE),
            pod.env_var("OUTLINES_CACHE_DIR", "/tmp/outlines"),
            pod.env_var("NIM_SERVER_PORT", str(self.port)),
            pod.env_var("NIM_HTTP_API_PORT", str(self.port)),
            pod.env_var("NIM_JSONL_LOGGING", "1"),
            pod.env_var("NIM_LOG_LEVEL", "INFO"),
        ]
        auth = self.spec.get("authSecret") or ""
        if auth:
            standard.append(pod.secret_env_var("NGC_API_KEY", auth, "NGC_API_KEY"))
        if self.grpc_port:
            standard.append(pod.env_var("NIM_GRPC_API_PORT", str(self.grpc_port)))
            standard.append(pod.env_var("NIM_TRITON_GRPC_PORT", str(self.grpc_port)))
        if self.metrics_port:
            standard.append(pod.env_var("NIM_TRITON_METRICS_PORT", str(self.metrics_port)))
        env = pod.merge_env_vars(standard, self.spec.get("env") or [])
        proxy = self.spec.get("proxy")
        if proxy:
            env = pod.merge_env_vars(env, proxy_env(proxy))
        cache = self.nimcache
        native = self._is_native()
        if cache is not None and sources.is_universal(cache) and not native:
            env = pod.add_env_defaults(
                env,
                [
                    pod.env_var("NIM_MODEL_NAME", MODEL_STORE),
                    pod.env_var("HF_HOME", f"{MODEL_STORE}/huggingface/hub"),
                    pod.env_var("NIM_MODEL_PATH", sources.hf_uri(cache)),
                ],
            )
        if native:
            path = f"/model/{dig(cache, 'metadata', 'name')}" if cache is not None else "/model"
            env = pod.merge_env_vars(env, [pod.env_var("NIM_ENGINE_MODEL_PATH", path)])
            env = pod.remove_env(env, "NGC_API_KEY")
            if auth:
                env = pod.remove_env(env, "HF_TOKEN")
                env.append(pod.secret_env_var("NGC_API_KEY", auth, "NGC_API_KEY", optional=True))
                env.append(pod.secret_env_var("HF_TOKEN", auth, "HF_TOKEN", optional=True))
        elif self._is_hf_model(env):
            env = pod.remove_env(env, "NGC_API_KEY")
            if auth:
                env = pod.remove_env(env, "HF_TOKEN")
                env.append(pod.secret_env_var("NGC_API_KEY", auth, "NGC_API_KEY", optional=True))
                env.append(pod.secret_env_var("HF_TOKEN", auth, "HF_TOKEN"))
        profile = dig(self.spec, "storage", "nimCache", "profile", default="")
        if profile:
            env = pod.add_env_defaults(env, [pod.env_var("NIM_MODEL_PROFILE", profile)])
        return env

    def _is_hf_model(self, env: list[dict[str, Any]]) -> bool:
        if self.nimcache is not None and sources.is_hf_model(self.nimcache):
            return True
        return any(
            e["name"] == "NIM_MODEL_NAME" and str(e.get("value", "")).startswith("hf://")
            for e in env
        )

    def probes(self) -> dict[str, dict[str, Any]]:
        defaults = {
            "livenessProbe": pod.http_get_probe(
                "/v1/health/live", PORT_API, initial_delay_seconds=15
            ),
            "readinessProbe": pod.http_get_probe(
                "/v1/health/ready", PORT_API, initial_delay_seconds=15
            ),
            "startupProbe": pod.http_get_probe(
                "/v1/health/ready", PORT_API, initial_delay_seconds=30, failure_threshold=120
            ),
        }
        out: dict[str, dict[str, Any]] = {}
        for key, default in defaults.items():
            cfg = self.spec.get(key) or {}
            if cfg.get("enabled") is False:
                continue
            out[key] = dict(cfg["probe"]) if cfg.get("probe") else default
        return out

    def resources(self, has_dra: bool) -> dict[str, Any] | None:
        res = dict(self.spec.get("resources") or {})
        res.pop("claims", None)
        gpus = self._auto_gpus(res, has_dra)
        if gpus is not None:
            res["requests"] = {**(res.get("requests") or {}), GPU_RESOURCE: gpus}
            res["limits"] = {**(res.get("limits") or {}), GPU_RESOURCE: gpus}
        return {k: v for k, v in res.items() if v} or None

    def _auto_gpus(self, res: Mapping[str, Any], has_dra: bool) -> int | None:
        """GPU count from the cached profile's tensor parallelism (§2.7), or None."""
        profile = dig(self.spec, "storage", "nimCache", "profile", default="")
        cache = self.nimcache
        if not profile or cache is None or not sources.is_optimized(cache) or has_dra:
            return None
        if GPU_RESOURCE in (res.get("requests") or {}) or GPU_RESOURCE in (res.get("limits") or {}):
            return None
        for entry in dig(cache, "status", "profiles", default=[]):
            if entry.get("name") != profile:
                continue
            if self.spec.get("multiNode"):
                return self.tensor  # GPUs per node of the group
            config = entry.get("config") or {}
            tp = config.get("tensorParallelism", config.get("tp", "1"))
            try:
                return int(str(tp))
            except ValueError:
                raise RenderError(
                    f"failed to parse tensor parallelism {tp!r} of profile {profile}"
                ) from None
        return None

    def _container_image_pull_policy(self, image: Mapping[str, Any] | None) -> str | None:
        own = (image or {}).get("pullPolicy")
        return str(own or dig(self.spec, "image", "pullPolicy", default="")) or None

    # -- DRA ----------------------------------------------------------------------

    def dra(
        self,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """ResourceClaimTemplates to create, pod resourceClaims, container claims."""
        resources = self.spec.get("draResources") or []
        templates: list[dict[str, Any]] = []
        pod_claims: list[dict[str, Any]] = []
        container_claims: list[dict[str, Any]] = []
        svc_hash = short_hash(self.name)
        for index, res in enumerate(resources):
            if res.get("resourceClaimName"):
                field_type, ref_key, ref = 0, "resourceClaimName", res["resourceClaimName"]
            elif res.get("resourceClaimTemplateName"):
                field_type, ref_key = 1, "resourceClaimTemplateName"
                ref = res["resourceClaimTemplateName"]
            elif res.get("claimCreationSpec"):
                spec = res["claimCreationSpec"]
                ref = f"{spec.get('generateName') or 'claimtemplate'}-{svc_hash}-{index}"
                field_type, ref_key = 1, "resourceClaimTemplateName"
                if self.ctx.capabilities.has(RESOURCE_CLAIM_TEMPLATE):
                    templates.append(self._claim_template(ref, spec))
            else:
                raise RenderError(
                    f"spec.draResources[{index}]: exactly one of spec.resourceClaimName, "
                    "spec.resourceClaimTemplateName, or spec.claimCreationSpec must be set."
                )
            claim = f"claim-{svc_hash}-{field_type}-{short_hash(ref)}-{index}"
            pod_claims.append({"name": claim, ref_key: ref})
            requests = res.get("requests") or []
            if requests:
                container_claims.extend({"name": claim, "request": r} for r in requests)
            else:
                container_claims.append({"name": claim})
        return templates, pod_claims, container_claims

    def _claim_template(self, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        requests = []
        for device in spec.get("devices") or []:
            driver = device.get("driverName") or "gpu.nvidia.com"
            selectors = [
                {"cel": {"expression": expr}} for expr in _device_selector_exprs(device, driver)
            ]
            exactly: dict[str, Any] = {
                "deviceClassName": device.get("deviceClassName") or "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": int(device.get("count", 1)),
            }
            if selectors:
                exactly["selectors"] = selectors
            requests.append({"name": device["name"], "exactly": exactly})
        return {
            "apiVersion": RESOURCE_CLAIM_TEMPLATE[0],
            "kind": RESOURCE_CLAIM_TEMPLATE[1],
            "metadata": self._meta(name),
            "spec": {
                # Claims made from the template carry the NIMService's labels too.
                "metadata": {"labels": dict(self.labels)},
                "spec": {"devices": {"requests": requests}},
            },
        }

    # -- endpoint picker ----------------------------------------------------------------

    def epp(self) -> list[dict[str, Any]]:
        config = dig(self.spec, "expose", "router", "eppConfig")
        if not config or not self.ctx.capabilities.has(INFERENCE_POOL):
            return []
        return render_epp(
            EPPInputs(
                name=self.name,
                namespace=self.namespace,
                labels=self.labels,
                annotations=self.annotations,
                pod_annotations=self.pod_annotations(),
                pod_labels=self.pod_labels(),
                owner_references=self.owner_refs,
                nim_selector=self.selector,
                nim_port=self.port,
                config=config,
                image_pull_secrets=dig(self.spec, "image", "pullSecrets"),
                image_pull_policy=dig(self.spec, "image", "pullPolicy"),
            )
        )

    # -- multi-node -----------------------------------------------------------------------

    def leader_worker_set(
        self,
        model_volume: dict[str, Any],
        sub_path: str | None,
        pod_claims: list[dict[str, Any]],
        container_claims: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        """[ComputeDomain], [MPI ConfigMaps], LeaderWorkerSet ``<name>-lws``."""
        mn = self.spec.get("multiNode") or {}
        objs: list[dict[str, Any]] = []
        pod_claims, container_claims = list(pod_claims), list(container_claims)
        cd = mn.get("computeDomain") or {}
        if cd:
            if cd.get("create"):
                template = multinode.compute_domain_template_name(self.name)
                if self.ctx.capabilities.has(COMPUTE_DOMAIN):
                    objs.append(
                        multinode.compute_domain(
                            self._meta(), num_nodes=self.pipeline, template_name=template
                        )
                    )
            elif self.ctx.compute_domain_claim_template:
                template = self.ctx.compute_domain_claim_template
            else:
                raise RenderError(
                    f"ComputeDomain {cd.get('name')} not found", reason="ComputeDomainFailed"
                )
            claim = f"claim-{short_hash(self.name)}-2-{short_hash(template)}-{len(pod_claims)}"
            pod_claims.append({"name": claim, "resourceClaimTemplateName": template})
            container_claims.append({"name": claim})

        ray = mn.get("ray")
        leader_volumes: list[dict[str, Any]] = []
        worker_volumes: list[dict[str, Any]] = []
        leader_mounts: list[dict[str, Any]] = []
        worker_mounts: list[dict[str, Any]] = []
        leader_ports: list[dict[str, Any]] = []
        worker_probes: dict[str, dict[str, Any]] = {}
        if ray:
            ray_port = int(ray.get("rayPort", 6379))
            leader_args, worker_args = multinode.ray_args(ray_port)
            leader_ports = [{"name": "ray", "containerPort": ray_port, "protocol": "TCP"}]
            worker_probes = {"startupProbe": dict(multinode.RAY_WORKER_STARTUP_PROBE)}
            timeout = 300
        else:
            timeout = int(dig(mn, "mpi", "mpiStartTimeout", default=300))
            leader_args, worker_args = [], []
            leader_volumes, worker_volumes = multinode.mpi_volumes(self.name)
            leader_mounts, worker_mounts = multinode.mpi_mounts()
            replicas = int(self.spec.get("replicas") or 0)
            hosts = multinode.hostfiles(
                self.name, self.namespace, replicas, self.pipeline, self.tensor
            )
            objs.append(multinode.mpi_config_map(self._meta(f"{self.name}-mpi-config"), hosts))
            objs.append(
                multinode.start_script_config_map(self._meta(f"{self.name}-mpi-start-script"))
            )

        leader_spec = self.nim_pod_spec(
            container_name="nim-leader",
            extra_env=multinode.leader_env(self.pipeline, self.tensor, timeout),
            extra_volumes=leader_volumes,
            extra_mounts=leader_mounts,
            extra_ports=leader_ports,
            args=leader_args or None,
            model_volume=model_volume,
            sub_path=sub_path,
            pod_claims=pod_claims,
            container_claims=container_claims,
        )
        worker_spec = self.nim_pod_spec(
            container_name="nim-worker",
            extra_env=multinode.worker_env(self.pipeline, self.tensor),
            extra_volumes=worker_volumes,
            extra_mounts=worker_mounts,
            extra_ports=leader_ports,
            args=worker_args or None,
            probes=worker_probes,
            model_volume=model_volume,
            sub_path=sub_path,
            pod_claims=pod_claims,
            container_claims=container_claims,
        )
        annotations = self.pod_annotations()
        objs.append(
            multinode.leader_worker_set(
                self._meta(multinode.lws_name(self.name)),
                replicas=self.spec.get("replicas"),
                size=self.pipeline,
                leader_template=pod.pod_template(
                    leader_spec,
                    labels=merge_maps(self.selector, self.pod_labels()),
                    annotations=annotations,
                ),
                worker_template=pod.pod_template(worker_spec, annotations=annotations),
            )
        )
        return objs

    # -- pods -----------------------------------------------------------------------

    def nim_pod_spec(
        self,
        *,
        container_name: str,
        model_volume: dict[str, Any],
        sub_path: str | None,
        pod_claims: list[dict[str, Any]],
        container_claims: list[dict[str, Any]],
        extra_env: list[dict[str, Any]] | None = None,
        extra_volumes: list[dict[str, Any]] | None = None,
        extra_mounts: list[dict[str, Any]] | None = None,
        extra_ports: list[dict[str, Any]] | None = None,
        command: list[str] | None = None,
        args: list[str] | None = None,
        probes: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The PodSpec running the NIM (Deployment pods, LWS leaders and workers).

        ``extra_env`` sits under the NIM env (the NIMService's env wins).
        """
        spec = self.spec
        proxy = spec.get("proxy") or {}
        ca_config_map = proxy.get("certConfigMap")
        user_inits = [c for c in spec.get("initContainers") or [] if c]
        sidecars = [c for c in spec.get("sidecarContainers") or [] if c]
        scratch = bool(user_inits or sidecars)

        volumes = [
            pod.empty_dir_volume(
                "dshm", medium="Memory", size_limit=dig(spec, "storage", "sharedMemorySizeLimit")
            ),
            model_volume,
        ]
        mounts = [
            pod.volume_mount("model-store", path, sub_path=sub_path)
            for path in self._model_mount_paths()
        ]
        mounts.append(pod.volume_mount("dshm", "/dev/shm"))
        if scratch:
            volumes.append(pod.empty_dir_volume("scratch"))
            mounts.append(pod.volume_mount("scratch", "/scratch"))
        if ca_config_map:
            volumes.append(pod.empty_dir_volume("ca-cert-volume"))
            volumes.append(pod.config_map_volume("custom-ca", ca_config_map))
            mounts.append(pod.volume_mount("ca-cert-volume", "/etc/ssl"))
        volumes.extend(extra_volumes or [])
        mounts.extend(extra_mounts or [])

        env = self.env()
        if extra_env:
            env = pod.merge_env_vars(extra_env, env)
        resources = self.resources(bool(pod_claims))
        if container_claims:
            resources = {**(resources or {}), "claims": container_claims}
        ports = [{"name": PORT_API, "containerPort": self.port, "protocol": "TCP"}]
        if self.grpc_port:
            ports.append({"name": PORT_GRPC, "containerPort": self.grpc_port, "protocol": "TCP"})
        if self.metrics_port:
            ports.append(
                {"name": PORT_METRICS, "containerPort": self.metrics_port, "protocol": "TCP"}
            )
        ports.extend(extra_ports or [])
        probes = self.probes() if probes is None else probes
        main = pod.container(
            container_name,
            image_of(spec.get("image")),
            image_pull_policy=dig(spec, "image", "pullPolicy"),
            command=command,
            args=args,
            env=env,
            ports=ports,
            resources=resources,
            volume_mounts=mounts,
            liveness_probe=probes.get("livenessProbe"),
            readiness_probe=probes.get("readinessProbe"),
            startup_probe=probes.get("startupProbe"),
        )

        init_containers: list[dict[str, Any]] = []
        if ca_config_map:
            init_containers.append(
                pod.container(
                    CA_INIT_CONTAINER,
                    image_of(spec.get("image")),
                    image_pull_policy=dig(spec, "image", "pullPolicy"),
                    command=["/bin/sh", "-c", CA_INIT_SCRIPT],
                    security_context={"runAsUser": 0, "runAsNonRoot": False},
                    volume_mounts=[
                        pod.volume_mount("model-store", MODEL_STORE, sub_path=sub_path),
                        pod.volume_mount("ca-cert-volume", "/ca-certs"),
                        pod.volume_mount("custom-ca", "/custom"),
                    ],
                )
            )
        init_mounts = [pod.volume_mount("model-store", MODEL_STORE, sub_path=sub_path)]
        if scratch:
            init_mounts.append(pod.volume_mount("scratch", "/scratch"))
        if ca_config_map:
            init_mounts.append(pod.volume_mount("ca-cert-volume", "/etc/ssl"))
        init_containers.extend(self._extra_container(c, env, init_mounts) for c in user_inits)
        containers = [main, *(self._extra_container(c, env, mounts) for c in sidecars)]

        security_context: dict[str, Any] = {
            "runAsUser": int(spec.get("userID", DEFAULT_USER_ID)),
            "runAsGroup": int(spec.get("groupID", DEFAULT_GROUP_ID)),
            "fsGroup": int(spec.get("groupID", DEFAULT_GROUP_ID)),
        }
        if self.ctx.orchestrator == ORCHESTRATOR_TKGS:
            security_context["seccompProfile"] = {"type": "RuntimeDefault"}

        return pod.pod_spec(
            containers,
            init_containers=init_containers,
            volumes=volumes,
            service_account_name=self.name,
            security_context=security_context,
            image_pull_secrets=dig(spec, "image", "pullSecrets"),
            node_selector=spec.get("nodeSelector"),
            tolerations=spec.get("tolerations"),
            affinity=spec.get("affinity"),
            scheduler_name=spec.get("schedulerName"),
            priority_class_name=spec.get("priorityClassName"),
            runtime_class_name=spec.get("runtimeClassName"),
            resource_claims=pod_claims,
        )

    def pod_labels(self) -> dict[str, str]:
        """Object labels minus the operator version.

        NVIDIA puts the version on the pod template too, so upgrading the
        operator restarts every NIM; here an upgrade only relabels objects.
        """
        return {k: v for k, v in self.labels.items() if k != OPERATOR_VERSION_LABEL}

    def pod_annotations(self) -> dict[str, str]:
        """Object annotations minus the parent-spec hash (a spec edit alone must not roll pods)."""
        return {k: v for k, v in self.annotations.items() if k != PARENT_SPEC_HASH_ANNOTATION}

    def deployment(
        self,
        model_volume: dict[str, Any],
        sub_path: str | None,
        pod_claims: list[dict[str, Any]],
        container_claims: list[dict[str, Any]],
    ) -> dict[str, Any]:
        spec = self.spec
        pod_spec = self.nim_pod_spec(
            container_name=f"{self.name}-ctr",
            model_volume=model_volume,
            sub_path=sub_path,
            pod_claims=pod_claims,
            container_claims=container_claims,
            command=spec.get("command"),
            args=spec.get("args"),
        )
        pod_labels = merge_maps(selector_labels(self.name), self.pod_labels())
        if is_autoscaling_enabled(spec):
            replicas: int | None = int(dig(spec, "scale", "hpa", "minReplicas", default=1))
        else:
            replicas = spec.get("replicas")
        return deployment.build(
            self._meta(),
            selector=selector_labels(self.name),
            template=pod.pod_template(
                pod_spec, labels=pod_labels, annotations=self.pod_annotations()
            ),
            replicas=replicas,
            strategy=deployment.rolling_update(),
        )

    def _extra_container(
        self,
        c: Mapping[str, Any],
        main_env: list[dict[str, Any]],
        mounts: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """A user init or sidecar container: its own env wins over the NIM's."""
        return pod.container(
            c["name"],
            image_of(c.get("image")),
            image_pull_policy=self._container_image_pull_policy(c.get("image")),
            command=c.get("command"),
            args=c.get("args"),
            working_dir=c.get("workingDir"),
            env=pod.merge_env_vars(main_env, c.get("env") or []),
            volume_mounts=[dict(m) for m in mounts],
        )


def proxy_env(proxy: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Proxy variables (both spellings) and native TLS for the NIM SDK."""
    env = [pod.env_var("NIM_SDK_USE_NATIVE_TLS", "1")]
    for upper, key in (
        ("HTTPS_PROXY", "httpsProxy"),
        ("HTTP_PROXY", "httpProxy"),
        ("NO_PROXY", "noProxy"),
    ):
        env.append(pod.env_var(upper, str(proxy.get(key) or "")))
    for upper, key in (
        ("https_proxy", "httpsProxy"),
        ("http_proxy", "httpProxy"),
        ("no_proxy", "noProxy"),
    ):
        env.append(pod.env_var(upper, str(proxy.get(key) or "")))
    return env


def _cel_literal(value: Mapping[str, Any]) -> str:
    if "boolValue" in value:
        return "true" if value["boolValue"] else "false"
    if "intValue" in value:
        return str(int(value["intValue"]))
    if "versionValue" in value:
        return f'semver("{value["versionValue"]}")'
    return '"' + str(value.get("stringValue", "")).replace('"', '\\"') + '"'


def _device_selector_exprs(device: Mapping[str, Any], driver: str) -> list[str]:
    """CEL selectors for a DRA device request (attribute, capacity, raw CEL)."""
    exprs: list[str] = []
    for sel in device.get("attributeSelectors") or []:
        op = _SELECTOR_OPS.get(sel.get("op") or "Equal", "==")
        value = sel.get("value") or {}
        attr = f'device.attributes["{driver}"].{sel["key"]}'
        if "versionValue" in value:
            exprs.append(f"{attr}.compareTo({_cel_literal(value)}) {op} 0")
        else:
            exprs.append(f"{attr} {op} {_cel_literal(value)}")
    for sel in device.get("capacitySelectors") or []:
        op = _SELECTOR_OPS.get(sel.get("op") or "Equal", "==")
        cap = f'device.capacity["{driver}"].{sel["key"]}'
        exprs.append(f'{cap}.compareTo(quantity("{sel.get("value", "0")}")) {op} 0')
    exprs.extend(str(e) for e in device.get("celExpressions") or [])
    return exprs
