"""NemoEntitystore: the Entity Store's Deployment env, init containers and probes (nemo.md).

Postgres comes in as ``POSTGRES_*`` env with the password read by the pod from
the user's Secret (``secretKeyRef``); the operator never reads it. Init
containers wait for the Postgres host, then run the schema migration.
"""

from __future__ import annotations

from typing import ClassVar

from api.apps.v1alpha1 import nemo_entitystore as api
from manifests import pod
from manifests.labels import APP_LABEL, INSTANCE_LABEL, NAME_LABEL
from platforms.nemo.common import (
    API_PORT_NAME,
    DB_MIGRATION_LIMITS,
    NemoRenderer,
    busybox_wait_for_postgres,
)

__all__ = ["EntitystoreRenderer"]

from nimctl_runtime.meta import Obj


class EntitystoreRenderer(NemoRenderer[api.NemoEntitystore]):
    part_of: ClassVar[str] = api.PART_OF
    api_port: ClassVar[int] = api.API_PORT
    probe_path: ClassVar[str] = "/health"

    def service_selector(self) -> dict[str, str]:
        return {APP_LABEL: self.name, NAME_LABEL: self.name, INSTANCE_LABEL: self.name}

    def postgres_env(self) -> list[Obj]:
        db = self.spec.database_config
        return [
            pod.env_var("POSTGRES_USER", db.credentials.user),
            pod.env_var("POSTGRES_HOST", db.host),
            pod.env_var("POSTGRES_PORT", str(db.port)),
            pod.env_var("POSTGRES_DB", db.database_name),
            pod.secret_env_var(
                "POSTGRES_PASSWORD", db.credentials.secret_name, db.credentials.password_key
            ),
        ]

    def standard_env(self) -> list[Obj]:
        return [
            pod.env_var("APP_VERSION", self.spec.image.tag),
            pod.env_var("BASE_URL_DATASTORE", self.spec.datastore.endpoint),
            *self.postgres_env(),
        ]

    def init_containers(self) -> list[Obj]:
        db = self.spec.database_config
        migration = pod.container(
            "entitystore-db-migration",
            self.image,
            image_pull_policy=self.pull_policy,
            command=["/app/.venv/bin/python3"],
            args=["-m", "scripts.run_db_migration"],
            working_dir="/app/services/entity-store",
            env=self.postgres_env(),
            resources=DB_MIGRATION_LIMITS,
        )
        return [busybox_wait_for_postgres(db, self.pull_policy, final_semicolon=True), migration]

    def probes(self) -> tuple[Obj, Obj, Obj]:
        """NVIDIA's Entitystore timings (liveness 3 s/20 s/10, readiness 10 s/20 s/20)."""
        path = self.probe_path
        return (
            pod.http_get_probe(
                path,
                API_PORT_NAME,
                initial_delay_seconds=3,
                timeout_seconds=20,
                failure_threshold=10,
            ),
            pod.http_get_probe(
                path,
                API_PORT_NAME,
                initial_delay_seconds=10,
                timeout_seconds=20,
                failure_threshold=20,
            ),
            pod.http_get_probe(path, API_PORT_NAME, initial_delay_seconds=30, failure_threshold=30),
        )
