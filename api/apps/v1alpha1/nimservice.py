"""NIMService (apps.nvidia.com/v1alpha1): a NIM inference microservice, its spec
(image, storage, exposure, scaling, multi-node, DRA, ...), status, states,
condition types and reasons, with NVIDIA's defaults and validation rules.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from api.apps.v1alpha1 import core_types as k8s
from api.apps.v1alpha1.common import (
    STATE_FAILED,
    STATE_NOT_READY,
    STATE_PENDING,
    STATE_READY,
    Autoscaling,
    Expose,
    Image,
    Metrics,
    NIMContainerSpec,
    PersistentVolumeClaim,
    Port,
    Probe,
    ProxySpec,
)
from api.base import (
    ApiModel,
    CustomResource,
    Int32,
    Int64,
    KindInfo,
    Quantity,
    Rule,
    markers,
)

__all__ = [
    "CONDITION_FAILED",
    "CONDITION_PVC_CREATED",
    "CONDITION_READY",
    "FINALIZER",
    "MPI",
    "NIMSERVICE_STATES",
    "REASON_DRA_RESOURCES_UNSUPPORTED",
    "REASON_FAILED",
    "REASON_NIMCACHE_FAILED",
    "REASON_NIMCACHE_NOT_FOUND",
    "REASON_NIMCACHE_NOT_READY",
    "REASON_NOT_READY",
    "REASON_PVC_CREATED",
    "REASON_READY",
    "STATE_PVC_CREATED",
    "AttributeSelector",
    "AttributeSelectorValue",
    "CapacitySelector",
    "ComputeDomain",
    "ComputeDomainNode",
    "ComputeDomainStatus",
    "DRAClaimCreationSpec",
    "DRADeviceSpec",
    "DRAResource",
    "DRAResourceClaimStatus",
    "DRAResourceClaimTemplateStatus",
    "DRAResourceStatus",
    "EmptyDirSpec",
    "ModelStatus",
    "MultiNodeParallelism",
    "NIMCacheVolSpec",
    "NIMService",
    "NIMServiceMultiNodeConfig",
    "NIMServiceSpec",
    "NIMServiceStatus",
    "NIMServiceStorage",
    "Ray",
]

FINALIZER: Final = "finalizer.nimservice.apps.nvidia.com"

NIMSERVICE_STATES: Final = (STATE_PENDING, STATE_NOT_READY, STATE_READY, STATE_FAILED)
CONDITION_READY: Final = "Ready"
CONDITION_FAILED: Final = "Failed"
REASON_READY: Final = "Ready"
REASON_NOT_READY: Final = "NotReady"
REASON_FAILED: Final = "Failed"
REASON_DRA_RESOURCES_UNSUPPORTED: Final = "DRAResourcesUnsupported"
REASON_NIMCACHE_NOT_FOUND: Final = "NIMCacheNotFound"
REASON_NIMCACHE_NOT_READY: Final = "NIMCacheNotReady"
REASON_NIMCACHE_FAILED: Final = "NIMCacheFailed"
STATE_PVC_CREATED: Final = "PVC-Created"
CONDITION_PVC_CREATED: Final = "NIM_CACHE_PVC_CREATED"
REASON_PVC_CREATED: Final = "PVCCreated"
# Per-object failure reasons written by the standalone platform.
REASON_SERVICE_ACCOUNT_FAILED: Final = "ServiceAccountFailed"
REASON_ROLE_FAILED: Final = "RoleFailed"
REASON_ROLE_BINDING_FAILED: Final = "RoleBindingFailed"
REASON_SERVICE_FAILED: Final = "ServiceFailed"
REASON_INGRESS_FAILED: Final = "IngressFailed"
REASON_HTTPROUTE_FAILED: Final = "HTTPRouteFailed"
REASON_GRPCROUTE_FAILED: Final = "GRPCRouteFailed"
REASON_HPA_FAILED: Final = "HPAFailed"
REASON_SERVICE_MONITOR_FAILED: Final = "ServiceMonitorFailed"
REASON_CONFIGMAP_FAILED: Final = "ConfigMapFailed"
REASON_SECRET_FAILED: Final = "SecretFailed"
REASON_DEPLOYMENT_FAILED: Final = "DeploymentFailed"
REASON_STATEFULSET_FAILED: Final = "StatefulsetFailed"
REASON_LEADER_WORKER_SET_FAILED: Final = "LeaderWorkerSetFailed"
REASON_RESOURCE_CLAIM_TEMPLATE_FAILED: Final = "ResourceClaimTemplateFailed"
REASON_RESOURCE_CLAIM_FAILED: Final = "ResourceClaimFailed"
REASON_COMPUTE_DOMAIN_FAILED: Final = "ComputeDomainFailed"
REASON_INFERENCE_POOL_FAILED: Final = "InferencePoolFailed"
REASON_INFERENCE_SERVICE_FAILED: Final = "InferenceServiceFailed"
REASON_SCC_FAILED: Final = "SCCFailed"
REASON_VALIDATION_FAILED: Final = "ValidationFailed"

DNS_SUBDOMAIN_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
"""NVIDIA's DRA name pattern, exactly as its CRD has it: anchored at the start only."""
DNSName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
SelectorOp = Literal[
    "Equal", "NotEqual", "GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual"
]


