"""GPUCluster (nvidia.com/v1alpha1, cluster-scoped singleton ``gpu-cluster``): the GPU
software stack for Dynamic Resource Allocation. It deploys NVIDIA's DRA driver (GPUs
and, when enabled, ComputeDomains) instead of the device plugin, optionally a
standalone DCGM host engine and the DCGM exporter, and a DRA validator; the GPU
driver itself is host-installed or comes from NVIDIADriver objects.

Field paths, defaults and the singleton rule are NVIDIA's (gpucluster.md §1-2).
The ``dcgm``, ``dcgmExporter`` and ``daemonsets`` blocks are ClusterPolicy's types.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal

from pydantic import ConfigDict, Field

from api.base import ApiModel, CustomResource, Int32, KindInfo, PrinterColumn, Rule
from api.nvidia import core_types as k8s
from api.nvidia.v1.clusterpolicy import (
    DaemonsetsSpec,
    DCGMExporterSpec,
    DCGMSpec,
    EnvVar,
    ResourceRequirements,
)

__all__ = [
    "DEFAULT_COMPUTE_DOMAINS_HEALTHCHECK_PORT",
    "DEFAULT_GPUS_HEALTHCHECK_PORT",
    "SINGLETON_MESSAGE",
    "SINGLETON_NAME",
    "STATE_DISABLED",
    "STATE_NOT_READY",
    "STATE_READY",
    "DRADriverComputeDomainsSpec",
    "DRADriverControllerSpec",
    "DRADriverGPUsSpec",
    "DRADriverHealthcheckSpec",
    "DRADriverKubeletPluginSpec",
    "DRADriverSpec",
    "GPUCluster",
    "GPUClusterSpec",
    "GPUClusterStatus",
    "HostPathsSpec",
]

STATE_READY: Final = "ready"
STATE_NOT_READY: Final = "notReady"
STATE_DISABLED: Final = "disabled"

SINGLETON_NAME: Final = "gpu-cluster"
SINGLETON_MESSAGE: Final = "GPUCluster is a singleton, metadata.name must be 'gpu-cluster'"

DEFAULT_GPUS_HEALTHCHECK_PORT: Final = 51516
DEFAULT_COMPUTE_DOMAINS_HEALTHCHECK_PORT: Final = 51515

Port = Annotated[Int32, Field(ge=1, le=65535)]


class DRADriverHealthcheckSpec(ApiModel):
    """The kubelet plugin's gRPC health check (startup and liveness probes)."""

    enabled: bool = True
    """`false` removes the probes and sets `HEALTHCHECK_PORT` to -1."""
    port: Port | None = None
    """Port (51516 for gpus, 51515 for computeDomains when unset)."""


class DRADriverKubeletPluginSpec(ApiModel):
    """One container of the kubelet plugin DaemonSet."""

    env: list[EnvVar] | None = None
    """Extra environment variables."""
    resources: ResourceRequirements | None = None
    """Container resources."""
    healthcheck: DRADriverHealthcheckSpec | None = None
    """Health check."""


class DRADriverControllerSpec(ApiModel):
    """The ComputeDomain controller Deployment."""

    env: list[EnvVar] | None = None
    """Extra environment variables."""
    resources: ResourceRequirements | None = None
    """Container resources."""


class DRADriverGPUsSpec(ApiModel):
    """The GPU capability of the DRA driver (always deployed)."""

    kubelet_plugin: DRADriverKubeletPluginSpec = Field(default_factory=DRADriverKubeletPluginSpec)
    """The `gpus` container of the kubelet plugin."""


class DRADriverComputeDomainsSpec(ApiModel):
    """The ComputeDomain capability (multi-node NVLink)."""

    enabled: bool = True
    """Deploy it (the CRD defaults `true` when the block is given; no block: off)."""
    controller: DRADriverControllerSpec = Field(default_factory=DRADriverControllerSpec)
    """The controller Deployment."""
    kubelet_plugin: DRADriverKubeletPluginSpec = Field(default_factory=DRADriverKubeletPluginSpec)
    """The `compute-domains` container of the kubelet plugin."""


