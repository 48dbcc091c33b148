"""Wiring of every controller into a Manager: discovery, cache filters, contract-derived watches.

As in NVIDIA's ``SetupWithManager`` (nim-operator.md §2.1, §3.1, §7), each
controller is ``For`` its kind with the spec-change filter and ``Owns`` the
kinds its contract may own (``owned_kinds(capabilities)``): the same list the
skeleton prunes from, so an owned object's change always wakes its owner and
a stale object is always found. ``own_kinds`` also registers the owner-UID
index those prunes read. The filtered cache keeps only objects labelled
``app.kubernetes.io/managed-by=k8s-nim-operator`` for the kinds NVIDIA filters.

``CONTROLLERS`` lists every controller with the group it belongs to (``nim``,
``nemo``, ``gpu``); ``nimctl_runtime.cli`` calls ``setup_controllers`` with the
groups the user enabled. Adding a kind is one ``setup_<kind>`` function and
one ``CONTROLLERS`` entry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from controllers import nimcache as nimcache_ctrl
from controllers import nimservice as nimservice_ctrl
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from nimctl_runtime.builder import Builder
from nimctl_runtime.cache.cache import ByObject
from nimctl_runtime.client.client import Client
from nimctl_runtime.client.errors import ApiError
from nimctl_runtime.handler import UpdateEvent
from nimctl_runtime.manager import Manager
from nimctl_runtime.meta import OWNER_UID_INDEX, name_of, namespace_of, owner_uid_index
from nimctl_runtime.predicate import Funcs, ResourceVersionChangedPredicate
from nimctl_runtime.reconcile import Request
from platforms.capabilities import GVK, OPTIONAL_GVKS, Capabilities
from platforms.nimcache import NIMCacheContract
from platforms.nimservice import NIMServiceContract

API_VERSION = nimservice_ctrl.API_VERSION

__all__ = [
    "ALWAYS_FILTERED",
    "CONTROLLERS",
    "FILTERED_IF_PRESENT",
    "ControllerEntry",
    "SetupOptions",
    "discover_capabilities",
    "filtered_cache_options",
    "own_kinds",
    "setup_controllers",
    "setup_nimcache",
    "setup_nimservice",
    "spec_change_predicate",
]

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


def own_kinds(builder: Builder, manager: Manager, kinds: Iterable[GVK]) -> Builder:
    """``owns`` every kind, with the owner-UID index the skeleton's prune reads."""
    for api_version, kind in kinds:
        with contextlib.suppress(ValueError):  # another controller owning this kind added it
            manager.cache.add_index(api_version, kind, OWNER_UID_INDEX, owner_uid_index)
        builder.owns(api_version, kind)
    return builder


@dataclass(frozen=True)
class SetupOptions:
    """What the composition root hands every controller's setup."""

    capabilities: Capabilities
    operator_version: str = ""
    max_concurrent_reconciles: int = 4
    model_query: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def setup_nimservice(manager: Manager, client: Client, options: SetupOptions) -> None:
    """The NIMService controller: contract-derived owns, plus NIMCache → NIMServices using it."""
    cache = manager.cache
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
        recorder=manager.event_recorder(nimservice_ctrl.RECORDER_NAME),
        capabilities=options.capabilities,
        model_query=options.model_query,
        operator_version=options.operator_version,
    )

    async def nimservices_of(nimcache: dict[str, Any]) -> list[Request]:
        namespace = namespace_of(nimcache)
        users = await cache.list(
            API_VERSION,
            nimservice_ctrl.KIND,
            namespace,
            index=(nimservice_ctrl.NIMCACHE_INDEX, name_of(nimcache)),
        )
        return [Request(namespace, name_of(u)) for u in users]

    builder = (
        Builder(manager)
        .named("nimservice")
        .for_(API_VERSION, nimservice_ctrl.KIND, predicates=[spec_change_predicate()])
        .with_options(max_concurrent_reconciles=options.max_concurrent_reconciles)
    )
    own_kinds(builder, manager, NIMServiceContract().owned_kinds(options.capabilities))
    builder.watches(
        API_VERSION,
        nimcache_ctrl.KIND,
        nimservices_of,
        predicates=[ResourceVersionChangedPredicate()],
    )
    builder.complete(reconciler)


def setup_nimcache(manager: Manager, client: Client, options: SetupOptions) -> None:
    """The NIMCache controller: owns its Job, manifest Pod and ConfigMap, and PVC."""

    async def logs(namespace: str, pod: str, container: str) -> str:
        return await nimcache_ctrl.client_pod_logs(client, namespace, pod, container)

    cache = manager.cache
    reconciler = nimcache_ctrl.NIMCacheReconciler(
        cache=cache,
        client=client,
        api_reader=cache.api_reader,
        recorder=manager.event_recorder(nimcache_ctrl.RECORDER_NAME),
        pod_logs=options.extra.get("pod_logs") or logs,
    )
    builder = (
        Builder(manager)
        .named("nimcache")
        .for_(API_VERSION, nimcache_ctrl.KIND, predicates=[spec_change_predicate()])
        .with_options(max_concurrent_reconciles=options.max_concurrent_reconciles)
    )
    own_kinds(builder, manager, NIMCacheContract().owned_kinds(options.capabilities))
    builder.complete(reconciler)


SetupFn = Callable[[Manager, Client, SetupOptions], None]


@dataclass(frozen=True)
class ControllerEntry:
    """One controller: its name, its group (``nim``, ``nemo``, ``gpu``) and its setup."""

    name: str
    group: str
    setup: SetupFn


CONTROLLERS: list[ControllerEntry] = [
    ControllerEntry("nimcache", "nim", setup_nimcache),
    ControllerEntry("nimservice", "nim", setup_nimservice),
]
"""Every controller, in the order they are added to the manager."""


def setup_controllers(
    manager: Manager,
    client: Client,
    options: SetupOptions,
    *,
    groups: Iterable[str] = ("nim", "nemo", "gpu"),
) -> list[str]:
    """Add the controllers of the enabled groups; returns their names."""
    enabled = set(groups)
    added: list[str] = []
    for entry in CONTROLLERS:
        if entry.group in enabled:
            entry.setup(manager, client, options)
            added.append(entry.name)
    return added

