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
from typing import Any, cast

from pydantic import BaseModel

from api.apps.v1alpha1.common import Image
from api.apps.v1alpha1.nimcache import NIMCache
from api.apps.v1alpha1.nimservice import NIMService, NIMServiceSpec
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
from platforms.parsing import parse, spec_json
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
MODEL_STORE = "/model-store"

__all__ = [
    "API_VERSION",
    "KIND",
    "MODEL_STORE",
    "NIMServiceInputs",
    "as_nimservice",
    "given",
    "quantity",
    "resolve_nimcache",
    "spec_hash",
]


def as_nimservice(nimservice: NIMService | Mapping[str, Any]) -> NIMService:
    """The typed NIMService (a dict, from a test or a file, is parsed here)."""
    return parse(NIMService, nimservice)


def spec_hash(spec: NIMServiceSpec) -> str:
    """``nvidia.com/parent-spec-hash``: the hash of the spec as it was given (stored)."""
    return hash_value(spec_json(spec))


@dataclass(frozen=True)
class NIMServiceInputs:
    """What one render of a NIMService reads, derived once (see ``of``)."""

    cr: NIMService
    ctx: RenderContext
    name: str
    namespace: str
    spec: NIMServiceSpec
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
    nimcache: NIMCache | None

    @classmethod
    def of(
        cls, cr: NIMService, ctx: RenderContext, *, resolve_cache: bool = True
    ) -> NIMServiceInputs:
        """Derive the inputs; raises ``RenderError`` for a missing name or NIMCache.

        ``resolve_cache=False`` leaves the NIMCache unresolved (for the objects
        that do not depend on it).
        """
        name = cr.metadata.name or ""
        if not name:
            raise RenderError("metadata.name: Required value")
        namespace = cr.metadata.namespace or "default"
        spec = cr.spec
        owner = {
            "apiVersion": cr.api_version,
            "kind": cr.kind,
            "metadata": {"name": name, "uid": cr.metadata.uid or ""},
        }
        digest = spec_hash(spec)
        labels = merge_maps(
            standard_labels(name, PART_OF_NIM_SERVICE, ctx.operator_version), spec.labels
        )
        annotations = merge_maps(
            {
                REQUIRED_SCC_ANNOTATION: _scc_annotation(spec),
                PARENT_SPEC_HASH_ANNOTATION: digest,
            },
            spec.annotations,
        )
        mn = spec.multi_node
        pipeline = (mn.parallelism.pipeline or 1) if mn is not None else 1
        # Only pipeline parallelism > 1 makes a LeaderWorkerSet. (NVIDIA then
        # still uses the LWS selector for a Deployment, which matches no pod.)
        is_multinode = mn is not None and pipeline > 1
        cache_name = spec.storage.nim_cache.name
        service = spec.expose.service
        return cls(
            cr=cr,
            ctx=ctx,
            name=name,
            namespace=namespace,
            spec=spec,
            owner_refs=[owner_reference(owner)],
            spec_hash=digest,
            labels=labels,
            annotations=annotations,
            port=service.port,
            grpc_port=service.grpc_port,
            metrics_port=service.metrics_port,
            pipeline=pipeline,
            tensor=(mn.parallelism.tensor or 1) if mn is not None else 1,
            multinode=is_multinode,
            selector=(multinode.leader_selector(name) if is_multinode else selector_labels(name)),
            nimcache=resolve_nimcache(ctx, cache_name) if cache_name and resolve_cache else None,
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
        return merge_maps(self.labels, self.spec.expose.service.labels)

    def host(self) -> str:
        router = self.spec.expose.router
        domain = (router.host_domain_name if router is not None else None) or ""
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

    def container_image_pull_policy(self, image: Image) -> str | None:
        return image.pull_policy or self.spec.image.pull_policy or None

    def role_scc(self) -> str:
        if given(self.spec.proxy):
            return "anyuid"
        if self.spec.storage.host_path:
            return "hostmount-anyuid"
        return "nonroot"

    def resolved_nimcache(self, cache_name: str) -> NIMCache:
        """The NIMCache ``spec.storage.nimCache.name`` names (resolved in ``of``)."""
        if self.nimcache is None:
            raise NIMCacheNotFound(f"NIMCache {cache_name} not found")
        return self.nimcache


def given(value: BaseModel | None) -> bool:
    """Whether an optional struct holds anything, as the API server stores it (``{}`` does not)."""
    return value is not None and bool(spec_json(value))


def quantity(value: int | str | None) -> str | None:
    """A Quantity field for a builder: written as the user gave it (a string or an int)."""
    return cast("str | None", value)


def _scc_annotation(spec: NIMServiceSpec) -> str:
    if spec.proxy is not None and spec.proxy.cert_config_map:
        return "anyuid"
    if spec.storage.host_path:
        return "hostmount-anyuid"
    return "nonroot"


def resolve_nimcache(ctx: RenderContext, cache_name: str) -> NIMCache:
    cache = ctx.nimcache
    if cache is None or (cache.metadata.name or cache_name) != cache_name:
        raise NIMCacheNotFound(f"NIMCache {cache_name} not found")
    status = cache.status
    state = (status.state if status is not None else None) or ""
    if state == "Failed":
        message = ""
        for cond in (status.conditions if status is not None else None) or []:
            if cond.get("type") == "Failed" and cond.get("status") == "True":
                message = cond.get("message", "")
        raise NIMCacheFailed(message or f"NIMCache {cache_name} failed")
    if state != "Ready":
        raise NIMCacheNotReady(f"NIMCache {cache_name} not ready")
    return cache
