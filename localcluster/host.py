"""What localcluster's HTTP layer needs from the cluster that serves it.

``ApiServer``, ``ResourceHandlers`` and ``WatchServer`` are written against
:class:`APIServerHost`, not against ``LocalCluster``: the cluster composes the
server (and its extensions), the server never reaches back for the composition.
``LocalCluster`` is the one implementation; the extension points it exposes
(request hooks, admission plugins, the pod log provider) are filled in by
``extensions.start_extensions`` before the server serves.
"""

from __future__ import annotations

from typing import Protocol

from .crd import CRDController
from .hooks import AdmissionPlugin, PodLogProvider, RequestHook
from .registry import Registry
from .storage import Storage
from .tokens import TokenIssuer


class APIServerHost(Protocol):
    """The cluster state and extension points the request handlers read."""

    host: str
    port: int
    bookmark_interval: float
    kubernetes_version: str
    registry: Registry
    storage: Storage
    crds: CRDController
    request_hooks: list[RequestHook]
    admission_plugins: list[AdmissionPlugin]
    pod_log_provider: PodLogProvider | None
    token_issuer: TokenIssuer

    def user_for_token(self, token: str) -> tuple[str, tuple[str, ...]] | None:
        """The (user, groups) a bearer token authenticates, or None."""
        ...
