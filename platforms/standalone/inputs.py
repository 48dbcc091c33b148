"""The explicit inputs every seam of the standalone NIMService render reads.

``NIMServiceInputs.of(nimservice, ctx)`` derives, once per render, what the
networking, pod, storage and multi-node builders share: identity (name,
namespace, owner reference), labels and annotations, ports, the pod
selector, multi-node parallelism and the resolved NIMCache. Each builder
module is a set of functions of these inputs, as ``epp.render_epp`` is of
``EPPInputs``; none reads the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from manifests.hashing import PARENT_SPEC_HASH_ANNOTATION, hash_value
from manifests.labels import (
    OPERATOR_VERSION_LABEL,
    PART_OF_NIM_SERVICE,
    REQUIRED_SCC_ANNOTATION,
    merge_maps,
    selector_labels,
    standard_labels,
)
from manifests.meta import object_meta, owner_reference
from nimctl_runtime.meta import dig
from platforms.standalone import multinode, sources
from platforms.standalone.context import RenderContext
from platforms.standalone.errors import (
    NIMCacheFailed,
    NIMCacheNotFound,
    NIMCacheNotReady,
    RenderError,
)

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMService"
DEFAULT_API_PORT = 8000
MODEL_STORE = "/model-store"

__all__ = ["API_VERSION", "KIND", "MODEL_STORE", "NIMServiceInputs", "resolve_nimcache"]


@dataclass(frozen=True)
class NIMServiceInputs:
    """What one render of a NIMService reads, derived once (see ``of``)."""

    svc: Mapping[str, Any]
    ctx: RenderContext
    name: str
    namespace: str
    spec: dict[str, Any]
    owner_refs: list[dict[str, Any]]
    spec_hash: str
    labels: dict[str, str]
    annotations: dict[str, str]
    port: int
    grpc_port: int | None
    metrics_port: int | None
    pipeline: int
    tensor: int
    multinode: bool
    selector: dict[str, str]
    nimcache: dict[str, Any] | None

    @classmethod
    def of(
        cls, svc: Mapping[str, Any], ctx: RenderContext, *, resolve_cache: bool = True
    ) -> NIMServiceInputs:
        """Derive the inputs; raises ``RenderError`` for a missing name or NIMCache.

        ``resolve_cache=False`` leaves the NIMCache unresolved (for the objects
        that do not depend on it).
        """
        meta = svc.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            raise RenderError("metadata.name: Required value")
        namespace = str(meta.get("namespace") or "default")
        spec: dict[str, Any] = dict(svc.get("spec") or {})
        owner = {
            "apiVersion": svc.get("apiVersion", API_VERSION),
            "kind": svc.get("kind", KIND),
            "metadata": {"name": name, "uid": meta.get("uid", "")},
        }
        spec_hash = hash_value(spec)
        labels = merge_maps(
            standard_labels(name, PART_OF_NIM_SERVICE, ctx.operator_version), spec.get("labels")
        )
        annotations = merge_maps(
            {
                REQUIRED_SCC_ANNOTATION: _scc_annotation(spec),
                PARENT_SPEC_HASH_ANNOTATION: spec_hash,
            },
            spec.get("annotations"),
        )
        mn = spec.get("multiNode") or {}
        pipeline = int(dig(mn, "parallelism", "pipeline", default=1))
        # Only pipeline parallelism > 1 makes a LeaderWorkerSet. (NVIDIA then
        # still uses the LWS selector for a Deployment, which matches no pod.)
        is_multinode = bool(mn) and pipeline > 1
        cache_name = dig(spec, "storage", "nimCache", "name")
        return cls(
            svc=svc,
            ctx=ctx,
            name=name,
            namespace=namespace,
            spec=spec,
            owner_refs=[owner_reference(owner)],
            spec_hash=spec_hash,
            labels=labels,
            annotations=annotations,
            port=int(dig(spec, "expose", "service", "port", default=DEFAULT_API_PORT)),
            grpc_port=dig(spec, "expose", "service", "grpcPort"),
            metrics_port=dig(spec, "expose", "service", "metricsPort"),
            pipeline=pipeline,
            tensor=int(dig(mn, "parallelism", "tensor", default=1)),
            multinode=is_multinode,
            selector=(
                multinode.leader_selector(name) if is_multinode else selector_labels(name)
            ),
            nimcache=resolve_nimcache(ctx, str(cache_name))
            if cache_name and resolve_cache
            else None,
        )

    def meta(
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


    def service_labels(self) -> dict[str, str]:
        """Object labels plus ``expose.service.labels`` (existing keys win).

        NVIDIA labels the Service, Ingress, routes, HPA and ServiceMonitor with
        these; the Deployment carries the plain object labels.
        """
        return merge_maps(self.labels, dig(self.spec, "expose", "service", "labels"))


    def host(self) -> str:
        domain = dig(self.spec, "expose", "router", "hostDomainName", default="")
        return f"{self.name}.{self.namespace}.{domain}"


    def pod_labels(self) -> dict[str, str]:
        """Object labels minus the operator version.

        NVIDIA puts the version on the pod template too, so upgrading the
        operator restarts every NIM; here an upgrade only relabels objects.
        """
        return {k: v for k, v in self.labels.items() if k != OPERATOR_VERSION_LABEL}


    def pod_annotations(self) -> dict[str, str]:
        """Object annotations minus the parent-spec hash (a spec edit alone must not roll pods)."""
        return {k: v for k, v in self.annotations.items() if k != PARENT_SPEC_HASH_ANNOTATION}


    def is_native(self) -> bool:
        if self.nimcache is not None:
            return sources.is_native(self.nimcache)
        return self.ctx.native_image


    def model_mount_paths(self) -> list[str]:
        return ["/model", "/opt/cache"] if self.is_native() else [MODEL_STORE]


    def container_image_pull_policy(self, image: Mapping[str, Any] | None) -> str | None:
        own = (image or {}).get("pullPolicy")
        return str(own or dig(self.spec, "image", "pullPolicy", default="")) or None


    def role_scc(self) -> str:
        if self.spec.get("proxy"):
            return "anyuid"
        if dig(self.spec, "storage", "hostPath"):
            return "hostmount-anyuid"
        return "nonroot"


    def resolved_nimcache(self, cache_name: str) -> dict[str, Any]:
        """The NIMCache ``spec.storage.nimCache.name`` names (resolved in ``of``)."""
        if self.nimcache is None:
            raise NIMCacheNotFound(f"NIMCache {cache_name} not found")
        return self.nimcache


def _scc_annotation(spec: Mapping[str, Any]) -> str:
    if dig(spec, "proxy", "certConfigMap"):
        return "anyuid"
    if dig(spec, "storage", "hostPath"):
        return "hostmount-anyuid"
    return "nonroot"


def resolve_nimcache(ctx: RenderContext, cache_name: str) -> dict[str, Any]:
    cache = ctx.nimcache_dict()
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
    return cache
