"""What a NeMo render needs from the cluster, looked up before rendering.

``controllers.nemo`` reads these from the cache (and the DB password through
the uncached reader) and hands them to the pure render in ``platforms.nemo``;
``nimctl render`` builds them from files or leaves them empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nimctl_runtime.meta import Obj, ObjView
from platforms.capabilities import Capabilities

__all__ = ["NemoFacts"]


@dataclass(frozen=True)
class NemoFacts:
    """Inputs of a NeMo render besides the CR itself.

    ``db_password`` is the value of ``databaseConfig.credentials`` in the
    user's Secret; only the kinds that write a connection-string Secret
    (Customizer ``dsn``, Evaluator and Guardrail ``uri``) read it, and it goes
    into that Secret and nowhere else. ``config_maps`` holds the ``data`` of
    the ConfigMaps the CR references (the Customizer's model and training
    configuration), by name. ``versions`` is not read by the render.
    """

    capabilities: Capabilities = field(default_factory=Capabilities.nothing)
    operator_version: str = ""
    db_password: str | None = field(default=None, repr=False)
    config_maps: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    versions: tuple[Any, ...] = ()
    """What the facts were read from (resourceVersions): the controller's render memo key."""
    pods: tuple[Obj, ...] = ()
    """The Deployment's pods, for readiness's blocker finder (not read by the render)."""
    events: tuple[Obj, ...] = ()
    """Warning Events about those pods."""
    nodes: tuple[ObjView, ...] | None = None
    """The cluster's nodes, only when a pod waits for a GPU or a node (else None)."""

    def config_map_data(self, name: str) -> Mapping[str, str] | None:
        return self.config_maps.get(name)
