"""NVIDIADriver (nvidia.com/v1alpha1, cluster-scoped): one NVIDIA driver
configuration for the nodes its selector picks (when ClusterPolicy sets
`driver.useNvidiaDriverCRD`); spec with the immutable driver type and precompiled
switch, upgrade policy, scheduling, status and states.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from api.base import ApiModel, CustomResource, KindInfo, PrinterColumn, Rule, markers
from api.nvidia import core_types as k8s
from api.nvidia.v1.clusterpolicy import (
    ConfigMapName,
    ContainerProbeSpec,
    DriverManagerSpec,
    DriverUpgradePolicySpec,
    EnvVar,
    GDRCopySpec,
    GPUDirectRDMASpec,
    GPUDirectStorageSpec,
    ResourceRequirements,
)

__all__ = [
    "DEFAULT_NODE_SELECTOR_MESSAGE",
    "DRIVER_TYPE_IMMUTABLE_MESSAGE",
    "STATE_DISABLED",
    "STATE_NOT_READY",
    "STATE_READY",
    "USE_PRECOMPILED_IMMUTABLE_MESSAGE",
    "DriverLicensingConfigSpec",
    "NVIDIADriver",
    "NVIDIADriverSpec",
    "NVIDIADriverStatus",
    "NVIDIADriverUpgradePolicySpec",
]

STATE_READY: Final = "ready"
STATE_NOT_READY: Final = "notReady"
STATE_DISABLED: Final = "disabled"

DRIVER_TYPE_IMMUTABLE_MESSAGE: Final = (
    "driverType is an immutable field. Please create a new NvidiaDriver resource instead "
    "when you want to change this setting."
)
USE_PRECOMPILED_IMMUTABLE_MESSAGE: Final = (
    "usePrecompiled is an immutable field. Please create a new NvidiaDriver resource instead "
    "when you want to change this setting."
)
DEFAULT_NODE_SELECTOR_MESSAGE: Final = "default NVIDIADriver must not use nodeSelector"


class NVIDIADriverUpgradePolicySpec(DriverUpgradePolicySpec):
    """Automatic driver upgrades of this driver's nodes (on by default)."""

    auto_upgrade: bool = True
    """Upgrade drivers automatically."""


class DriverLicensingConfigSpec(ApiModel):
    """vGPU licensing."""

    name: str | None = None
    """Deprecated: ConfigMap with `gridd.conf` (use `secretName`)."""
    secret_name: str | None = None
    """Secret with `gridd.conf` and the client token."""
    nls_enabled: bool | None = Field(default=None, alias="nlsEnabled")
    """Use the NVIDIA License System."""


class NVIDIADriverSpec(ApiModel):
    """Desired state of an NVIDIADriver."""

    validations = (
        Rule(
            "has(self.default) && self.default ? !has(self.nodeSelector) || "
            "size(self.nodeSelector) == 0 : true",
            DEFAULT_NODE_SELECTOR_MESSAGE,
        ),
    )

    default: bool = False
    """The default driver, for nodes no other NVIDIADriver selects."""
    driver_type: Literal["gpu", "vgpu", "vgpu-host-manager"] = Field(
        default="gpu",
        json_schema_extra=markers(
            validations=[Rule("self == oldSelf", DRIVER_TYPE_IMMUTABLE_MESSAGE)], required=True
        ),
    )
    """Driver type (immutable)."""
    use_precompiled: bool | None = Field(
        default=None,
        json_schema_extra=markers(
            validations=[Rule("self == oldSelf", USE_PRECOMPILED_IMMUTABLE_MESSAGE)]
        ),
    )
    """Use precompiled kernel modules (immutable)."""
    use_open_kernel_modules: bool | None = None
    """Deprecated: use `kernelModuleType`."""
    kernel_module_type: Literal["auto", "open", "proprietary"] = "auto"
    """Kernel module flavour."""
    startup_probe: ContainerProbeSpec | None = None
    """Driver container startup probe."""
    liveness_probe: ContainerProbeSpec | None = None
    """Driver container liveness probe."""
    readiness_probe: ContainerProbeSpec | None = None
    """Driver container readiness probe."""
    rdma: GPUDirectRDMASpec | None = None
    """GPUDirect RDMA."""
    gds: GPUDirectStorageSpec | None = None
    """GPUDirect Storage driver."""
    gdrcopy: GDRCopySpec | None = None
    """GDRCopy driver."""
    repository: str | None = None
    """Driver image repository."""
    image: str = Field(default="nvcr.io/nvidia/driver", json_schema_extra=markers(required=True))
    """Driver image."""
    version: str | None = None
    """Driver version (the branch for precompiled drivers)."""
    image_pull_policy: str | None = None
    """Image pull policy."""
    image_pull_secrets: list[str] | None = None
    """Image pull secrets."""
    manager: DriverManagerSpec = Field(default_factory=DriverManagerSpec)
    """Driver manager init container."""
    resources: ResourceRequirements | None = None
    """Driver container resources."""
    args: list[str] | None = None
    """Driver container arguments."""
    env: list[EnvVar] | None = None
    """Driver container environment."""
    repo_config: ConfigMapName | None = None
    """Custom package repositories."""
    cert_config: ConfigMapName | None = None
    """Custom CA certificates."""
    licensing_config: DriverLicensingConfigSpec | None = None
    """vGPU licensing."""
    virtual_topology_config: ConfigMapName | None = None
    """vGPU virtual topology."""
    kernel_module_config: ConfigMapName | None = None
    """Kernel module parameters."""
    secret_env: str | None = None
    """Secret with extra environment variables for the driver."""
    upgrade_policy: NVIDIADriverUpgradePolicySpec | None = None
    """Automatic upgrades."""
    node_selector: dict[str, str] | None = None
    """Nodes this driver is installed on."""
    node_affinity: k8s.NodeAffinity | None = None
    """Node affinity of the driver pods."""
    labels: dict[str, str] | None = None
    """Extra pod labels."""
    annotations: dict[str, str] | None = None
    """Extra pod annotations."""
    tolerations: list[k8s.Toleration] | None = None
    """Pod tolerations."""
    priority_class_name: str | None = None
    """Pod priorityClassName."""
    pod_security_context: k8s.PodSecurityContext | None = None
    """Pod security context."""
    host_network: bool | None = None
    """Run in the host network namespace."""


class NVIDIADriverStatus(ApiModel):
    """Observed state of an NVIDIADriver."""

    state: Literal["ignored", "ready", "notReady", "disabled"]
    """ready, notReady or disabled (disabled: ClusterPolicy does not use NVIDIADriver)."""
    namespace: str | None = None
    """Operator namespace."""
    conditions: list[k8s.Condition] | None = None
    """Conditions (`Ready`, `Error`)."""


class NVIDIADriver(CustomResource):
    """An NVIDIA driver configuration for a pool of nodes."""

    kind_info = KindInfo(
        group="nvidia.com",
        version="v1alpha1",
        kind="NVIDIADriver",
        plural="nvidiadrivers",
        scope="Cluster",
        short_names=("nvd", "nvdriver", "nvdrivers"),
        printer_columns=(
            PrinterColumn("Status", "string", ".status.state"),
            PrinterColumn("Default", "boolean", ".spec.default"),
            PrinterColumn("Age", "string", ".metadata.creationTimestamp"),
        ),
    )

    api_version: Literal["nvidia.com/v1alpha1"] = "nvidia.com/v1alpha1"
    kind: Literal["NVIDIADriver"] = "NVIDIADriver"
    spec: NVIDIADriverSpec
    """Desired state."""
    status: NVIDIADriverStatus | None = None
    """Observed state."""
