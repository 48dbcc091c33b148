"""NemoGuardrail (apps.nvidia.com/v1alpha1): the NeMo Guardrails service in front
of a NIM (or NIM proxy) endpoint, with its configuration store (ConfigMap or PVC)
and optional PostgreSQL; spec, status, API port, labels and finalizer.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from api.apps.v1alpha1.common import PersistentVolumeClaim
from api.apps.v1alpha1.nemo_common import (
    ConfigMapRef,
    DatabaseConfig,
    NemoServiceSpec,
    NemoServiceStatus,
    OTelSpec,
)
from api.base import ApiModel, CustomResource, KindInfo, Rule, markers

__all__ = [
    "API_PORT",
    "BASE_URL_PATTERN",
    "FINALIZER",
    "PART_OF",
    "GuardrailConfig",
    "NIMEndpoint",
    "NemoGuardrail",
    "NemoGuardrailSpec",
    "NemoGuardrailStatus",
]

FINALIZER: Final = "finalizer.NemoGuardrail.apps.nvidia.com"
PART_OF: Final = "nemo-guardrail-service"
"""Value of the `app.kubernetes.io/part-of` label."""
API_PORT: Final = 8000
BASE_URL_PATTERN: Final = r"^https?:\/\/[^\s]+\/v1\/?$"


class NIMEndpoint(ApiModel):
    """The NIM (or NIM proxy) the guardrails call."""

    base_url: Annotated[
        str,
        Field(min_length=1, pattern=BASE_URL_PATTERN, json_schema_extra=markers(fmt="uri")),
    ] = Field(alias="baseURL")
    """Base URL ending in `/v1`."""
    api_key_secret: str | None = None
    """Secret holding the API key for the endpoint."""
    api_key_key: str = "NIM_ENDPOINT_API_KEY"
    """Key of the API key in the secret."""


class GuardrailConfig(ApiModel):
    """Where the guardrail configuration is (a ConfigMap or a PVC)."""

    validations = (
        Rule(
            "!(has(self.configMap) && has(self.pvc))",
            "Cannot set both ConfigMap and PVC in ConfigStore",
        ),
    )

    config_map: ConfigMapRef | None = None
    """ConfigMap with the configuration."""
    pvc: PersistentVolumeClaim | None = None
    """PVC with the configuration (sub-path `guardrails-config-store` by default)."""


class NemoGuardrailSpec(NemoServiceSpec):
    """Desired state of a NemoGuardrail."""

    nim_endpoint: NIMEndpoint | None = Field(default=None, alias="nimEndpoint")
    """NIM endpoint."""
    config_store: GuardrailConfig = Field(default_factory=GuardrailConfig)
    """Configuration store."""
    database_config: DatabaseConfig | None = None
    """Optional PostgreSQL database."""
    otel: OTelSpec | None = None
    """OpenTelemetry."""


class NemoGuardrailStatus(NemoServiceStatus):
    """Observed state of a NemoGuardrail."""


class NemoGuardrail(CustomResource):
    """A NeMo Guardrails service."""

    kind_info = KindInfo(
        group="apps.nvidia.com", version="v1alpha1", kind="NemoGuardrail", plural="nemoguardrails"
    )

    api_version: Literal["apps.nvidia.com/v1alpha1"] = "apps.nvidia.com/v1alpha1"
    kind: Literal["NemoGuardrail"] = "NemoGuardrail"
    spec: NemoGuardrailSpec
    """Desired state."""
    status: NemoGuardrailStatus | None = None
    """Observed state."""
