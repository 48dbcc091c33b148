"""The node-labelling reconcilers: one Node per request, one merge patch per node that changed.

Every Node label nimctl writes is written here; the kind reconcilers write none.

NVIDIA reconciles a singleton request that walks every node on any Node event
(gpu-operator.md §3.2). Here a Node event reconciles that node only, and a
ClusterPolicy change enqueues every node: the work per event does not grow
with the cluster. What a node should carry is ``controllers.gpu.nodelabels``'
pure ``node_patch``; without an active ClusterPolicy nothing is written. With
``useNvidiaDriverCRD`` the NVIDIADrivers are read too (each owner's
``upgradePolicy.autoUpgrade`` sets its nodes' auto-upgrade annotation), and an
NVIDIADriver change enqueues every node.

``DriverOwnerLabeler`` writes ``nvidia.com/gpu-operator.driver.owner=<name>``
(removing it where no NVIDIADriver owns the node) as ``assign_owners`` decides
over the NVIDIADrivers it watches, while NVIDIADrivers manage the drivers (no
ClusterPolicy, or one with ``useNvidiaDriverCRD``). NVIDIA's node labelling
controller writes it too; the NVIDIADriver controller renders its pools from
the same decision, so a pool's DaemonSet and its nodes' labels agree. It reads
the NVIDIADriver controller's cache: a nodeSelector may name any label, and the
ClusterPolicy labeller's cache keeps only the labels its rules read.

The patch sent to a node is remembered with the node's resourceVersion
(``controllers.sync.WriteMemo``), so a reconcile that runs before the cache has
seen our own patch does not send it twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from controllers.gpu.clusterpolicy import active_policy
from controllers.gpu.nodelabels import (
    dra_node_patch,
    driver_auto_upgrades,
    node_patch,
    uses_driver_crd,
)
from controllers.gpu.nvidiadriver import CP_API, driver_mode, driver_selectors
from controllers.sync import WriteMemo
from nimctl_runtime.client.errors import NotFound
from nimctl_runtime.client.interfaces import Reader, Writer
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import dig, name_of
from nimctl_runtime.reconcile import Request, Result
from platforms.gpu.contract import API_VERSION, KIND
from platforms.gpu.nvidiadriver_pools import DRIVER_OWNER_LABEL, assign_owners

ND_API = "nvidia.com/v1alpha1"
ND_KIND = "NVIDIADriver"
GC_KIND = "GPUCluster"
CP_KIND = "ClusterPolicy"

__all__ = ["GC_KIND", "ND_API", "ND_KIND", "DriverOwnerLabeler", "NodeLabelingReconciler"]


@dataclass
class NodeLabelingReconciler:
    """Labels GPU nodes for the active ClusterPolicy (see the module docstring)."""

    cache: Reader
    client: Writer
    _sent: WriteMemo[str, str] = field(default_factory=WriteMemo)
    _policy: tuple[str, ClusterPolicy] | None = None

    def __post_init__(self) -> None:
        self._log = get_logger("controllers.nodelabeling")

    async def _active(self) -> ClusterPolicy | None:
        policies = await self.cache.list(API_VERSION, KIND)
        name = active_policy(policies)
        if name is None:
            return None
        obj = next(p for p in policies if name_of(p) == name)
        version = f"{dig(obj, 'metadata', 'uid')}/{dig(obj, 'metadata', 'generation')}"
        if self._policy is None or self._policy[0] != version:
            self._policy = (version, ClusterPolicy.model_validate(obj))
        return self._policy[1]

    async def reconcile(self, request: Request) -> Result:
        try:
            node = await self.cache.get("v1", "Node", request.name)
        except NotFound:
            self._sent.forget(request.name)
            return Result()
        policy = await self._active()
        gpu_cluster = bool(await self.cache.list(ND_API, GC_KIND))
        meta = node.get("metadata") or {}
        if policy is None and gpu_cluster:
            patch = dra_node_patch(meta.get("labels") or {})
        elif policy is None or gpu_cluster:
            # Neither stack, or both (each refuses to run beside the other): no labels.
            return Result()
        else:
            drivers = None
            if uses_driver_crd(policy.spec):
                drivers = driver_auto_upgrades(await self.cache.list(ND_API, ND_KIND))
            patch = node_patch(
                meta.get("labels") or {}, meta.get("annotations") or {}, policy.spec, drivers
            )
        if patch is None:
            self._sent.forget(request.name)
            return Result()
        rv = str(meta.get("resourceVersion", ""))
        fingerprint = repr(sorted(patch["metadata"].items()))
        if self._sent.pending(request.name, rv, fingerprint):
            return Result()  # our patch is on its way into the cache
        try:
            await self.client.patch("v1", "Node", request.name, patch, patch_type="merge")
        except NotFound:
            return Result()
        self._sent.record(request.name, rv, fingerprint)
        self._log.info("labelled node", node=request.name, labels=patch["metadata"].get("labels"))
        return Result()


@dataclass
class DriverOwnerLabeler:
    """The driver owner label of one Node, from the NVIDIADrivers (see the module docstring)."""

    cache: Reader
    client: Writer
    _sent: WriteMemo[str, str | None] = field(default_factory=WriteMemo)

    def __post_init__(self) -> None:
        self._log = get_logger("controllers.nodelabeling")

    async def reconcile(self, request: Request) -> Result:
        try:
            node = await self.cache.get("v1", "Node", request.name)
        except NotFound:
            self._sent.forget(request.name)
            return Result()
        enabled, _ = driver_mode(await self.cache.list(CP_API, CP_KIND))
        if not enabled:
            return Result()  # the ClusterPolicy manages the driver: owners are left alone
        selectors = driver_selectors(await self.cache.list(ND_API, ND_KIND))
        want = assign_owners(selectors, [node]).get(request.name)
        have = (dig(node, "metadata", "labels") or {}).get(DRIVER_OWNER_LABEL)
        rv = str(dig(node, "metadata", "resourceVersion") or "")
        if have == want:
            self._sent.forget(request.name)
            return Result()
        if self._sent.pending(request.name, rv, want):
            return Result()  # written already; the cache has not caught up
        patch = {"metadata": {"labels": {DRIVER_OWNER_LABEL: want}}}
        try:
            await self.client.patch("v1", "Node", request.name, patch, patch_type="merge")
        except NotFound:
            return Result()
        self._sent.record(request.name, rv, want)
        self._log.info("labelled node", node=request.name, owner=want)
        return Result()
