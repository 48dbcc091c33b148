"""Shapes shared by the apps.nvidia.com/v1alpha1 kinds (NVIDIA's common_types.go):
image, service exposure (service, deprecated ingress, router with ingress, Gateway
routes and the endpoint picker), metrics, autoscaling, probes, proxy, PVC, extra
containers, plus the constants (default ports and port names, secret keys, states)
every kind uses.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import ConfigDict, Field

from api.apps.v1alpha1 import core_types as k8s
from api.base import ApiModel, Int32, Rule, ShapedDict, markers

__all__ = [
    "DEFAULT_API_PORT",
    "DEFAULT_NAMED_PORT_API",
    "DEFAULT_NAMED_PORT_GRPC",
    "DEFAULT_NAMED_PORT_METRICS",
    "DURATION_PATTERN",
    "HF_TOKEN",
    "NGC_API_KEY",
    "STATE_FAILED",
    "STATE_NOT_READY",
    "STATE_PENDING",
    "STATE_READY",
    "Autoscaling",
    "BackendRef",
    "CertConfig",
    "EPPConfig",
    "EndpointPickerConfig",
    "Expose",
    "ExposeV1",
    "Gateway",
    "HFSecret",
    "HorizontalPodAutoscalerSpec",
    "Image",
    "Ingress",
    "IngressPath",
    "IngressV1",
    "IngressV1Spec",
    "Metrics",
    "NGCSecret",
    "NIMContainerSpec",
    "PersistentVolumeClaim",
    "Port",
    "Probe",
    "ProxySpec",
    "Router",
    "RouterIngress",
    "Service",
    "ServiceMonitor",
]

DEFAULT_API_PORT: Final = 8000
DEFAULT_NAMED_PORT_API: Final = "api"
DEFAULT_NAMED_PORT_GRPC: Final = "grpc"
DEFAULT_NAMED_PORT_METRICS: Final = "metrics"
NGC_API_KEY: Final = "NGC_API_KEY"
HF_TOKEN: Final = "HF_TOKEN"

STATE_PENDING: Final = "Pending"
STATE_NOT_READY: Final = "NotReady"
STATE_READY: Final = "Ready"
STATE_FAILED: Final = "Failed"

DURATION_PATTERN: Final = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
HOST_DOMAIN_PATTERN: Final = (
    r"^(([a-z0-9][a-z0-9\-]*[a-z0-9])|[a-z0-9]+\.)*([a-z]+|xn\-\-[a-z0-9]+)\.?$"
)

Port = Annotated[Int32, Field(ge=1, le=65535)]
"""A TCP port, 1..65535."""


class Image(ApiModel):
    """A container image: rendered as `repository:tag`."""

    repository: str
    """Image repository, e.g. `nvcr.io/nim/meta/llama-3.1-8b-instruct`."""
    tag: str
    """Image tag."""
    pull_policy: str | None = None
    """Image pull policy (Always, IfNotPresent, Never)."""
    pull_secrets: list[str] | None = None
    """Names of image pull secrets."""


class Service(ApiModel):
    """The Service in front of the workload."""

    type: str | None = None
    """Service type (ClusterIP, NodePort, LoadBalancer)."""
    name: str | None = None
    """Override the default service name (unused, as in NVIDIA's operator)."""
    port: Port = DEFAULT_API_PORT
    """Main API serving port."""
    grpc_port: Port | None = Field(default=None, alias="grpcPort")
    """gRPC serving port."""
    metrics_port: Port | None = None
    """Metrics port, when different from the API port."""
    annotations: dict[str, str] | None = None
    """Extra annotations on the Service."""
    labels: dict[str, str] | None = None
    """Extra labels on the Service."""


class Ingress(ApiModel):
    """Deprecated `expose.ingress` (use `expose.router`)."""

    enabled: bool | None = None
    """Create the Ingress."""
    annotations: dict[str, str] | None = None
    """Extra annotations on the Ingress."""
    spec: k8s.IngressSpec | None = None
    """The full networking/v1 IngressSpec."""


class IngressPath(ApiModel):
    """One path of the deprecated NeMo ingress."""

    path: str = "/"
    """URL path."""
    path_type: str = "Prefix"
    """Ingress path type."""


class IngressV1Spec(ApiModel):
    """The reduced ingress spec of the deprecated NeMo `expose.ingress`."""

    ingress_class_name: Annotated[
        str, Field(pattern=r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
    ]
    """IngressClass to use."""
    host: str | None = None
    """Host name."""
    paths: list[IngressPath] | None = None
    """Paths routed to the service."""


class IngressV1(ApiModel):
    """Deprecated NeMo `expose.ingress`."""

    validations = (
        Rule(
            "(has(self.spec) && has(self.enabled) && self.enabled) || !has(self.enabled)"
            " || !self.enabled",
            "spec cannot be nil when ingress is enabled",
        ),
    )

    enabled: bool | None = None
    """Create the Ingress."""
    annotations: dict[str, str] | None = None
    """Extra annotations on the Ingress."""
    spec: IngressV1Spec | None = None
    """Ingress class, host and paths."""


class RouterIngress(ApiModel):
    """Router ingress: an Ingress of the given class for `<name>.<ns>.<domain>`."""

    ingress_class: Annotated[str, Field(min_length=1)]
    """IngressClass name."""
    tls_secret_name: str | None = None
    """Secret holding the TLS certificate."""


class BackendRef(ApiModel):
    """A Gateway API (gateway.networking.k8s.io/v1) BackendRef."""

    validations = (
        Rule(
            "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true",
            "Must have port for Service reference",
        ),
    )

    group: Annotated[
        str,
        Field(
            max_length=253,
            pattern=r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        ),
    ] = ""
    """API group of the referent; empty means the core group."""
    kind: Annotated[
        str, Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")
    ] = "Service"
    """Kind of the referent."""
    name: Annotated[str, Field(min_length=1, max_length=253)]
    """Name of the referent."""
    namespace: (
        Annotated[
            str,
            Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
        ]
        | None
    ) = None
    """Namespace of the referent (default: the route's namespace)."""
    port: Port | None = None
    """Destination port; required when the referent is a Kubernetes Service."""
    weight: Annotated[Int32, Field(ge=0, le=1000000)] = 1
    """Proportion of requests forwarded to this backend."""


class Gateway(ApiModel):
    """Router Gateway: HTTPRoute/GRPCRoute attached to an existing Gateway."""

    namespace: Annotated[str, Field(min_length=1)]
    """Namespace of the Gateway."""
    name: Annotated[str, Field(min_length=1)]
    """Name of the Gateway."""
    http_routes_enabled: bool = True
    """Create an HTTPRoute."""
    grpc_routes_enabled: bool = False
    """Create a GRPCRoute (needs `expose.service.grpcPort`)."""
    backend_ref: BackendRef | None = None
    """Route to this backend (e.g. an InferencePool) instead of the Service."""


class NIMContainerSpec(ApiModel):
    """An extra container (init, sidecar, endpoint picker)."""

    name: str
    """Container name."""
    image: Image
    """Container image."""
    command: list[str] | None = None
    """Entrypoint."""
    args: list[str] | None = None
    """Arguments."""
    env: list[k8s.EnvVar] | None = None
    """Environment variables."""
    working_dir: str | None = None
    """Working directory."""


class EPPPluginSpec(ApiModel):
    """One plugin instance of an EndpointPickerConfig."""

    name: str | None = None
    """Name other entries reference (default: the type)."""
    type: str
    """Plugin type to instantiate."""
    parameters: Annotated[str | None, Field(json_schema_extra=markers(fmt="byte"))] = None
    """Plugin parameters (upstream a raw JSON message: a string in the CRD)."""


class EPPSchedulingPlugin(ApiModel):
    """A plugin slotted into a scheduling profile."""

    plugin_ref: str
    """Name of an entry of `plugins`."""
    weight: int | None = None
    """Weight when the plugin is a scorer."""


class EPPSchedulingProfile(ApiModel):
    """A named scheduling profile."""

    name: str
    """Profile name."""
    plugins: list[EPPSchedulingPlugin]
    """Plugins of the profile."""


class EPPSaturationDetector(ApiModel):
    """Saturation detector thresholds."""

    queue_depth_threshold: int | None = None
    """Waiting queue size above which a pod has no capacity."""
    kv_cache_util_threshold: float | None = Field(default=None, alias="kvCacheUtilThreshold")
    """KV cache utilisation (0.0-1.0) above which a pod has no capacity."""
    metrics_staleness_threshold: str | None = None
    """How old a pod's metrics may be."""


class EPPDataLayerExtractor(ApiModel):
    """An extractor of a data layer source."""

    plugin_ref: str
    """Name of an entry of `plugins`."""


class EPPDataLayerSource(ApiModel):
    """A data layer source."""

    plugin_ref: str
    """Name of an entry of `plugins`."""
    extractors: list[EPPDataLayerExtractor]
    """Extractors of the source."""


class EPPDataLayer(ApiModel):
    """The data layer."""

    sources: list[EPPDataLayerSource]
    """Data sources."""


class EndpointPickerConfig(ApiModel):
    """The upstream gateway-api-inference-extension EndpointPickerConfig, typed as
    NVIDIA's CRD types it; other fields are kept (preserve-unknown-fields)."""

    model_config = ConfigDict(
        extra="allow", json_schema_extra=markers(preserve_unknown_fields=True)
    )

    api_version: str | None = None
    """EndpointPickerConfig apiVersion."""
    kind: str | None = None
    """EndpointPickerConfig."""
    plugins: list[EPPPluginSpec]
    """Plugins to instantiate."""
    scheduling_profiles: list[EPPSchedulingProfile]
    """Scheduling profiles."""
    feature_gates: list[str] | None = None
    """Experimental EPP features to enable."""
    saturation_detector: EPPSaturationDetector | None = None
    """Saturation detector thresholds (default values when absent)."""
    data: EPPDataLayer | None = None
    """Data layer configuration."""


class EPPConfig(ApiModel):
    """Endpoint picker (Gateway API inference extension) configuration."""

    validations = (
        Rule(
            "!(has(self.configMapRef) && has(self.config))",
            "specify either configMapRef or config, not both",
        ),
    )

    container_spec: NIMContainerSpec
    """The endpoint picker container."""
    readiness_probe: k8s.Probe | None = None
    """Readiness probe of the endpoint picker."""
    liveness_probe: k8s.Probe | None = None
    """Liveness probe of the endpoint picker."""
    startup_probe: k8s.Probe | None = None
    """Startup probe of the endpoint picker."""
    ports: list[k8s.ContainerPort] | None = None
    """Container ports of the endpoint picker."""
    config_map_ref: k8s.ConfigMapKeySelector | None = None
    """ConfigMap key holding the EndpointPickerConfig."""
    config: Annotated[dict[str, Any], ShapedDict(EndpointPickerConfig)] | None = None
    """Inline EndpointPickerConfig (kept as written)."""


class Router(ApiModel):
    """Router: Ingress or Gateway routes for `<name>.<namespace>.<hostDomainName>`."""

    validations = (
        Rule(
            "!(has(self.gateway) && has(self.ingress))",
            "ingress and gateway cannot be specified together",
        ),
    )

    host_domain_name: (
        Annotated[str, Field(min_length=1, max_length=63, pattern=HOST_DOMAIN_PATTERN)] | None
    ) = None
    """Domain the host name is built in."""
    annotations: dict[str, str] | None = None
    """Extra annotations on the Ingress / routes."""
    ingress: RouterIngress | None = None
    """Create an Ingress."""
    gateway: Gateway | None = None
    """Create Gateway API routes."""
    epp_config: EPPConfig | None = Field(default=None, alias="eppConfig")
    """Deploy an endpoint picker and an InferencePool."""


class Expose(ApiModel):
    """How a NIMService is exposed."""

    service: Service = Field(default_factory=Service)
    """The Service."""
    ingress: Ingress | None = None
    """Deprecated: use `router`."""
    router: Router | None = None
    """Ingress or Gateway routes."""


class ExposeV1(ApiModel):
    """How a NeMo service is exposed (no gRPC or metrics ports)."""

    validations = (
        Rule("!(has(self.service.grpcPort))", "unsupported field: spec.expose.service.grpcPort"),
        Rule(
            "!(has(self.service.metricsPort))",
            "unsupported field: spec.expose.service.metricsPort",
        ),
    )

    service: Service = Field(default_factory=Service)
    """The Service."""
    ingress: IngressV1 | None = None
    """Deprecated: use `router`."""
    router: Router | None = Field(
        default=None,
        json_schema_extra=markers(
            validations=[
                Rule(
                    "!(has(self.gateway) && self.gateway.grpcRoutesEnabled)",
                    "unsupported field: spec.expose.router.gateway.grpcRoutesEnabled",
                )
            ]
        ),
    )
    """Ingress or Gateway routes."""


class ServiceMonitor(ApiModel):
    """Prometheus ServiceMonitor settings."""

    additional_labels: dict[str, str] | None = None
    """Extra labels (they win over the standard labels)."""
    annotations: dict[str, str] | None = None
    """Extra annotations."""
    interval: Annotated[str, Field(pattern=DURATION_PATTERN)] | None = None
    """Scrape interval."""
    scrape_timeout: Annotated[str, Field(pattern=DURATION_PATTERN)] | None = None
    """Scrape timeout."""


class Metrics(ApiModel):
    """Metrics collection."""

    enabled: bool | None = None
    """Create a ServiceMonitor."""
    service_monitor: ServiceMonitor = Field(default_factory=ServiceMonitor)
    """ServiceMonitor settings."""


class HorizontalPodAutoscalerSpec(ApiModel):
    """The HPA the operator creates."""

    min_replicas: Annotated[Int32, Field(ge=1)] = 1
    """Lower replica bound."""
    max_replicas: Int32
    """Upper replica bound."""
    metrics: list[k8s.MetricSpec] | None = None
    """autoscaling/v2 metrics."""
    behavior: k8s.HorizontalPodAutoscalerBehavior | None = None
    """autoscaling/v2 scaling behavior."""


class Autoscaling(ApiModel):
    """Horizontal autoscaling (`spec.scale`)."""

    enabled: bool | None = None
    """Create an HPA."""
    hpa: HorizontalPodAutoscalerSpec | None = None
    """HPA bounds, metrics and behavior."""
    annotations: dict[str, str] | None = None
    """Extra annotations on the HPA."""


class Probe(ApiModel):
    """A probe that can be disabled or replaced; unset means the operator default."""

    enabled: bool | None = None
    """False disables the probe; unset means enabled."""
    probe: k8s.Probe | None = None
    """A custom core/v1 Probe."""


class ProxySpec(ApiModel):
    """HTTP(S) proxy and a custom CA bundle."""

    http_proxy: str | None = None
    """HTTP_PROXY value."""
    https_proxy: str | None = None
    """HTTPS_PROXY value."""
    no_proxy: str | None = None
    """NO_PROXY value."""
    cert_config_map: str | None = None
    """ConfigMap with CA certificates to trust."""


class PersistentVolumeClaim(ApiModel):
    """A PVC to use, or to create when `create` is true."""

    create: bool | None = None
    """Create the PVC."""
    name: str | None = None
    """PVC name (default `<name>-pvc`)."""
    storage_class: str | None = None
    """StorageClass of a created PVC."""
    size: str | None = None
    """Size of a created PVC (a quantity, e.g. `50Gi`)."""
    volume_access_mode: str | None = None
    """Access mode of a created PVC."""
    sub_path: str | None = None
    """Sub-path inside the volume to mount."""
    annotations: dict[str, str] | None = None
    """Annotations of a created PVC."""


class NGCSecret(ApiModel):
    """Secret holding the NGC API key."""

    name: Annotated[str, Field(min_length=1)]
    """Secret name."""
    key: str = Field(default="NGC_API_KEY", json_schema_extra=markers(required=True))
    """Key in the secret."""


class HFSecret(ApiModel):
    """Secret holding the Hugging Face token."""

    name: Annotated[str, Field(min_length=1)]
    """Secret name."""
    key: str = "HF_TOKEN"
    """Key in the secret."""


class CertConfig(ApiModel):
    """Deprecated custom CA configuration (use `proxy`)."""

    name: str
    """ConfigMap name."""
    mount_path: str
    """Mount path."""
