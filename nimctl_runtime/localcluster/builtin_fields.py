"""Unknown-field handling for built-in kinds, as Go's typed decoding does it.

kube-apiserver decodes a Deployment into Go structs, so a field the type does
not have is dropped (and reported: a warning by default, a 400 with
``fieldValidation=Strict``, which kubectl sends). localcluster stores plain
dicts, so it prunes against Kubernetes' v1.32 type schemas (the definitions
kubernetes-validate ships, read through ``patch.strategic_schema``). A typo in
an operator's manifest builder therefore shows up here as it would on a real
cluster, instead of being stored silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MAX_DEPTH = 64


def _resolve(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    from . import patch

    ref = schema.get("$ref")
    if isinstance(ref, str):
        resolved = patch.strategic_schema(ref.rsplit("/", 1)[-1])
        if resolved is not None:
            merged = dict(resolved)
            merged.update({k: v for k, v in schema.items() if k != "$ref"})
            return merged
    return schema


def prune_unknown_fields(kind_key: tuple[str, str], obj: dict[str, Any]) -> list[str]:
    """Remove fields the built-in kind does not declare, in place; return their paths."""
    from . import patch

    schema = patch.strategic_schema(kind_key)
    if schema is None:
        return []
    pruned: list[str] = []
    _prune(schema, obj, "", pruned, 0)
    return pruned


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _prune(schema: Mapping[str, Any], value: Any, path: str, pruned: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    schema = _resolve(schema)
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        if isinstance(props, Mapping) and props:
            for key in list(value):
                sub = props.get(key)
                if isinstance(sub, Mapping):
                    _prune(sub, value[key], _child(path, key), pruned, depth + 1)
                elif isinstance(additional, Mapping):
                    _prune(additional, value[key], _child(path, key), pruned, depth + 1)
                elif additional is True:
                    continue
                else:
                    del value[key]
                    pruned.append(_child(path, key))
        elif isinstance(additional, Mapping):
            for key, item in value.items():
                _prune(additional, item, _child(path, key), pruned, depth + 1)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _prune(items, item, f"{path}[{i}]", pruned, depth + 1)
