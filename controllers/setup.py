"""Wiring of the NIMService and NIMCache controllers: discovery, cache filters, watches.

As in NVIDIA's ``SetupWithManager`` (nim-operator.md §2.1, §3.1, §7): the
NIMService controller is ``For(NIMService)`` with the spec-change filter,
``Owns`` its objects (the Gateway API routes only when discovery shows the
CRDs), and watches NIMCaches through the ``spec.storage.nimCache.name``
index; the NIMCache controller owns its Job, Pod and PVC. The filtered cache
keeps only objects labelled ``app.kubernetes.io/managed-by=k8s-nim-operator``
for the kinds NVIDIA filters. The composition root (``nimctl_runtime.cli``)
calls these functions and adds the returned controllers to its manager.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from controllers import nimcache as nimcache_ctrl
from controllers import nimservice as nimservice_ctrl
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from nimctl_runtime.cache.cache import ByObject, Cache
from nimctl_runtime.client.client import Client
from nimctl_runtime.client.errors import ApiError
from nimctl_runtime.controller import Controller
from nimctl_runtime.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    UpdateEvent,
)
from nimctl_runtime.predicate import Funcs, ResourceVersionChangedPredicate
from nimctl_runtime.reconcile import Request
from platforms.standalone.context import OPTIONAL_GVKS, Capabilities

GVK = tuple[str, str]

API_VERSION = nimservice_ctrl.API_VERSION

ALWAYS_FILTERED: tuple[GVK, ...] = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("v1", "Service"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("batch/v1", "Job"),
    ("v1", "Pod"),
)
FILTERED_IF_PRESENT: tuple[GVK, ...] = (
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("gateway.networking.k8s.io/v1", "GRPCRoute"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("serving.kserve.io/v1beta1", "InferenceService"),
)
NIMSERVICE_OWNS: tuple[GVK, ...] = (
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("networking.k8s.io/v1", "Ingress"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
)
NIMSERVICE_OWNS_IF_PRESENT: tuple[GVK, ...] = (
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("gateway.networking.k8s.io/v1", "GRPCRoute"),
)
NIMCACHE_OWNS: tuple[GVK, ...] = (
    ("batch/v1", "Job"),
    ("v1", "Pod"),
    ("v1", "PersistentVolumeClaim"),
)


async def discover_capabilities(
    client: Client, gvks: Iterable[GVK] = OPTIONAL_GVKS
) -> Capabilities:
    """Which optional kinds the API server serves (discovery; a miss is not an error)."""
    present: set[GVK] = set()
    for api_version, kind in gvks:
        try:
            await client.mapper.rest_mapping(api_version, kind)
        except ApiError:
            continue
        present.add((api_version, kind))
    return Capabilities.from_gvks(present)


def filtered_cache_options(capabilities: Capabilities) -> dict[GVK, ByObject]:
    """``ByObject`` label filters for the kinds the operator creates (NVIDIA's filtered cache)."""
    selector = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    kinds = list(ALWAYS_FILTERED) + [g for g in FILTERED_IF_PRESENT if capabilities.has(g)]
    return {gvk: ByObject(label_selector=selector) for gvk in kinds}


def spec_change_predicate() -> Funcs:
    """Updates of the primary kind pass only when spec changed or deletion started."""

    def update(event: UpdateEvent) -> bool:
        return nimservice_ctrl.spec_changed(event.object_old, event.object_new)

    return Funcs(update=update)


def nimservice_controller(
    *,
    cache: Cache,
    client: Client,
    recorder: Any,
    capabilities: Capabilities,
    model_query: nimservice_ctrl.ModelQuery | None = nimservice_ctrl.http_model_query,
    max_concurrent_reconciles: int = 1,
    operator_version: str = "",
) -> Controller:
    """The NIMService controller, ready for ``manager.add``; call before the cache starts."""
    cache.add_index(
        API_VERSION,
        nimservice_ctrl.KIND,
        nimservice_ctrl.NIMCACHE_INDEX,
        nimservice_ctrl.nimcache_name_index,
    )
    reconciler = nimservice_ctrl.NIMServiceReconciler(
        cache=cache,
        client=client,
        api_reader=cache.api_reader,
        recorder=recorder,
        capabilities=capabilities,
        model_query=model_query,
        operator_version=operator_version,
    )
    ctrl = Controller(
        "nimservice",
        reconciler,
        cache,
        max_concurrent_reconciles=max_concurrent_reconciles,
        scope_resolver=client.mapper.is_namespaced,
    )
    ctrl.watch(
        API_VERSION, nimservice_ctrl.KIND, EnqueueRequestForObject(), spec_change_predicate()
    )
    owner = EnqueueRequestForOwner(API_VERSION, nimservice_ctrl.KIND, owner_namespaced=True)
    for api_version, kind in NIMSERVICE_OWNS:
        ctrl.watch(api_version, kind, owner)
    for gvk in NIMSERVICE_OWNS_IF_PRESENT:
        if capabilities.has(gvk):
            ctrl.watch(gvk[0], gvk[1], owner)

    async def nimservices_of(nimcache: dict[str, Any]) -> list[Request]:
        meta = nimcache.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        users = await cache.list(
            API_VERSION,
            nimservice_ctrl.KIND,
            namespace,
            index=(nimservice_ctrl.NIMCACHE_INDEX, str(meta.get("name", ""))),
        )
        return [Request(namespace, str(u["metadata"]["name"])) for u in users]

    ctrl.watch(
        API_VERSION,
        nimcache_ctrl.KIND,
        EnqueueRequestsFromMapFunc(nimservices_of),
        ResourceVersionChangedPredicate(),
    )
    return ctrl


def nimcache_controller(
    *,
    cache: Cache,
    client: Client,
    recorder: Any,
    builders: nimcache_ctrl.NIMCacheBuilders,
    pod_logs: nimcache_ctrl.PodLogReader | None = None,
    max_concurrent_reconciles: int = 1,
) -> Controller:
    """The NIMCache controller, ready for ``manager.add``."""

    async def logs(namespace: str, pod: str, container: str) -> str:
        return await nimcache_ctrl.client_pod_logs(client, namespace, pod, container)

    reconciler = nimcache_ctrl.NIMCacheReconciler(
        cache=cache,
        client=client,
        api_reader=cache.api_reader,
        recorder=recorder,
        builders=builders,
        pod_logs=pod_logs or logs,
    )
    ctrl = Controller(
        "nimcache",
        reconciler,
        cache,
        max_concurrent_reconciles=max_concurrent_reconciles,
        scope_resolver=client.mapper.is_namespaced,
    )
    ctrl.watch(API_VERSION, nimcache_ctrl.KIND, EnqueueRequestForObject(), spec_change_predicate())
    owner = EnqueueRequestForOwner(API_VERSION, nimcache_ctrl.KIND, owner_namespaced=True)
    for api_version, kind in NIMCACHE_OWNS:
        ctrl.watch(api_version, kind, owner)
    return ctrl
