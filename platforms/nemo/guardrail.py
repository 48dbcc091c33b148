"""NemoGuardrail: the guardrails server's env, its config store (a ConfigMap or a PVC) and,
with ``databaseConfig``, Postgres through the ``<name>`` Secret (nim-operator.md §5, nemo.md).

The config store is mounted at ``/config-store``: a ConfigMap as is, a PVC on
sub-path ``guardrails-config-store`` unless ``subPath`` says otherwise. A PVC
with ``create: true`` is created by the operator and owned by the CR (never
pruned while the CR exists, deleted with it, as NVIDIA's); one without must
exist already.
"""

from __future__ import annotations

from typing import ClassVar

from api.apps.v1alpha1 import nemo_guardrail as api
from manifests import pod
from manifests.labels import APP_LABEL, INSTANCE_LABEL, NAME_LABEL
from platforms.nemo.common import (
    DB_MIGRATION_LIMITS,
    NemoRenderer,
    RenderFailed,
    busybox_wait_for_postgres,
    otel_env,
    postgres_uri,
    pvc_name,
)
from platforms.nemo.evaluator import uri_secret

__all__ = ["CONFIG_STORE_MOUNT", "DEFAULT_CONFIG_STORE_SUB_PATH", "GuardrailRenderer"]

from nimctl_runtime.meta import Obj

CONFIG_STORE_MOUNT = "/config-store"
DEFAULT_CONFIG_STORE_SUB_PATH = "guardrails-config-store"


class GuardrailRenderer(NemoRenderer[api.NemoGuardrail]):
    part_of: ClassVar[str] = api.PART_OF
    api_port: ClassVar[int] = api.API_PORT

    def service_selector(self) -> dict[str, str]:
        return {APP_LABEL: self.name, NAME_LABEL: self.name, INSTANCE_LABEL: self.name}

    def config_store_pvc_name(self) -> str | None:
        store = self.spec.config_store
        return pvc_name(self.name, store.pvc) if store.pvc is not None else None

    def postgres_env(self) -> list[Obj]:
        db = self.spec.database_config
        if db is None:
            return []
        creds = db.credentials
        return [
            pod.secret_env_var("POSTGRES_DB_PASSWORD", creds.secret_name, creds.password_key),
            pod.secret_env_var("POSTGRES_URI", self.name, "uri"),
            pod.secret_env_var("DB_URI", self.name, "uri"),
        ]

    def standard_env(self) -> list[Obj]:
        env = [
            pod.env_var("CONFIG_STORE_PATH", CONFIG_STORE_MOUNT),
            pod.env_var("DEFAULT_CONFIG_ID", "default"),
            pod.env_var("DEFAULT_LLM_PROVIDER", "nim"),
            pod.env_var("NEMO_GUARDRAILS_SERVER_ENABLE_CORS", "False"),
            pod.env_var("NEMO_GUARDRAILS_SERVER_ALLOWED_ORIGINS", "*"),
            pod.env_var("GUARDRAILS_HOST", "0.0.0.0"),
            pod.env_var("GUARDRAILS_PORT", str(api.API_PORT)),
            pod.env_var("DEMO", "False"),
        ]
        endpoint = self.spec.nim_endpoint
        if endpoint is not None:
            env.append(pod.env_var("NIM_ENDPOINT_URL", endpoint.base_url))
            if endpoint.api_key_secret:
                env.append(
                    pod.secret_env_var(
                        "NIM_ENDPOINT_API_KEY", endpoint.api_key_secret, endpoint.api_key_key
                    )
                )
        env.extend(self.postgres_env())
        env.extend(otel_env(self.spec.otel))  # OTEL_SDK_DISABLED=true without otel, as NVIDIA's
        return env

    def init_containers(self) -> list[Obj]:
        db = self.spec.database_config
        if db is None:
            return []
        migration = pod.container(
            "guardrail-db-migration",
            self.image,
            image_pull_policy=self.pull_policy,
            command=["/app/.venv/bin/alembic"],
            args=["upgrade", "head"],
            working_dir="/app/services/guardrails",
            env=[
                pod.env_var("NAMESPACE", self.namespace),
                pod.env_var("PYTHONPATH", "/app/services/guardrails"),
                *self.postgres_env(),
            ],
            resources=DB_MIGRATION_LIMITS,
        )
        return [busybox_wait_for_postgres(db, self.pull_policy), migration]

    def volumes(self) -> list[Obj]:
        store = self.spec.config_store
        if store.config_map is not None:
            return [pod.config_map_volume("config-store", store.config_map.name)]
        claim = self.config_store_pvc_name()
        if claim is not None:
            return [pod.pvc_volume("config-store", claim)]
        return []

    def volume_mounts(self) -> list[Obj]:
        store = self.spec.config_store
        if store.config_map is not None:
            return [pod.volume_mount("config-store", CONFIG_STORE_MOUNT)]
        if store.pvc is not None:
            sub_path = store.pvc.sub_path or DEFAULT_CONFIG_STORE_SUB_PATH
            return [pod.volume_mount("config-store", CONFIG_STORE_MOUNT, sub_path=sub_path)]
        return []

    def objects_before_service(self) -> list[Obj]:
        store = self.spec.config_store
        if store.pvc is not None and store.pvc.create:
            name = self.config_store_pvc_name() or ""
            return [self.created_pvc(store.pvc, name, "spec.configStore.pvc")]
        return []

    def objects_before_deployment(self) -> list[Obj]:
        db = self.spec.database_config
        if db is None:
            return []
        if self.facts.db_password is None:
            raise RenderFailed("the database password has not been read")
        return [uri_secret(self, "uri", postgres_uri(db, self.facts.db_password))]
