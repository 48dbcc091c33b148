"""ClusterPolicy's 20 states, in NVIDIA's order: when each is enabled, and
``render``, the one place that decides what a ClusterPolicy becomes.

``render(policy, facts)`` is pure. Every state is listed on every call: a
disabled state has ``enabled=False`` and no objects, so the reconciler deletes
what it had. Each object carries our managed-by label (the filtered cache),
a controller ownerReference to the ClusterPolicy and the
``nvidia.com/last-applied-hash`` annotation. ``owned_kinds`` lists every kind a
ClusterPolicy may own, for the watches and for pruning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from api.nvidia.v1.clusterpolicy import ClusterPolicy, ClusterPolicySpec
from manifests.hashing import stamped_copy
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from manifests.meta import owner_reference
from platforms.gpu import (
    openshift,
    state_cc_manager,
    state_container_toolkit,
    state_dcgm,
    state_dcgm_exporter,
    state_device_plugin,
    state_driver,
    state_gfd,
    state_kata_device_plugin,
    state_kata_manager,
    state_mig_manager,
    state_mps_control_daemon,
    state_node_status_exporter,
    state_operator_metrics,
    state_operator_validation,
    state_prerequisites,
    state_sandbox_device_plugin,
    state_sandbox_validation,
    state_vfio_manager,
    state_vgpu_device_manager,
    state_vgpu_manager,
)
from platforms.gpu.context import StateContext
from platforms.gpu.errors import RenderError
from platforms.gpu.facts import SERVICE_MONITOR, ClusterFacts

Builder = Callable[[StateContext], list[dict[str, Any]]]

_BUILDERS: Final[dict[str, Builder]] = {
    "pre-requisites": state_prerequisites.build,
    "state-operator-metrics": state_operator_metrics.build,
    "state-driver": state_driver.build,
    "state-container-toolkit": state_container_toolkit.build,
    "state-operator-validation": state_operator_validation.build,
    "state-device-plugin": state_device_plugin.build,
    "state-mps-control-daemon": state_mps_control_daemon.build,
    "state-dcgm": state_dcgm.build,
    "state-dcgm-exporter": state_dcgm_exporter.build,
    "gpu-feature-discovery": state_gfd.build,
    "state-mig-manager": state_mig_manager.build,
    "state-node-status-exporter": state_node_status_exporter.build,
    "state-vgpu-manager": state_vgpu_manager.build,
    "state-vgpu-device-manager": state_vgpu_device_manager.build,
    "state-sandbox-validation": state_sandbox_validation.build,
    "state-vfio-manager": state_vfio_manager.build,
    "state-sandbox-device-plugin": state_sandbox_device_plugin.build,
    "state-kata-device-plugin": state_kata_device_plugin.build,
    "state-kata-manager": state_kata_manager.build,
    "state-cc-manager": state_cc_manager.build,
}

STATE_NAMES: Final[tuple[str, ...]] = tuple(_BUILDERS)
"""NVIDIA's 20 states, in the order they are applied."""

ORPHAN: Final = "Orphan"
BACKGROUND: Final = "Background"

CLUSTER_SCOPED: Final = frozenset(
    {"ClusterRole", "ClusterRoleBinding", "RuntimeClass", "SecurityContextConstraints"}
)

_BASE_KINDS: Final[tuple[tuple[str, str], ...]] = (
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("apps/v1", "DaemonSet"),
    ("node.k8s.io/v1", "RuntimeClass"),
)


@dataclass(frozen=True)
class StateRender:
    """One state's desired objects, in apply order (empty when disabled).

    ``propagation`` is how the reconciler deletes what the state no longer has:
    ``Orphan`` for the driver DaemonSets once NVIDIADriver objects own the
    drivers (``driver.useNvidiaDriverCRD``), so driver pods keep running.
    """

    name: str
    enabled: bool
    objects: list[dict[str, Any]] = field(default_factory=list)
    propagation: str = BACKGROUND


def _sandbox(spec: ClusterPolicySpec) -> bool:
    return spec.sandbox_workloads.is_enabled()


def _kata(spec: ClusterPolicySpec) -> bool:
    return _sandbox(spec) and spec.sandbox_workloads.mode == "kata"


def _nvidia_driver_crd(spec: ClusterPolicySpec) -> bool:
    return bool(spec.driver.use_nvidia_driver_crd)