class DRADriverSpec(ApiModel):
    """NVIDIA's DRA driver for GPUs."""

    repository: str | None = None
    """Image repository."""
    image: Annotated[str, Field(pattern=r"^[a-zA-Z0-9\-]+$")] | None = None
    """Image name."""
    version: str | None = None
    """Image tag."""
    image_pull_policy: str | None = None
    """Pull policy of every DRA container and of the validator."""
    image_pull_secrets: list[str] | None = None
    """Pull secrets of every DRA pod and of the validator."""
    feature_gates: dict[str, bool] | None = None
    """Driver feature gates (env `FEATURE_GATES`, `Name=bool,...` sorted)."""
    gpus: DRADriverGPUsSpec = Field(default_factory=DRADriverGPUsSpec)
    """The GPU capability."""
    compute_domains: DRADriverComputeDomainsSpec | None = None
    """The ComputeDomain capability."""

    image_env: ClassVar[str] = "DRA_DRIVER_IMAGE"
    """Operator-pod environment variable with the default driver image."""

    def compute_domains_enabled(self) -> bool:
        """NVIDIA's ``IsComputeDomainsEnabled``: only an explicit (or defaulted) true."""
        return self.compute_domains is not None and self.compute_domains.enabled


class HostPathsSpec(ApiModel):
    """Host paths the operands mount. Unknown keys (NVIDIA's sample writes
    `rootFS`) are dropped, as the API server prunes them."""

    model_config = ConfigDict(extra="ignore")

    driver_install_dir: str | None = None
    """Where the driver is installed on the host (`/run/nvidia/driver` when unset)."""
    kubelet_root_dir: str = "/var/lib/kubelet"
    """The kubelet's root directory."""


class GPUClusterSpec(ApiModel):
    """Desired state of the GPUCluster."""

    dra_driver: DRADriverSpec = Field(alias="draDriver")
    """The DRA driver (always deployed)."""
    dcgm: DCGMSpec | None = None
    """Standalone DCGM host engine (deployed only with `enabled: true`)."""
    dcgm_exporter: DCGMExporterSpec | None = None
    """DCGM exporter (deployed when given and not `enabled: false`)."""
    host_paths: HostPathsSpec = Field(default_factory=HostPathsSpec)
    """Host paths."""
    daemonsets: DaemonsetsSpec = Field(default_factory=DaemonsetsSpec)
    """Labels, annotations, tolerations and priority class of the operand pods."""

    def dcgm_enabled(self) -> bool:
        """NVIDIA's ``dcgmEnabled``: off unless `dcgm.enabled: true`."""
        return self.dcgm is not None and self.dcgm.enabled is True

    def dcgm_exporter_enabled(self) -> bool:
        """The exporter block is given and not `enabled: false`."""
        return self.dcgm_exporter is not None and self.dcgm_exporter.enabled is not False


class GPUClusterStatus(ApiModel):
    """Observed state of the GPUCluster."""

    state: Literal["ready", "notReady", "disabled"]
    """ready, notReady or disabled."""
    namespace: str | None = None
    """Operator namespace."""
    conditions: list[k8s.Condition] | None = None
    """Conditions (`Ready`, `Error`)."""


class GPUCluster(CustomResource):
    """The DRA-based GPU stack of the cluster (one object, named `gpu-cluster`)."""

    kind_info = KindInfo(
        group="nvidia.com",
        version="v1alpha1",
        kind="GPUCluster",
        plural="gpuclusters",
        scope="Cluster",
        short_names=("gc",),
        printer_columns=(
            PrinterColumn("Status", "string", ".status.state"),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )
    validations = (Rule(f"self.metadata.name == '{SINGLETON_NAME}'", SINGLETON_MESSAGE),)

    api_version: Literal["nvidia.com/v1alpha1"] = "nvidia.com/v1alpha1"
    kind: Literal["GPUCluster"] = "GPUCluster"
    spec: GPUClusterSpec
    """Desired state."""
    status: GPUClusterStatus | None = None
    """Observed state."""
