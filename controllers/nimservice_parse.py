"""Parse NIMServices and NIMCaches once: the typed model of each stored object, kept per key.

Validating a NIMService against its model (CEL rules, Kubernetes core-type
schemas) costs more CPU than rendering it, and a reconcile pass happens far
more often than a spec changes. ``ParseMemo`` keeps the model of each object
until its key changes: for a NIMService ``(uid, generation)`` over its
identity and spec (what its contract reads; status stays in the stored dict,
which the skeleton hands to ``Kind.status``), for a NIMCache ``(uid,
resourceVersion)`` over the whole object (its status decides the render).

A stored object that does not fit its model is reported, never cached:
:func:`invalid` turns ``InvalidResource`` into a ``Blocked`` ``Failed``
readiness whose message names the field paths.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from api.apps.v1alpha1.common import STATE_FAILED
from nimctl_runtime.meta import ObjView, name_of, namespace_of
from platforms.contract import Blocked, Readiness
from platforms.parsing import InvalidResource

__all__ = [
    "INVALID_SPEC",
    "ParseMemo",
    "by_generation",
    "by_resource_version",
    "identity_and_spec",
    "invalid",
]

M = TypeVar("M")


def identity_and_spec(obj: ObjView) -> dict[str, Any]:
    """The parts of a stored object a spec-only contract reads: kind, identity and spec."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "generation") if k in meta},
        "spec": obj.get("spec"),
    }


def by_generation(obj: ObjView) -> tuple[Hashable, ...] | None:
    """``(uid, generation)``: changes with the spec only (None: not known, parse every time)."""
    meta = obj.get("metadata") or {}
    generation = meta.get("generation")
    return None if generation is None else (meta.get("uid"), generation)


def by_resource_version(obj: ObjView) -> tuple[Hashable, ...] | None:
    """``(uid, resourceVersion)``: changes with any write (None: not known)."""
    meta = obj.get("metadata") or {}
    rv = meta.get("resourceVersion")
    return None if not rv else (meta.get("uid"), rv)


class ParseMemo(Generic[M]):
    """The model of each stored object by namespace/name, parsed again when ``key`` changes.

    With ``limit``, only the ``limit`` most recently used models are kept: a model
    costs memory (~9 KB for a NIMService) while a stored parse is cheap (~16 us,
    no CEL, no core-type schema walks), so a memo over every object of a large
    cluster holds megabytes to spare microseconds for objects that are rarely
    reconciled once settled. An object reconciled again after ``limit`` others is
    parsed once more.
    """

    def __init__(
        self,
        parse: Callable[[ObjView], M],
        key: Callable[[ObjView], tuple[Hashable, ...] | None],
        *,
        limit: int | None = None,
    ) -> None:
        self._parse = parse
        self._key = key
        self._limit = limit
        self._models: OrderedDict[tuple[str, str], tuple[tuple[Hashable, ...], M]] = OrderedDict()
        self.parses = 0

    def get(self, obj: ObjView) -> M:
        """The model of ``obj``; ``InvalidResource`` when it does not fit (not remembered)."""
        key = self._key(obj)
        if key is None:
            self.parses += 1
            return self._parse(obj)
        where = (namespace_of(obj), name_of(obj))
        models = self._models
        found = models.get(where)
        if found is not None and found[0] == key:
            if self._limit is not None:
                models.move_to_end(where)
            return found[1]
        self.parses += 1
        model = self._parse(obj)
        models[where] = (key, model)
        if self._limit is not None:
            models.move_to_end(where)
            while len(models) > self._limit:
                models.popitem(last=False)
        return model

    def forget(self, namespace: str, name: str) -> None:
        self._models.pop((namespace, name), None)

    def __len__(self) -> int:
        return len(self._models)


INVALID_SPEC = "invalidSpec"
"""``Readiness.details`` key set on the readiness :func:`invalid` reports."""


def invalid(err: InvalidResource, reason: str) -> Blocked:
    """``Failed`` with ``reason`` and the field paths that do not fit (nothing is rendered)."""
    return Blocked(
        Readiness(STATE_FAILED, reason, str(err), failed=True, details={INVALID_SPEC: True})
    )
