"""Shapes shared by the NeMo kinds (NemoCustomizer, NemoDatastore, NemoEntitystore,
NemoEvaluator, NemoGuardrail), as in NVIDIA's nemo_common_types.go: service
endpoints, the external PostgreSQL configuration, Weights & Biases, OpenTelemetry,
ConfigMap references, and the spec fields, CEL rules, status, states and condition
types every NeMo kind has in common.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, model_validator

from api.apps.v1alpha1 import core_types as k8s
from api.apps.v1alpha1.common import (
    STATE_FAILED,
    STATE_NOT_READY,
    STATE_PENDING,
    STATE_READY,
    Autoscaling,
    ExposeV1,
    Image,
    Metrics,
    Port,
)
from api.base import ApiModel, Int32, Int64, Rule, markers

__all__ = [
    "CONDITION_FAILED",
    "CONDITION_READY",
    "DEPRECATED_INGRESS_MESSAGE",
    "FAILURE_REASONS",
    "NEMO_SPEC_RULES",
    "NEMO_STATES",
    "REASON_CONFIGMAP_FAILED",
    "REASON_CONFIGMAP_NOT_FOUND",
    "REASON_DEPLOYMENT_FAILED",
    "REASON_FAILED",
    "REASON_HPA_FAILED",
    "REASON_HTTPROUTE_FAILED",
    "REASON_INGRESS_FAILED",
    "REASON_INVALID_SPEC",
    "REASON_NOT_READY",
    "REASON_PVC_FAILED",
    "REASON_PVC_NOT_FOUND",
    "REASON_READY",
    "REASON_ROLE_BINDING_FAILED",
    "REASON_ROLE_FAILED",
    "REASON_SECRET_FAILED",
    "REASON_SECRET_NOT_FOUND",
    "REASON_SERVICE_ACCOUNT_FAILED",
    "REASON_SERVICE_FAILED",
    "REASON_SERVICE_MONITOR_FAILED",
    "ArgoWorkflows",
    "ConfigMapRef",
    "DatabaseConfig",
    "DatabaseCredentials",
    "Datastore",
    "Entitystore",
    "ExporterConfig",
    "MLFlow",
    "NemoServiceSpec",
    "NemoServiceStatus",
    "OTelSpec",
    "VectorDB",
    "WandBConfig",
]

NEMO_STATES: Final = (STATE_PENDING, STATE_NOT_READY, STATE_READY, STATE_FAILED)
"""The `status.state` values of every NeMo kind."""
CONDITION_READY: Final = "Ready"
CONDITION_FAILED: Final = "Failed"
REASON_READY: Final = "Ready"
REASON_NOT_READY: Final = "NotReady"
REASON_FAILED: Final = "Failed"
REASON_SECRET_NOT_FOUND: Final = "SecretNotFound"
"""nimctl: the Secret named by `databaseConfig.credentials` (or its key) is missing."""
REASON_PVC_NOT_FOUND: Final = "PVCNotFound"
"""nimctl: a PVC the spec names without `create: true` is missing."""
REASON_CONFIGMAP_NOT_FOUND: Final = "ConfigMapNotFound"
"""nimctl: a ConfigMap the spec names is missing."""
REASON_INVALID_SPEC: Final = "InvalidSpec"
"""nimctl: the stored spec does not parse (e.g. written under an older CRD)."""
REASON_SERVICE_ACCOUNT_FAILED: Final = "ServiceAccountFailed"
REASON_ROLE_FAILED: Final = "RoleFailed"
REASON_ROLE_BINDING_FAILED: Final = "RoleBindingFailed"
REASON_SERVICE_FAILED: Final = "ServiceFailed"
REASON_INGRESS_FAILED: Final = "IngressFailed"
REASON_HTTPROUTE_FAILED: Final = "HTTPRouteFailed"
REASON_HPA_FAILED: Final = "HPAFailed"
REASON_SERVICE_MONITOR_FAILED: Final = "ServiceMonitorFailed"
REASON_CONFIGMAP_FAILED: Final = "ConfigMapFailed"
REASON_SECRET_FAILED: Final = "SecretFailed"
REASON_PVC_FAILED: Final = "PVCFailed"
REASON_DEPLOYMENT_FAILED: Final = "DeploymentFailed"
FAILURE_REASONS: Final = {
    "ServiceAccount": REASON_SERVICE_ACCOUNT_FAILED,
    "Role": REASON_ROLE_FAILED,
    "RoleBinding": REASON_ROLE_BINDING_FAILED,
    "Service": REASON_SERVICE_FAILED,
    "Ingress": REASON_INGRESS_FAILED,
    "HTTPRoute": REASON_HTTPROUTE_FAILED,
    "HorizontalPodAutoscaler": REASON_HPA_FAILED,
    "ServiceMonitor": REASON_SERVICE_MONITOR_FAILED,
    "ConfigMap": REASON_CONFIGMAP_FAILED,
    "Secret": REASON_SECRET_FAILED,
    "PersistentVolumeClaim": REASON_PVC_FAILED,
    "Deployment": REASON_DEPLOYMENT_FAILED,
}
"""The `Failed` condition reason when writing an object of each kind fails."""

DEPRECATED_INGRESS_MESSAGE: Final = (
    ".spec.expose.ingress is deprecated, and will be removed in a future release. If "
    ".spec.expose.ingress is set, please do not set .spec.expose.router.ingress."
)

NEMO_SPEC_RULES: Final = (
    Rule(
        "!(has(self.expose.ingress) && has(self.expose.ingress.enabled) && "
        "self.expose.ingress.enabled && has(self.expose.router) && "
        "has(self.expose.router.ingress))",
        DEPRECATED_INGRESS_MESSAGE,
    ),
    Rule(
        "!(has(self.scale) && has(self.scale.enabled) && self.scale.enabled && has(self.replicas))",
        "spec.replicas cannot be set when spec.scale.enabled is true",
    ),
)
"""CEL rules NVIDIA puts on every NeMo spec."""

HTTP_ENDPOINT_PATTERN: Final = r"^http"
HttpEndpoint = Annotated[str, Field(min_length=1, pattern=HTTP_ENDPOINT_PATTERN)]
"""An http(s) URL of a dependency."""
NonEmpty = Annotated[str, Field(min_length=1)]
LogLevel = Literal["INFO", "DEBUG"]
Exporter = Literal["otlp", "console", "none"]


class ArgoWorkflows(ApiModel):
    """Argo Workflows server the evaluator submits jobs to."""

    endpoint: HttpEndpoint
    """Argo server URL."""
    service_account: str
    """Service account the workflows run as."""


class VectorDB(ApiModel):
    """External vector database (Milvus)."""

    endpoint: HttpEndpoint
    """Vector database URL."""


class Datastore(ApiModel):
    """NeMo Datastore service."""

    endpoint: HttpEndpoint
    """Datastore URL."""


class Entitystore(ApiModel):
    """NeMo Entitystore service."""

    endpoint: HttpEndpoint
    """Entitystore URL."""


class MLFlow(ApiModel):
    """MLflow tracking service."""

    endpoint: HttpEndpoint
    """MLflow tracking URL."""


class DatabaseCredentials(ApiModel):
    """Where the database user's password is."""

    user: NonEmpty
    """Non-root database user."""
    secret_name: NonEmpty
    """Secret holding the password."""
    password_key: str = "password"
    """Key of the password in the secret."""


