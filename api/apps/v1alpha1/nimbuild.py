"""NIMBuild (apps.nvidia.com/v1alpha1): builds a TensorRT-LLM engine from a
buildable profile of a NIMCache; spec (immutable), status, states, condition types.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from api.apps.v1alpha1 import core_types as k8s
from api.apps.v1alpha1.common import Image
from api.apps.v1alpha1.nimcache import NIMProfile
from api.base import ApiModel, CustomResource, KindInfo, Quantity, Rule, markers

__all__ = [
    "FINALIZER",
    "NIMBUILD_STATES",
    "NIMBuild",
    "NIMBuildSpec",
    "NIMBuildStatus",
    "NIMCacheReference",
    "ResourceRequirements",
]

FINALIZER: Final = "finalizer.nimbuild.apps.nvidia.com"

STATE_NOT_READY: Final = "NotReady"
STATE_STARTED: Final = "Started"
STATE_READY: Final = "Ready"
STATE_IN_PROGRESS: Final = "InProgress"
STATE_PENDING: Final = "Pending"
STATE_FAILED: Final = "Failed"
NIMBUILD_STATES: Final = (
    STATE_NOT_READY,
    STATE_STARTED,
    STATE_READY,
    STATE_IN_PROGRESS,
    STATE_PENDING,
    STATE_FAILED,
)

CONDITION_WAIT_FOR_NIM_CACHE_READY: Final = "NIM_BUILD_WAIT_FOR_NIM_CACHE_READY"
CONDITION_RECONCILE_FAILED: Final = "NIM_BUILD_RECONCILE_FAILED"
CONDITION_MULTIPLE_BUILDABLE_PROFILES_FOUND: Final = "NIM_BUILD_MULTIPLE_BUILDABLE_PROFILES_FOUND"
CONDITION_SINGLE_BUILDABLE_PROFILE_FOUND: Final = "NIM_BUILD_SINGLE_BUILDABLE_PROFILE_FOUND"
CONDITION_NO_BUILDABLE_PROFILE_FOUND: Final = "NIM_BUILD_NO_BUILDABLE_PROFILE_FOUND"
CONDITION_ENGINE_BUILD_POD_CREATED: Final = "NIM_BUILD_ENGINE_BUILD_POD_CREATED"
CONDITION_ENGINE_BUILD_POD_COMPLETED: Final = "NIM_BUILD_ENGINE_BUILD_POD_COMPLETED"
CONDITION_ENGINE_BUILD_POD_PENDING: Final = "NIM_BUILD_ENGINE_BUILD_POD_PENDING"
CONDITION_MODEL_MANIFEST_POD_COMPLETED: Final = "NIM_BUILD_MODEL_MANIFEST_POD_COMPLETED"
CONDITION_NIM_CACHE_NOT_FOUND: Final = "NIM_BUILD_NIM_CACHE_NOT_FOUND"
CONDITION_NIM_CACHE_FAILED: Final = "NIM_BUILD_NIM_CACHE_FAILED"

# Condition reasons. NVIDIA's NIMCache reasons contain spaces ("NIMCache not found"),
# which metav1.Condition's reason pattern refuses; nimctl uses the CamelCase forms.
REASON_NIMCACHE_NOT_FOUND: Final = "NIMCacheNotFound"
REASON_NIMCACHE_FAILED: Final = "NIMCacheFailed"
REASON_NIMCACHE_NOT_READY: Final = "NIMCacheNotReady"
REASON_RECONCILE_FAILED: Final = "ReconcileFailed"
REASON_RECONCILED: Final = "Reconciled"
REASON_BUILDABLE_PROFILE_FOUND: Final = "BuildableProfileFound"
REASON_NO_BUILDABLE_PROFILES: Final = "NoBuildableProfilesFound"
REASON_MULTIPLE_BUILDABLE_PROFILES: Final = "MultipleBuildableProfilesFound"
REASON_ENGINE_BUILD_POD_CREATED: Final = "EngineBuildPodCreated"
REASON_POD_READY: Final = "PodReady"
REASON_POD_FAILED: Final = "PodFailed"
REASON_POD_RUNNING: Final = "PodRunning"
REASON_POD_COMPLETED: Final = "PodCompleted"
REASON_MANIFEST_POD_PENDING: Final = "LocalManifestPodPending"

MESSAGE_NIMCACHE_NOT_FOUND: Final = "Not able to get NIMCache for NIMBuild"
MESSAGE_NIMCACHE_FAILED: Final = "NIMCache is failed. NIMBuild can not progress"
MESSAGE_NIMCACHE_NOT_READY: Final = "Waiting for NIMCache to be ready before building engines"
MESSAGE_ENGINE_BUILD_POD_CREATED: Final = "The pod to build engine has been created"
MESSAGE_ENGINE_BUILD_POD_COMPLETED: Final = "The Pod to build engine has successfully completed"
MESSAGE_ENGINE_BUILD_POD_FAILED: Final = "The pod to build engine has failed"
MESSAGE_ENGINE_BUILD_POD_RUNNING: Final = "The Pod to build engine is in progress"
MESSAGE_MANIFEST_POD_COMPLETED: Final = "The Pod to read local model manifest is completed"

RECORDER_NAME: Final = "nimbuild-controller"

SPEC_IMMUTABLE_RULE: Final = Rule("self == oldSelf", "spec is immutable")


class NIMCacheReference(ApiModel):
    """The NIMCache (and profile) to build from."""

    name: str
    """NIMCache name."""
    profile: str | None = None
    """Buildable profile (default: the only buildable one)."""


class ResourceRequirements(ApiModel):
    """Resources of the engine build pod."""

    limits: dict[str, Quantity] | None = None
    """Limits."""
    requests: dict[str, Quantity] | None = None
    """Requests."""


class NIMBuildSpec(ApiModel):
    """Desired state of a NIMBuild."""

    nim_cache: NIMCacheReference
    """Source NIMCache."""
    model_name: str | None = None
    """Name of the built model (default: the NIMBuild name)."""
    resources: ResourceRequirements | None = None
    """Build pod resources."""
    tolerations: list[k8s.Toleration] | None = None
    """Build pod tolerations."""
    node_selector: dict[str, str] | None = None
    """Build pod nodeSelector."""
    env: list[k8s.EnvVar] | None = None
    """Build pod environment."""
    labels: dict[str, str] | None = None
    """Extra labels."""
    annotations: dict[str, str] | None = None
    """Extra annotations."""
    image: Image
    """NIM image that builds the engine."""


class NIMBuildStatus(ApiModel):
    """Observed state of a NIMBuild."""

    state: str | None = None
    """NotReady, Started, InProgress, Pending, Ready, Failed."""
    input_profile: NIMProfile | None = None
    """Profile built from."""
    output_profile: NIMProfile | None = None
    """Profile produced."""
    conditions: list[k8s.Condition] | None = None
    """Conditions."""


class NIMBuild(CustomResource):
    """An engine build from a cached buildable profile."""

    kind_info = KindInfo(
        group="apps.nvidia.com", version="v1alpha1", kind="NIMBuild", plural="nimbuilds"
    )

    api_version: Literal["apps.nvidia.com/v1alpha1"] = "apps.nvidia.com/v1alpha1"
    kind: Literal["NIMBuild"] = "NIMBuild"
    spec: NIMBuildSpec = Field(json_schema_extra=markers(validations=[SPEC_IMMUTABLE_RULE]))
    """Desired state."""
    status: NIMBuildStatus | None = None
    """Observed state."""
