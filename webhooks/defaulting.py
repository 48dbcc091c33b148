"""Mutating admission for NIMService and NIMCache: the defaults the CRD cannot express.

NVIDIA's CRDs (which ours match field for field) leave some defaults to the
operator's code, and some depend on other fields, which a CRD ``default:``
cannot do. This webhook writes them into the spec, so what a user reads back
is what runs. The list is explicit (``NIMSERVICE_DEFAULTS``,
``NIMCACHE_DEFAULTS``) and each entry only fills a field that is absent:

NIMService
  ``spec.userID: 1000`` and ``spec.groupID: 2000`` (the pod's user and group);
  ``spec.replicas: 1`` unless autoscaling is on (``replicas`` and
  ``scale.enabled`` exclude each other);
  ``spec.multiNode.mpi: {mpiStartTimeout: 300}`` for a multi-node service
  that names neither ``mpi`` nor ``ray`` (MPI is the default mode).
NIMCache
  ``spec.userID: 1000`` and ``spec.groupID: 2000``;
  ``spec.nodeSelector: {feature.node.kubernetes.io/pci-10de.present: "true"}``
  when none is given (the caching pods run on NVIDIA GPU nodes).

On CREATE every default applies. On UPDATE a default is only put back where
the old object had exactly that value and the new one dropped the field (a
``kubectl replace`` of the original manifest): a default never appears in an
existing object's spec on its own, so the immutability rules (``multiNode``,
a NIMCache's whole spec) never see a change the user did not make. A second
admission of an admitted object changes nothing. ``--disable-defaulting``
turns the webhook off; NVIDIA's operator instead rewrites the whole spec from
its Go types when it adds its finalizer.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nimctl_runtime.meta import Obj
from nimctl_runtime.webhook import AdmissionRequest, AdmissionResponse, allowed
from nimctl_runtime.webhook.admission import errored, patched

GPU_NODE_SELECTOR = {"feature.node.kubernetes.io/pci-10de.present": "true"}

__all__ = [
    "NIMCACHE_DEFAULTS",
    "NIMSERVICE_DEFAULTS",
    "Default",
    "DefaultingWebhook",
    "apply_defaults",
]


@dataclass(frozen=True)
class Default:
    """One default: ``path`` under ``spec`` gets ``value`` when absent and ``applies``."""

    path: tuple[str, ...]
    value: Any
    applies: Callable[[Mapping[str, Any]], bool] = lambda spec: True

    def get(self, spec: Mapping[str, Any]) -> Any:
        node: Any = spec
        for key in self.path:
            if not isinstance(node, Mapping) or key not in node:
                return None
            node = node[key]
        return node

    def has(self, spec: Mapping[str, Any]) -> bool:
        node: Any = spec
        for key in self.path:
            if not isinstance(node, Mapping) or key not in node or node[key] is None:
                return False
            node = node[key]
        return True

    def set(self, spec: Obj) -> None:
        node = spec
        for key in self.path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        node[self.path[-1]] = copy.deepcopy(self.value)


def _not_autoscaled(spec: Mapping[str, Any]) -> bool:
    return not (spec.get("scale") or {}).get("enabled")


def _mpi_by_default(spec: Mapping[str, Any]) -> bool:
    multi = spec.get("multiNode")
    return isinstance(multi, Mapping) and "mpi" not in multi and "ray" not in multi


NIMSERVICE_DEFAULTS: tuple[Default, ...] = (
    Default(("userID",), 1000),
    Default(("groupID",), 2000),
    Default(("replicas",), 1, _not_autoscaled),
    Default(("multiNode", "mpi"), {"mpiStartTimeout": 300}, _mpi_by_default),
)
NIMCACHE_DEFAULTS: tuple[Default, ...] = (
    Default(("userID",), 1000),
    Default(("groupID",), 2000),
    Default(("nodeSelector",), GPU_NODE_SELECTOR, lambda spec: not spec.get("nodeSelector")),
)


def apply_defaults(
    obj: Obj, defaults: tuple[Default, ...], old: Mapping[str, Any] | None = None
) -> Obj:
    """``obj`` with the defaults filled in (``old``: the object before an UPDATE)."""
    out = copy.deepcopy(obj)
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    old_spec = (old or {}).get("spec") if old is not None else None
    for default in defaults:
        if default.has(spec) or not default.applies(spec):
            continue
        # UPDATE: only put back a default the old object carried.
        if old is not None and (
            not isinstance(old_spec, Mapping) or default.get(old_spec) != default.value
        ):
            continue
        default.set(spec)
    return out


class DefaultingWebhook:
    """The admission handler of one kind's defaults (CREATE and UPDATE)."""

    def __init__(self, defaults: tuple[Default, ...]) -> None:
        self.defaults = defaults

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed()
        if request.object is None:
            return errored(400, f"{request.operation} request carries no object")
        old = request.old_object if request.operation == "UPDATE" else None
        if request.operation == "UPDATE" and old is None:
            return allowed()
        return patched(request.object, apply_defaults(request.object, self.defaults, old))