class DatabaseConfig(ApiModel):
    """External PostgreSQL database."""

    host: NonEmpty
    """Database host name."""
    port: Port = 5432
    """Database port."""
    database_name: NonEmpty
    """Database name."""
    credentials: DatabaseCredentials
    """Database credentials."""


class WandBConfig(ApiModel):
    """Weights & Biases, for training metrics."""

    secret_name: NonEmpty
    """Secret holding the W&B API key."""
    api_key_key: NonEmpty = Field(default="apiKey", json_schema_extra=markers(required=True))
    """Key of the API key in the secret."""
    encryption_key: str = "encryptionKey"
    """Key of the encryption key in the secret."""
    entity: str = "null"
    """User or team the runs are logged under."""
    project_name: str = "nvidia-nemo-customizer"
    """Project the runs are logged under."""


class ExporterConfig(ApiModel):
    """OpenTelemetry exporters."""

    traces_exporter: Exporter = "otlp"
    """Traces exporter."""
    metrics_exporter: Exporter = "otlp"
    """Metrics exporter."""
    logs_exporter: Exporter = "otlp"
    """Logs exporter."""


class OTelSpec(ApiModel):
    """OpenTelemetry settings."""

    enabled: bool | None = None
    """Export traces, metrics and logs."""
    exporter_otlp_endpoint: str | None = None
    """OTLP collector endpoint."""
    disable_logging: bool | None = None
    """Disable Python logging auto-instrumentation."""
    exporter_config: ExporterConfig = Field(default_factory=ExporterConfig)
    """Exporters."""
    excluded_urls: list[str] = Field(default=["health"])
    """URLs excluded from tracing."""
    log_level: LogLevel = "INFO"
    """OpenTelemetry log level."""


