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


class BuiltinPruner:
    """Prunes built-in objects; resolved schemas are cached per instance (one per server)."""

    def __init__(self) -> None:
        self._resolved: dict[str, Mapping[str, Any] | None] = {}

    def _definition(self, name: str) -> Mapping[str, Any] | None:
        if name not in self._resolved:
            from . import patch

            self._resolved[name] = patch.strategic_schema(name)
        return self._resolved[name]

    def _kind(self, kind_key: tuple[str, str]) -> Mapping[str, Any] | None:
        key = f"{kind_key[0]}, Kind={kind_key[1]}"
        if key not in self._resolved:
            from . import patch

            self._resolved[key] = patch.strategic_schema(kind_key)
        return self._resolved[key]

    def _resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            resolved = self._definition(ref.rsplit("/", 1)[-1])
            if resolved is not None:
                if len(schema) == 1:
                    return resolved
                merged = dict(resolved)
                merged.update({k: v for k, v in schema.items() if k != "$ref"})
                return merged
        return schema

    def prune(self, kind_key: tuple[str, str], obj: dict[str, Any]) -> list[str]:
        """Remove fields the built-in kind does not declare, in place; return their paths."""
        schema = self._kind(kind_key)
        if schema is None:
            return []
        pruned: list[str] = []
        self._prune(schema, obj, "", pruned, 0)
        return pruned

    def _prune(
        self, schema: Mapping[str, Any], value: Any, path: str, pruned: list[str], depth: int
    ) -> None:
        if depth > _MAX_DEPTH:
            return
        schema = self._resolve(schema)
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        if isinstance(value, dict):
            props = schema.get("properties")
            additional = schema.get("additionalProperties")
            if isinstance(props, Mapping) and props:
                for key in list(value):
                    sub = props.get(key)
                    if isinstance(sub, Mapping):
                        self._prune(sub, value[key], _child(path, key), pruned, depth + 1)
                    elif isinstance(additional, Mapping):
                        self._prune(additional, value[key], _child(path, key), pruned, depth + 1)
                    elif additional is True:
                        continue
                    else:
                        del value[key]
                        pruned.append(_child(path, key))
            elif isinstance(additional, Mapping) and _has_structure(self._resolve(additional)):
                for key, item in value.items():
                    self._prune(additional, item, _child(path, key), pruned, depth + 1)
        elif isinstance(value, list):
            items = schema.get("items")
            if isinstance(items, Mapping) and _has_structure(self._resolve(items)):
                for i, item in enumerate(value):
                    self._prune(items, item, f"{path}[{i}]", pruned, depth + 1)


def _has_structure(schema: Mapping[str, Any]) -> bool:
    """Whether values of this schema can hold fields to prune (objects or lists of them)."""
    return bool(
        schema.get("properties") or schema.get("additionalProperties") or schema.get("items")
    )


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
