"""Node labelling as a pure function: a Node's labels + the active ClusterPolicy -> one patch.

NVIDIA's node-labelling controller (gpu-operator.md §3): ``nvidia.com/gpu.present``
on every node NFD found an NVIDIA GPU on (``"false"`` once the GPU is gone), the
``nvidia.com/gpu.deploy.<component>`` labels the operand DaemonSets select on,
chosen by the node's workload config, MIG capability and the default MIG
config, and the driver auto-upgrade annotation
(``nvidia.com/gpu-driver-upgrade-enabled``, which k8s-driver-manager reads).
Rules that matter to users:

- the kill switch ``nvidia.com/gpu.deploy.operands=false`` removes every deploy
  label, so every operand pod leaves the node;
- a deploy label that already has a non-empty value is never overwritten: that
  is how the driver manager and the MIG manager pause an operand
  (``paused-for-driver-upgrade``, ``paused-for-mig-change``);
- deploy labels outside the node's set are removed, except
  ``gpu.deploy.mig-manager`` in the ``container`` config;
- the auto-upgrade annotation follows the ClusterPolicy (``driver.enabled``,
  ``driver.upgradePolicy.autoUpgrade``, sandbox workloads off). With
  ``useNvidiaDriverCRD`` (sandbox workloads off) it follows, on each node, the
  ``upgradePolicy.autoUpgrade`` of the NVIDIADriver named by the node's
  ``nvidia.com/gpu-operator.driver.owner`` label (true when unset, as NVIDIA
  defaults it); a node no NVIDIADriver owns keeps its annotation as it is, as
  NVIDIA's (gpu-operator.md §3.2, §4.4).

``node_patch`` returns the merge patch (``None`` values delete) or ``None`` when
the node already carries what it should: one PATCH per node that changed,
nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from api.nvidia.v1.clusterpolicy import ClusterPolicySpec
from platforms.gpu.facts import GPU_PRESENT_LABEL, is_gpu_node_by_nfd

DEPLOY_PREFIX: Final = "nvidia.com/gpu.deploy."
OPERANDS_LABEL: Final = "nvidia.com/gpu.deploy.operands"
WORKLOAD_CONFIG_LABEL: Final = "nvidia.com/gpu.workload.config"
MIG_CAPABLE_LABEL: Final = "nvidia.com/mig.capable"
MIG_CONFIG_LABEL: Final = "nvidia.com/mig.config"
GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
VGPU_HOST_DRIVER_LABEL: Final = "nvidia.com/vgpu.host-driver-version"
UPGRADE_ENABLED_ANNOTATION: Final = "nvidia.com/gpu-driver-upgrade-enabled"
DRIVER_OWNER_LABEL: Final = "nvidia.com/gpu-operator.driver.owner"
MIG_MANAGER_LABEL: Final = DEPLOY_PREFIX + "mig-manager"

WORKLOAD_CONTAINER: Final = "container"
WORKLOAD_VM_PASSTHROUGH: Final = "vm-passthrough"
WORKLOAD_VM_VGPU: Final = "vm-vgpu"
WORKLOADS: Final = (WORKLOAD_CONTAINER, WORKLOAD_VM_PASSTHROUGH, WORKLOAD_VM_VGPU)


def _labels(*components: str) -> tuple[str, ...]:
    return tuple(DEPLOY_PREFIX + c for c in components)


CONTAINER_LABELS: Final = _labels(
    "driver",
    "gpu-feature-discovery",
    "container-toolkit",
    "device-plugin",
    "dcgm",
    "dcgm-exporter",
    "node-status-exporter",
    "operator-validator",
    "client",
)
VM_PASSTHROUGH_LABELS: Final = _labels(
    "sandbox-validator", "vfio-manager", "kata-manager", "cc-manager", "client"
)
VM_VGPU_LABELS: Final = _labels(
    "sandbox-device-plugin",
    "vgpu-manager",
    "vgpu-device-manager",
    "sandbox-validator",
    "cc-manager",
    "client",
)
SANDBOX_DEVICE_PLUGIN_LABEL: Final = DEPLOY_PREFIX + "sandbox-device-plugin"
KATA_DEVICE_PLUGIN_LABEL: Final = DEPLOY_PREFIX + "kata-sandbox-device-plugin"
DRA_LABELS: Final = _labels(
    "driver", "dra-driver", "dra-validator", "dcgm-dra", "dcgm-exporter-dra"
)

STATE_LABELS: Final = frozenset(
    (
        *CONTAINER_LABELS,
        MIG_MANAGER_LABEL,
        *VM_PASSTHROUGH_LABELS,
        *VM_VGPU_LABELS,
        SANDBOX_DEVICE_PLUGIN_LABEL,
        KATA_DEVICE_PLUGIN_LABEL,
        *DRA_LABELS,
    )
)
"""Every deploy label the operator manages (both stacks, kata and mig-manager)."""

_MIG_PRODUCTS: Final = ("h100", "a100", "a30")

__all__ = [
    "MIG_CONFIG_LABEL",
    "OPERANDS_LABEL",
    "STATE_LABELS",
    "UPGRADE_ENABLED_ANNOTATION",
    "WORKLOAD_CONFIG_LABEL",
    "dra_node_patch",
    "driver_auto_upgrades",
    "is_mig_capable",
    "node_patch",
    "uses_driver_crd",
    "workload_config",
]


def workload_config(labels: Mapping[str, str], spec: ClusterPolicySpec) -> str:
    """The node's workload config: ``container`` unless sandbox workloads are on."""
    if not spec.sandbox_workloads.is_enabled():
        return WORKLOAD_CONTAINER
    value = labels.get(WORKLOAD_CONFIG_LABEL, "")
    if value in WORKLOADS:
        return value
    return spec.sandbox_workloads.default_workload or WORKLOAD_CONTAINER


