"""NIMCache (apps.nvidia.com/v1alpha1): downloads a model (from NGC, Hugging Face
or NeMo DataStore) into a PVC once, for NIMServices to mount; spec, status,
states, condition types and reasons, with NVIDIA's defaults and validation rules.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from api.apps.v1alpha1 import core_types as k8s
from api.apps.v1alpha1.common import (
    CertConfig,
    NIMContainerSpec,
    PersistentVolumeClaim,
    ProxySpec,
)
from api.base import (
    ApiModel,
    CustomResource,
    Int64,
    KindInfo,
    PrinterColumn,
    Quantity,
    Rule,
    markers,
)

__all__ = [
    "CONDITION_JOB_COMPLETED",
    "CONDITION_JOB_CREATED",
    "CONDITION_JOB_PENDING",
    "CONDITION_PVC_CREATED",
    "CONDITION_RECONCILE_FAILED",
    "DEFAULT_NODE_SELECTOR",
    "FINALIZER",
    "NIMCACHE_STATES",
    "STATE_FAILED",
    "STATE_IN_PROGRESS",
    "STATE_NOT_READY",
    "STATE_PENDING",
    "STATE_PVC_CREATED",
    "STATE_READY",
    "STATE_STARTED",
    "TYPE_MODEL_FREE",
    "TYPE_NATIVE",
    "GPUSpec",
    "HuggingFaceHubSource",
    "ModelSpec",
    "NGCSource",
    "NIMCache",
    "NIMCacheSpec",
    "NIMCacheStatus",
    "NIMProfile",
    "NIMSource",
    "NemoDataStoreSource",
    "NimCacheStorage",
    "Resources",
]

FINALIZER: Final = "finalizer.nimcache.apps.nvidia.com"

STATE_NOT_READY: Final = "NotReady"
STATE_PVC_CREATED: Final = "PVC-Created"
STATE_STARTED: Final = "Started"
STATE_READY: Final = "Ready"
STATE_IN_PROGRESS: Final = "InProgress"
STATE_PENDING: Final = "Pending"
STATE_FAILED: Final = "Failed"
NIMCACHE_STATES: Final = (
    STATE_NOT_READY,
    STATE_PVC_CREATED,
    STATE_STARTED,
    STATE_READY,
    STATE_IN_PROGRESS,
    STATE_PENDING,
    STATE_FAILED,
)

TYPE_MODEL_FREE: Final = "model-free"
TYPE_NATIVE: Final = "native"

CONDITION_JOB_CREATED: Final = "NIM_CACHE_JOB_CREATED"
CONDITION_JOB_COMPLETED: Final = "NIM_CACHE_JOB_COMPLETED"
CONDITION_JOB_PENDING: Final = "NIM_CACHE_JOB_PENDING"
CONDITION_PVC_CREATED: Final = "NIM_CACHE_PVC_CREATED"
CONDITION_RECONCILE_FAILED: Final = "NIM_CACHE_RECONCILE_FAILED"

REASON_JOB_CREATED: Final = "JobCreated"
REASON_JOB_COMPLETED: Final = "JobCompleted"
REASON_JOB_FAILED: Final = "JobFailed"
REASON_JOB_RUNNING: Final = "JobRunning"
REASON_JOB_PENDING: Final = "JobPending"
REASON_PVC_CREATED: Final = "PVCCreated"
REASON_RECONCILE_FAILED: Final = "ReconcileFailed"
REASON_RECONCILED: Final = "Reconciled"

DEFAULT_NODE_SELECTOR: Final = {"feature.node.kubernetes.io/pci-10de.present": "true"}

NonEmpty = Annotated[str, Field(min_length=1)]


class GPUSpec(ApiModel):
    """A GPU model to select profiles for."""

    product: str | None = None
    """GPU product name, e.g. `h100`."""
    ids: list[str] | None = None
    """PCI device ids."""


class ModelSpec(ApiModel):
    """Which profiles of an NGC NIM to cache."""

    profiles: list[str] | None = None
    """Explicit profile ids, or `["all"]`."""
    precision: str | None = None
    """Precision, e.g. `fp16`."""
    engine: str | None = None
    """Engine, e.g. `tensorrt_llm`, `vllm`."""
    tensor_parallelism: str | None = None
    """Tensor parallelism."""
    qos_profile: str | None = None
    """`throughput` or `latency`."""
    gpus: list[GPUSpec] | None = None
    """GPUs to select for."""
    lora: bool | None = None
    """LoRA-enabled profiles."""
    buildable: bool | None = None
    """Buildable (trtllm_buildable) profiles."""


class NGCSource(ApiModel):
    """Cache from NGC with the NIM's own puller."""

    validations = (
        Rule(
            "!(has(self.model) && has(self.modelEndpoint))",
            "Only one of 'model' or 'modelEndpoint' can be specified",
        ),
    )

    auth_secret: str
    """Secret with `NGC_API_KEY`."""
    model_puller: str = Field(
        json_schema_extra=markers(
            validations=[
                Rule(
                    "self == oldSelf",
                    "modelPuller is an immutable field. Please create a new NIMCache resource "
                    "instead when you want to change this container.",
                )
            ]
        )
    )
    """Image that downloads the model (usually the NIM image)."""
    pull_secret: str | None = None
    """Image pull secret for the puller."""
    model: ModelSpec | None = None
    """Profile selection."""
    model_endpoint: str | None = None
    """Model endpoint of a universal NIM."""


