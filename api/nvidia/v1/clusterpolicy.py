"""ClusterPolicy (nvidia.com/v1, cluster-scoped): the GPU Operator's single
configuration object. Every component section (driver, toolkit, device plugin,
DCGM, DCGM exporter, GFD, MIG manager, validator, GDS, GDRCopy, sandbox
workloads and their operands, CDI, CC manager, host paths, ...) with NVIDIA's
CRD defaults, enums and patterns, the driver upgrade policy, status, states and
condition types and reasons.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Final, Literal

from pydantic import Field

from api.apps.v1alpha1.common import DURATION_PATTERN
from api.base import (
    ApiModel,
    CustomResource,
    Int32,
    Int64,
    IntOrString,
    KindInfo,
    PrinterColumn,
    Quantity,
    markers,
)
from api.nvidia import core_types as k8s

__all__ = [
    "CONDITION_ERROR",
    "CONDITION_READY",
    "REASON_CONFLICTING_NODE_SELECTOR",
    "REASON_DRIVER_NOT_READY",
    "REASON_IGNORED",
    "REASON_NFD_LABELS_MISSING",
    "REASON_NO_GPU_NODES",
    "REASON_OPERAND_NOT_READY",
    "REASON_RECONCILED",
    "REASON_RECONCILE_FAILED",
    "STATE_IGNORED",
    "STATE_NOT_READY",
    "STATE_READY",
    "CCManagerSpec",
    "CDIConfigSpec",
    "ClusterPolicy",
    "ClusterPolicySpec",
    "ClusterPolicyStatus",
    "ComponentSpec",
    "ContainerProbeSpec",
    "DCGMExporterSpec",
    "DCGMSpec",
    "DaemonsetsSpec",
    "DevicePluginSpec",
    "DrainSpec",
    "DriverManagerSpec",
    "DriverSpec",
    "DriverUpgradePolicySpec",
    "EnvVar",
    "GDRCopySpec",
    "GPUDirectRDMASpec",
    "GPUDirectStorageSpec",
    "GPUFeatureDiscoverySpec",
    "HostPathsSpec",
    "MIGManagerSpec",
    "MIGSpec",
    "OperatorSpec",
    "PodDeletionSpec",
    "ResourceRequirements",
    "SandboxWorkloadsSpec",
    "ToolkitSpec",
    "VGPUDeviceManagerSpec",
    "VGPUManagerSpec",
    "ValidatorSpec",
    "WaitForCompletionSpec",
]

STATE_IGNORED: Final = "ignored"
STATE_READY: Final = "ready"
STATE_NOT_READY: Final = "notReady"
CONDITION_READY: Final = "Ready"
CONDITION_ERROR: Final = "Error"
REASON_RECONCILED: Final = "Reconciled"
REASON_RECONCILE_FAILED: Final = "ReconcileFailed"
REASON_NFD_LABELS_MISSING: Final = "NFDLabelsMissing"
REASON_NO_GPU_NODES: Final = "NoGPUNodes"
REASON_OPERAND_NOT_READY: Final = "OperandNotReady"
REASON_DRIVER_NOT_READY: Final = "DriverNotReady"
REASON_CONFLICTING_NODE_SELECTOR: Final = "ConflictingNodeSelector"
REASON_IGNORED: Final = "Ignored"
"""Event reason (nimctl): this ClusterPolicy is not the active one (the oldest is)."""

IMAGE_NAME_PATTERN: Final = r"[a-zA-Z0-9\-]+"
ImageName = Annotated[str, Field(pattern=IMAGE_NAME_PATTERN)]
"""A component image name (without repository or tag)."""
Duration = Annotated[str, Field(pattern=DURATION_PATTERN)]
"""A Prometheus duration (`30s`, `1m30s`)."""


class EnvVar(ApiModel):
    """An environment variable set on a component's main container."""

    name: str
    """Variable name."""
    value: str | None = None
    """Variable value."""


class ResourceRequirements(ApiModel):
    """Resources of a component's main container."""

    limits: dict[str, Quantity] | None = None
    """Limits."""
    requests: dict[str, Quantity] | None = None
    """Requests."""


