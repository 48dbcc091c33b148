"""The node-labelling reconciler: one Node per request, one merge patch per node that changed.

NVIDIA reconciles a singleton request that walks every node on any Node event
(gpu-operator.md §3.2). Here a Node event reconciles that node only, and a
ClusterPolicy change enqueues every node: the work per event does not grow
with the cluster. What a node should carry is ``controllers.gpu.nodelabels``'
pure ``node_patch``; without an active ClusterPolicy nothing is written. With
``useNvidiaDriverCRD`` the NVIDIADrivers are read too (each owner's
``upgradePolicy.autoUpgrade`` sets its nodes' auto-upgrade annotation), and an
NVIDIADriver change enqueues every node.

The patch sent to a node is remembered with the node's resourceVersion, so a
reconcile that runs before the cache has seen our own patch does not send it
twice.
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
from nimctl_runtime.client.errors import NotFound
from nimctl_runtime.client.interfaces import Reader, Writer
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import dig, name_of
from nimctl_runtime.reconcile import Request, Result
from platforms.gpu.contract import API_VERSION, KIND

ND_API = "nvidia.com/v1alpha1"
ND_KIND = "NVIDIADriver"
GC_KIND = "GPUCluster"

__all__ = ["GC_KIND", "ND_API", "ND_KIND", "NodeLabelingReconciler"]


@dataclass
class NodeLabelingReconciler:
    """Labels GPU nodes for the active ClusterPolicy (see the module docstring)."""

    cache: Reader
    client: Writer
    _sent: dict[str, tuple[str, str]] = field(default_factory=dict)
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
            self._sent.pop(request.name, None)
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
            self._sent.pop(request.name, None)
            return Result()
        rv = str(meta.get("resourceVersion", ""))
        fingerprint = repr(sorted(patch["metadata"].items()))
        if self._sent.get(request.name) == (rv, fingerprint):
            return Result()  # our patch is on its way into the cache
        try:
            await self.client.patch("v1", "Node", request.name, patch, patch_type="merge")
        except NotFound:
            return Result()
        self._sent[request.name] = (rv, fingerprint)
        self._log.info("labelled node", node=request.name, labels=patch["metadata"].get("labels"))
        return Result()
