"""Validation ratcheting for custom resources (kube-apiserver v1.30+).

:func:`ratchet` drops the causes about values an update left unchanged, so an
object stored before a stricter schema can still be updated as long as it does
not touch the offending value. Values are correlated by the cause's field path;
map-list items by their keys, other lists only when unchanged as a whole.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from nimctl_runtime.field import REASON_REQUIRED, Cause

from .schema_validate import json_equal, map_list_key

_PATH_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_ABSENT: Any = object()


def _parse_path(path: str) -> list[str | int] | None:
    tokens: list[str | int] = []
    pos = 0
    while pos < len(path):
        if path[pos] == ".":
            pos += 1
            continue
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            return None
        tokens.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        pos = match.end()
    return tokens


def _correlated(schema: Any, new: Any, old: Any, tokens: list[str | int]) -> tuple[Any, Any]:
    """The values at ``tokens`` in ``new`` and its correlated counterpart in ``old``."""
    for token in tokens:
        if isinstance(token, int):
            if not isinstance(new, list) or token >= len(new):
                return _ABSENT, _ABSENT
            item = new[token]
            node = schema if isinstance(schema, dict) else {}
            keys = node.get("x-kubernetes-list-map-keys") or []
            items = node.get("items") if isinstance(node.get("items"), dict) else {}
            if (
                node.get("x-kubernetes-list-type") == "map"
                and keys
                and isinstance(item, dict)
                and isinstance(old, list)
            ):
                key = map_list_key(item, keys, items)
                old = next(
                    (
                        o
                        for o in old
                        if isinstance(o, dict)
                        and key is not None
                        and map_list_key(o, keys, items) == key
                    ),
                    _ABSENT,
                )
            elif isinstance(old, list) and json_equal(old, new):
                old = old[token]
            else:
                old = _ABSENT
            new, schema = item, items
        else:
            node = schema if isinstance(schema, dict) else {}
            props = node.get("properties")
            sub = props.get(token) if isinstance(props, dict) else None
            if sub is None and isinstance(node.get("additionalProperties"), dict):
                sub = node["additionalProperties"]
            new = new.get(token, _ABSENT) if isinstance(new, dict) else _ABSENT
            old = old.get(token, _ABSENT) if isinstance(old, dict) else _ABSENT
            schema = sub if isinstance(sub, dict) else {}
    return new, old


def ratchet(schema: Mapping[str, Any], obj: Any, old: Any, causes: list[Cause]) -> list[Cause]:
    """Drop causes about values an update left unchanged (validation ratcheting).

    As kube-apiserver since v1.30: an update may keep a value that newer
    validation would reject, as long as it does not change it. The value is
    found by the cause's path, correlating map-list items by key (other lists
    only when unchanged as a whole); a missing required field is judged by its
    parent object. Causes whose path cannot be resolved are kept.
    """
    kept: list[Cause] = []
    for cause in causes:
        tokens = _parse_path(cause.get("field", ""))
        if not tokens:
            kept.append(cause)
            continue
        if cause.get("reason") == REASON_REQUIRED:
            tokens = tokens[:-1]
            if not tokens:
                kept.append(cause)
                continue
        new_value, old_value = _correlated(schema, obj, old, tokens)
        if new_value is _ABSENT or old_value is _ABSENT or not json_equal(new_value, old_value):
            kept.append(cause)
    return kept