class ImageSpec(ApiModel):
    """Image fields every component has: `repository/image:version` (all three, or
    `image` alone, or none for the operator's default)."""

    repository: str | None = None
    """Image repository."""
    image: ImageName | None = None
    """Image name."""
    version: str | None = None
    """Image tag (or `sha256:` digest)."""
    image_pull_policy: str | None = None
    """Always, Never or IfNotPresent (anything else means IfNotPresent)."""
    image_pull_secrets: list[str] | None = None
    """Image pull secrets."""

    image_env: ClassVar[str | None] = None
    """Operator-pod environment variable with the default image of this component."""

    def image_path(self, env: Mapping[str, str]) -> str:
        """The image to run, as NVIDIA resolves it: `image` alone as written, else
        `repository/image:version` (`@version` for a `sha256:` digest), else the
        operator pod's environment variable ``image_env`` (``env`` is that
        environment). ValueError when none of them gives an image."""
        repository, image, version = self.repository or "", self.image or "", self.version or ""
        if not repository and not version and image:
            return image
        if repository or image or version:
            if not (repository and image and version):
                raise ValueError(
                    "invalid image specification: repository, image and version must all "
                    f"be set (got repository={repository!r}, image={image!r}, "
                    f"version={version!r})"
                )
            separator = "@" if version.startswith("sha256:") else ":"
            return f"{repository}/{image}{separator}{version}"
        from_env = env.get(self.image_env or "", "") if self.image_env else ""
        if from_env:
            return from_env
        raise ValueError(
            f"empty image path provided through both ClusterPolicy CR and ENV {self.image_env}"
        )


class ComponentSpec(ImageSpec):
    """Fields shared by the operand components."""

    enabled: bool | None = None
    """Deploy this component (unset: the component's default)."""
    resources: ResourceRequirements | None = None
    """Main container resources."""
    args: list[str] | None = None
    """Main container arguments (replace the default ones)."""
    env: list[EnvVar] | None = None
    """Environment variables set on the main container."""
    host_network: bool | None = None
    """Run in the host network namespace (with `ClusterFirstWithHostNet` DNS)."""

    default_enabled: ClassVar[bool] = False
    """Whether the component is deployed when `enabled` is unset (NVIDIA's IsEnabled)."""

    def is_enabled(self) -> bool:
        """`enabled`, or the component's default when it is unset."""
        return self.default_enabled if self.enabled is None else self.enabled


