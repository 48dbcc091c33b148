"""Wiring of every controller into a Manager: discovery, cache filters, contract-derived watches.

As in NVIDIA's ``SetupWithManager`` (nim-operator.md §2.1, §3.1, §7), each
controller is ``For`` its kind with the spec-change filter and ``Owns`` the
kinds its contract may own (``owned_kinds(capabilities)``): the same list the
skeleton prunes from, so an owned object's change always wakes its owner and
a stale object is always found. ``own_kinds`` also registers the owner-UID
index those prunes read. The filtered cache keeps only objects labelled
``app.kubernetes.io/managed-by=k8s-nim-operator`` for the kinds NVIDIA filters.

``CONTROLLERS`` lists every controller with the group it belongs to (``nim``,
``nemo``, ``gpu``); ``nimctl.operator`` calls ``setup_controllers`` with the
groups the user enabled. Adding a kind is one ``setup_<kind>`` function and
one ``CONTROLLERS`` entry.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from controllers import nimcache as nimcache_ctrl
from controllers import nimservice as nimservice_ctrl
from controllers.blocker_facts import (
    EVENT,
    pod_blocker_changed,
    pod_event_watches,
    warning_event_cache,
)
from controllers.gpu.gpucluster_setup import setup_gpucluster
from controllers.gpu.nvidiadriver_setup import setup_nvidiadriver
from controllers.gpu.setup import setup_gpu
from controllers.gpu.upgrade.setup import setup_driver_upgrade
from controllers.nemo import setup_nemo
from controllers.nimbuild import setup_nimbuild
from controllers.nimpipeline import setup_nimpipeline
from controllers.reconciler import KindReconciler
from controllers.wiring import (
    ALWAYS_FILTERED,
    FILTERED_IF_PRESENT,
    ControllerEntry,
    SetupOptions,
    discover_capabilities,
    filtered_cache_options,
    own_kinds,
    spec_change_predicate,
)
from nimctl_runtime.builder import Builder
from nimctl_runtime.client.client import Client
from nimctl_runtime.handler import LOW_PRIORITY
from nimctl_runtime.manager import Manager
from nimctl_runtime.meta import name_of, namespace_of
from nimctl_runtime.predicate import ResourceVersionChangedPredicate
from nimctl_runtime.reconcile import Request
from platforms.capabilities import COMPUTE_DOMAIN, INFERENCE_SERVICE
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


def setup_nimservice(manager: Manager, client: Client, options: SetupOptions) -> None:
    """The NIMService controller: contract-derived owns, plus NIMCache → NIMServices using it."""
    cache = manager.cache
    nimservice_ctrl.cache_secrets_without_values(cache)
    warning_event_cache(cache)
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
        discover=functools.partial(discover_capabilities, client),
        read_events=True,
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
        .with_options(
            max_concurrent_reconciles=options.max_concurrent_reconciles,
            # An owned object's state (its creation coming back, a rollout's status)
            # queues behind NIMServices created or edited: with 1,000 applied at once,
            # each one's objects are created before earlier ones' status is followed.
            owned_state_priority=LOW_PRIORITY,
        )
    )
    own_kinds(
        builder,
        manager,
        NIMServiceContract().owned_kinds(options.capabilities),
        reconciler.expectations,
        # gather reads these (KServe's deployment mode, the ComputeDomain's channel)
        read_by_gather=(INFERENCE_SERVICE, COMPUTE_DOMAIN),
    )
    builder.watches(
        API_VERSION,
        nimcache_ctrl.KIND,
        nimservices_of,
        predicates=[ResourceVersionChangedPredicate()],
    )
    for (api_version, kind), users in nimservice_ctrl.dra_watches(cache, options.capabilities):
        builder.watches(api_version, kind, users)
    # What blocks the NIM's pods shows on the pods and in Warning Events about them,
    # not on the Deployment: wake the NIMService when it changes (issue 25).
    # Both report state, as the owned objects' status does: queued behind news.
    of_pod, of_event = pod_event_watches(cache, nimservice_ctrl.nimservice_of_pod)
    builder.watches("v1", "Pod", of_pod, predicates=[pod_blocker_changed()], priority=LOW_PRIORITY)
    builder.watches(*EVENT, of_event, priority=LOW_PRIORITY)
    # Optional CRDs installed (or removed) while running: rediscover, watch, wake.
    builder.watches("apiextensions.k8s.io/v1", "CustomResourceDefinition", reconciler.crd_changed)
    controller = builder.complete(reconciler)
    reconciler.watch_owned = nimservice_ctrl.late_owner_watch(cache, controller.enqueue)


def setup_nimcache(manager: Manager, client: Client, options: SetupOptions) -> None:
    """The NIMCache controller: owns its Job, manifest Pod and ConfigMap, and PVC."""

    async def logs(namespace: str, pod: str, container: str) -> str:
        return await nimcache_ctrl.client_pod_logs(client, namespace, pod, container)

    cache = manager.cache
    warning_event_cache(cache)
    reconciler: KindReconciler[Any, Any] = KindReconciler(
        kind=nimcache_ctrl.NIMCacheKind(
            api_reader=cache.api_reader,
            pod_logs=options.extra.get("pod_logs") or logs,
            read_events=True,
        ),
        cache=cache,
        client=client,
        api_reader=cache.api_reader,
        recorder=manager.event_recorder(nimcache_ctrl.RECORDER_NAME),
    )
    builder = (
        Builder(manager)
        .named("nimcache")
        .for_(API_VERSION, nimcache_ctrl.KIND, predicates=[spec_change_predicate()])
        .with_options(max_concurrent_reconciles=options.max_concurrent_reconciles)
    )
    own_kinds(builder, manager, NIMCacheContract().owned_kinds(options.capabilities))
    # The caching Job's pod can wait (missing Secret, image pull) while the Job's
    # status stays the same: its blocker wakes the NIMCache (issue 25).
    of_pod, of_event = pod_event_watches(cache, nimcache_ctrl.nimcache_of_pod)
    builder.watches("v1", "Pod", of_pod, predicates=[pod_blocker_changed()])
    builder.watches(*EVENT, of_event)
    builder.complete(reconciler)


CONTROLLERS: list[ControllerEntry] = [
    ControllerEntry("nimcache", "nim", setup_nimcache),
    ControllerEntry("nimservice", "nim", setup_nimservice),
    ControllerEntry("clusterpolicy", "gpu", setup_gpu),
    ControllerEntry("driver-upgrade", "gpu", setup_driver_upgrade),
    ControllerEntry("nvidiadriver", "gpu", setup_nvidiadriver),
    ControllerEntry("gpucluster", "gpu", setup_gpucluster),
    ControllerEntry("nimpipeline", "nim", setup_nimpipeline),
    ControllerEntry("nimbuild", "nim", setup_nimbuild),
    ControllerEntry("nemo", "nemo", setup_nemo),
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
