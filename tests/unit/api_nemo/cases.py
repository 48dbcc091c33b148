"""Table of invalid NeMo manifests, one row per CEL rule, bound, enum and pattern
of the five NeMo kinds, shared by the model-level tests and the API-server
(localcluster) tests.

Each row starts from the valid base manifest of its kind (:data:`BASES`), applies
edits (a dotted path with ``[i]`` indexes set to a value, or ``DELETE``), and
states the field path the API server reports the error at and what it says:
NVIDIA's message for a CEL rule, or a fragment of Kubernetes' wording otherwise.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final

from tests.unit.api.negative_cases import (
    DELETE,
    ENUM,
    GE,
    LE,
    MIN_LEN,
    PATTERN,
    REQUIRED,
    set_path,
)

API = "apps.nvidia.com/v1alpha1"
IMAGE = {"repository": "nvcr.io/nvidia/nemo-microservices/x", "tag": "25.08"}
DB = {
    "host": "pg.nemo.svc",
    "databaseName": "db",
    "credentials": {"user": "u", "secretName": "pg-secret"},
}
EXPOSE = {"service": {"type": "ClusterIP"}}
GW = {"namespace": "gw", "name": "gw"}


def _base(kind: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": "neg", "namespace": "nemo"},
        "spec": {"image": IMAGE, "expose": EXPOSE, **spec},
    }


BASES: Final[dict[str, dict[str, Any]]] = {
    "NemoEntitystore": _base(
        "NemoEntitystore", databaseConfig=DB, datastore={"endpoint": "http://ds:8000"}
    ),
    "NemoDatastore": _base(
        "NemoDatastore",
        databaseConfig=DB,
        secrets={
            "giteaAdminSecret": "a",
            "lfsJwtSecret": "b",
            "datastoreInitSecret": "c",
            "datastoreConfigSecret": "d",
            "datastoreInlineConfigSecret": "e",
        },
    ),
    "NemoEvaluator": _base(
        "NemoEvaluator",
        databaseConfig=DB,
        argoWorkflows={"endpoint": "https://argo:2746", "serviceAccount": "argo"},
        vectorDB={"endpoint": "http://milvus:19530"},
        datastore={"endpoint": "http://ds:8000"},
        entitystore={"endpoint": "http://es:8000"},
        evaluationImages={"rag": "nvcr.io/x/rag:1"},
    ),
    "NemoGuardrail": _base("NemoGuardrail", configStore={"configMap": {"name": "gr-config"}}),
    "NemoCustomizer": _base(
        "NemoCustomizer",
        databaseConfig=DB,
        datastore={"endpoint": "http://ds:8000"},
        entitystore={"endpoint": "http://es:8000"},
        mlflow={"endpoint": "http://mlflow:80"},
        nemoDatastoreTools={"image": "nvcr.io/x/tools:1"},
        modelDownloadJobs={
            "image": "nvcr.io/x/dl:1",
            "ngcAPISecret": {"name": "ngc-api"},
            "ttlSecondsAfterFinished": 600,
            "pollIntervalSeconds": 15,
        },
        trainingConfig={
            "modelPVC": {"create": True, "size": "50Gi"},
            "workspacePVC": {"size": "10Gi"},
            "image": IMAGE,
        },
        modelConfig={"name": "models"},
        wandb={"secretName": "wandb"},
    ),
}


@dataclass(frozen=True)
class Case:
    """One invalid manifest and the error it must get."""

    id: str
    kind: str
    edits: tuple[tuple[str, Any], ...]
    path: str
    message: str
    """NVIDIA's CEL message, or a fragment of Kubernetes' wording."""
    cel: bool = False

    def manifest(self) -> dict[str, Any]:
        obj = copy.deepcopy(BASES[self.kind])
        for path, value in self.edits:
            set_path(obj, path, value)
        return obj


def cel(id_: str, kind: str, edits: dict[str, Any], path: str, message: str) -> Case:
    return Case(id_, kind, tuple(edits.items()), path, message, cel=True)


def bound(id_: str, kind: str, edits: dict[str, Any], path: str, fragment: str) -> Case:
    return Case(id_, kind, tuple(edits.items()), path, fragment)


CU, DS, ES, EV, GR = (
    "NemoCustomizer",
    "NemoDatastore",
    "NemoEntitystore",
    "NemoEvaluator",
    "NemoGuardrail",
)
DEPRECATED_INGRESS = (
    ".spec.expose.ingress is deprecated, and will be removed in a future release. If "
    ".spec.expose.ingress is set, please do not set .spec.expose.router.ingress."
)
ROUTER_INGRESS = {"hostDomainName": "example.com", "ingress": {"ingressClass": "nginx"}}

CASES: Final[tuple[Case, ...]] = (
    # ---- CEL rules shared by every NeMo spec (one row per rule and kind) ----------------
    *(
        cel(f"{kind.lower()}-deprecated-ingress-with-router-ingress", kind,
            {"spec.expose.ingress": {"enabled": True, "spec": {"ingressClassName": "nginx"}},
             "spec.expose.router": ROUTER_INGRESS},
            "spec", DEPRECATED_INGRESS)
        for kind in (CU, DS, ES, EV, GR)
    ),
    *(
        cel(f"{kind.lower()}-replicas-with-autoscaling", kind,
            {"spec.replicas": 2, "spec.scale": {"enabled": True, "hpa": {"maxReplicas": 3}}},
            "spec", "spec.replicas cannot be set when spec.scale.enabled is true")
        for kind in (CU, DS, ES, EV, GR)
    ),
    cel("expose-grpc-port", ES, {"spec.expose.service.grpcPort": 50051},
        "spec.expose", "unsupported field: spec.expose.service.grpcPort"),
    cel("expose-metrics-port", EV, {"spec.expose.service.metricsPort": 9090},
        "spec.expose", "unsupported field: spec.expose.service.metricsPort"),
    cel("router-grpc-routes", GR,
        {"spec.expose.router": {"gateway": {**GW, "grpcRoutesEnabled": True}}},
        "spec.expose.router", "unsupported field: spec.expose.router.gateway.grpcRoutesEnabled"),
    cel("router-ingress-and-gateway", CU,
        {"spec.expose.router": {**ROUTER_INGRESS, "gateway": GW}},
        "spec.expose.router", "ingress and gateway cannot be specified together"),
    cel("ingress-enabled-without-spec", DS, {"spec.expose.ingress": {"enabled": True}},
        "spec.expose.ingress", "spec cannot be nil when ingress is enabled"),
    cel("backendref-service-without-port", ES,
        {"spec.expose.router.gateway": {**GW, "backendRef": {"name": "svc"}}},
        "spec.expose.router.gateway.backendRef", "Must have port for Service reference"),
    cel("configstore-configmap-and-pvc", GR,
        {"spec.configStore": {"configMap": {"name": "c"}, "pvc": {"name": "p"}}},
        "spec.configStore", "Cannot set both ConfigMap and PVC in ConfigStore"),
    # ---- shared bounds, enums, patterns --------------------------------------------------
    bound("replicas-zero", ES, {"spec.replicas": 0}, "spec.replicas", GE),
    bound("service-port-too-big", DS, {"spec.expose.service.port": 65536},
          "spec.expose.service.port", LE),
    bound("hpa-min-replicas-zero", GR,
          {"spec.scale": {"enabled": True, "hpa": {"minReplicas": 0, "maxReplicas": 2}}},
          "spec.scale.hpa.minReplicas", GE),
    bound("ingress-class-name-pattern", ES,
          {"spec.expose.ingress": {"enabled": False, "spec": {"ingressClassName": "!!"}}},
          "spec.expose.ingress.spec.ingressClassName", PATTERN),
    bound("router-host-domain-pattern", EV,
          {"spec.expose.router": {"hostDomainName": "Example.COM",
                                  "ingress": {"ingressClass": "nginx"}}},
          "spec.expose.router.hostDomainName", PATTERN),
    bound("servicemonitor-interval-pattern", GR,
          {"spec.metrics": {"enabled": True, "serviceMonitor": {"interval": "30 sec"}}},
          "spec.metrics.serviceMonitor.interval", PATTERN),
    bound("image-tag-missing", GR, {"spec.image": {"repository": "r"}},
          "spec.image.tag", REQUIRED),
    bound("image-missing", CU, {"spec.image": DELETE}, "spec.image", REQUIRED),
    # ---- databaseConfig --------------------------------------------------------------------
    bound("db-port-zero", ES, {"spec.databaseConfig.port": 0}, "spec.databaseConfig.port", GE),
    bound("db-port-too-big", EV, {"spec.databaseConfig.port": 70000},
          "spec.databaseConfig.port", LE),
    bound("db-host-empty", DS, {"spec.databaseConfig.host": ""},
          "spec.databaseConfig.host", MIN_LEN),
    bound("db-name-empty", CU, {"spec.databaseConfig.databaseName": ""},
          "spec.databaseConfig.databaseName", MIN_LEN),
    bound("db-user-empty", ES, {"spec.databaseConfig.credentials.user": ""},
          "spec.databaseConfig.credentials.user", MIN_LEN),
    bound("db-secret-empty", EV, {"spec.databaseConfig.credentials.secretName": ""},
          "spec.databaseConfig.credentials.secretName", MIN_LEN),
    bound("db-credentials-missing", DS, {"spec.databaseConfig.credentials": DELETE},
          "spec.databaseConfig.credentials", REQUIRED),
    bound("db-missing", ES, {"spec.databaseConfig": DELETE}, "spec.databaseConfig", REQUIRED),
    # ---- endpoints -------------------------------------------------------------------------
    bound("entitystore-datastore-endpoint-pattern", ES,
          {"spec.datastore.endpoint": "ftp://ds"}, "spec.datastore.endpoint", PATTERN),
    bound("customizer-entitystore-endpoint-pattern", CU,
          {"spec.entitystore.endpoint": "es:8000"}, "spec.entitystore.endpoint", PATTERN),
    bound("customizer-mlflow-endpoint-empty", CU, {"spec.mlflow.endpoint": ""},
          "spec.mlflow.endpoint", MIN_LEN),
    bound("evaluator-vectordb-endpoint-pattern", EV,
          {"spec.vectorDB.endpoint": "milvus:19530"}, "spec.vectorDB.endpoint", PATTERN),
    bound("evaluator-argo-endpoint-pattern", EV,
          {"spec.argoWorkflows.endpoint": "argo:2746"}, "spec.argoWorkflows.endpoint", PATTERN),
    bound("evaluator-argo-service-account-missing", EV,
          {"spec.argoWorkflows.serviceAccount": DELETE},
          "spec.argoWorkflows.serviceAccount", REQUIRED),
    # ---- NemoEvaluator ---------------------------------------------------------------------
    bound("evaluator-eval-log-level-enum", EV, {"spec.evalLogLevel": "TRACE"},
          "spec.evalLogLevel", ENUM),
    bound("evaluator-log-handlers-enum", EV, {"spec.logHandlers": "syslog"},
          "spec.logHandlers", ENUM),
    bound("evaluator-console-log-level-enum", EV, {"spec.consoleLogLevel": "info"},
          "spec.consoleLogLevel", ENUM),
    bound("evaluator-images-missing", EV, {"spec.evaluationImages": DELETE},
          "spec.evaluationImages", REQUIRED),
    bound("evaluator-otel-log-level-enum", EV, {"spec.otel": {"logLevel": "WARN"}},
          "spec.otel.logLevel", ENUM),
    bound("evaluator-otel-traces-exporter-enum", EV,
          {"spec.otel": {"exporterConfig": {"tracesExporter": "jaeger"}}},
          "spec.otel.exporterConfig.tracesExporter", ENUM),
    bound("evaluator-otel-metrics-exporter-enum", EV,
          {"spec.otel": {"exporterConfig": {"metricsExporter": "prometheus"}}},
          "spec.otel.exporterConfig.metricsExporter", ENUM),
    bound("evaluator-otel-logs-exporter-enum", EV,
          {"spec.otel": {"exporterConfig": {"logsExporter": "file"}}},
          "spec.otel.exporterConfig.logsExporter", ENUM),
    # ---- NemoDatastore ---------------------------------------------------------------------
    bound("datastore-secrets-missing", DS, {"spec.secrets": DELETE}, "spec.secrets", REQUIRED),
    bound("datastore-lfs-secret-missing", DS, {"spec.secrets.lfsJwtSecret": DELETE},
          "spec.secrets.lfsJwtSecret", REQUIRED),
    bound("datastore-object-store-bucket-missing", DS,
          {"spec.objectStoreConfig": {
              "credentials": {"user": "u", "secretName": "s", "passwordKey": "p"},
              "endpoint": "minio:9000", "region": "us-east-1", "ssl": False}},
          "spec.objectStoreConfig.bucketName", REQUIRED),
    # ---- NemoGuardrail ---------------------------------------------------------------------
    bound("guardrail-base-url-pattern", GR,
          {"spec.nimEndpoint": {"baseURL": "https://integrate.api.nvidia.com/v2"}},
          "spec.nimEndpoint.baseURL", PATTERN),
    bound("guardrail-base-url-missing", GR, {"spec.nimEndpoint": {"apiKeySecret": "k"}},
          "spec.nimEndpoint.baseURL", REQUIRED),
    bound("guardrail-configmap-name-empty", GR, {"spec.configStore.configMap.name": ""},
          "spec.configStore.configMap.name", MIN_LEN),
    # ---- NemoCustomizer --------------------------------------------------------------------
    bound("customizer-scheduler-enum", CU, {"spec.scheduler.type": "kueue"},
          "spec.scheduler.type", ENUM),
    bound("customizer-download-ttl-too-small", CU,
          {"spec.modelDownloadJobs.ttlSecondsAfterFinished": 59},
          "spec.modelDownloadJobs.ttlSecondsAfterFinished", GE),
    bound("customizer-download-poll-too-small", CU,
          {"spec.modelDownloadJobs.pollIntervalSeconds": 14},
          "spec.modelDownloadJobs.pollIntervalSeconds", GE),
    bound("customizer-download-pull-policy-enum", CU,
          {"spec.modelDownloadJobs.imagePullPolicy": "Sometimes"},
          "spec.modelDownloadJobs.imagePullPolicy", ENUM),
    bound("customizer-download-image-empty", CU, {"spec.modelDownloadJobs.image": ""},
          "spec.modelDownloadJobs.image", MIN_LEN),
    bound("customizer-download-ngc-secret-missing", CU,
          {"spec.modelDownloadJobs.ngcAPISecret": DELETE},
          "spec.modelDownloadJobs.ngcAPISecret", REQUIRED),
    bound("customizer-tools-image-empty", CU, {"spec.nemoDatastoreTools.image": ""},
          "spec.nemoDatastoreTools.image", MIN_LEN),
    bound("customizer-model-config-name-empty", CU, {"spec.modelConfig.name": ""},
          "spec.modelConfig.name", MIN_LEN),
    bound("customizer-wandb-secret-empty", CU, {"spec.wandb.secretName": ""},
          "spec.wandb.secretName", MIN_LEN),
    bound("customizer-wandb-api-key-empty", CU, {"spec.wandb.apiKeyKey": ""},
          "spec.wandb.apiKeyKey", MIN_LEN),
    bound("customizer-training-model-pvc-missing", CU,
          {"spec.trainingConfig.modelPVC": DELETE}, "spec.trainingConfig.modelPVC", REQUIRED),
    bound("customizer-training-shm-quantity-pattern", CU,
          {"spec.trainingConfig.sharedMemorySizeLimit": "8 GB"},
          "spec.trainingConfig.sharedMemorySizeLimit", PATTERN),
    bound("customizer-training-config-missing", CU, {"spec.trainingConfig": DELETE},
          "spec.trainingConfig", REQUIRED),
)
