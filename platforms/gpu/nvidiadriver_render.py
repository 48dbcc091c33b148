"""What an NVIDIADriver becomes: per node pool, the driver RBAC and one driver DaemonSet.

The driver container, its init container, volumes, probes, repository and
certificate ConfigMaps, licensing, kernel module parameters and the
``DRIVER_CONFIG_DIGEST`` are exactly ClusterPolicy's driver state's
(``platforms.gpu.state_driver``): the NVIDIADriver spec is read as a
ClusterPolicy ``driver`` spec (``driver_spec``; the field names differ in three
places: ``repoConfig.name``, ``licensingConfig.name``,
``virtualTopologyConfig.name``) and the pod-level settings NVIDIADriver holds
itself (tolerations, priority class, labels, annotations, pod security
context) as ClusterPolicy's ``daemonsets``. Then each pool's DaemonSet gets
its own name, ``app`` label and selector, the pool's nodeSelector, the
``nvidia.com/node.os-version`` label (and ``nvidia.com/precompiled.kernel-version``
for precompiled pools) and the NVIDIADriver's ``nodeAffinity``.

Beyond NVIDIA: the startup-probe ConfigMap is one per NVIDIADriver
(``<driver name>-startup-probe``) rather than one shared
``nvidia-driver-startup-probe``, so two NVIDIADrivers never take one object
from each other. Pure: everything read from the cluster comes in
``NVIDIADriverFacts``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from api.nvidia.v1.clusterpolicy import (
    ClusterPolicy,
    ContainerProbeSpec,
    DriverLicensingConfigSpec,
    DriverRepoConfigSpec,
    DriverSpec,
    HostPathsSpec,
    VirtualTopologyConfigSpec,
)
from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver, NVIDIADriverSpec
from manifests.hashing import stamped_copy
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from manifests.meta import owner_reference
from platforms.gpu import state_driver
from platforms.gpu import transforms as t
from platforms.gpu.common import deploy_label, json_copy
from platforms.gpu.context import StateContext
from platforms.gpu.errors import RenderError
from platforms.gpu.facts import ClusterFacts
from platforms.gpu.nvidiadriver_pools import NodePool, app_name, driver_name, node_pools
from platforms.gpu.states import CLUSTER_SCOPED

OS_VERSION_LABEL: Final = "nvidia.com/node.os-version"
KERNEL_VERSION_LABEL: Final = "nvidia.com/precompiled.kernel-version"
PRECOMPILED_STARTUP_DELAY: Final = 5
_SKIPPED_POD_LABEL_PREFIX: Final = "app.kubernetes.io/"

__all__ = [
    "NVIDIADriverFacts",
    "driver_spec",
    "pools_of",
    "render_driver",
    "startup_probe_name",
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


def driver_spec(spec: NVIDIADriverSpec) -> DriverSpec:
    """The NVIDIADriver spec as a ClusterPolicy ``driver`` spec (see the module docstring)."""
    startup = spec.startup_probe
    if startup is None and spec.use_precompiled:
        startup = ContainerProbeSpec(initial_delay_seconds=PRECOMPILED_STARTUP_DELAY)
    lic = spec.licensing_config
    return DriverSpec(
        enabled=True,
        repository=spec.repository,
        image=spec.image,
        version=spec.version,
        image_pull_policy=spec.image_pull_policy,
        image_pull_secrets=spec.image_pull_secrets,
        resources=spec.resources,
        args=spec.args,
        env=spec.env,
        host_network=spec.host_network,
        use_precompiled=spec.use_precompiled,
        use_open_kernel_modules=spec.use_open_kernel_modules,
        kernel_module_type=spec.kernel_module_type,
        startup_probe=startup,
        liveness_probe=spec.liveness_probe,
        readiness_probe=spec.readiness_probe,
        rdma=spec.rdma,
        manager=spec.manager,
        repo_config=DriverRepoConfigSpec(config_map_name=spec.repo_config.name)
        if spec.repo_config is not None and spec.repo_config.name
        else None,
        cert_config=spec.cert_config if spec.cert_config and spec.cert_config.name else None,
        licensing_config=DriverLicensingConfigSpec(
            config_map_name=lic.name, secret_name=lic.secret_name, nlsEnabled=lic.nls_enabled
        )
        if lic is not None and (lic.name or lic.secret_name)
        else None,
        virtual_topology=VirtualTopologyConfigSpec(config=spec.virtual_topology_config.name)
        if spec.virtual_topology_config is not None and spec.virtual_topology_config.name
        else None,
        kernel_module_config=spec.kernel_module_config
        if spec.kernel_module_config is not None and spec.kernel_module_config.name
        else None,
        secret_env=spec.secret_env or None,
    )


def _policy(cr: NVIDIADriver, host_paths: HostPathsSpec | None) -> ClusterPolicy:
    """A ClusterPolicy carrying the NVIDIADriver's driver and pod settings (render input only)."""
    spec = cr.spec
    labels = {
        k: v
        for k, v in (spec.labels or {}).items()
        if k != "app" and not k.startswith(_SKIPPED_POD_LABEL_PREFIX)
    }
    daemonsets: dict[str, Any] = {"updateStrategy": "OnDelete"}
    if labels:
        daemonsets["labels"] = labels
    if spec.annotations:
        daemonsets["annotations"] = dict(spec.annotations)
    if spec.tolerations:
        daemonsets["tolerations"] = [json_copy(x) for x in spec.tolerations]
    if spec.priority_class_name:
        daemonsets["priorityClassName"] = spec.priority_class_name
    if spec.pod_security_context is not None:
        daemonsets["podSecurityContext"] = json_copy(spec.pod_security_context)
    policy = ClusterPolicy.model_validate(
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": cr.metadata.name or ""},
            "spec": {
                "operator": {},
                "daemonsets": daemonsets,
                "driver": {},
                "toolkit": {},
                "devicePlugin": {},
                "dcgmExporter": {},
                "dcgm": {},
                "nodeStatusExporter": {},
                "gfd": {},
            },
        }
    )
    policy.spec.driver = driver_spec(spec)
    policy.spec.gds = spec.gds
    policy.spec.gdrcopy = spec.gdrcopy
    if host_paths is not None:
        policy.spec.host_paths = host_paths
    return policy


