"""What NVIDIA's NeMo samples need around them, for ``nimctl local --demo nemo`` and the tests.

NVIDIA's samples (``docs/examples/nemo-*.yaml``) name external services by
their in-cluster DNS names (``<svc>.<namespace>.svc.cluster.local``):
PostgreSQL per service, MinIO, Argo Workflows, Milvus, MLflow, an OTel
collector. ``dependency_objects`` derives, from the CRs themselves, a
Deployment and a Service for each such host that is not one of the NeMo
services, plus the Secrets and ConfigMaps the samples reference (the DB
password Secrets, W&B, NGC and Gitea secrets, the Customizer's model and
training ConfigMaps, the Guardrail config store). On localcluster the
dependency pods become ready, so their Services get ready endpoints, which is
what the NeMo pods' ``wait-for-postgres`` init containers wait for.

Demo passwords are fixed, recognisable strings; they are for a local cluster.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from api.apps.v1alpha1 import nemo_customizer, nemo_datastore, nemo_guardrail
from api.base import CustomResource
from api.serialize import load_all
from nimctl_runtime.meta import Obj

__all__ = [
    "DEMO_NAMESPACE",
    "DEMO_PASSWORD",
    "EXAMPLES_DIR",
    "dependency_objects",
    "dependency_services",
    "sample_crs",
    "secret",
]

DEMO_NAMESPACE = "nemo"
DEMO_PASSWORD = "demo-password"
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "docs" / "examples"
SAMPLE_FILES = (
    "nemo-datastore.yaml",
    "nemo-entitystore.yaml",
    "nemo-evaluator.yaml",
    "nemo-guardrail.yaml",
    "nemo-customizer.yaml",
)
DEPENDENCY_IMAGES = {
    "postgresql": "docker.io/bitnami/postgresql:16",
    "minio": "quay.io/minio/minio:latest",
    "argo": "quay.io/argoproj/argocli:v3.5.5",
    "milvus": "docker.io/milvusdb/milvus:v2.4.4",
    "mlflow": "ghcr.io/mlflow/mlflow:v2.14.1",
    "otel": "docker.io/otel/opentelemetry-collector:0.102.0",
}
SAMPLE_MODELS = """\
meta/llama-3.2-1b-instruct:
  enabled: true
  model_uri: ngc://nvidia/nemo/llama-3_2-1b-instruct:2.0
  model_path: llama32_1b-instruct
  training_options:
    - training_type: sft
      finetuning_type: lora
      num_gpus: 1
  micro_batch_size: 1
  max_seq_length: 4096
  precision: bf16-mixed
"""
SAMPLE_TRAINING = """\
container_defaults:
  imagePullPolicy: IfNotPresent
"""



def sample_crs(directory: Path = EXAMPLES_DIR) -> list[CustomResource]:
    """NVIDIA-style NeMo samples, in dependency order (Datastore first, Customizer last)."""
    out: list[CustomResource] = []
    for name in SAMPLE_FILES:
        path = directory / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: NeMo sample not found (docs/examples of a checkout)")
        out.extend(load_all(path.read_text()))
    return out


def secret(name: str, namespace: str, data: Mapping[str, str]) -> Obj:
    """An Opaque Secret with ``data`` (plain text, encoded here)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def _config_map(name: str, namespace: str, data: Mapping[str, str]) -> Obj:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}


def _host_port(endpoint: str | None, default_port: int) -> tuple[str, int] | None:
    if not endpoint:
        return None
    parts = urlsplit(endpoint if "://" in endpoint else f"tcp://{endpoint}")
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or default_port


def _role(host: str) -> str:
    for role in DEPENDENCY_IMAGES:
        if role in host:
            return role
    return "postgresql" if host.endswith("-pg-postgresql") else "service"


def dependency_services(crs: Iterable[CustomResource]) -> dict[tuple[str, str], set[int]]:
    """(namespace, Service name) → ports of every external host the CRs name."""
    crs = list(crs)
    own = {(cr.metadata.namespace or "default", cr.metadata.name or "") for cr in crs}
    wanted: list[tuple[str, int] | None] = []
    for cr in crs:
        spec: Any = getattr(cr, "spec")  # noqa: B009
        db = getattr(spec, "database_config", None)
        if db is not None:
            wanted.append((db.host, int(db.port)))
        for field in ("datastore", "entitystore", "mlflow", "argo_workflows", "vector_db"):
            dep = getattr(spec, field, None)
            if dep is not None:
                wanted.append(_host_port(dep.endpoint, 80))
        otel = getattr(spec, "otel", None)
        if otel is not None and otel.enabled:
            wanted.append(_host_port(otel.exporter_otlp_endpoint, 4317))
        store = getattr(spec, "object_store_config", None)
        if store is not None:
            wanted.append(_host_port(store.endpoint, 9000))
    out: dict[tuple[str, str], set[int]] = {}
    for item in wanted:
        if item is None:
            continue
        host, port = item
        labels = host.split(".")
        name = labels[0]
        namespace = labels[1] if len(labels) > 1 else DEMO_NAMESPACE
        if (namespace, name) in own:
            continue
        out.setdefault((namespace, name), set()).add(port)
    return out


