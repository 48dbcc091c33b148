"""Wiring of the NVIDIADriver controller: its cache, its watches, one worker.

As NVIDIA's ``nvidia-driver-controller`` (gpu-operator.md §6.1): one worker
(ownership and conflicts are decided over all NVIDIADrivers at once), the
exponential failure backoff from 100 ms to 3 s, and these watches:

- NVIDIADriver (create, delete, generation change) → every NVIDIADriver: one
  CR's selector decides the others' nodes and conflicts;
- ClusterPolicy (create, delete, generation change) → every NVIDIADriver
  (``useNvidiaDriverCRD`` turns them on and off);
- Node, when its labels change → every NVIDIADriver (a label can move a node
  between pools or owners); beyond NVIDIA, not when only the driver upgrade's
  own labels (``nvidia.com/gpu-driver-upgrade*``) changed: a rollout moves
  them on every node many times, and they choose no pool;
- the objects an NVIDIADriver owns (DaemonSets, RBAC, the ConfigMap) → that
  NVIDIADriver (by controller owner).

Beside it, on the same cache, the node labelling reconciler of the driver
owner label (``controllers.gpu.nodelabeling.DriverOwnerLabeler``, four
workers, one Node per request): a Node created or whose labels changed (as
above) → that Node; an NVIDIADriver or ClusterPolicy created, deleted or with
a new generation → every Node.

The cache holds Nodes with their labels only (any label can be in a user's
nodeSelector, so none is trimmed; status, spec and annotations are), the
owned kinds in ``OPERATOR_NAMESPACE`` filtered by nimctl's managed-by label
(the pools' SecurityContextConstraints too, where served), the driver pods
there (trimmed; a pod whose blocker changes wakes every NVIDIADriver, whose
readiness names it), the ClusterPolicies and NVIDIADrivers, and on OpenShift
the ClusterVersion, the cluster Proxy and the Driver Toolkit ImageStream
(``controllers.gpu.openshift``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from controllers.gpu import openshift
from controllers.gpu.cache import DRIVER_COMPONENT, DRIVER_COMPONENT_LABEL, trim_driver_pod
from controllers.gpu.config import GPUConfig, MissingOperatorNamespace
from controllers.gpu.nodelabeling import DriverOwnerLabeler
from controllers.gpu.nvidiadriver import CP_API, RECORDER_NAME, NVIDIADriverKind
from controllers.reconciler import KindReconciler
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from nimctl_runtime.builder import Builder
from nimctl_runtime.cache.cache import ByObject, Cache
from nimctl_runtime.handler import (
    UpdateEvent,
)
from nimctl_runtime.meta import OWNER_UID_INDEX, dig, name_of, owner_uid_index
from nimctl_runtime.predicate import Funcs, GenerationChangedPredicate
from nimctl_runtime.reconcile import Request
from nimctl_runtime.workqueue import ItemExponentialFailureRateLimiter
from platforms.blockers import pod_blocker
from platforms.capabilities import Capabilities
from platforms.gpu.nvidiadriver import API_VERSION, KIND, NVIDIADriverContract

if TYPE_CHECKING:
    from controllers.wiring import SetupOptions
    from nimctl_runtime.client.client import Client
    from nimctl_runtime.manager import Manager

from nimctl_runtime.meta import Obj

NVIDIADRIVER_CONTROLLER: Final = "nvidia-driver-controller"
OWNER_LABELING_CONTROLLER: Final = "nvidia-driver-owner-labeling"
OWNER_LABELING_WORKERS: Final = 4

__all__ = [
    "NVIDIADRIVER_CONTROLLER",
    "OWNER_LABELING_CONTROLLER",
    "nvidiadriver_cache",
    "setup_nvidiadriver",
    "trim_node",
]


def trim_node(node: Obj) -> Obj:
    """A Node as the NVIDIADriver controller reads it: name, version and every label."""
    meta = node.get("metadata") or {}
    out = {k: meta[k] for k in ("name", "uid", "resourceVersion", "deletionTimestamp") if k in meta}
    out["labels"] = dict(meta.get("labels") or {})
    return {"apiVersion": "v1", "kind": "Node", "metadata": out}


UPGRADE_LABEL_PREFIX: Final = "nvidia.com/gpu-driver-upgrade"


def _pool_labels_changed() -> Funcs:
    """Node label changes other than the upgrade's own labels."""

    def changed(event: UpdateEvent) -> bool:
        old = dig(event.object_old, "metadata", "labels") or {}
        new = dig(event.object_new, "metadata", "labels") or {}
        keys = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
        return any(not k.startswith(UPGRADE_LABEL_PREFIX) for k in keys)

    return Funcs(update=changed)


