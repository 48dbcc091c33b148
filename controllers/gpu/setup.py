"""Wiring of the GPU lifecycle controllers: the ClusterPolicy and node-labelling reconcilers.

Both read from one cache of their own (``controllers.gpu.cache.gpu_cache``):
the operator namespace only, trimmed Nodes, driver pods only. Both back off
exponentially from 100 ms to 3 s on failure, as NVIDIA's (gpu-operator.md §2.7,
§3.2); the ClusterPolicy controller runs one worker (a singleton), node
labelling four (a request is one node). The watches, and where we filter more
than NVIDIA:

- ClusterPolicy controller: ClusterPolicy (spec changes; a deletion wakes the
  others, one of which becomes active), every kind a ClusterPolicy owns (by
  controller owner), Nodes only when something a render or the status reads
  changed (GPU presence, NFD presence, kernel, OS, container runtime; the
  driver owner, upgrade-state and upgrade-skip labels, as NVIDIA's), driver
  pods when their readiness or revision changed;
- node-labelling controller: a Node when its labels or annotations changed
  (that node only), and a ClusterPolicy, NVIDIADriver or GPUCluster change
  (every node);
- the ClusterPolicy controller also wakes on a GPUCluster created or deleted
  (the two cannot co-exist).

``OPERATOR_NAMESPACE`` is required. NVIDIA's operator exits 1 without it;
nimctl also serves the NIM kinds, so ``setup_gpu`` logs the error (what to
set) and leaves the GPU controllers off instead of taking NIM down with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controllers.gpu import openshift
from controllers.gpu.cache import gpu_cache
from controllers.gpu.clusterpolicy import (
    RECORDER_NAME,
    ClusterPolicyKind,
)
from controllers.gpu.coalesce import Coalesced
from controllers.gpu.config import GPUConfig, MissingOperatorNamespace
from controllers.gpu.nodelabeling import GC_KIND, ND_API, ND_KIND, NodeLabelingReconciler
from controllers.reconciler import KindReconciler
from nimctl_runtime.builder import Builder
from nimctl_runtime.handler import (
    CreateEvent,
    DeleteEvent,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    UpdateEvent,
)
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import OWNER_UID_INDEX, dig, name_of, owner_uid_index
from nimctl_runtime.predicate import Funcs, GenerationChangedPredicate
from nimctl_runtime.reconcile import Request
from nimctl_runtime.workqueue import ItemExponentialFailureRateLimiter
from platforms.blockers import pod_blocker
from platforms.gpu.contract import API_VERSION, KIND, ClusterPolicyContract
from platforms.gpu.facts import (
    GPU_PRESENT_LABEL,
    KERNEL_LABEL,
    OS_ID_LABEL,
    OS_VERSION_LABEL,
    has_nfd_labels,
    is_gpu_node_by_nfd,
)
from platforms.gpu.readiness import REVISION_HASH_LABEL

if TYPE_CHECKING:
    from controllers.wiring import SetupOptions
    from nimctl_runtime.client.client import Client
    from nimctl_runtime.manager import Manager

from nimctl_runtime.meta import Obj

CLUSTERPOLICY_CONTROLLER = "clusterpolicy-controller"
NODE_LABELING_CONTROLLER = "nodelabeling-controller"
LABELING_WORKERS = 4
OWNER = "nvidia.com/gpu-operator.driver.owner"
DRIVER_UPGRADE_LABELS = (
    OWNER,
    "nvidia.com/gpu-driver-upgrade-state",
    "nvidia.com/gpu-driver-upgrade.skip",
)

__all__ = [
    "CLUSTERPOLICY_CONTROLLER",
    "NODE_LABELING_CONTROLLER",
    "node_facts_changed",
    "setup_gpu",
]


def _node_facts(node: Mapping[str, Any]) -> tuple[Any, ...]:
    labels: Mapping[str, str] = dig(node, "metadata", "labels") or {}
    return (
        labels.get(GPU_PRESENT_LABEL),
        has_nfd_labels(labels),
        labels.get(KERNEL_LABEL),
        labels.get(OS_ID_LABEL),
        labels.get(OS_VERSION_LABEL),
        dig(node, "status", "nodeInfo", "containerRuntimeVersion"),
        *(labels.get(k) for k in DRIVER_UPGRADE_LABELS),
    )


def node_facts_changed() -> Funcs:
    """Node events that can change a ClusterPolicy's render or status."""

    def create(event: CreateEvent) -> bool:
        labels = dig(event.object, "metadata", "labels") or {}
        return has_nfd_labels(labels) or labels.get(GPU_PRESENT_LABEL) == "true"

    def update(event: UpdateEvent) -> bool:
        return _node_facts(event.object_old) != _node_facts(event.object_new)

    def delete(event: DeleteEvent) -> bool:
        labels = dig(event.object, "metadata", "labels") or {}
        return has_nfd_labels(labels) or is_gpu_node_by_nfd(labels) or bool(labels.get(OWNER))

    return Funcs(create=create, update=update, delete=delete)