class NIMCacheVolSpec(ApiModel):
    """Use the PVC of a NIMCache."""

    name: str | None = None
    """NIMCache name."""
    profile: str | None = None
    """Model profile to serve from the cache."""


class EmptyDirSpec(ApiModel):
    """An emptyDir model store."""

    size_limit: Quantity | None = None
    """Size limit of the emptyDir."""


class NIMServiceStorage(ApiModel):
    """Where the model store comes from (one of nimCache, pvc, emptyDir, hostPath)."""

    nim_cache: NIMCacheVolSpec = Field(default_factory=NIMCacheVolSpec)
    """A NIMCache."""
    shared_memory_size_limit: Quantity | None = None
    """Size limit of the `/dev/shm` memory volume."""
    pvc: PersistentVolumeClaim = Field(default_factory=PersistentVolumeClaim)
    """A PVC (existing, or created when `create` is true)."""
    host_path: str | None = None
    """A host path."""
    read_only: bool | None = None
    """Mount the PVC read-only."""
    empty_dir: EmptyDirSpec | None = None
    """An emptyDir."""


class AttributeSelectorValue(ApiModel):
    """A device attribute value: one of bool, int, string, version."""

    bool_value: bool | None = None
    """Boolean value."""
    int_value: Int32 | None = None
    """Integer value."""
    string_value: Annotated[str, Field(max_length=64)] | None = None
    """String value."""
    version_value: Annotated[str, Field(max_length=64)] | None = None
    """Semantic version value."""


class AttributeSelector(ApiModel):
    """Select devices by an attribute."""

    key: Annotated[str, Field(max_length=64)]
    """Attribute name (`<driver>/` prefix optional)."""
    op: SelectorOp = "Equal"
    """Comparison."""
    value: AttributeSelectorValue | None = None
    """Value to compare with (the webhook requires exactly one of its fields)."""


class CapacitySelector(ApiModel):
    """Select devices by a capacity."""

    key: Annotated[str, Field(max_length=64)]
    """Capacity name."""
    op: SelectorOp = "Equal"
    """Comparison."""
    value: Quantity | None = None
    """Quantity to compare with (required by the webhook)."""


class DRADeviceSpec(ApiModel):
    """One device request of an operator-created ResourceClaimTemplate."""

    validations = (
        Rule(
            "(has(self.celExpressions) && !(has(self.attributeSelectors) || "
            "has(self.capacitySelectors))) || !has(self.celExpressions)",
            "celExpressions must not be set if attributeSelectors or capacitySelectors are set",
        ),
    )

    name: DNSName
    """Request name."""
    count: Int32 = 1
    """Number of devices."""
    device_class_name: str = "gpu.nvidia.com"
    """DeviceClass."""
    driver_name: Annotated[str, Field(max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)] = (
        "gpu.nvidia.com"
    )
    """DRA driver the attributes belong to."""
    attribute_selectors: list[AttributeSelector] | None = None
    """Attribute selectors (ANDed)."""
    capacity_selectors: list[CapacitySelector] | None = None
    """Capacity selectors (ANDed)."""
    cel_expressions: list[str] | None = Field(default=None, alias="celExpressions")
    """Raw CEL device selectors."""


class DRAClaimCreationSpec(ApiModel):
    """A ResourceClaimTemplate the operator creates."""

    generate_name: Annotated[str, Field(min_length=1, max_length=16)] | None = None
    """Name prefix of the template."""
    devices: list[DRADeviceSpec]
    """Device requests."""


class DRAResource(ApiModel):
    """A DRA claim for the NIM pods: an existing claim, a template, or one to create."""

    validations = (
        Rule(
            "(has(self.resourceClaimName) ? 1 : 0) + (has(self.resourceClaimTemplateName) ? 1 : 0)"
            " + (has(self.claimCreationSpec) ? 1 : 0) == 1",
            "exactly one of spec.resourceClaimName, spec.resourceClaimTemplateName, or "
            "spec.claimCreationSpec must be set.",
        ),
    )

    resource_claim_name: DNSName | None = None
    """An existing ResourceClaim."""
    resource_claim_template_name: DNSName | None = None
    """An existing ResourceClaimTemplate."""
    claim_creation_spec: DRAClaimCreationSpec | None = None
    """A ResourceClaimTemplate to create."""
    requests: list[Annotated[str, Field(min_length=1)]] | None = None
    """Requests of the claim the container uses (default: all)."""