class _DSHFCommon(ApiModel):
    """Fields shared by the Hugging Face and NeMo DataStore sources."""

    validations = (
        Rule(
            "(has(self.modelName) ? 1 : 0) + (has(self.datasetName) ? 1 : 0) == 1",
            "Exactly one of modelName or datasetName must be defined",
        ),
    )

    model_name: str | None = None
    """Model repository name."""
    dataset_name: str | None = None
    """Dataset repository name."""
    auth_secret: NonEmpty
    """Secret with `HF_TOKEN`."""
    model_puller: NonEmpty
    """Image that downloads the model."""
    pull_secret: NonEmpty
    """Image pull secret for the puller."""
    revision: NonEmpty | None = None
    """Revision (branch, tag or commit)."""


class NemoDataStoreSource(_DSHFCommon):
    """Cache from a NeMo DataStore (Hugging Face API)."""

    endpoint: Annotated[str, Field(pattern=r"^https?://.*/v1/hf/?$")]
    """DataStore HF endpoint, `http(s)://.../v1/hf`."""
    namespace: str = Field(default="default", json_schema_extra=markers(required=True))
    """DataStore namespace."""


class HuggingFaceHubSource(_DSHFCommon):
    """Cache from a Hugging Face hub."""

    endpoint: Annotated[str, Field(pattern=r"^https?://.*$")]
    """Hub endpoint."""
    namespace: NonEmpty
    """Organisation or user of the repository."""


class NIMSource(ApiModel):
    """Where to download from: exactly one of ngc, dataStore, hf."""

    validations = (
        Rule(
            "(has(self.ngc) ? 1 : 0) + (has(self.dataStore) ? 1 : 0) + (has(self.hf) ? 1 : 0) == 1",
            "Exactly one of ngc, dataStore, or hf must be defined",
        ),
    )

    ngc: NGCSource | None = None
    """NGC."""
    data_store: NemoDataStoreSource | None = Field(default=None, alias="dataStore")
    """NeMo DataStore."""
    hf: HuggingFaceHubSource | None = None
    """Hugging Face hub."""


class NimCacheStorage(ApiModel):
    """Where the cache is written."""

    pvc: PersistentVolumeClaim = Field(default_factory=PersistentVolumeClaim)
    """The PVC (existing, or created when `create` is true)."""
    host_path: str | None = None
    """Deprecated host path."""


class Resources(ApiModel):
    """CPU and memory of the caching job (both requests and limits)."""

    cpu: Quantity | None = None
    """CPU."""
    memory: Quantity | None = None
    """Memory."""


class NIMCacheSpec(ApiModel):
    """Desired state of a NIMCache."""

    source: NIMSource
    """Model source."""
    storage: NimCacheStorage
    """Target storage."""
    resources: Resources = Field(default_factory=Resources)
    """Caching job resources."""
    tolerations: list[k8s.Toleration] | None = None
    """Caching job tolerations."""
    node_selector: dict[str, str] | None = None
    """Caching job nodeSelector (default: NVIDIA PCI device present)."""
    user_id: Int64 | None = Field(default=None, alias="userID")
    """runAsUser (default 1000)."""
    group_id: Int64 | None = Field(default=None, alias="groupID")
    """fsGroup (default 2000)."""
    cert_config: CertConfig | None = None
    """Deprecated: use `proxy`."""
    env: list[k8s.EnvVar] | None = None
    """Extra environment of the caching container."""
    runtime_class_name: str | None = None
    """Caching job runtimeClassName."""
    proxy: ProxySpec | None = None
    """Proxy and custom CA."""
    init_containers: list[NIMContainerSpec] | None = None
    """Extra init containers."""


class NIMProfile(ApiModel):
    """A cached model profile."""

    name: str | None = None
    """Profile id."""
    model: str | None = None
    """Model name."""
    release: str | None = None
    """Release."""
    config: dict[str, str] | None = None
    """Profile tags."""


class NIMCacheStatus(ApiModel):
    """Observed state of a NIMCache."""

    state: str | None = None
    """NotReady, PVC-Created, Started, InProgress, Pending, Ready, Failed."""
    type: str | None = None
    """Cache type: legacy (empty), model-free, native."""
    pvc: str | None = None
    """PVC holding the cache, once Ready."""
    profiles: list[NIMProfile] | None = None
    """Cached profiles."""
    conditions: list[k8s.Condition] | None = None
    """Conditions."""


class NIMCache(CustomResource):
    """A model cache."""

    kind_info = KindInfo(
        group="apps.nvidia.com",
        version="v1alpha1",
        kind="NIMCache",
        plural="nimcaches",
        printer_columns=(
            PrinterColumn("Status", "string", ".status.state"),
            PrinterColumn("PVC", "string", ".status.pvc"),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )

    api_version: Literal["apps.nvidia.com/v1alpha1"] = "apps.nvidia.com/v1alpha1"
    kind: Literal["NIMCache"] = "NIMCache"
    spec: NIMCacheSpec
    """Desired state."""
    status: NIMCacheStatus | None = None
    """Observed state."""