def startup_probe_name(cr_name: str, driver_type: str) -> str:
    """The NVIDIADriver's startup-probe ConfigMap."""
    return f"nvidia-{driver_type}-driver-{cr_name}-startup-probe"[:253]


def pools_of(cr: NVIDIADriver, facts: NVIDIADriverFacts) -> tuple[list[NodePool], list[str]]:
    """The NVIDIADriver's node pools, and its nodes left out for missing NFD labels."""
    return node_pools(
        cr.metadata.name or "", facts.nodes, facts.owners, precompiled=bool(cr.spec.use_precompiled)
    )


def _pool_daemonset(
    cr: NVIDIADriver, ctx: StateContext, pool: NodePool, *, sa: str, config_map: str
) -> dict[str, Any]:
    assert pool.first is not None
    ds = state_driver.driver_daemonset(ctx, pool.first, kernel=pool.kernel or None)
    app = app_name(cr.spec.driver_type, cr.metadata.uid or "", pool)
    meta = ds["metadata"]
    meta["name"] = app
    template = ds["spec"]["template"]
    extra = {OS_VERSION_LABEL: pool.os_tag}
    if pool.kernel:
        extra[KERNEL_VERSION_LABEL] = pool.kernel
    for labels in (meta["labels"], template["metadata"]["labels"]):
        labels["app"] = app
        labels.update(extra)
    ds["spec"]["selector"] = {"matchLabels": {"app": app}}
    meta.setdefault("annotations", {})["openshift.io/scc"] = sa
    pod = t.pod_spec(ds)
    pod["serviceAccountName"] = sa
    pod["nodeSelector"] = {deploy_label("driver"): "true", **pool.node_selector}
    if cr.spec.node_affinity:
        pod.setdefault("affinity", {})["nodeAffinity"] = dict(cr.spec.node_affinity)
    probe = t.volume(ds, "driver-startup-probe-script")
    if probe is not None:
        probe["configMap"]["name"] = config_map
    return ds


def render_driver(cr: NVIDIADriver, facts: NVIDIADriverFacts) -> list[dict[str, Any]]:
    """The objects of every pool, each once, with namespace, labels, owner and hash (pure).

    RenderError when the spec cannot be rendered (an incomplete image, GDS with
    precompiled drivers, ``vgpu-host-manager``, a missing ConfigMap).
    """
    spec = cr.spec
    name = cr.metadata.name or ""
    if spec.driver_type == "vgpu-host-manager":
        raise RenderError(
            "spec.driverType: vgpu-host-manager is not supported by nimctl yet; "
            "use driverType gpu or vgpu"
        )
    pools, _ = pools_of(cr, facts)
    if not pools:
        return []
    policy = _policy(cr, facts.host_paths)
    config_map = startup_probe_name(name, spec.driver_type)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    cm = state_driver.startup_probe_config_map(config_map)
    out[("ConfigMap", config_map)] = cm
    for pool in pools:
        assert pool.first is not None
        ctx = StateContext(
            policy=policy, facts=dataclasses.replace(facts.cluster, nodes=(pool.first,))
        )
        sa = driver_name(spec.driver_type, name, pool)
        for obj in state_driver.driver_rbac(ctx, sa):
            out.setdefault((str(obj["kind"]), str(obj["metadata"]["name"])), obj)
        ds = _pool_daemonset(cr, ctx, pool, sa=sa, config_map=config_map)
        out[("DaemonSet", str(ds["metadata"]["name"]))] = ds
    owner = owner_reference(
        {
            "apiVersion": cr.api_version,
            "kind": cr.kind,
            "metadata": {"name": name, "uid": cr.metadata.uid or ""},
        }
    )
    return [_finish(obj, owner, facts.cluster.operator_namespace) for obj in out.values()]


def _finish(obj: dict[str, Any], owner: dict[str, Any], namespace: str) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    if obj.get("kind") not in CLUSTER_SCOPED:
        meta["namespace"] = namespace
    meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    meta["ownerReferences"] = [owner]
    return stamped_copy(obj)