def is_mig_capable(labels: Mapping[str, str]) -> bool:
    """Not a vGPU node, and GFD says MIG capable (or, before GFD, an H100/A100/A30)."""
    if labels.get(VGPU_HOST_DRIVER_LABEL, ""):
        return False
    if MIG_CAPABLE_LABEL in labels:
        return labels[MIG_CAPABLE_LABEL] == "true"
    product = labels.get(GPU_PRODUCT_LABEL, "").lower()
    return any(p in product for p in _MIG_PRODUCTS)


def _wanted_deploy_labels(labels: Mapping[str, str], spec: ClusterPolicySpec) -> tuple[str, ...]:
    config = workload_config(labels, spec)
    if config == WORKLOAD_VM_PASSTHROUGH:
        plugin = (
            KATA_DEVICE_PLUGIN_LABEL
            if spec.sandbox_workloads.mode == "kata"
            else SANDBOX_DEVICE_PLUGIN_LABEL
        )
        return (plugin, *VM_PASSTHROUGH_LABELS)
    if config == WORKLOAD_VM_VGPU:
        return VM_VGPU_LABELS
    if is_mig_capable(labels):
        return (*CONTAINER_LABELS, MIG_MANAGER_LABEL)
    return CONTAINER_LABELS


def driver_auto_upgrades(drivers: Iterable[Mapping[str, Any]]) -> dict[str, bool]:
    """NVIDIADriver name -> its ``spec.upgradePolicy.autoUpgrade`` (true when unset)."""
    out: dict[str, bool] = {}
    for driver in drivers:
        name = str((driver.get("metadata") or {}).get("name") or "")
        policy = (driver.get("spec") or {}).get("upgradePolicy") or {}
        out[name] = policy.get("autoUpgrade") is not False
    return out


def uses_driver_crd(spec: ClusterPolicySpec) -> bool:
    """Whether the annotation follows NVIDIADrivers (``useNvidiaDriverCRD``, no sandbox)."""
    return bool(spec.driver.use_nvidia_driver_crd) and not spec.sandbox_workloads.is_enabled()


