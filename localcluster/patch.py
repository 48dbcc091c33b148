"""Patch algorithms for localcluster's PATCH verb: pure functions on plain dicts.

- :func:`merge_patch`: JSON merge patch (RFC 7386,
  ``application/merge-patch+json``).
- :func:`json_patch`: JSON patch (RFC 6902, ``application/json-patch+json``);
  failures raise :class:`PatchError` whose ``status`` is 400 for a malformed
  patch document and 422 for a patch that does not apply to the object.
- :func:`strategic_merge_patch`: strategic merge patch for built-in kinds
  (``application/strategic-merge-patch+json``), driven by the
  ``x-kubernetes-patch-merge-key`` / ``x-kubernetes-patch-strategy``
  annotations in kubernetes-validate's shipped v1.32 schemas (loaded once,
  lazily). Directives: ``$patch: replace|delete|merge`` on maps and list
  elements, ``$retainKeys``, ``$deleteFromPrimitiveList/<field>`` and
  ``$setElementOrder/<field>``. Lists without a ``merge`` strategy are
  replaced, as in Kubernetes. ``$setElementOrder`` orders the listed
  elements and weaves server-only elements back in by their server positions
  (apimachinery's ``mergeSortedSlice``).
- Server-side apply lives in :mod:`localcluster.patch_apply`
  and is re-exported here as :func:`apply`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .patch_apply import (
    ApplyConflict,
    apply,
    fields_v1_for,
    track_update,
)
from .patch_schema import (
    KUBERNETES_SCHEMA_VERSION,
    has_strategic_schema,
    resolve,
    strategic_schema,
    warm_up,
)

__all__ = [
    "KUBERNETES_SCHEMA_VERSION",
    "ApplyConflict",
    "PatchError",
    "apply",
    "fields_v1_for",
    "has_strategic_schema",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
    "strategic_schema",
    "track_update",
    "warm_up",
]




def _copy_json(value: Any) -> Any:
    """Deep copy of decoded JSON (much faster than copy.deepcopy)."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value

