"""Object accessors and condition helpers for Kubernetes objects held as plain dicts.

The one place that knows how to read identity (``name_of``, ``namespace_of``,
``uid_of``, ``key_of``), walk a nested field (``dig``), follow owner
references (``controller_of``, ``is_controlled_by``, ``owner_uid_index``) and
edit ``metav1.Condition`` lists with apimachinery's ``meta.SetStatusCondition``
semantics (``set_condition``: ``lastTransitionTime`` moves only when a
condition's ``status`` changes, so setting the same condition twice yields an
equal list, which lets controllers write status only when something a user can
see changed). Controllers, platforms and webhooks import these; nothing else
declares them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "OWNER_UID_INDEX",
    "Obj",
    "ObjView",
    "ObjectKey",
    "controller_of",
    "dig",
    "find_condition",
    "is_controlled_by",
    "is_true",
    "key_of",
    "name_of",
    "namespace_of",
    "now_rfc3339",
    "owner_uid_index",
    "set_condition",
    "uid_of",
]

Obj = dict[str, Any]
"""A Kubernetes object, or any part of one, as decoded JSON: the one alias the tree uses."""

ObjView = Mapping[str, Any]
"""The same, for code that only reads it (and so also takes frozen or proxied mappings)."""

ObjectKey = tuple[str, str, str, str]
"""``(apiVersion, kind, namespace, name)``; namespace is ``""`` for cluster-scoped objects."""

OWNER_UID_INDEX = "metadata.ownerReferences.controller.uid"
"""Cache index name: the UID of an object's controller owner (see ``owner_uid_index``)."""


def dig(obj: Mapping[str, Any] | None, *path: str, default: Any = None) -> Any:
    """``obj[path[0]][path[1]]...`` or ``default`` when any step is missing or null."""
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return default
        cur = cur.get(key)
        if cur is None:
            return default
    return cur


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    """The object's ``ObjectKey``."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    return (api_version, kind, namespace_of(obj), name_of(obj))


def controller_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true``, or None."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


def is_controlled_by(obj: Mapping[str, Any], owner_uid: str) -> bool:
    """Whether ``obj``'s controller ownerReference points at ``owner_uid``."""
    ref = controller_of(obj)
    return ref is not None and bool(owner_uid) and ref.get("uid") == owner_uid


def owner_uid_index(obj: Mapping[str, Any]) -> list[str]:
    """Index function for ``OWNER_UID_INDEX``: the controller owner's UID, if any."""
    ref = controller_of(obj)
    uid = (ref or {}).get("uid")
    return [str(uid)] if uid else []


def now_rfc3339() -> str:
    """The current time as Kubernetes writes it (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(
    conditions: Sequence[Mapping[str, Any]] | None, type_: str
) -> dict[str, Any] | None:
    """The condition of that type, or None."""
    for c in conditions or ():
        if c.get("type") == type_:
            return dict(c)
    return None


def _condition_copy(condition: Mapping[str, Any]) -> dict[str, Any]:
    """A private copy of one condition: shallow when its values are scalars (they are,
    in every ``metav1.Condition``), deep otherwise."""
    out = dict(condition)
    if any(isinstance(v, dict | list) for v in out.values()):
        return copy.deepcopy(out)
    return out


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    type_: str,
    status: str,
    reason: str,
    message: str = "",
    *,
    now: str | None = None,
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """A new list with the condition set; other conditions are kept in order."""
    out = [_condition_copy(c) for c in conditions or ()]
    for c in out:
        if c.get("type") == type_:
            if c.get("status") != status:
                c["status"] = status
                c["lastTransitionTime"] = now or now_rfc3339()
            c["reason"] = reason
            c["message"] = message
            if observed_generation is not None:
                c["observedGeneration"] = observed_generation
            return out
    new: dict[str, Any] = {
        "type": type_,
        "status": status,
        "lastTransitionTime": now or now_rfc3339(),
        "reason": reason,
        "message": message,
    }
    if observed_generation is not None:
        new["observedGeneration"] = observed_generation
    out.append(new)
    return out


def is_true(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> bool:
    c = find_condition(conditions, type_)
    return c is not None and c.get("status") == "True"
