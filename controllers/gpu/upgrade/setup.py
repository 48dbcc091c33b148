"""Wiring of the driver upgrade controller: its cache, watches and the singleton request.

As NVIDIA's (gpu-operator.md §4.4) it runs one worker over one request for
the whole cluster and requeues every 2 minutes. It wakes on: a ClusterPolicy
or NVIDIADriver created, deleted or with a new generation; a Node whose
upgrade state, skip label, driver owner, upgrade annotations, cordon or
readiness changed; a driver DaemonSet
with a new generation, or a new ControllerRevision; and, beyond NVIDIA, an
operand pod of the operator namespace (driver, validator) created, deleted or
changing readiness, restarts or revision, so a node moves on as soon as its
driver is up (or fails) instead of at the next 2-minute tick; and a
ClusterPolicy whose ``DriverUpgrade`` condition changed: the ClusterPolicy
controller writes its conditions as a whole list, so a write of its own
from an older copy can undo ours, which the next pass puts back.

``OPERATOR_NAMESPACE`` is required (``setup_gpu`` logs when it is missing).
``NIMCTL_DRIVER_UPGRADE_STALL_SECONDS`` (environment) sets after how long a
node with no progress is reported (default 1800, 30 minutes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controllers.gpu.config import GPUConfig, MissingOperatorNamespace
from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade.cache import upgrade_cache
from controllers.gpu.upgrade.controller import CP_API, REQUEST, UpgradeReconciler
from controllers.gpu.upgrade.partition import NVIDIADRIVER_API, NVIDIADRIVER_KIND
from controllers.gpu.upgrade.policy import DEFAULT_STALL_SECONDS
from nimctl_runtime.builder import Builder
from nimctl_runtime.handler import UpdateEvent
from nimctl_runtime.meta import dig
from nimctl_runtime.predicate import Funcs, GenerationChangedPredicate
from nimctl_runtime.reconcile import Request
from nimctl_runtime.workqueue import ItemExponentialFailureRateLimiter

if TYPE_CHECKING:
    from controllers.wiring import SetupOptions
    from nimctl_runtime.client.client import Client
    from nimctl_runtime.manager import Manager

UPGRADE_CONTROLLER = "upgrade-controller"
STALL_ENV = "NIMCTL_DRIVER_UPGRADE_STALL_SECONDS"
RECORDER_NAME = "nvidia-driver-upgrade"

__all__ = ["UPGRADE_CONTROLLER", "node_upgrade_facts_changed", "setup_driver_upgrade"]


def _node_facts(node: Mapping[str, Any]) -> tuple[Any, ...]:
    labels = dig(node, "metadata", "labels") or {}
    annotations = dig(node, "metadata", "annotations") or {}
    ready = [x.get("status") for x in dig(node, "status", "conditions") or []
             if x.get("type") == "Ready"]  # fmt: skip
    return (
        labels.get(c.STATE_LABEL),
        labels.get(c.SKIP_LABEL),
        labels.get(c.DRIVER_OWNER_LABEL),
        annotations.get(c.UPGRADE_REQUESTED_ANNOTATION),
        annotations.get(c.SAFE_LOAD_ANNOTATION),
        bool(dig(node, "spec", "unschedulable")),
        tuple(ready),
    )


def node_upgrade_facts_changed() -> Funcs:
    """Node updates that can move an upgrade."""
    return Funcs(update=lambda e: _node_facts(e.object_old) != _node_facts(e.object_new))


def _pod_facts(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    statuses = [
        *(dig(pod, "status", "initContainerStatuses") or []),
        *(dig(pod, "status", "containerStatuses") or []),
    ]
    return (
        dig(pod, "metadata", "labels", c.REVISION_HASH_LABEL),
        bool(dig(pod, "metadata", "deletionTimestamp")),
        dig(pod, "status", "phase"),
        tuple((bool(s.get("ready")), s.get("restartCount")) for s in statuses),
    )


def _pod_changed(event: UpdateEvent) -> bool:
    return _pod_facts(event.object_old) != _pod_facts(event.object_new)


def _upgrade_condition(policy: Mapping[str, Any]) -> Any:
    conditions = dig(policy, "status", "conditions") or []
    return next((cond for cond in conditions if cond.get("type") == "DriverUpgrade"), None)


def _upgrade_condition_changed(event: UpdateEvent) -> bool:
    return bool(_upgrade_condition(event.object_old) != _upgrade_condition(event.object_new))


def _stall_seconds(environ: Mapping[str, str] | None) -> float:
    env = os.environ if environ is None else environ
    text = (env.get(STALL_ENV) or "").strip()
    if not text:
        return DEFAULT_STALL_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ValueError(f"{STALL_ENV}={text!r}: expected a number of seconds above 0")
    return value


def setup_driver_upgrade(manager: Manager, client: Client, options: SetupOptions) -> None:
    """Add the driver upgrade controller and its cache to ``manager``."""
    try:
        config = GPUConfig.from_env(options.extra.get("environ"))
    except MissingOperatorNamespace:
        return  # setup_gpu logs what to set
    cache = upgrade_cache(client, config.operator_namespace)
    manager.add(cache)
    reconciler = UpgradeReconciler(
        cache=cache,
        client=client,
        recorder=manager.event_recorder(RECORDER_NAME),
        operator_namespace=config.operator_namespace,
        stall_after_seconds=_stall_seconds(options.extra.get("environ")),
    )

    async def singleton(_: dict[str, Any]) -> list[Request]:
        return [REQUEST]

    # One request for the whole cluster: no for_, only watches that map to it.
    (
        Builder(manager)
        .named(UPGRADE_CONTROLLER)
        .with_cache(cache)
        .watches(CP_API, "ClusterPolicy", singleton, predicates=[GenerationChangedPredicate()])
        .watches(
            CP_API,
            "ClusterPolicy",
            singleton,
            predicates=[
                Funcs(
                    create=lambda e: False,
                    update=_upgrade_condition_changed,
                    delete=lambda e: False,
                )
            ],
        )
        .watches(
            NVIDIADRIVER_API,
            NVIDIADRIVER_KIND,
            singleton,
            predicates=[GenerationChangedPredicate()],
        )
        .watches("v1", "Node", singleton, predicates=[node_upgrade_facts_changed()])
        .watches("apps/v1", "DaemonSet", singleton, predicates=[GenerationChangedPredicate()])
        .watches("v1", "Pod", singleton, predicates=[Funcs(update=_pod_changed)])
        # A new driver revision is what makes pods out of sync; it is created after the
        # DaemonSet's generation changed, so that event alone can come too early.
        .watches(
            "apps/v1", "ControllerRevision", singleton, predicates=[Funcs(update=lambda e: False)]
        )
        .with_options(
            max_concurrent_reconciles=1,
            rate_limiter=ItemExponentialFailureRateLimiter[Request](base_delay=0.1, max_delay=3.0),
        )
        .complete(reconciler)
    )