class MultiNodeParallelism(ApiModel):
    """Pipeline and tensor parallelism."""

    pipeline: Annotated[Int32, Field(ge=1)] | None = None
    """Pipeline parallelism (number of nodes)."""
    tensor: Annotated[Int32, Field(ge=1)] | None = None
    """Tensor parallelism (GPUs per node)."""


class MPI(ApiModel):
    """MPI launch settings."""

    mpi_start_timeout: int = Field(default=300, alias="mpiStartTimeout")
    """Seconds to wait for the workers before starting MPI."""


class Ray(ApiModel):
    """Ray cluster settings."""

    ray_port: Port = 6379
    """Ray head port."""


class ComputeDomain(ApiModel):
    """An NVIDIA ComputeDomain (IMEX) for the multi-node workers."""

    validations = (
        Rule(
            "(has(self.create) && self.create) ? !has(self.name) : "
            "(has(self.name) && size(self.name) > 0)",
            "if create is true, name must not be set; otherwise name is required.",
        ),
    )

    create: bool | None = None
    """Create a ComputeDomain named after the NIMService."""
    name: str | None = None
    """An existing ComputeDomain."""


class NIMServiceMultiNodeConfig(ApiModel):
    """Multi-node deployment through a LeaderWorkerSet."""

    validations = (Rule("!(has(self.mpi) && has(self.ray))", "mpi and ray are mutually exclusive"),)

    backend_type: Literal["lws"] = "lws"
    """Multi-node backend."""
    parallelism: MultiNodeParallelism
    """Parallelism."""
    mpi: MPI | None = None
    """Launch with MPI."""
    ray: Ray | None = None
    """Launch with Ray."""
    compute_domain: ComputeDomain | None = None
    """ComputeDomain for multi-node NVLink."""


_SPEC_RULES: Final = (
    Rule(
        "!(has(self.multiNode) && has(self.scale) && has(self.scale.enabled) && "
        "self.scale.enabled)",
        "autoScaling must be nil or disabled when multiNode is set",
    ),
    Rule(
        "!(has(self.scale) && has(self.scale.enabled) && self.scale.enabled && has(self.replicas))",
        "spec.replicas cannot be set when spec.scale.enabled is true",
    ),
    Rule(
        "!(has(self.expose) && has(self.expose.ingress) && has(self.expose.ingress.enabled) && "
        "self.expose.ingress.enabled && has(self.expose.router) && "
        "has(self.expose.router.ingress))",
        ".spec.expose.ingress is deprecated, and will be removed in a future release. If "
        ".spec.expose.ingress is set, please do not set .spec.expose.router.ingress.",
    ),
)

DRA_IMMUTABLE_RULE: Final = Rule(
    "(has(self.draResources) && has(oldSelf.draResources) && "
    "self.draResources == oldSelf.draResources) || "
    "(!has(self.draResources) && !has(oldSelf.draResources))",
    "spec.draResources is immutable",
)


