"""ObjectMeta and ownerReference helpers shared by every builder."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def owner_reference(owner: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    """A controller ownerReference to ``owner`` (a dict with apiVersion, kind, metadata).

    ``blockOwnerDeletion`` is set as controller-runtime's SetControllerReference
    does, so foreground deletion of the owner waits for its objects.
    """
    meta = owner.get("metadata", {})
    ref: dict[str, Any] = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta.get("uid") or "",
    }
    if controller:
        ref["controller"] = True
        ref["blockOwnerDeletion"] = True
    return ref


def object_meta(
    name: str,
    namespace: str | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner_references: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """ObjectMeta with only the fields that have a value."""
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner_references:
        meta["ownerReferences"] = [dict(r) for r in owner_references]
    return meta