def _dependency(namespace: str, name: str, ports: set[int]) -> list[Obj]:
    labels = {"app": name, "nimctl.io/demo-dependency": _role(name)}
    container = {
        "name": name,
        "image": DEPENDENCY_IMAGES.get(_role(name), "docker.io/library/busybox:1.36"),
        "ports": [{"containerPort": p, "protocol": "TCP"} for p in sorted(ports)],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"app": name},
            "ports": [
                {"name": f"p{p}", "port": p, "targetPort": p, "protocol": "TCP"}
                for p in sorted(ports)
            ],
        },
    }
    return [deployment, service]


def _secrets_of(cr: CustomResource, namespace: str) -> list[Obj]:
    spec: Any = getattr(cr, "spec")  # noqa: B009
    out: list[Obj] = []
    db = getattr(spec, "database_config", None)
    if db is not None:
        creds = db.credentials
        out.append(secret(creds.secret_name, namespace, {creds.password_key: DEMO_PASSWORD}))
    pulls = spec.image.pull_secrets or []
    for pull in pulls:
        auth = base64.b64encode(b"$oauthtoken:demo").decode()
        config = json.dumps({"auths": {"nvcr.io": {"username": "$oauthtoken", "auth": auth}}})
        pull_secret = secret(pull, namespace, {".dockerconfigjson": config})
        pull_secret["type"] = "kubernetes.io/dockerconfigjson"
        out.append(pull_secret)
    if isinstance(cr, nemo_datastore.NemoDatastore):
        s = spec.secrets
        out.append(
            secret(
                s.gitea_admin_secret,
                namespace,
                {"GITEA_ADMIN_USERNAME": "datastore_admin", "GITEA_ADMIN_PASSWORD": DEMO_PASSWORD},
            )
        )
        out.append(secret(s.lfs_jwt_secret, namespace, {"jwtSecret": "demo-jwt"}))
        out.append(secret(s.datastore_init_secret, namespace, {"init_directory_structure.sh": ""}))
        out.append(secret(s.datastore_config_secret, namespace, {"config_environment.sh": ""}))
        out.append(secret(s.datastore_inline_config_secret, namespace, {"server": ""}))
        store = spec.object_store_config
        if store is not None:
            creds = store.credentials
            out.append(secret(creds.secret_name, namespace, {creds.password_key: DEMO_PASSWORD}))
    if isinstance(cr, nemo_customizer.NemoCustomizer):
        w = spec.wandb
        out.append(
            secret(w.secret_name, namespace, {w.api_key_key: "demo", w.encryption_key: "demo"})
        )
        jobs = spec.model_download_jobs
        out.append(secret(jobs.ngc_api_secret.name, namespace, {jobs.ngc_api_secret.key: "demo"}))
        if jobs.hf_secret is not None:
            out.append(secret(jobs.hf_secret.name, namespace, {jobs.hf_secret.key: "demo"}))
    if isinstance(cr, nemo_guardrail.NemoGuardrail):
        ep = spec.nim_endpoint
        if ep is not None and ep.api_key_secret:
            out.append(secret(ep.api_key_secret, namespace, {ep.api_key_key: "demo"}))
    return out


def _config_maps_of(cr: CustomResource, namespace: str) -> list[Obj]:
    spec: Any = getattr(cr, "spec")  # noqa: B009
    if isinstance(cr, nemo_customizer.NemoCustomizer):
        out = [_config_map(spec.model_config_ref.name, namespace, {"models": SAMPLE_MODELS})]
        training = spec.training_config.config_map
        if training is not None:
            out.append(_config_map(training.name, namespace, {"training": SAMPLE_TRAINING}))
        return out
    if isinstance(cr, nemo_guardrail.NemoGuardrail) and spec.config_store.config_map is not None:
        config = "models: []\n"
        return [_config_map(spec.config_store.config_map.name, namespace, {"config.yml": config})]
    return []


def dependency_objects(crs: Iterable[CustomResource]) -> list[Obj]:
    """Namespaces, Secrets, ConfigMaps and dependency Deployments/Services for ``crs``."""
    crs = list(crs)
    namespaces = sorted({cr.metadata.namespace or "default" for cr in crs})
    out: list[Obj] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces
    ]
    seen: set[tuple[str, str, str]] = set()
    for cr in crs:
        namespace = cr.metadata.namespace or "default"
        for obj in [*_secrets_of(cr, namespace), *_config_maps_of(cr, namespace)]:
            key = (obj["kind"], namespace, obj["metadata"]["name"])
            if key not in seen:
                seen.add(key)
                out.append(obj)
    for (namespace, name), ports in sorted(dependency_services(crs).items()):
        if namespace not in namespaces:
            out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            namespaces.append(namespace)
        out.extend(_dependency(namespace, name, ports))
    return out
