"""NemoEvaluator: env for Argo, Milvus, the Datastore and Entitystore, the evaluation images,
Postgres through the ``<name>`` Secret's ``uri``, OTel, and the two init containers (nemo.md).

The operator reads the DB password from the user's Secret and writes it into
Secret ``<name>`` key ``uri`` (``postgresql://user:password@host:port/db``);
the pod reads it from there. The password is in that Secret only.
"""

from __future__ import annotations

import base64
from typing import Any, ClassVar

from api.apps.v1alpha1 import nemo_evaluator as api
from manifests import pod, role
from manifests.meta import object_meta
from platforms.nemo.common import (
    API_PORT_NAME,
    DB_MIGRATION_LIMITS,
    NemoRenderer,
    RenderFailed,
    busybox_wait_for_postgres,
    otel_env,
    postgres_uri,
)

__all__ = ["EVALUATION_IMAGE_ENV", "EvaluatorRenderer", "uri_secret"]

from nimctl_runtime.meta import Obj

EVALUATION_IMAGE_ENV = (
    ("BIGCODE_EVALUATION_HARNESS", "bigcode_eval_harness"),
    ("LM_EVAL_HARNESS", "lm_eval_harness"),
    ("SIMILARITY_METRICS", "similarity_metrics"),
    ("LLM_AS_A_JUDGE", "llm_as_judge"),
    ("MT_BENCH", "mt_bench"),
    ("RETRIEVER", "retriever"),
    ("RAG", "rag"),
    ("BFCL", "bfcl"),
    ("AGENTIC_EVAL", "agentic_eval"),
)
"""Env name and ``evaluationImages`` field of each evaluation target image."""


def uri_secret(renderer: NemoRenderer[Any], key: str, value: str) -> Obj:
    """Secret ``<name>`` holding the connection string the pod reads by ``secretKeyRef``."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(
            renderer.name,
            renderer.namespace,
            labels=renderer.labels,
            annotations=renderer.annotations,
            owner_references=renderer.owner_refs,
        ),
        "type": "Opaque",
        "data": {key: base64.b64encode(value.encode()).decode()},
    }


class EvaluatorRenderer(NemoRenderer[api.NemoEvaluator]):
    part_of: ClassVar[str] = api.PART_OF
    api_port: ClassVar[int] = api.API_PORT
    probe_path: ClassVar[str] = "/health"

    def postgres_env(self) -> list[Obj]:
        creds = self.spec.database_config.credentials
        return [
            pod.secret_env_var("POSTGRES_DB_PASSWORD", creds.secret_name, creds.password_key),
            pod.secret_env_var("POSTGRES_URI", self.name, "uri"),
        ]

    def evaluation_image_env(self) -> list[Obj]:
        images = self.spec.evaluation_images
        return [
            pod.env_var(env, getattr(images, field) or "") for env, field in EVALUATION_IMAGE_ENV
        ]

    def standard_env(self) -> list[Obj]:
        s = self.spec
        env = [
            pod.env_var("NAMESPACE", self.namespace),
            pod.field_env_var("HOST_IP", "status.hostIP"),
            pod.env_var("EVALUATOR_HOST", "0.0.0.0"),
            pod.env_var("EVALUATOR_PORT", str(api.API_PORT)),
            pod.env_var("ARGO_HOST", s.argo_workflows.endpoint),
            pod.env_var("MILVUS_URL", s.vector_db.endpoint),
            pod.env_var("SERVICE_ACCOUNT", s.argo_workflows.service_account),
            pod.env_var("DATA_STORE_URL", s.datastore.endpoint),
            pod.env_var("ENTITY_STORE_URL", s.entitystore.endpoint),
            pod.env_var("EVAL_CONTAINER", self.image),
            pod.env_var("LOG_HANDLERS", s.log_handlers),
            pod.env_var("CONSOLE_LOG_LEVEL", s.console_log_level),
            pod.env_var("EVAL_LOG_LEVEL", s.eval_log_level),
        ]
        if s.enable_validation is None or s.enable_validation:
            env.append(pod.env_var("EVAL_ENABLE_VALIDATION", "True"))
        return [*env, *self.evaluation_image_env(), *self.postgres_env(), *otel_env(s.otel)]

    def init_containers(self) -> list[Obj]:
        s = self.spec
        env = [
            pod.env_var("NAMESPACE", self.namespace),
            pod.env_var("ARGO_HOST", s.argo_workflows.endpoint),
            pod.env_var("EVAL_CONTAINER", self.image),
            pod.env_var("DATA_STORE_URL", s.datastore.endpoint),
            *self.postgres_env(),
            *self.evaluation_image_env(),
        ]
        migration = pod.container(
            "evaluator-db-migration",
            self.image,
            image_pull_policy=self.pull_policy,
            command=["sh", "-c", "/app/scripts/run-db-migration.sh"],
            env=env,
            resources=DB_MIGRATION_LIMITS,
        )
        return [busybox_wait_for_postgres(s.database_config, self.pull_policy), migration]

    def probes(self) -> tuple[Obj, Obj, Obj]:
        """NVIDIA's Evaluator probes: liveness and readiness start at once (no initial delay)."""
        path = self.probe_path
        live = pod.http_get_probe(path, API_PORT_NAME, initial_delay_seconds=0)
        ready = pod.http_get_probe(path, API_PORT_NAME, initial_delay_seconds=0)
        for probe in (live, ready):
            del probe["initialDelaySeconds"]  # 0: the API server leaves it out
        return (
            live,
            ready,
            pod.http_get_probe(path, API_PORT_NAME, initial_delay_seconds=30, failure_threshold=30),
        )

    def role_rules(self) -> list[Obj]:
        """The SCC rule, and the jobs' secrets and pods (get, watch, list, create) as NVIDIA's."""
        return [
            role.scc_rule("nonroot"),
            role.policy_rule([""], ["secrets", "pods"], ["get", "watch", "list", "create"]),
        ]

    def objects_before_deployment(self) -> list[Obj]:
        password = self.facts.db_password
        if password is None:
            raise RenderFailed("the database password has not been read")
        return [uri_secret(self, "uri", postgres_uri(self.spec.database_config, password))]
