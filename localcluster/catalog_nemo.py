"""Catalog data for NVIDIA's NeMo microservice images (read by ``catalog.builtin_rules``).

Each entry is ``(image pattern, command-line substring, logs, exit code, run
seconds)``, as :class:`~localcluster.catalog.CatalogRule` takes
them: the database migrations and the Data Store's init scripts print what
they did and exit 0 after a simulated second; the services print their start-up
lines and keep running. (The ``wait-for-postgres`` loops are held by the
simulator until their Service answers: ``simulator.tcpwait``.)
"""

from __future__ import annotations

__all__ = ["NEMO_RULES"]

NEMO_IMAGES = "nvcr.io/nvidia/nemo-microservices/*"
MIGRATION_LOG = """\
INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.
INFO  [alembic.runtime.migration] Will assume transactional DDL.
INFO  [alembic.runtime.migration] Running upgrade  -> head
Database migration complete
"""
SERVICE_LOG = """\
INFO:     Started server process [1]
INFO:     Waiting for application startup.
INFO:     Application startup complete.
"""
GITEA_INIT_LOG = "Gitea directories and app.ini prepared\n"
GITEA_CONFIGURE_LOG = "Gitea admin user and database configured\n"

NEMO_RULES: tuple[tuple[str, str, str, int | None, float], ...] = (
    (NEMO_IMAGES, "run_db_migration", MIGRATION_LOG, 0, 1.0),
    (NEMO_IMAGES, "run-db-migration", MIGRATION_LOG, 0, 1.0),
    (NEMO_IMAGES, "alembic upgrade head", MIGRATION_LOG, 0, 1.0),
    (NEMO_IMAGES, "init_directory_structure.sh", GITEA_INIT_LOG, 0, 1.0),
    (NEMO_IMAGES, "config_environment.sh", GITEA_INIT_LOG, 0, 1.0),
    (NEMO_IMAGES, "configure_gitea.sh", GITEA_CONFIGURE_LOG, 0, 1.0),
    (NEMO_IMAGES, "", SERVICE_LOG, None, 0.0),
)
"""NeMo images: migrations and init scripts exit 0, the services run."""
