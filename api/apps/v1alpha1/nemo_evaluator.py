"""NemoEvaluator (apps.nvidia.com/v1alpha1): the NeMo Evaluator service, which
runs evaluation jobs through Argo Workflows against a vector database, the NeMo
Datastore and Entitystore; spec (log levels, evaluation images, OpenTelemetry),
status, API port, labels and finalizer.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from api.apps.v1alpha1.nemo_common import (
    ArgoWorkflows,
    DatabaseConfig,
    Datastore,
    Entitystore,
    LogLevel,
    NemoServiceSpec,
    NemoServiceStatus,
    OTelSpec,
    VectorDB,
)
from api.base import ApiModel, CustomResource, KindInfo

__all__ = [
    "API_PORT",
    "FINALIZER",
    "PART_OF",
    "EvaluationImages",
    "NemoEvaluator",
    "NemoEvaluatorSpec",
    "NemoEvaluatorStatus",
]

FINALIZER: Final = "finalizer.nemoevaluator.apps.nvidia.com"
PART_OF: Final = "nemo-evaluator-service"
"""Value of the `app.kubernetes.io/part-of` label."""
API_PORT: Final = 7331


class EvaluationImages(ApiModel):
    """Images of the evaluation targets."""

    bigcode_eval_harness: str | None = None
    """BigCode evaluation harness."""
    lm_eval_harness: str | None = None
    """LM evaluation harness."""
    similarity_metrics: str | None = None
    """Similarity metrics."""
    llm_as_judge: str | None = None
    """LLM-as-a-judge."""
    mt_bench: str | None = None
    """MT-Bench."""
    retriever: str | None = None
    """Retriever evaluation."""
    rag: str | None = None
    """RAG evaluation."""
    bfcl: str | None = None
    """Berkeley function-calling leaderboard."""
    agentic_eval: str | None = None
    """Agentic evaluation."""


class NemoEvaluatorSpec(NemoServiceSpec):
    """Desired state of a NemoEvaluator."""

    database_config: DatabaseConfig
    """External PostgreSQL database."""
    argo_workflows: ArgoWorkflows
    """Argo Workflows server."""
    vector_db: VectorDB = Field(alias="vectorDB")
    """Vector database."""
    datastore: Datastore
    """NeMo Datastore endpoint."""
    entitystore: Entitystore
    """NeMo Entitystore endpoint."""
    otel: OTelSpec = Field(default_factory=OTelSpec)
    """OpenTelemetry."""
    eval_log_level: LogLevel = "INFO"
    """Evaluator log level."""
    log_handlers: Literal["console", "file"] = "console"
    """Log sink."""
    console_log_level: LogLevel = "INFO"
    """Console log level."""
    enable_validation: bool | None = None
    """Run validation jobs (unset means enabled)."""
    evaluation_images: EvaluationImages
    """Evaluation target images."""


class NemoEvaluatorStatus(NemoServiceStatus):
    """Observed state of a NemoEvaluator."""


class NemoEvaluator(CustomResource):
    """A NeMo Evaluator service."""

    kind_info = KindInfo(
        group="apps.nvidia.com", version="v1alpha1", kind="NemoEvaluator", plural="nemoevaluators"
    )

    api_version: Literal["apps.nvidia.com/v1alpha1"] = "apps.nvidia.com/v1alpha1"
    kind: Literal["NemoEvaluator"] = "NemoEvaluator"
    spec: NemoEvaluatorSpec
    """Desired state."""
    status: NemoEvaluatorStatus | None = None
    """Observed state."""