def _driver_pod_changed() -> Funcs:
    def facts(pod: Mapping[str, Any]) -> tuple[Any, ...]:
        statuses = dig(pod, "status", "containerStatuses") or []
        found = pod_blocker(pod)
        return (
            dig(pod, "metadata", "labels", REVISION_HASH_LABEL),
            dig(pod, "status", "phase"),
            tuple(bool(s.get("ready")) for s in statuses),
            found.key if found is not None else None,
        )

    return Funcs(update=lambda e: facts(e.object_old) != facts(e.object_new))


def _labels_changed() -> Funcs:
    def meta(node: Mapping[str, Any]) -> tuple[Any, Any]:
        return (dig(node, "metadata", "labels"), dig(node, "metadata", "annotations"))

    return Funcs(update=lambda e: meta(e.object_old) != meta(e.object_new))


def _rate_limiter() -> ItemExponentialFailureRateLimiter[Request]:
    return ItemExponentialFailureRateLimiter(base_delay=0.1, max_delay=3.0)


def setup_gpu(manager: Manager, client: Client, options: SetupOptions) -> None:
    """Add the ClusterPolicy and node-labelling controllers and their cache to ``manager``."""
    try:
        config = GPUConfig.from_env(options.extra.get("environ"))
    except MissingOperatorNamespace as err:
        get_logger("controllers.gpu").error("GPU lifecycle controllers not started", error=str(err))
        return
    contract = ClusterPolicyContract()
    owned = contract.owned_kinds(options.capabilities)
    cache = gpu_cache(
        client, config.operator_namespace, owned, openshift.cache_options(options.capabilities)
    )
    manager.add(cache)

    reconciler = KindReconciler(
        kind=ClusterPolicyKind(
            config=config, capabilities=options.capabilities, api_reader=cache.api_reader
        ),
        cache=cache,
        client=client,
        api_reader=cache.api_reader,
        recorder=manager.event_recorder(RECORDER_NAME),
        capabilities=options.capabilities,
        use_finalizer=False,
    )

    async def every_policy(_: Obj) -> list[Request]:
        return [Request("", name_of(p)) for p in await cache.list(API_VERSION, KIND)]

    policy = (
        Builder(manager)
        .named(CLUSTERPOLICY_CONTROLLER)
        .with_cache(cache)
        .for_(API_VERSION, KIND, predicates=[GenerationChangedPredicate()])
        .watches(
            API_VERSION,
            KIND,
            every_policy,
            predicates=[Funcs(create=lambda e: False, update=lambda e: False)],
        )
        .with_options(max_concurrent_reconciles=1, rate_limiter=_rate_limiter())
    )
    for api_version, kind in owned:
        cache.add_index(api_version, kind, OWNER_UID_INDEX, owner_uid_index)
        policy.watches(api_version, kind, Coalesced(EnqueueRequestForOwner(API_VERSION, KIND)))
    # Node, driver-pod and operand events come in O(nodes) while a rollout runs and
    # each reconcile reads every node: they share one reconcile per COALESCE_SECONDS.
    policy.watches(
        "v1",
        "Node",
        Coalesced(EnqueueRequestsFromMapFunc(every_policy)),
        predicates=[node_facts_changed()],
    )
    policy.watches(
        "v1",
        "Pod",
        Coalesced(EnqueueRequestsFromMapFunc(every_policy)),
        predicates=[_driver_pod_changed()],
    )
    # A GPUCluster beside the ClusterPolicy blocks it (and its going unblocks it).
    policy.watches(ND_API, GC_KIND, every_policy, predicates=[Funcs(update=lambda e: False)])
    policy.complete(reconciler)

    async def every_node(_: Obj) -> list[Request]:
        return [Request("", name_of(n)) for n in await cache.list("v1", "Node")]

    (
        Builder(manager)
        .named(NODE_LABELING_CONTROLLER)
        .with_cache(cache)
        .for_("v1", "Node", predicates=[_labels_changed()])
        .watches(API_VERSION, KIND, every_node, predicates=[GenerationChangedPredicate()])
        .watches(ND_API, ND_KIND, every_node, predicates=[GenerationChangedPredicate()])
        .watches(ND_API, GC_KIND, every_node, predicates=[GenerationChangedPredicate()])
        # One node per request, so nodes can be labelled side by side (NVIDIA: one
        # request for the whole cluster, one worker).
        .with_options(max_concurrent_reconciles=LABELING_WORKERS, rate_limiter=_rate_limiter())
        .complete(NodeLabelingReconciler(cache=cache, client=client))
    )