class PatchError(ValueError):
    """A patch that is malformed (``status`` 400) or does not apply (422)."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


# --------------------------------------------------------------------------- RFC 7386


def merge_patch(orig: Any, patch: Any) -> Any:
    """Apply a JSON merge patch; returns a new value (inputs are not modified)."""
    if not isinstance(patch, dict):
        return _copy_json(patch)
    result: dict[str, Any] = _copy_json(dict(orig)) if isinstance(orig, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def create_merge_patch(orig: Any, target: Any) -> Any:
    """The merge patch that turns ``orig`` into ``target`` (for clients and tests)."""
    if not isinstance(orig, dict) or not isinstance(target, dict):
        return _copy_json(target)
    patch: dict[str, Any] = {}
    for key in orig:
        if key not in target:
            patch[key] = None
    for key, value in target.items():
        if key not in orig:
            patch[key] = _copy_json(value)
        elif isinstance(value, dict) and isinstance(orig[key], dict):
            sub = create_merge_patch(orig[key], value)
            if sub:
                patch[key] = sub
        elif orig[key] != value or type(orig[key]) is not type(value):
            patch[key] = _copy_json(value)
    return patch


# --------------------------------------------------------------------------- RFC 6902


def _parse_pointer(pointer: Any) -> list[str]:
    if not isinstance(pointer, str):
        raise PatchError(f"invalid JSON pointer: {pointer!r}", 400)
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f'JSON pointer must be empty or start with a "/": {pointer!r}', 400)
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def _index(token: str, length: int, *, allow_end: bool, pointer: str) -> int:
    if token == "-" and allow_end:
        return length
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r} in {pointer}")
    index = int(token)
    limit = length if allow_end else length - 1
    if index > limit:
        raise PatchError(f"array index {index} out of bounds in {pointer}")
    return index


def _resolve_parent(doc: Any, parts: list[str], pointer: str) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict):
            if part not in node:
                raise PatchError(f"doc is missing path: {pointer!r}: missing value")
            node = node[part]
        elif isinstance(node, list):
            node = node[_index(part, len(node), allow_end=False, pointer=pointer)]
        else:
            raise PatchError(f"doc is missing path: {pointer!r}: missing value")
    return node


def _get(doc: Any, pointer: str) -> Any:
    parts = _parse_pointer(pointer)
    if not parts:
        return doc
    parent = _resolve_parent(doc, parts, pointer)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"doc is missing path: {pointer!r}: missing value")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(last, len(parent), allow_end=False, pointer=pointer)]
    raise PatchError(f"doc is missing path: {pointer!r}: missing value")


def _add(doc: Any, pointer: str, value: Any) -> Any:
    parts = _parse_pointer(pointer)
    if not parts:
        return value
    parent = _resolve_parent(doc, parts, pointer)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True, pointer=pointer), value)
    else:
        raise PatchError(f"doc is missing path: {pointer!r}: missing value")
    return doc


def _remove(doc: Any, pointer: str) -> tuple[Any, Any]:
    parts = _parse_pointer(pointer)
    if not parts:
        raise PatchError("unable to remove the whole document", 422)
    parent = _resolve_parent(doc, parts, pointer)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(
                f"error in remove for path: {pointer!r}: "
                f"Unable to remove nonexistent key: {last}: missing value"
            )
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(last, len(parent), allow_end=False, pointer=pointer))
    raise PatchError(f"doc is missing path: {pointer!r}: missing value")


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def json_patch(orig: Any, ops: Any) -> Any:
    """Apply an RFC 6902 JSON patch; returns a new document."""
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list of operations", 400)
    doc = _copy_json(orig)
    for number, op in enumerate(ops):
        if not isinstance(op, dict):
            raise PatchError(f"operation {number} is not an object", 400)
        kind = op.get("op")
        if "path" not in op:
            raise PatchError(f"operation {number} ({kind}) is missing path", 400)
        path = op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {number} ({kind}) is missing value", 400)
        if kind == "add":
            doc = _add(doc, path, _copy_json(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            parts = _parse_pointer(path)
            if not parts:
                doc = _copy_json(op["value"])
                continue
            parent = _resolve_parent(doc, parts, path)
            if isinstance(parent, dict):
                parent[parts[-1]] = _copy_json(op["value"])
            else:
                parent[_index(parts[-1], len(parent), allow_end=False, pointer=path)] = (
                    _copy_json(op["value"])
                )
        elif kind in ("move", "copy"):
            if "from" not in op:
                raise PatchError(f"operation {number} ({kind}) is missing from", 400)
            source = op["from"]
            if kind == "move":
                if isinstance(path, str) and path.startswith(f"{source}/"):
                    raise PatchError(f"cannot move {source} into its own child {path}")
                doc, value = _remove(doc, source)
            else:
                value = _copy_json(_get(doc, source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if not _json_equal(_get(doc, path), op["value"]):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}", 400)
    return doc


# --------------------------------------------------------------------------- strategic merge


_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def strategic_merge_patch(orig: Any, patch: Any, kind_key: Any) -> dict[str, Any]:
    """Apply a strategic merge patch to a built-in object; returns a new dict.

    Unknown kinds are patched with map merging and atomic lists (JSON merge
    patch semantics plus directive handling).
    """
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", 400)
    schema = strategic_schema(kind_key) or {}
    base = _copy_json(dict(orig)) if isinstance(orig, dict) else {}
    result = _merge_map(base, patch, schema)
    return result


def _sub_schema(schema: Mapping[str, Any], key: str) -> dict[str, Any]:
    props = schema.get("properties")
    if isinstance(props, dict) and key in props:
        return resolve(props[key])
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        return resolve(additional)
    return {}


def _strategy(schema: Mapping[str, Any]) -> set[str]:
    text = schema.get("x-kubernetes-patch-strategy")
    return set(text.split(",")) if isinstance(text, str) else set()


def _merge_map(
    original: dict[str, Any], patch: Mapping[str, Any], schema: Mapping[str, Any]
) -> dict[str, Any]:
    directive = patch.get(_DIRECTIVE)
    if directive == "replace":
        replaced: dict[str, Any] = _strip_directives(
            {k: v for k, v in patch.items() if k != _DIRECTIVE}, schema
        )
        return replaced
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise PatchError(f"Unknown patch type: {directive}", 422)
    retain = patch.get(_RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError("$retainKeys must be a list", 422)
        keep = set(retain)
        for key in list(original):
            if key not in keep:
                del original[key]
    order_directives: dict[str, list[Any]] = {}
    server_order: dict[str, list[Any]] = {}
    for key in patch:
        if key.startswith(_SET_ORDER):
            field = key[len(_SET_ORDER) :]
            current = original.get(field)
            server_order[field] = list(current) if isinstance(current, list) else []
    for key, value in patch.items():
        if key in (_DIRECTIVE, _RETAIN_KEYS):
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE) :]
            if isinstance(value, list) and isinstance(original.get(field), list):
                original[field] = [x for x in original[field] if x not in value]
            continue
        if key.startswith(_SET_ORDER):
            if isinstance(value, list):
                order_directives[key[len(_SET_ORDER) :]] = value
            continue
        if value is None:
            original.pop(key, None)
            continue
        sub = _sub_schema(schema, key)
        current = original.get(key)
        if isinstance(value, dict):
            if value.get(_DIRECTIVE) == "delete":
                original.pop(key, None)
            else:
                original[key] = _merge_map(current if isinstance(current, dict) else {}, value, sub)
        elif isinstance(value, list):
            original[key] = _merge_list(current if isinstance(current, list) else [], value, sub)
        else:
            original[key] = _copy_json(value)
    for field, order in order_directives.items():
        if isinstance(original.get(field), list):
            original[field] = _apply_order(
                original[field],
                order,
                _sub_schema(schema, field).get("x-kubernetes-patch-merge-key"),
                server_order.get(field, []),
            )
    return original


def _strip_directives(value: Any, schema: Mapping[str, Any]) -> Any:
    if isinstance(value, dict):
        return _merge_map({}, value, schema)
    if isinstance(value, list):
        return _merge_list([], value, schema)
    return _copy_json(value)


def _merge_list(original: list[Any], patch: list[Any], schema: Mapping[str, Any]) -> list[Any]:
    item_schema = resolve(schema.get("items")) if isinstance(schema, dict) else {}
    if "merge" not in _strategy(schema):
        # Atomic list: the patch replaces it (directive elements dropped).
        return [
            _strip_directives(item, item_schema)
            for item in patch
            if not (isinstance(item, dict) and _DIRECTIVE in item and len(item) == 1)
        ]
    merge_key = schema.get("x-kubernetes-patch-merge-key")
    if any(isinstance(item, dict) and item.get(_DIRECTIVE) == "replace" for item in patch):
        return [
            _strip_directives(item, item_schema)
            for item in patch
            if not (isinstance(item, dict) and _DIRECTIVE in item)
        ]
    if not isinstance(merge_key, str) or not merge_key:
        # Merge of a primitive list: union, keeping order.
        result = list(original)
        for item in patch:
            if isinstance(item, dict):
                continue
            if item not in result:
                result.append(_copy_json(item))
        return result
    result = list(original)
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(
                f"unable to merge a primitive {item!r} into a list merged by {merge_key}", 422
            )
        if merge_key not in item:
            shown = " ".join(f"{k}:{v}" for k, v in sorted(item.items()))
            raise PatchError(f"map: map[{shown}] does not contain declared merge key: {merge_key}")
        position = next(
            (
                i
                for i, existing in enumerate(result)
                if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get(_DIRECTIVE) == "delete":
            result = [
                x
                for x in result
                if not (isinstance(x, dict) and x.get(merge_key) == item[merge_key])
            ]
            continue
        if position is None:
            result.append(_merge_map({}, item, item_schema))
        else:
            result[position] = _merge_map(dict(result[position]), item, item_schema)
    return result


def _apply_order(
    items: list[Any], order: list[Any], merge_key: Any, server: list[Any]
) -> list[Any]:
    """Kubernetes' ``$setElementOrder``: listed elements in the given order,
    server-only elements woven in where they stood relative to them."""

    def ident(item: Any) -> str:
        if isinstance(merge_key, str) and isinstance(item, dict):
            return json.dumps(item.get(merge_key), sort_keys=True)
        return json.dumps(item, sort_keys=True)

    rank = {ident(x): i for i, x in enumerate(order)}
    server_rank = {ident(x): i for i, x in enumerate(server)}
    listed = sorted((x for x in items if ident(x) in rank), key=lambda x: rank[ident(x)])
    server_only = [x for x in items if ident(x) not in rank]
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(listed):
        if i >= len(server_only):
            out.append(listed[j])
            j += 1
        elif j >= len(listed):
            out.append(server_only[i])
            i += 1
        else:
            left = server_rank.get(ident(server_only[i]))
            right = server_rank.get(ident(listed[j]))
            if left is not None and right is not None and left < right:
                out.append(server_only[i])
                i += 1
            else:
                out.append(listed[j])
                j += 1
    return out
