"""What an NVIDIADriver becomes: per node pool, the driver RBAC and one driver DaemonSet.

Each pool's objects are NVIDIA's NVIDIADriver state's
(``platforms.gpu.nvidiadriver_daemonset``): the ServiceAccount and RBAC named
after the pool, the shared ``nvidia-driver-startup-probe`` ConfigMap, on
OpenShift the pool's SecurityContextConstraints and the trusted-CA ConfigMap,
and the DaemonSet. Objects two pools share (the startup-probe ConfigMap, the
trusted-CA ConfigMap) appear once, as the last pool renders them (NVIDIA
applies every pool's copy in turn), and only in the render of one NVIDIADriver
(``shared_owner``) when there are several. Every object carries
``nvidia.com/gpu-operator.state: state-driver``, as NVIDIA labels them when it
creates them. Pure: everything read from the cluster comes in
``NVIDIADriverFacts``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from api.nvidia.v1.clusterpolicy import HostPathsSpec
from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver
from manifests.hashing import stamped_copy
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from manifests.meta import owner_reference
from platforms.gpu.errors import RenderError
from platforms.gpu.facts import ClusterFacts
from platforms.gpu.nvidiadriver_daemonset import (
    STARTUP_PROBE_CONFIGMAP,
    TRUSTED_CA_CONFIGMAP,
    OpenShift,
    PoolNames,
    pool_objects,
)
from platforms.gpu.nvidiadriver_pools import NodePool, app_name, driver_name, node_pools
from platforms.gpu.states import CLUSTER_SCOPED

STATE_LABEL: Final = "nvidia.com/gpu-operator.state"
_SHARED: Final = frozenset(
    {("ConfigMap", STARTUP_PROBE_CONFIGMAP), ("ConfigMap", TRUSTED_CA_CONFIGMAP)}
)
STATE_NAME: Final = "state-driver"

__all__ = [
    "STATE_LABEL",
    "NVIDIADriverFacts",
    "pools_of",
    "render_driver",
    "shared_owner",
]


@dataclass(frozen=True)
class NVIDIADriverFacts:
    """What an NVIDIADriver is rendered and judged against (gathered by the controller)."""

    cluster: ClusterFacts
    """The operator namespace, image fallbacks, user ConfigMap keys, runtime, OpenShift."""
    nodes: tuple[Mapping[str, Any], ...] = ()
    """Every Node (labels), for the pools."""
    owners: Mapping[str, str | None] = field(default_factory=dict)
    """GPU node -> its owning NVIDIADriver (``nvidiadriver_pools.assign_owners``)."""
    host_paths: HostPathsSpec | None = None
    """The ClusterPolicy's ``hostPaths`` when one exists (its ``rootFS`` is the host root)."""
    dtk_images: Mapping[str, str] = field(default_factory=dict)
    """OpenShift: RHCOS release -> Driver Toolkit image (ImageStream openshift/driver-toolkit)."""
    proxy: Mapping[str, Any] | None = None
    """OpenShift: the cluster Proxy's spec (``httpProxy``, ``httpsProxy``, ``noProxy``,
    ``trustedCA``)."""
    shared_owner: str | None = None
    """The NVIDIADriver that renders the objects every pool shares (the startup-probe and
    trusted-CA ConfigMaps); None: each one does (one NVIDIADriver). See ``shared_owner``."""
    pods: tuple[Mapping[str, Any], ...] = ()
    """Driver pods of the operator namespace (trimmed): readiness names the one that blocks."""

    def openshift(self) -> OpenShift | None:
        """What the render reads of OpenShift, None elsewhere."""
        if not self.cluster.openshift:
            return None
        return OpenShift(
            version=self.cluster.openshift, dtk_images=self.dtk_images, proxy=self.proxy
        )


def shared_owner(owners: Mapping[str, str | None], blocked: Iterable[str] = ()) -> str | None:
    """Which NVIDIADriver renders the objects all pools share: the first, by name, of those
    that own a node and render (not ``blocked``). NVIDIA's NVIDIADrivers each write them in
    turn; one writer keeps two NVIDIADrivers from taking the object from each other on
    every pass. None when no NVIDIADriver owns a node."""
    skip = set(blocked)
    names = sorted({o for o in owners.values() if o is not None and o not in skip})
    return names[0] if names else None


def pools_of(cr: NVIDIADriver, facts: NVIDIADriverFacts) -> tuple[list[NodePool], list[str]]:
    """The NVIDIADriver's node pools, and its nodes left out for missing NFD labels."""
    return node_pools(
        cr.metadata.name or "",
        facts.nodes,
        facts.owners,
        precompiled=bool(cr.spec.use_precompiled),
        selector=cr.spec.node_selector,
        openshift=bool(facts.cluster.openshift),
    )


def render_driver(cr: NVIDIADriver, facts: NVIDIADriverFacts) -> list[dict[str, Any]]:
    """The objects of every pool, each once, with namespace, labels, owner and hash (pure).

    RenderError when the spec cannot be rendered (an incomplete image, GDS with
    precompiled drivers, a missing ConfigMap, a distribution without a known
    repository or certificate directory).
    """
    spec = cr.spec
    name = cr.metadata.name or ""
    pools, _ = pools_of(cr, facts)
    cluster = facts.cluster
    # NVIDIA's controller hands the render the ClusterPolicy's rootFS, "/" without one
    host_root = (facts.host_paths.root_fs if facts.host_paths is not None else None) or "/"
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for pool in pools:
        names = PoolNames(
            name=driver_name(spec.driver_type, name, pool),
            app=app_name(spec.driver_type, cr.metadata.uid or "", pool),
        )
        try:
            objects = pool_objects(
                spec,
                pool,
                names,
                namespace=cluster.operator_namespace,
                config_map_keys=cluster.config_map_keys,
                operator_env=cluster.operator_env,
                openshift=facts.openshift(),
                runtime=cluster.container_runtime,
                host_root=host_root,
            )
        except RenderError as err:
            raise RenderError(f"node pool {pool.name}: {err.message}") from None
        for obj in objects:
            key = (str(obj["kind"]), str(obj["metadata"]["name"]))
            if key in _SHARED and facts.shared_owner not in (None, name):
                continue
            out[key] = obj
    owner = owner_reference(
        {
            "apiVersion": cr.api_version,
            "kind": cr.kind,
            "metadata": {"name": name, "uid": cr.metadata.uid or ""},
        }
    )
    return [_finish(obj, owner, cluster.operator_namespace) for obj in out.values()]


def _finish(obj: dict[str, Any], owner: dict[str, Any], namespace: str) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    if obj.get("kind") not in CLUSTER_SCOPED:
        meta["namespace"] = namespace
    meta["labels"] = {
        **(meta.get("labels") or {}),
        STATE_LABEL: STATE_NAME,
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
    }
    meta["ownerReferences"] = [owner]
    return stamped_copy(obj)
