"""The wiring point between the localcluster API server and its part-2 extensions.

``LocalCluster.start()`` calls :func:`start_extensions` once storage exists and
before the HTTP server serves; ``LocalCluster.stop()`` awaits
``Extensions.stop()`` first. The extensions (simulator, audit log, fault
injection, admission webhooks) attach themselves through the hooks the cluster
exposes (``request_hooks``, ``admission_plugins``, ``pod_log_provider``) and
through ``cluster.storage``; nothing here reaches into the server's internals.
"""

from __future__ import annotations

from typing import Any


class Extensions:
    """The running extensions of one LocalCluster; ``stop()`` shuts them down."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self._stopped = False

    async def stop(self) -> None:
        """Stop every extension (idempotent)."""
        self._stopped = True


async def start_extensions(cluster: Any) -> Extensions:
    """Install the extensions on *cluster* and start their background tasks."""
    return Extensions(cluster)