class RelabelConfig(ApiModel):
    """A Prometheus relabeling rule (monitoring.coreos.com/v1 RelabelConfig)."""

    source_labels: list[Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")]] | None = None
    """Labels whose values are concatenated."""
    separator: str | None = None
    """Separator of the concatenated values."""
    target_label: str | None = None
    """Label the result is written to."""
    regex: str | None = None
    """Regular expression matched against the concatenated value."""
    modulus: Int64 | None = None
    """Modulus for `hashmod`."""
    replacement: str | None = None
    """Replacement value."""
    action: Literal[
        "replace",
        "Replace",
        "keep",
        "Keep",
        "drop",
        "Drop",
        "hashmod",
        "HashMod",
        "labelmap",
        "LabelMap",
        "labeldrop",
        "LabelDrop",
        "labelkeep",
        "LabelKeep",
        "lowercase",
        "Lowercase",
        "uppercase",
        "Uppercase",
        "keepequal",
        "KeepEqual",
        "dropequal",
        "DropEqual",
    ] = "replace"
    """Relabeling action."""


class OperatorServiceMonitor(ApiModel):
    """ServiceMonitor of the operator's own metrics."""

    enabled: bool | None = None
    """Deploy the ServiceMonitor."""
    interval: Duration | None = None
    """Scrape interval."""
    scrape_timeout: Duration | None = None
    """Scrape timeout."""
    honor_labels: bool | None = None
    """Keep the metric's labels on collisions."""
    additional_labels: dict[str, str] | None = None
    """Extra labels on the ServiceMonitor."""
    relabelings: list[RelabelConfig] | None = None
    """Relabeling rules."""


class OperatorMetrics(ApiModel):
    """Metrics of the operator."""

    service_monitor: OperatorServiceMonitor | None = None
    """ServiceMonitor."""


class OperatorSpec(ApiModel):
    """Operator-wide settings."""

    default_runtime: Literal["docker", "crio", "containerd"] = Field(
        default="docker", json_schema_extra=markers(required=True)
    )
    """Deprecated and ignored."""
    runtime_class: str = "nvidia"
    """RuntimeClass the operands use."""
    init_container: ImageSpec = Field(default_factory=ImageSpec)
    """Deprecated: init container image."""
    labels: dict[str, str] | None = None
    """Extra labels on the operator's objects."""
    annotations: dict[str, str] | None = None
    """Extra annotations on the operator's objects."""
    use_ocp_driver_toolkit: bool | None = Field(default=None, alias="use_ocp_driver_toolkit")
    """Build drivers with the OpenShift Driver Toolkit (unset: on when on OpenShift)."""
    metrics: OperatorMetrics | None = None
    """Operator metrics."""


class RollingUpdateSpec(ApiModel):
    """Rolling update of the operand DaemonSets."""

    max_unavailable: str | None = None
    """Pods that may be unavailable during the update (a number or a percentage)."""


class DaemonsetsSpec(ApiModel):
    """Settings applied to every operand DaemonSet."""

    labels: dict[str, str] | None = None
    """Extra pod labels (`app` and `app.kubernetes.io/part-of` are ignored)."""
    annotations: dict[str, str] | None = None
    """Extra pod annotations."""
    tolerations: list[k8s.Toleration] | None = None
    """Pod tolerations."""
    priority_class_name: str | None = None
    """Pod priorityClassName."""
    update_strategy: Literal["RollingUpdate", "OnDelete"] = "RollingUpdate"
    """DaemonSet update strategy."""
    rolling_update: RollingUpdateSpec | None = None
    """Rolling update settings."""
    pod_security_context: k8s.PodSecurityContext | None = None
    """Pod security context."""


class ContainerProbeSpec(ApiModel):
    """Timing of a driver container probe."""

    initial_delay_seconds: Int32 | None = None
    """Seconds before the first probe."""
    timeout_seconds: Annotated[Int32, Field(ge=1)] | None = None
    """Probe timeout."""
    period_seconds: Annotated[Int32, Field(ge=1)] | None = None
    """Seconds between probes."""
    success_threshold: Annotated[Int32, Field(ge=1)] | None = None
    """Consecutive successes to pass."""
    failure_threshold: Annotated[Int32, Field(ge=1)] | None = None
    """Consecutive failures to fail."""


class GPUDirectRDMASpec(ApiModel):
    """GPUDirect RDMA (nvidia-peermem)."""

    enabled: bool | None = None
    """Load nvidia-peermem."""
    use_host_mofed: bool | None = None
    """MOFED is installed on the host (not by the Network Operator)."""


class PodDeletionSpec(ApiModel):
    """Deleting GPU pods before a driver upgrade."""

    force: bool = False
    """Delete pods not managed by a controller."""
    timeout_seconds: Annotated[int, Field(ge=0)] = 300
    """Seconds to wait for the deletion (0: forever)."""
    delete_empty_dir: bool = False
    """Delete pods that use emptyDir volumes."""


class WaitForCompletionSpec(ApiModel):
    """Waiting for jobs to finish before a driver upgrade."""

    pod_selector: str | None = None
    """Label selector of the pods to wait for."""
    timeout_seconds: Annotated[int, Field(ge=0)] = 0
    """Seconds to wait (0: forever)."""


class DrainSpec(ApiModel):
    """Draining the node before a driver upgrade."""

    enable: bool = False
    """Drain the node."""
    force: bool = False
    """Delete pods not managed by a controller."""
    pod_selector: str | None = None
    """Label selector of the pods to evict."""
    timeout_seconds: Annotated[int, Field(ge=0)] = 300
    """Seconds to wait for the drain (0: forever)."""
    delete_empty_dir: bool = False
    """Delete pods that use emptyDir volumes."""


class DriverUpgradePolicySpec(ApiModel):
    """Automatic driver upgrades, node by node."""

    auto_upgrade: bool = False
    """Upgrade drivers automatically."""
    max_parallel_upgrades: Annotated[int, Field(ge=0)] = 1
    """Nodes upgraded at once (0: no limit)."""
    max_unavailable: IntOrString = "25%"
    """Nodes that may be unavailable during the upgrade (a number or a percentage)."""
    pod_deletion: PodDeletionSpec | None = None
    """GPU pod deletion."""
    wait_for_completion: WaitForCompletionSpec | None = None
    """Waiting for jobs."""
    drain: DrainSpec | None = None
    """Node drain."""


class DriverManagerSpec(ImageSpec):
    """The k8s-driver-manager init container."""

    image_env = "DRIVER_MANAGER_IMAGE"

    env: list[EnvVar] | None = None
    """Environment variables."""


class DriverRepoConfigSpec(ApiModel):
    """Custom package repository configuration."""

    config_map_name: str | None = None
    """ConfigMap with the repository files."""


class ConfigMapName(ApiModel):
    """A ConfigMap by name."""

    name: str | None = None
    """ConfigMap name."""


class DriverLicensingConfigSpec(ApiModel):
    """vGPU licensing."""

    config_map_name: str | None = None
    """Deprecated: ConfigMap with `gridd.conf` (use `secretName`)."""
    secret_name: str | None = None
    """Secret with `gridd.conf` and the client token."""
    nls_enabled: bool | None = Field(default=None, alias="nlsEnabled")
    """Use the NVIDIA License System."""


class VirtualTopologyConfigSpec(ApiModel):
    """vGPU virtual topology daemon configuration."""

    config: str | None = None
    """ConfigMap with the topology configuration."""


class DriverSpec(ComponentSpec):
    """The NVIDIA driver DaemonSet."""

    image_env = "DRIVER_IMAGE"
    default_enabled = True

    use_nvidia_driver_crd: bool | None = Field(default=None, alias="useNvidiaDriverCRD")
    """Manage drivers with NVIDIADriver objects instead."""
    use_precompiled: bool | None = None
    """Use precompiled kernel modules."""
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
    upgrade_policy: DriverUpgradePolicySpec | None = None
    """Automatic upgrades."""
    manager: DriverManagerSpec = Field(default_factory=DriverManagerSpec)
    """Driver manager init container."""
    repo_config: DriverRepoConfigSpec | None = None
    """Custom package repositories."""
    cert_config: ConfigMapName | None = None
    """Custom CA certificates."""
    licensing_config: DriverLicensingConfigSpec | None = None
    """vGPU licensing."""
    virtual_topology: VirtualTopologyConfigSpec | None = None
    """vGPU virtual topology."""
    kernel_module_config: ConfigMapName | None = None
    """Kernel module parameters."""
    secret_env: str | None = None
    """Secret with extra environment variables for the driver."""


class ToolkitSpec(ComponentSpec):
    """The NVIDIA Container Toolkit DaemonSet."""

    image_env = "CONTAINER_TOOLKIT_IMAGE"
    default_enabled = True

    install_dir: str = "/usr/local/nvidia"
    """Install directory on the host."""


class DevicePluginConfig(ApiModel):
    """Device plugin configuration ConfigMap (shared with GFD)."""

    name: str | None = None
    """ConfigMap name."""
    default: str | None = None
    """Default configuration in the ConfigMap."""


class MPSConfig(ApiModel):
    """MPS settings of the device plugin."""

    root: str = "/run/nvidia/mps"
    """MPS root on the host."""


class DevicePluginSpec(ComponentSpec):
    """The NVIDIA device plugin DaemonSet."""

    image_env = "DEVICE_PLUGIN_IMAGE"
    default_enabled = True

    config: DevicePluginConfig | None = None
    """Configuration ConfigMap."""
    mps: MPSConfig | None = None
    """MPS."""


class SandboxDevicePluginSpec(ComponentSpec):
    """The KubeVirt GPU device plugin (sandbox workloads)."""

    image_env = "SANDBOX_DEVICE_PLUGIN_IMAGE"
    default_enabled = False


class KataDevicePluginSpec(ComponentSpec):
    """The Kata sandbox device plugin (sandbox workloads, Kata mode)."""

    image_env = "KATA_SANDBOX_DEVICE_PLUGIN_IMAGE"
    default_enabled = False


class DCGMExporterMetricsConfig(ApiModel):
    """ConfigMap with `dcgm-metrics.csv`."""

    name: str | None = None
    """ConfigMap name."""


class DCGMExporterServiceMonitorConfig(ApiModel):
    """ServiceMonitor of DCGM exporter."""

    enabled: bool | None = None
    """Deploy the ServiceMonitor."""
    interval: Duration | None = None
    """Scrape interval."""
    scrape_timeout: Duration | None = None
    """Scrape timeout."""
    honor_labels: bool | None = None
    """Keep the metric's labels on collisions."""
    additional_labels: dict[str, str] | None = None
    """Extra labels on the ServiceMonitor."""
    relabelings: list[RelabelConfig] | None = None
    """Relabeling rules."""


class DCGMExporterServiceConfig(ApiModel):
    """The DCGM exporter Service."""

    type: str | None = None
    """Service type."""
    internal_traffic_policy: str | None = None
    """Internal traffic policy (Cluster or Local)."""


class DCGMExporterHPCJobMappingConfig(ApiModel):
    """HPC job mapping of DCGM exporter."""

    enabled: bool | None = None
    """Label metrics with HPC job ids."""
    directory: str | None = None
    """Directory of the job mapping files (default `/var/lib/dcgm-exporter/job-mapping`)."""


class DCGMExporterSpec(ComponentSpec):
    """The DCGM exporter DaemonSet."""

    image_env = "DCGM_EXPORTER_IMAGE"
    default_enabled = True

    annotations: dict[str, str] | None = None
    """Extra pod annotations."""
    pod_annotations: dict[str, str] | None = None
    """Extra pod annotations."""
    pod_labels: dict[str, str] | None = None
    """Extra pod labels."""
    config: DCGMExporterMetricsConfig | None = None
    """Metrics to collect."""
    service_monitor: DCGMExporterServiceMonitorConfig | None = None
    """ServiceMonitor."""
    service: DCGMExporterServiceConfig | None = None
    """Service."""
    host_pid: bool | None = Field(default=None, alias="hostPID")
    """Use the host PID namespace."""
    hpc_job_mapping: DCGMExporterHPCJobMappingConfig | None = None
    """HPC job mapping."""
    enable_pod_labels: bool | None = None
    """Add pod labels to the metrics."""
    enable_pod_uid: bool | None = Field(default=None, alias="enablePodUID")
    """Add the pod UID to the metrics."""
    pod_label_allowlist_regex: list[str] | None = None
    """Pod labels (regular expressions) added to the metrics."""


class DCGMSpec(ComponentSpec):
    """The standalone DCGM host engine."""

    image_env = "DCGM_IMAGE"
    default_enabled = True

    host_port: Int32 | None = None
    """Deprecated: host port of the host engine (5555)."""


class NodeStatusExporterSpec(ComponentSpec):
    """The node status exporter DaemonSet."""

    image_env = "VALIDATOR_IMAGE"
    default_enabled = False


class GPUFeatureDiscoverySpec(ComponentSpec):
    """The GPU feature discovery DaemonSet."""

    image_env = "GFD_IMAGE"
    default_enabled = True


class MIGSpec(ApiModel):
    """MIG strategy for the device plugin and GFD."""

    strategy: Literal["none", "single", "mixed"] | None = None
    """MIG strategy."""


class MIGPartedConfigSpec(ApiModel):
    """MIG manager configuration ConfigMap."""

    name: str | None = None
    """ConfigMap name. If not specified, MIG configuration will be dynamically generated
    from hardware (the default ConfigMap is mounted as mig-manager's fallback)."""
    default: Literal["all-disabled", ""] = "all-disabled"
    """Configuration applied when a node has no MIG config label."""


class MIGManagerSpec(ComponentSpec):
    """The MIG manager DaemonSet."""

    image_env = "MIG_MANAGER_IMAGE"
    default_enabled = True

    config: MIGPartedConfigSpec | None = None
    """MIG configurations."""
    gpu_clients_config: ConfigMapName | None = Field(default=None, alias="gpuClientsConfig")
    """GPU clients to restart around a reconfiguration."""


class PSPSpec(ApiModel):
    """Deprecated: PodSecurityPolicies."""

    enabled: bool | None = None
    """Create PodSecurityPolicies."""


class PSASpec(ApiModel):
    """Pod Security Admission labels on the operator namespace."""

    enabled: bool | None = None
    """Label the namespace `privileged`."""

    def is_enabled(self) -> bool:
        """`enabled`; off when it is unset."""
        return bool(self.enabled)


class ValidatorComponentSpec(ApiModel):
    """Environment of one validation step."""

    env: list[EnvVar] | None = None
    """Environment variables."""


class ValidatorSpec(ImageSpec):
    """The operator validator DaemonSet."""

    image_env = "VALIDATOR_IMAGE"

    plugin: ValidatorComponentSpec | None = None
    """Device plugin validation."""
    toolkit: ValidatorComponentSpec | None = None
    """Toolkit validation."""
    driver: ValidatorComponentSpec | None = None
    """Driver validation."""
    cuda: ValidatorComponentSpec | None = None
    """CUDA workload validation."""
    vfio_pci: ValidatorComponentSpec | None = Field(default=None, alias="vfioPCI")
    """VFIO-PCI validation."""
    vgpu_manager: ValidatorComponentSpec | None = None
    """vGPU manager validation."""
    vgpu_devices: ValidatorComponentSpec | None = None
    """vGPU devices validation."""
    resources: ResourceRequirements | None = None
    """Main container resources."""
    args: list[str] | None = None
    """Main container arguments."""
    env: list[EnvVar] | None = None
    """Environment variables."""


class GPUDirectStorageSpec(ComponentSpec):
    """GPUDirect Storage (nvidia-fs) driver sidecar."""

    image_env = "GDS_IMAGE"
    default_enabled = False


class GDRCopySpec(ComponentSpec):
    """GDRCopy driver sidecar."""

    image_env = "GDRCOPY_IMAGE"
    default_enabled = False

    use_precompiled: bool | None = None
    """Use precompiled gdrdrv modules."""


class SandboxWorkloadsSpec(ApiModel):
    """Sandbox workloads (virtual machines)."""

    enabled: bool | None = None
    """Manage the sandbox operands."""
    default_workload: Literal["container", "vm-passthrough", "vm-vgpu"] = "container"
    """Workload a node is configured for when it has no workload label."""
    mode: Literal["kubevirt", "kata"] = "kubevirt"
    """Sandbox technology."""

    def is_enabled(self) -> bool:
        """`enabled`; sandbox workloads are off when it is unset."""
        return bool(self.enabled)


class VFIOManagerSpec(ComponentSpec):
    """The VFIO-PCI manager DaemonSet."""

    image_env = "VFIO_MANAGER_IMAGE"
    default_enabled = False

    driver_manager: DriverManagerSpec | None = None
    """Driver manager init container."""


class VGPUManagerSpec(ComponentSpec):
    """The vGPU manager (host driver) DaemonSet."""

    image_env = "VGPU_MANAGER_IMAGE"
    default_enabled = False

    driver_manager: DriverManagerSpec | None = None
    """Driver manager init container."""
    kernel_module_config: ConfigMapName | None = None
    """Kernel module parameters."""


class VGPUDevicesConfigSpec(ApiModel):
    """vGPU device configuration ConfigMap."""

    name: str | None = None
    """ConfigMap name."""
    default: str = "default"
    """Configuration applied when a node has no vGPU config label."""


class VGPUDeviceManagerSpec(ComponentSpec):
    """The vGPU device manager DaemonSet."""

    image_env = "VGPU_DEVICE_MANAGER_IMAGE"
    default_enabled = False

    config: VGPUDevicesConfigSpec | None = None
    """vGPU device configurations."""


class CDIConfigSpec(ApiModel):
    """Container Device Interface."""

    enabled: bool = True
    """Use CDI to inject GPUs."""
    default: bool = False
    """Deprecated and ignored."""
    nri_plugin_enabled: bool = Field(default=False, alias="nriPluginEnabled")
    """Inject devices with the toolkit's NRI plugin (needs CDI and the toolkit)."""


class KataArtifacts(ApiModel):
    """The OCI artifact holding a kata runtime class's payload."""

    url: str
    """Path of the OCI artifact."""
    pull_secret: str | None = None
    """Secret used to pull the artifact."""


class KataRuntimeClass(ApiModel):
    """One kata RuntimeClass to configure."""

    name: str
    """Name of the runtime class."""
    node_selector: dict[str, str] | None = None
    """nodeSelector of the RuntimeClass object."""
    artifacts: KataArtifacts
    """Kata artifacts of the runtime class."""


class KataManagerConfig(ApiModel):
    """Kata manager configuration (NVIDIA's k8s-kata-manager Config)."""

    artifacts_dir: str = "/opt/nvidia-gpu-operator/artifacts/runtimeclasses"
    """Where kata artifacts are placed on the host."""
    runtime_classes: list[KataRuntimeClass] | None = None
    """Kata runtime classes to configure."""


class KataManagerSpec(ComponentSpec):
    """Deprecated: the Kata manager (never deployed)."""

    image_env = "KATA_MANAGER_IMAGE"
    default_enabled = False

    config: KataManagerConfig | None = None
    """Kata manager configuration."""


class CCManagerSpec(ComponentSpec):
    """The confidential computing manager DaemonSet."""

    image_env = "CC_MANAGER_IMAGE"
    default_enabled = False

    default_mode: Literal["on", "off", "devtools"] | None = None
    """CC mode applied when a node has no CC mode label."""


class HostPathsSpec(ApiModel):
    """Host paths the operands use."""

    root_fs: str | None = Field(default=None, alias="rootFS")
    """Host root filesystem (chroot-able)."""
    driver_install_dir: str | None = None
    """Where the driver files are on the host."""
    kubelet_root_dir: str = "/var/lib/kubelet"
    """Kubelet root directory."""


class ClusterPolicySpec(ApiModel):
    """Desired state of the GPU Operator."""

    operator: OperatorSpec
    """Operator settings."""
    daemonsets: DaemonsetsSpec
    """Settings of every operand DaemonSet."""
    driver: DriverSpec
    """NVIDIA driver."""
    toolkit: ToolkitSpec
    """NVIDIA Container Toolkit."""
    device_plugin: DevicePluginSpec
    """Device plugin."""
    dcgm_exporter: DCGMExporterSpec = Field(alias="dcgmExporter")
    """DCGM exporter."""
    dcgm: DCGMSpec
    """Standalone DCGM host engine."""
    node_status_exporter: NodeStatusExporterSpec
    """Node status exporter."""
    gfd: GPUFeatureDiscoverySpec
    """GPU feature discovery."""
    mig: MIGSpec = Field(default_factory=MIGSpec)
    """MIG strategy."""
    mig_manager: MIGManagerSpec = Field(default_factory=MIGManagerSpec)
    """MIG manager."""
    psp: PSPSpec = Field(default_factory=PSPSpec)
    """Deprecated: PodSecurityPolicies."""
    psa: PSASpec = Field(default_factory=PSASpec)
    """Pod Security Admission."""
    validator: ValidatorSpec = Field(default_factory=ValidatorSpec)
    """Operator validator."""
    gds: GPUDirectStorageSpec | None = None
    """GPUDirect Storage."""
    gdrcopy: GDRCopySpec | None = None
    """GDRCopy."""
    sandbox_workloads: SandboxWorkloadsSpec = Field(default_factory=SandboxWorkloadsSpec)
    """Sandbox workloads."""
    vfio_manager: VFIOManagerSpec = Field(default_factory=VFIOManagerSpec)
    """VFIO-PCI manager."""
    sandbox_device_plugin: SandboxDevicePluginSpec = Field(default_factory=SandboxDevicePluginSpec)
    """KubeVirt device plugin."""
    vgpu_manager: VGPUManagerSpec = Field(default_factory=VGPUManagerSpec)
    """vGPU manager."""
    vgpu_device_manager: VGPUDeviceManagerSpec = Field(default_factory=VGPUDeviceManagerSpec)
    """vGPU device manager."""
    cdi: CDIConfigSpec = Field(default_factory=CDIConfigSpec)
    """Container Device Interface."""
    kata_manager: KataManagerSpec = Field(default_factory=KataManagerSpec)
    """Deprecated: Kata manager."""
    cc_manager: CCManagerSpec = Field(default_factory=CCManagerSpec)
    """Confidential computing manager."""
    host_paths: HostPathsSpec = Field(default_factory=HostPathsSpec)
    """Host paths."""
    kata_sandbox_device_plugin: KataDevicePluginSpec = Field(default_factory=KataDevicePluginSpec)
    """Kata sandbox device plugin."""


class ClusterPolicyStatus(ApiModel):
    """Observed state of the GPU Operator."""

    state: Literal["ignored", "ready", "notReady"]
    """ready, notReady, or ignored (not the active ClusterPolicy)."""
    namespace: str | None = None
    """Operator namespace."""
    conditions: list[k8s.Condition] | None = None
    """Conditions (`Ready`, `Error`)."""


class ClusterPolicy(CustomResource):
    """The GPU Operator configuration (one per cluster)."""

    kind_info = KindInfo(
        group="nvidia.com",
        version="v1",
        kind="ClusterPolicy",
        plural="clusterpolicies",
        scope="Cluster",
        printer_columns=(
            PrinterColumn("Status", "string", ".status.state"),
            # NVIDIA declares Age as a string column (kubectl then prints the timestamp).
            PrinterColumn("Age", "string", ".metadata.creationTimestamp"),
        ),
    )

    api_version: Literal["nvidia.com/v1"] = "nvidia.com/v1"
    kind: Literal["ClusterPolicy"] = "ClusterPolicy"
    spec: ClusterPolicySpec
    """Desired state."""
    status: ClusterPolicyStatus | None = None
    """Observed state."""
