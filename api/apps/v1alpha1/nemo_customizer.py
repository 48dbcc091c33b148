"""NemoCustomizer (apps.nvidia.com/v1alpha1): the NeMo Customizer service, which
fine-tunes models with training jobs scheduled by Volcano or Run:ai; spec
(training, model download jobs, model configuration, W&B, MLflow, scheduler,
OpenTelemetry), status, ports, labels and finalizer.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from api.apps.v1alpha1 import core_types as k8s
from api.apps.v1alpha1.common import HFSecret, Image, NGCSecret, PersistentVolumeClaim
from api.apps.v1alpha1.nemo_common import (
    ConfigMapRef,
    DatabaseConfig,
    Datastore,
    Entitystore,
    MLFlow,
    NemoServiceSpec,
    NemoServiceStatus,
    NonEmpty,
    OTelSpec,
    WandBConfig,
)
from api.base import ApiModel, CustomResource, KindInfo, Quantity

__all__ = [
    "API_PORT",
    "FINALIZER",
    "INTERNAL_PORT",
    "NAMED_PORT_INTERNAL",
    "PART_OF",
    "SCHEDULER_RUNAI",
    "SCHEDULER_VOLCANO",
    "ModelDownloadJobsConfig",
    "NemoCustomizer",
    "NemoCustomizerSpec",
    "NemoCustomizerStatus",
    "NemoDatastoreToolsConfig",
    "Scheduler",
    "TrainingConfig",
    "WorkspacePVCConfig",
]

FINALIZER: Final = "finalizer.nemocustomizer.apps.nvidia.com"
PART_OF: Final = "nemo-customizer-service"
"""Value of the `app.kubernetes.io/part-of` label."""
API_PORT: Final = 8000
INTERNAL_PORT: Final = 9009
"""Port the training jobs report progress to."""
NAMED_PORT_INTERNAL: Final = "internal"
SCHEDULER_VOLCANO: Final = "volcano"
SCHEDULER_RUNAI: Final = "runai"


class WorkspacePVCConfig(ApiModel):
    """The per-job workspace PVC the training jobs create."""

    storage_class: str | None = None
    """StorageClass (empty: the cluster default)."""
    size: str | None = None
    """Size, e.g. `10Gi`."""
    volume_access_mode: str | None = None
    """Access mode."""
    mount_path: str = "/pvc/workspace"
    """Mount path inside the training job."""


class TrainingConfig(ApiModel):
    """How fine-tuning jobs run."""

    config_map: ConfigMapRef | None = None
    """ConfigMap with the training configuration (key `training`)."""
    model_pvc: PersistentVolumeClaim = Field(alias="modelPVC")
    """Models used for fine-tuning."""
    workspace_pvc: WorkspacePVCConfig = Field(alias="workspacePVC")
    """Per-job workspace."""
    env: list[k8s.EnvVar] | None = None
    """Environment of the training jobs."""
    image: Image
    """Training image."""
    ttl_seconds_after_finished: int | None = None
    """Seconds a finished job is kept."""
    timeout: int | None = None
    """Seconds a job may run."""
    runai_queue: str = "default"
    """Run:ai queue (scheduler `runai` only)."""
    network_config: list[k8s.EnvVar] | None = None
    """Multi-node networking environment (NCCL settings)."""
    node_selector: dict[str, str] | None = None
    """Training job nodeSelector."""
    tolerations: list[k8s.Toleration] | None = None
    """Training job tolerations."""
    affinity: k8s.Affinity | None = None
    """Training job affinity."""
    pod_affinity: k8s.PodAffinity | None = None
    """Deprecated: use `affinity`."""
    shared_memory_size_limit: Quantity | None = None
    """Size limit of the `/dev/shm` memory volume."""
    resources: k8s.ResourceRequirements | None = None
    """Training job resources."""


class NemoDatastoreToolsConfig(ApiModel):
    """Tools that move assets to and from the datastore."""

    image: NonEmpty
    """Datastore CLI tools image."""


class ModelDownloadJobsConfig(ApiModel):
    """Jobs that download base models."""

    image: NonEmpty
    """Download job image."""
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    """Image pull policy."""
    ngc_api_secret: NGCSecret = Field(alias="ngcAPISecret")
    """Secret with the NGC API key."""
    hf_secret: HFSecret | None = None
    """Secret with the Hugging Face token."""
    security_context: k8s.PodSecurityContext | None = None
    """Pod security context of the jobs."""
    ttl_seconds_after_finished: Annotated[int, Field(ge=60)]
    """Seconds a finished job is kept."""
    poll_interval_seconds: Annotated[int, Field(ge=15)]
    """Seconds between download status polls."""


class Scheduler(ApiModel):
    """Scheduler of the training jobs."""

    type: Literal["volcano", "runai"] = SCHEDULER_VOLCANO
    """Volcano or Run:ai."""


class NemoCustomizerSpec(NemoServiceSpec):
    """Desired state of a NemoCustomizer."""

    datastore: Datastore
    """NeMo Datastore endpoint."""
    entitystore: Entitystore
    """NeMo Entitystore endpoint."""
    mlflow: MLFlow
    """MLflow tracking endpoint."""
    nemo_datastore_tools: NemoDatastoreToolsConfig
    """Datastore tools."""
    model_download_jobs: ModelDownloadJobsConfig
    """Model download jobs."""
    training_config: TrainingConfig
    """Training jobs."""
    model_config_ref: ConfigMapRef = Field(alias="modelConfig")
    """ConfigMap with `models`, `customizationTargets` and
    `customizationConfigTemplates`."""
    scheduler: Scheduler = Field(default_factory=Scheduler)
    """Training job scheduler."""
    otel: OTelSpec | None = None
    """OpenTelemetry."""
    database_config: DatabaseConfig
    """External PostgreSQL database."""
    wandb: WandBConfig
    """Weights & Biases."""


class NemoCustomizerStatus(NemoServiceStatus):
    """Observed state of a NemoCustomizer."""


class NemoCustomizer(CustomResource):
    """A NeMo Customizer service."""

    kind_info = KindInfo(
        group="apps.nvidia.com",
        version="v1alpha1",
        kind="NemoCustomizer",
        plural="nemocustomizers",
    )

    api_version: Literal["apps.nvidia.com/v1alpha1"] = "apps.nvidia.com/v1alpha1"
    kind: Literal["NemoCustomizer"] = "NemoCustomizer"
    spec: NemoCustomizerSpec
    """Desired state."""
    status: NemoCustomizerStatus | None = None
    """Observed state."""