_ENABLED: Final[dict[str, Callable[[ClusterPolicySpec], bool]]] = {
    "pre-requisites": lambda s: not s.cdi.nri_plugin_enabled,
    "state-operator-metrics": lambda s: True,
    "state-driver": lambda s: s.driver.is_enabled() and not _nvidia_driver_crd(s),
    "state-container-toolkit": lambda s: s.toolkit.is_enabled(),
    "state-operator-validation": lambda s: True,
    "state-device-plugin": lambda s: s.device_plugin.is_enabled(),
    "state-mps-control-daemon": lambda s: s.device_plugin.is_enabled(),
    "state-dcgm": lambda s: s.dcgm.is_enabled(),
    "state-dcgm-exporter": lambda s: s.dcgm_exporter.is_enabled(),
    "gpu-feature-discovery": lambda s: s.gfd.is_enabled(),
    "state-mig-manager": lambda s: s.mig_manager.is_enabled(),
    "state-node-status-exporter": lambda s: s.node_status_exporter.is_enabled(),
    "state-vgpu-manager": lambda s: (
        _sandbox(s) and s.vgpu_manager.is_enabled() and not _nvidia_driver_crd(s)
    ),
    "state-vgpu-device-manager": lambda s: _sandbox(s) and s.vgpu_device_manager.is_enabled(),
    "state-sandbox-validation": _sandbox,
    "state-vfio-manager": lambda s: _sandbox(s) and s.vfio_manager.is_enabled(),
    "state-sandbox-device-plugin": lambda s: (
        _sandbox(s)
        and s.sandbox_device_plugin.is_enabled()
        and s.sandbox_workloads.mode == "kubevirt"
    ),
    "state-kata-device-plugin": lambda s: _kata(s) and s.kata_sandbox_device_plugin.is_enabled(),
    # Deprecated: NVIDIA hard-codes this state off.
    "state-kata-manager": lambda s: False,
    "state-cc-manager": lambda s: _kata(s) and s.cc_manager.is_enabled(),
}


def state_enabled(name: str, spec: ClusterPolicySpec) -> bool:
    """NVIDIA's ``isStateEnabled`` for the state ``name``."""
    return _ENABLED[name](spec)


def validate(spec: ClusterPolicySpec) -> None:
    """NVIDIA's ``validateClusterPolicySpec``: RenderError on a contradiction."""
    if spec.cdi.nri_plugin_enabled and not spec.cdi.enabled:
        raise RenderError(
            "spec.cdi.nriPluginEnabled: the NRI Plugin cannot be enabled when CDI is disabled"
        )
    if spec.cdi.nri_plugin_enabled and not spec.toolkit.is_enabled():
        raise RenderError(
            "spec.cdi.nriPluginEnabled: the NRI Plugin cannot be enabled when the NVIDIA "
            "Container Toolkit is disabled (spec.toolkit.enabled=false)"
        )


def render(policy: ClusterPolicy, facts: ClusterFacts) -> list[StateRender]:
    """Every state of ``policy`` on a cluster described by ``facts``, in order (pure).

    DaemonSets are left out while there is no GPU node (NVIDIA creates none
    then). RenderError names the state and the field when a spec cannot be
    rendered (an incomplete image, a missing OS label on a GPU node, ...).
    """
    spec = policy.spec
    validate(spec)
    ctx = StateContext(policy=policy, facts=facts)
    owner = owner_reference(
        {
            "apiVersion": policy.api_version,
            "kind": policy.kind,
            "metadata": {"name": policy.metadata.name or "", "uid": policy.metadata.uid or ""},
        }
    )
    out: list[StateRender] = []
    for name, build in _BUILDERS.items():
        enabled = state_enabled(name, spec)
        propagation = ORPHAN if name == "state-driver" and _nvidia_driver_crd(spec) else BACKGROUND
        if not enabled:
            out.append(StateRender(name, False, [], propagation))
            continue
        try:
            objects = build(ctx)
        except RenderError as err:
            raise RenderError(err.message, state=name) from None
        if facts.openshift is not None:
            objects = openshift.with_scc(name, objects, facts.operator_namespace)
        if not facts.nodes:
            objects = [o for o in objects if o.get("kind") != "DaemonSet"]
        out.append(StateRender(name, True, [_finish(o, owner, ctx) for o in objects], propagation))
    return out


def _finish(obj: dict[str, Any], owner: dict[str, Any], ctx: StateContext) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    if obj.get("kind") not in CLUSTER_SCOPED:
        meta["namespace"] = ctx.namespace
    # Ours wins over spec.daemonsets.labels on the objects: the operator's cache
    # selects on it. Operand pods keep the user's labels: the GPU cache finds the
    # driver pods by their component label, and a managed-by label on every
    # operand pod would pull them all into the NIM controllers' Pod cache.
    meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    meta["ownerReferences"] = [owner]
    return stamped_copy(obj)


def owned_kinds(facts: ClusterFacts | None = None) -> tuple[tuple[str, str], ...]:
    """Every (apiVersion, kind) a ClusterPolicy may own on a cluster like ``facts``.

    Without facts: the kinds every cluster serves. ServiceMonitor is added
    when the cluster serves it, SecurityContextConstraints on OpenShift; the
    RuntimeClass version follows the Kubernetes version. (PrometheusRules are
    not rendered.)
    """
    kinds = list(_BASE_KINDS)
    if facts is None:
        return tuple(kinds)
    kinds[kinds.index(("node.k8s.io/v1", "RuntimeClass"))] = (
        facts.runtime_class_api_version,
        "RuntimeClass",
    )
    if facts.serves(SERVICE_MONITOR):
        kinds.append(SERVICE_MONITOR)
    if facts.openshift is not None:
        kinds.append(openshift.GVK)
    return tuple(kinds)