def nvidiadriver_cache(
    client: Client,
    operator_namespace: str,
    capabilities: Capabilities | None = None,
) -> Cache:
    """The cache the NVIDIADriver controller reads from (see the module docstring)."""
    caps = capabilities or Capabilities.nothing()
    managed = ByObject(label_selector={MANAGED_BY_LABEL: MANAGED_BY_VALUE})
    owned = NVIDIADriverContract().owned_kinds(caps)
    by_object: dict[tuple[str, str], ByObject] = {gvk: managed for gvk in owned}
    by_object.update(openshift.cache_options(caps, driver=True))
    by_object[("v1", "Node")] = ByObject(transform=trim_node, index_labels=False)
    # driver pods, trimmed: readiness names the one that blocks (issue 25)
    by_object[("v1", "Pod")] = ByObject(
        label_selector={DRIVER_COMPONENT_LABEL: DRIVER_COMPONENT}, transform=trim_driver_pod
    )
    return Cache(client, by_object=by_object, namespace=operator_namespace)


def _driver_pod_blocker_changed() -> Funcs:
    """Driver pod updates that change its readiness or what blocks it."""

    def facts(pod: Obj) -> tuple[Any, ...]:
        found = pod_blocker(pod)
        statuses = dig(pod, "status", "containerStatuses") or []
        return (found.key if found else None, tuple(bool(s.get("ready")) for s in statuses))

    return Funcs(update=lambda e: facts(e.object_old) != facts(e.object_new))


def setup_nvidiadriver(manager: Manager, client: Client, options: SetupOptions) -> None:
    """Add the NVIDIADriver controller and its cache to ``manager``."""
    try:
        config = GPUConfig.from_env(options.extra.get("environ"))
    except MissingOperatorNamespace:
        return  # setup_gpu logs what to set
    cache = nvidiadriver_cache(client, config.operator_namespace, options.capabilities)
    manager.add(cache)
    reconciler = KindReconciler(
        kind=NVIDIADriverKind(
            config=config, api_reader=cache.api_reader, capabilities=options.capabilities
        ),
        cache=cache,
        client=client,
        api_reader=cache.api_reader,
        recorder=manager.event_recorder(RECORDER_NAME),
        capabilities=options.capabilities,
        use_finalizer=False,
    )

    async def every_driver(obj: Obj) -> list[Request]:
        return [
            Request("", n)
            for n in sorted({name_of(d) for d in await cache.list(API_VERSION, KIND)})
        ]

    async def the_other_drivers(obj: Obj) -> list[Request]:
        # the changed one itself comes from for_ (a deleted one too: its pass releases its nodes)
        return [r for r in await every_driver(obj) if r.name != name_of(obj)]

    builder = (
        Builder(manager)
        .named(NVIDIADRIVER_CONTROLLER)
        .with_cache(cache)
        .for_(API_VERSION, KIND, predicates=[GenerationChangedPredicate()])
        .watches(API_VERSION, KIND, the_other_drivers, predicates=[GenerationChangedPredicate()])
        .watches(CP_API, "ClusterPolicy", every_driver, predicates=[GenerationChangedPredicate()])
        .watches("v1", "Node", every_driver, predicates=[_pool_labels_changed()])
        .watches("v1", "Pod", every_driver, predicates=[_driver_pod_blocker_changed()])
        .with_options(
            max_concurrent_reconciles=1,
            rate_limiter=ItemExponentialFailureRateLimiter[Request](base_delay=0.1, max_delay=3.0),
        )
    )
    for api_version, kind in NVIDIADriverContract().owned_kinds(options.capabilities):
        cache.add_index(api_version, kind, OWNER_UID_INDEX, owner_uid_index)
        builder.owns(api_version, kind)
    builder.complete(reconciler)

    async def every_node(_: Obj) -> list[Request]:
        return [Request("", name_of(n)) for n in await cache.list("v1", "Node")]

    (
        Builder(manager)
        .named(OWNER_LABELING_CONTROLLER)
        .with_cache(cache)
        .for_("v1", "Node", predicates=[_pool_labels_changed()])
        .watches(API_VERSION, KIND, every_node, predicates=[GenerationChangedPredicate()])
        .watches(CP_API, "ClusterPolicy", every_node, predicates=[GenerationChangedPredicate()])
        .with_options(
            max_concurrent_reconciles=OWNER_LABELING_WORKERS,
            rate_limiter=ItemExponentialFailureRateLimiter[Request](base_delay=0.1, max_delay=3.0),
        )
        .complete(DriverOwnerLabeler(cache=cache, client=client))
    )
