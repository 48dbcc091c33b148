"""NIMPipeline (apps.nvidia.com/v1alpha1): a set of NIMServices deployed together,
with dependency env vars between them; spec, status and states.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from api.apps.v1alpha1 import core_types as k8s
from api.apps.v1alpha1.common import STATE_FAILED, STATE_NOT_READY, STATE_READY
from api.apps.v1alpha1.nimservice import NIMServiceSpec
from api.base import ApiModel, CustomResource, Int32, KindInfo

__all__ = [
    "CONDITION_FAILED",
    "CONDITION_READY",
    "FINALIZER",
    "NIMPIPELINE_STATES",
    "REASON_FAILED",
    "REASON_INVALID_SPEC",
    "REASON_NOT_OWNED",
    "REASON_NOT_READY",
    "REASON_READY",
    "NIMPipeline",
    "NIMPipelineSpec",
    "NIMPipelineStatus",
    "NIMServicePipelineSpec",
    "ServiceDependency",
]

FINALIZER: Final = "finalizer.nimpipeline.apps.nvidia.com"
NIMPIPELINE_STATES: Final = (STATE_NOT_READY, STATE_READY, STATE_FAILED)
# NVIDIA defines these and never writes them; nimctl writes ``Ready``/``Failed``.
NVIDIA_CONDITION_READY: Final = "NIM_PIPELINE_READY"
NVIDIA_CONDITION_FAILED: Final = "NIM_PIPELINE_FAILED"
CONDITION_READY: Final = "Ready"
CONDITION_FAILED: Final = "Failed"
REASON_READY: Final = "Ready"
REASON_NOT_READY: Final = "NotReady"
REASON_FAILED: Final = "NIMServiceFailed"
REASON_NOT_OWNED: Final = "NIMServiceNotOwned"
REASON_INVALID_SPEC: Final = "InvalidSpec"
RECORDER_NAME: Final = "nimpipeline-controller"


class ServiceDependency(ApiModel):
    """Another service this one calls; exported to it as an env var."""

    name: str
    """Name of the service depended on."""
    port: Int32
    """Its port."""
    env_name: str | None = None
    """Env var to set on this service."""
    env_value: str | None = None
    """Value of that env var."""


class NIMServicePipelineSpec(ApiModel):
    """One NIMService of the pipeline."""

    name: str | None = None
    """NIMService name."""
    enabled: bool | None = None
    """Deploy it (unset means not deployed)."""
    spec: NIMServiceSpec | None = None
    """The NIMService spec."""
    dependencies: list[ServiceDependency] | None = None
    """Services it depends on."""


class NIMPipelineSpec(ApiModel):
    """Desired state of a NIMPipeline."""

    services: list[NIMServicePipelineSpec] | None = None
    """The NIMServices."""


class NIMPipelineStatus(ApiModel):
    """Observed state of a NIMPipeline."""

    conditions: list[k8s.Condition] | None = None
    """Conditions (not written)."""
    states: dict[str, str] | None = None
    """State of each service."""
    state: str | None = None
    """NotReady, Ready or Failed."""


class NIMPipeline(CustomResource):
    """A pipeline of NIMServices."""

    kind_info = KindInfo(
        group="apps.nvidia.com", version="v1alpha1", kind="NIMPipeline", plural="nimpipelines"
    )

    api_version: Literal["apps.nvidia.com/v1alpha1"] = "apps.nvidia.com/v1alpha1"
    kind: Literal["NIMPipeline"] = "NIMPipeline"
    spec: NIMPipelineSpec = Field(default_factory=NIMPipelineSpec)
    """Desired state."""
    status: NIMPipelineStatus | None = None
    """Observed state."""