def _upgrade_annotation(
    labels: Mapping[str, str], spec: ClusterPolicySpec, drivers: Mapping[str, bool]
) -> bool | None:
    """Whether the node should carry the annotation; None: leave it as it is."""
    if uses_driver_crd(spec):
        return drivers.get(labels.get(DRIVER_OWNER_LABEL) or "")
    policy = spec.driver.upgrade_policy
    auto = bool(policy is not None and policy.auto_upgrade)
    return spec.driver.is_enabled() and auto and not spec.sandbox_workloads.is_enabled()


def node_patch(
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    spec: ClusterPolicySpec,
    drivers: Mapping[str, bool] | None = None,
) -> dict[str, Any] | None:
    """The merge patch that brings one node's labels to NVIDIA's rules (None: nothing to do).

    *drivers* is ``driver_auto_upgrades`` of the NVIDIADrivers (read with
    ``useNvidiaDriverCRD`` only).
    """
    want: dict[str, str | None] = {}
    present = labels.get(GPU_PRESENT_LABEL)
    if is_gpu_node_by_nfd(labels):
        present_now = "true"
    elif present == "true":
        present_now = "false"
    else:
        present_now = present or ""
    if present_now and present_now != present:
        want[GPU_PRESENT_LABEL] = present_now

    if present_now != "true" or labels.get(OPERANDS_LABEL) == "false":
        keep: tuple[str, ...] = ()
    else:
        keep = _wanted_deploy_labels(labels, spec)
    for label in keep:
        if not labels.get(label):
            want[label] = "true"
    config = workload_config(labels, spec) if present_now == "true" else ""
    killed = present_now != "true" or labels.get(OPERANDS_LABEL) == "false"
    for label in STATE_LABELS:
        if label in labels and label not in keep:
            if label == MIG_MANAGER_LABEL and config == WORKLOAD_CONTAINER and not killed:
                continue
            want[label] = None

    if (
        present_now == "true"
        and spec.mig_manager.is_enabled()
        and is_mig_capable(labels)
        and MIG_CONFIG_LABEL not in labels
        and (spec.mig_manager.config is None or spec.mig_manager.config.default == "all-disabled")
    ):
        want[MIG_CONFIG_LABEL] = "all-disabled"

    annotation: dict[str, str | None] = {}
    if present_now == "true":
        enabled = _upgrade_annotation(labels, spec, drivers or {})
        if enabled and annotations.get(UPGRADE_ENABLED_ANNOTATION) != "true":
            annotation[UPGRADE_ENABLED_ANNOTATION] = "true"
        elif enabled is False and UPGRADE_ENABLED_ANNOTATION in annotations:
            annotation[UPGRADE_ENABLED_ANNOTATION] = None

    if not want and not annotation:
        return None
    meta: dict[str, Any] = {}
    if want:
        meta["labels"] = want
    if annotation:
        meta["annotations"] = annotation
    return {"metadata": meta}


def dra_node_patch(labels: Mapping[str, str]) -> dict[str, Any] | None:
    """The merge patch for a node while a GPUCluster (the DRA stack) is active (None:
    nothing to do): ``nvidia.com/gpu.present`` as with a ClusterPolicy; on GPU nodes
    the DRA deploy labels (driver, dra-driver, dra-validator, dcgm-dra,
    dcgm-exporter-dra) set to ``true`` where absent or empty (a non-empty value, a
    pause, is kept); every other deploy label swept. The kill switch
    ``nvidia.com/gpu.deploy.operands=false`` sweeps them all (gpucluster.md §3)."""
    want: dict[str, str | None] = {}
    present = labels.get(GPU_PRESENT_LABEL)
    if is_gpu_node_by_nfd(labels):
        present_now = "true"
    elif present == "true":
        present_now = "false"
    else:
        present_now = present or ""
    if present_now and present_now != present:
        want[GPU_PRESENT_LABEL] = present_now
    killed = present_now != "true" or labels.get(OPERANDS_LABEL) == "false"
    keep: tuple[str, ...] = () if killed else DRA_LABELS
    for label in keep:
        if not labels.get(label):
            want[label] = "true"
    for label in STATE_LABELS:
        if label in labels and label not in keep:
            want[label] = None
    return {"metadata": {"labels": want}} if want else None
