"""apps.nvidia.com/v1alpha1: NIMService, NIMCache, NIMPipeline, NIMBuild and the NeMo
kinds, as typed models. Import kinds and shared shapes from here; kind-specific
constants (states, condition types, reasons) live in each kind's module."""

from api.apps.v1alpha1.common import *  # noqa: F403
from api.apps.v1alpha1.common import __all__ as _common_all
from api.apps.v1alpha1.nemo_common import (
    ArgoWorkflows,
    ConfigMapRef,
    DatabaseConfig,
    DatabaseCredentials,
    Datastore,
    Entitystore,
    MLFlow,
    OTelSpec,
    VectorDB,
    WandBConfig,
)
from api.apps.v1alpha1.nemo_customizer import NemoCustomizer, NemoCustomizerSpec
from api.apps.v1alpha1.nemo_datastore import NemoDatastore, NemoDatastoreSpec
from api.apps.v1alpha1.nemo_entitystore import NemoEntitystore, NemoEntitystoreSpec
from api.apps.v1alpha1.nemo_evaluator import NemoEvaluator, NemoEvaluatorSpec
from api.apps.v1alpha1.nemo_guardrail import NemoGuardrail, NemoGuardrailSpec
from api.apps.v1alpha1.nimbuild import NIMBuild, NIMBuildSpec, NIMBuildStatus
from api.apps.v1alpha1.nimcache import (
    HuggingFaceHubSource,
    ModelSpec,
    NemoDataStoreSource,
    NGCSource,
    NIMCache,
    NIMCacheSpec,
    NIMCacheStatus,
    NimCacheStorage,
    NIMProfile,
    NIMSource,
)
from api.apps.v1alpha1.nimpipeline import (
    NIMPipeline,
    NIMPipelineSpec,
    NIMPipelineStatus,
    NIMServicePipelineSpec,
    ServiceDependency,
)
from api.apps.v1alpha1.nimservice import (
    DRAResource,
    NIMCacheVolSpec,
    NIMService,
    NIMServiceMultiNodeConfig,
    NIMServiceSpec,
    NIMServiceStatus,
    NIMServiceStorage,
)

__all__ = [  # noqa: PLE0604
    *_common_all,
    "ArgoWorkflows",
    "ConfigMapRef",
    "DatabaseConfig",
    "DatabaseCredentials",
    "Datastore",
    "Entitystore",
    "MLFlow",
    "NemoCustomizer",
    "NemoCustomizerSpec",
    "NemoDatastore",
    "NemoDatastoreSpec",
    "NemoEntitystore",
    "NemoEntitystoreSpec",
    "NemoEvaluator",
    "NemoEvaluatorSpec",
    "NemoGuardrail",
    "NemoGuardrailSpec",
    "OTelSpec",
    "VectorDB",
    "WandBConfig",
    "DRAResource",
    "HuggingFaceHubSource",
    "ModelSpec",
    "NGCSource",
    "NIMBuild",
    "NIMBuildSpec",
    "NIMBuildStatus",
    "NIMCache",
    "NIMCacheSpec",
    "NIMCacheStatus",
    "NIMCacheVolSpec",
    "NIMPipeline",
    "NIMPipelineSpec",
    "NIMPipelineStatus",
    "NIMProfile",
    "NIMService",
    "NIMServiceMultiNodeConfig",
    "NIMServicePipelineSpec",
    "NIMServiceSpec",
    "NIMServiceStatus",
    "NIMServiceStorage",
    "NIMSource",
    "NemoDataStoreSource",
    "NimCacheStorage",
    "ServiceDependency",
]
