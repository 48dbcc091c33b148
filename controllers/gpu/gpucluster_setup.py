"""Wiring of the GPUCluster controller: its cache, its watches, one worker.

As NVIDIA's GPUCluster controller (gpucluster.md §3): one worker, the
exponential failure backoff from 100 ms to 3 s, and these watches:

- GPUCluster (create, delete, generation change) → every GPUCluster;
- ClusterPolicy (create, delete) → every GPUCluster: the conflict comes and
  goes at once (NVIDIA notices it on its one-minute resync);
- the objects a GPUCluster owns (DaemonSets, RBAC, Services, DeviceClasses...)
  → that GPUCluster (by controller owner).

The cache holds the owned kinds in ``OPERATOR_NAMESPACE`` filtered by
nimctl's managed-by label, and the GPUClusters and ClusterPolicies. The
``resource.k8s.io`` versions serving DeviceClass are asked of discovery on
every render that is not memoised (the REST mapper caches them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from controllers.gpu.config import GPUConfig, MissingOperatorNamespace
from controllers.gpu.gpucluster import CP_API, CP_KIND, RECORDER_NAME, GPUClusterKind
from controllers.reconciler import KindReconciler
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from nimctl_runtime.builder import Builder
from nimctl_runtime.cache.cache import ByObject, Cache
from nimctl_runtime.client.errors import ApiError
from nimctl_runtime.meta import OWNER_UID_INDEX, name_of, owner_uid_index
from nimctl_runtime.predicate import Funcs, GenerationChangedPredicate
from nimctl_runtime.reconcile import Request
from nimctl_runtime.workqueue import ItemExponentialFailureRateLimiter
from platforms.gpu.gpucluster import API_VERSION, KIND, GPUClusterContract
from platforms.gpu.gpucluster_common import DRA_API_VERSIONS

if TYPE_CHECKING:
    from controllers.wiring import SetupOptions
    from nimctl_runtime.client.client import Client
    from nimctl_runtime.manager import Manager

from nimctl_runtime.meta import Obj

GPUCLUSTER_CONTROLLER: Final = "gpucluster-controller"

__all__ = ["GPUCLUSTER_CONTROLLER", "gpucluster_cache", "served_dra_versions", "setup_gpucluster"]


async def served_dra_versions(client: Client) -> frozenset[str]:
    """The ``resource.k8s.io`` versions whose discovery lists DeviceClass."""
    out = set()
    for version in DRA_API_VERSIONS:
        try:
            await client.mapper.rest_mapping(version, "DeviceClass")
        except ApiError:
            continue
        out.add(version)
    return frozenset(out)


def gpucluster_cache(client: Client, operator_namespace: str, owned: tuple[Any, ...]) -> Cache:
    """The cache the GPUCluster controller reads from (see the module docstring)."""
    managed = ByObject(label_selector={MANAGED_BY_LABEL: MANAGED_BY_VALUE})
    by_object: dict[tuple[str, str], ByObject] = {gvk: managed for gvk in owned}
    return Cache(client, by_object=by_object, namespace=operator_namespace)


def setup_gpucluster(manager: Manager, client: Client, options: SetupOptions) -> None:
    """Add the GPUCluster controller and its cache to ``manager``."""
    try:
        config = GPUConfig.from_env(options.extra.get("environ"))
    except MissingOperatorNamespace:
        return  # setup_gpu logs what to set
    owned = GPUClusterContract().owned_kinds(options.capabilities)
    cache = gpucluster_cache(client, config.operator_namespace, owned)
    manager.add(cache)

    async def dra_versions() -> frozenset[str]:
        return await served_dra_versions(client)

    reconciler = KindReconciler(
        kind=GPUClusterKind(
            config=config, capabilities=options.capabilities, dra_versions=dra_versions
        ),
        cache=cache,
        client=client,
        api_reader=cache.api_reader,
        recorder=manager.event_recorder(RECORDER_NAME),
        capabilities=options.capabilities,
    )

    async def every_cluster(obj: Obj) -> list[Request]:
        return [
            Request("", n)
            for n in sorted({name_of(c) for c in await cache.list(API_VERSION, KIND)})
        ]

    async def the_other_clusters(obj: Obj) -> list[Request]:
        return [r for r in await every_cluster(obj) if r.name != name_of(obj)]  # it: for_

    builder = (
        Builder(manager)
        .named(GPUCLUSTER_CONTROLLER)
        .with_cache(cache)
        .for_(API_VERSION, KIND, predicates=[GenerationChangedPredicate()])
        .watches(API_VERSION, KIND, the_other_clusters, predicates=[GenerationChangedPredicate()])
        .watches(CP_API, CP_KIND, every_cluster, predicates=[Funcs(update=lambda e: False)])
        .with_options(
            max_concurrent_reconciles=1,
            rate_limiter=ItemExponentialFailureRateLimiter[Request](base_delay=0.1, max_delay=3.0),
        )
    )
    for api_version, kind in owned:
        cache.add_index(api_version, kind, OWNER_UID_INDEX, owner_uid_index)
        builder.owns(api_version, kind)
    builder.complete(reconciler)
