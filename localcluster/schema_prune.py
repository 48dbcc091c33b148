"""Pruning of custom resources: fields their structural schema does not declare go.

:func:`prune` removes unknown fields in place, as kube-apiserver does before
defaulting, honouring ``x-kubernetes-preserve-unknown-fields`` and
``x-kubernetes-embedded-resource`` (``apiVersion``/``kind``/``metadata``
survive at the root and at embedded roots, ``metadata`` reduced to ObjectMeta's
fields).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nimctl_runtime.field import child_path, index_path

from .schema_validate import preserves_unknown

ROOT_META_FIELDS = ("apiVersion", "kind", "metadata")


def prune(schema: Mapping[str, Any], obj: Any) -> list[str]:
    """Remove fields the schema does not declare, in place; return their paths.

    ``apiVersion``, ``kind`` and ``metadata`` are kept at the root and at every
    ``x-kubernetes-embedded-resource`` root; ``metadata`` there is reduced to
    ObjectMeta's fields. ``x-kubernetes-preserve-unknown-fields`` keeps unknown
    fields but known properties below it are still pruned.
    """
    pruned: list[str] = []
    prune_node(schema, obj, "", pruned, is_root=True)
    return pruned


_OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


def prune_node(
    schema: Any, value: Any, path: str, pruned: list[str], *, is_root: bool = False
) -> None:
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        embedded = is_root or bool(schema.get("x-kubernetes-embedded-resource"))
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        additional = schema.get("additionalProperties")
        preserve = preserves_unknown(schema) or additional is True
        for key in list(value):
            child = child_path(path, key)
            if embedded and key in ROOT_META_FIELDS:
                if key == "metadata" and isinstance(value[key], dict):
                    meta = value[key]
                    for mkey in list(meta):
                        if mkey not in _OBJECT_META_FIELDS:
                            del meta[mkey]
                            pruned.append(child_path(child, mkey))
                if key in props and key != "metadata":
                    prune_node(props[key], value[key], child, pruned)
                continue
            sub = props.get(key)
            if isinstance(sub, dict):
                prune_node(sub, value[key], child, pruned)
            elif isinstance(additional, dict):
                prune_node(additional, value[key], child, pruned)
            elif not preserve:
                del value[key]
                pruned.append(child)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                prune_node(items, item, index_path(path, i), pruned)