class NIMServiceSpec(ApiModel):
    """Desired state of a NIMService."""

    validations = _SPEC_RULES

    image: Image
    """NIM container image."""
    command: list[str] | None = None
    """Override the container command."""
    args: list[str] | None = None
    """Container arguments."""
    env: list[k8s.EnvVar] | None = None
    """Environment variables (merged over the operator's; yours win)."""
    auth_secret: str | None = None
    """Secret with `NGC_API_KEY` (and optionally `HF_TOKEN`); omit only air-gapped."""
    storage: NIMServiceStorage = Field(default_factory=NIMServiceStorage)
    """Model store."""
    labels: dict[str, str] | None = None
    """Extra labels on every created object."""
    annotations: dict[str, str] | None = None
    """Extra annotations on every created object and the pods."""
    node_selector: dict[str, str] | None = None
    """Pod nodeSelector."""
    tolerations: list[k8s.Toleration] | None = None
    """Pod tolerations."""
    affinity: k8s.Affinity | None = None
    """Pod affinity."""
    pod_affinity: k8s.PodAffinity | None = None
    """Deprecated and ignored: use `affinity`."""
    resources: k8s.ResourceRequirements | None = None
    """Container resources (GPUs may be assigned from the cached profile)."""
    dra_resources: list[DRAResource] | None = Field(default=None, alias="draResources")
    """Dynamic Resource Allocation claims."""
    expose: Expose = Field(default_factory=Expose)
    """Service, ingress and router."""
    liveness_probe: Probe = Field(default_factory=Probe)
    """Liveness probe."""
    readiness_probe: Probe = Field(default_factory=Probe)
    """Readiness probe."""
    startup_probe: Probe = Field(default_factory=Probe)
    """Startup probe."""
    scale: Autoscaling = Field(default_factory=Autoscaling)
    """Horizontal autoscaling."""
    scheduler_name: str | None = None
    """Pod schedulerName."""
    metrics: Metrics = Field(default_factory=Metrics)
    """ServiceMonitor."""
    replicas: Annotated[Int32, Field(ge=0)] | None = None
    """Replicas (not with `scale.enabled`)."""
    user_id: Int64 | None = Field(default=None, alias="userID")
    """Pod runAsUser (default 1000)."""
    group_id: Int64 | None = Field(default=None, alias="groupID")
    """Pod runAsGroup and fsGroup (default 2000)."""
    runtime_class_name: str | None = None
    """Pod runtimeClassName."""
    priority_class_name: str | None = None
    """Pod priorityClassName."""
    proxy: ProxySpec | None = None
    """Proxy and custom CA."""
    multi_node: NIMServiceMultiNodeConfig | None = None
    """Multi-node deployment."""
    inference_platform: Literal["standalone", "kserve"] = "standalone"
    """Where the NIM runs."""
    init_containers: list[NIMContainerSpec] | None = None
    """Extra init containers."""
    sidecar_containers: list[NIMContainerSpec] | None = None
    """Extra sidecar containers."""


class ModelStatus(ApiModel):
    """The model being served and where."""

    name: str
    """Model name."""
    cluster_endpoint: str
    """In-cluster endpoint."""
    external_endpoint: str
    """External endpoint."""


class DRAResourceClaimStatus(ApiModel):
    """State of one ResourceClaim."""

    name: str
    """Claim name."""
    state: str | None = None
    """Comma-joined subset of deleted, pending, allocated, reserved."""


class DRAResourceClaimTemplateStatus(ApiModel):
    """State of one ResourceClaimTemplate and its claims."""

    name: str
    """Template name."""
    resource_claim_statuses: list[DRAResourceClaimStatus] | None = None
    """Claims generated from the template."""


class DRAResourceStatus(ApiModel):
    """State of one DRA resource."""

    validations = (
        Rule(
            "has(self.resourceClaimStatus) != has(self.resourceClaimTemplateStatus)",
            "exactly one of resourceClaimStatus and resourceClaimTemplateStatus must be set.",
        ),
    )

    name: str
    """Name of the pod claim."""
    resource_claim_status: DRAResourceClaimStatus | None = None
    """Claim state."""
    resource_claim_template_status: DRAResourceClaimTemplateStatus | None = None
    """Template state."""


class ComputeDomainNode(ApiModel):
    """A node of a ComputeDomain."""

    name: str | None = None
    """Node name."""
    clique_id: str | None = Field(default=None, alias="cliqueID")
    """NVLink clique."""
    status: Literal["Ready", "NotReady"] = "NotReady"
    """Node status."""


class ComputeDomainStatus(ApiModel):
    """State of the ComputeDomain."""

    name: str | None = None
    """ComputeDomain name."""
    status: str | None = None
    """Overall status."""
    nodes: list[ComputeDomainNode] | None = None
    """Nodes."""


class NIMServiceStatus(ApiModel):
    """Observed state of a NIMService."""

    conditions: list[k8s.Condition] | None = None
    """Conditions (`Ready`, `Failed`)."""
    available_replicas: Int32 | None = None
    """Available replicas."""
    state: str | None = None
    """Pending, NotReady, Ready, Failed (or PVC-Created)."""
    model: ModelStatus | None = None
    """Served model and endpoints."""
    dra_resource_statuses: list[DRAResourceStatus] | None = Field(
        default=None,
        alias="draResourceStatuses",
        json_schema_extra=markers(list_type="map", list_map_keys=["name"]),
    )
    """DRA claim states."""
    compute_domain_status: ComputeDomainStatus | None = None
    """ComputeDomain state."""


class NIMService(CustomResource):
    """A NIM inference microservice."""

    kind_info = KindInfo(
        group="apps.nvidia.com", version="v1alpha1", kind="NIMService", plural="nimservices"
    )

    api_version: Literal["apps.nvidia.com/v1alpha1"] = "apps.nvidia.com/v1alpha1"
    kind: Literal["NIMService"] = "NIMService"
    spec: NIMServiceSpec = Field(json_schema_extra=markers(validations=[DRA_IMMUTABLE_RULE]))
    """Desired state."""
    status: NIMServiceStatus | None = None
    """Observed state."""