class ConfigMapRef(ApiModel):
    """A ConfigMap by name."""

    name: NonEmpty
    """ConfigMap name."""


class NemoServiceSpec(ApiModel):
    """The spec fields every NeMo kind has (the kinds add their own)."""

    validations = NEMO_SPEC_RULES

    image: Image
    """Service image."""
    command: list[str] | None = None
    """Override the container command."""
    args: list[str] | None = None
    """Container arguments."""
    env: list[k8s.EnvVar] | None = None
    """Environment variables (merged over the operator's; yours win)."""
    labels: dict[str, str] | None = None
    """Extra labels on every created object."""
    annotations: dict[str, str] | None = None
    """Extra annotations on every created object."""
    node_selector: dict[str, str] | None = None
    """Pod nodeSelector."""
    tolerations: list[k8s.Toleration] | None = None
    """Pod tolerations."""
    affinity: k8s.Affinity | None = None
    """Pod affinity."""
    pod_affinity: k8s.PodAffinity | None = None
    """Deprecated: use `affinity`."""
    resources: k8s.ResourceRequirements | None = None
    """Container resources."""
    expose: ExposeV1 = Field(default_factory=ExposeV1)
    """Service, deprecated ingress and router."""
    scale: Autoscaling = Field(default_factory=Autoscaling)
    """Horizontal autoscaling."""
    metrics: Metrics = Field(default_factory=Metrics)
    """ServiceMonitor."""
    replicas: Annotated[Int32, Field(ge=1)] | None = None
    """Replicas (not with `scale.enabled`)."""
    user_id: Int64 | None = Field(default=None, alias="userID")
    """Pod runAsUser (1000 when unset)."""
    group_id: Int64 | None = Field(default=None, alias="groupID")
    """Pod runAsGroup and fsGroup (2000 when unset)."""
    runtime_class: str | None = None
    """Pod runtimeClassName."""

    @model_validator(mode="after")
    def _expose_is_read_by_the_spec_rules(self) -> NemoServiceSpec:
        # NVIDIA's first spec rule reads self.expose.ingress; without `expose` its
        # evaluation fails and the API server refuses the object with this text
        # (celpy's has() is lenient there, so say it here).
        if "expose" not in self.model_fields_set:
            raise ValueError(f"no such key: expose evaluating rule: {NEMO_SPEC_RULES[0].rule}")
        return self


class NemoServiceStatus(ApiModel):
    """Observed state of a NeMo service."""

    conditions: list[k8s.Condition] | None = None
    """Conditions (`Ready`, `Failed`)."""
    available_replicas: Int32 | None = None
    """Available replicas."""
    state: str | None = None
    """Pending, NotReady, Ready or Failed."""
