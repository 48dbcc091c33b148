"""Server-side apply and managedFields bookkeeping for localcluster.

:func:`apply` merges an applied configuration into the live object on behalf
of a field manager and records ownership in ``metadata.managedFields``
(``manager``, ``operation: Apply``, ``apiVersion``, ``time``, ``fieldsType:
FieldsV1``, ``fieldsV1``). :func:`track_update` records the fields an ordinary
create/update/patch changed under ``operation: Update``, so that a later apply
conflicts with them as in Kubernetes.

How lists are merged comes from ``schema_hint``: a CRD's ``openAPIV3Schema``
(``x-kubernetes-list-type`` / ``x-kubernetes-list-map-keys`` /
``x-kubernetes-map-type``), or for built-in kinds an ``(apiVersion, kind)``
key resolved against Kubernetes' v1.32 schemas (where a list with only a
patch merge key counts as a map list keyed by it). Without a hint, lists are
atomic and maps granular.

Simplifications (documented, deliberate):

- Conflicts are detected on leaf fields only (scalars, atomic lists and
  maps, set members): another manager owns the path and its live value
  differs from the applied one. Equal values are shared, never conflicting.
- Managers are identified by ``(manager, operation, subresource)``; all of a
  manager's fields live in one entry per operation, ``time`` is the last
  write.
- Elements of map lists keep the live order; new elements are appended.
- ``null`` in an applied configuration is ignored.
- Fields a manager stops applying are removed only when no other manager
  owns them or anything below them.
- Identity and system fields (``apiVersion``, ``kind``, ``metadata.name``,
  ``namespace``, ``uid``, ``resourceVersion``, ``generation``,
  ``creationTimestamp``, ``deletionTimestamp``, ``managedFields``...) are not
  tracked. Resetting ``status`` on the main resource is the caller's job.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .patch_schema import resolve, strategic_schema

Path = tuple[str, ...]
FieldSet = set[Path]

_UNTRACKED_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)
_MISSING: Any = object()



def _copy_json(value: Any) -> Any:
    """Deep copy of decoded JSON (much faster than copy.deepcopy)."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value

class ApplyConflict(Exception):
    """A 409 from server-side apply: other managers own fields with other values."""

    def __init__(self, conflicts: list[tuple[str, str, str]]) -> None:
        self.conflicts = conflicts
        super().__init__(self.message)

    @property
    def message(self) -> str:
        count = len(self.conflicts)
        noun = "conflict" if count == 1 else "conflicts"
        if count == 1:
            manager, api_version, path = self.conflicts[0]
            return (
                f'Apply failed with 1 {noun}: conflict with "{manager}" using {api_version}: {path}'
            )
        by_manager: dict[tuple[str, str], list[str]] = {}
        for manager, api_version, path in self.conflicts:
            by_manager.setdefault((manager, api_version), []).append(path)
        parts = []
        for (manager, api_version), paths in by_manager.items():
            lines = "\n".join(f"- {p}" for p in paths)
            parts.append(f'conflicts with "{manager}" using {api_version}:\n{lines}')
        return f"Apply failed with {count} {noun}: " + "\n".join(parts)

    @property
    def causes(self) -> list[dict[str, str]]:
        return [
            {
                "reason": "FieldManagerConflict",
                "message": f'conflict with "{manager}" using {api_version}',
                "field": path,
            }
            for manager, api_version, path in self.conflicts
        ]


# --------------------------------------------------------------------------- schema navigation


@dataclass(frozen=True)
class _Node:
    schema: Mapping[str, Any]

    def child(self, key: str) -> _Node:
        props = self.schema.get("properties")
        if isinstance(props, dict) and key in props:
            return _Node(_resolve(props[key]))
        additional = self.schema.get("additionalProperties")
        if isinstance(additional, dict):
            return _Node(_resolve(additional))
        return _Node({})

    def items(self) -> _Node:
        return _Node(_resolve(self.schema.get("items")))

    def is_granular_map(self) -> bool:
        return isinstance(self.schema.get("additionalProperties"), Mapping)

    def is_atomic_map(self) -> bool:
        return self.schema.get("x-kubernetes-map-type") == "atomic"

    def list_kind(self) -> tuple[str, list[str]]:
        list_type = self.schema.get("x-kubernetes-list-type")
        keys = self.schema.get("x-kubernetes-list-map-keys")
        if list_type == "map" and isinstance(keys, list) and keys:
            return "map", [str(k) for k in keys]
        if list_type == "set":
            return "set", []
        merge_key = self.schema.get("x-kubernetes-patch-merge-key")
        if list_type is None and isinstance(merge_key, str) and merge_key:
            return "map", [merge_key]
        if list_type is None and "merge" in str(
            self.schema.get("x-kubernetes-patch-strategy", "")
        ).split(","):
            return "set", []
        return "atomic", []


def _resolve(node: Any) -> Mapping[str, Any]:
    if not isinstance(node, dict):
        return {}
    if "$ref" not in node and "allOf" not in node:
        return node
    return resolve(node)


def _root_node(schema_hint: Any) -> _Node:
    if isinstance(schema_hint, dict):
        inner = schema_hint.get("openAPIV3Schema", schema_hint)
        return _Node(inner if isinstance(inner, dict) else {})
    if schema_hint is None:
        return _Node({})
    return _Node(strategic_schema(schema_hint) or {})


# --------------------------------------------------------------------------- field sets


def _key_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# Key fields Kubernetes defaults before keying associative lists (ports are
# keyed by port + protocol, and protocol defaults to TCP), so that an applied
# port without a protocol is the live port with TCP, as in its managedFields.
_KEY_DEFAULTS = {"protocol": "TCP"}


def _key_value(item: Mapping[str, Any], key: str) -> Any:
    if key in item:
        return item[key]
    return _KEY_DEFAULTS.get(key, _MISSING)


def _item_key(item: Any, keys: list[str]) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    out = {}
    for key in keys:
        value = _key_value(item, key)
        if value is not _MISSING:
            out[key] = value
    return out or None


def field_set(obj: Any, schema_hint: Any = None) -> FieldSet:
    """The set of field paths ``obj`` sets (fieldsV1 path elements as tuples)."""
    out: FieldSet = set()
    if isinstance(obj, dict):
        root = _root_node(schema_hint)
        for key, value in obj.items():
            if key in ("apiVersion", "kind") or value is None:
                continue
            if key == "metadata" and isinstance(value, dict):
                meta_node = root.child("metadata")
                for mkey, mvalue in value.items():
                    if mkey in _UNTRACKED_META or mvalue is None:
                        continue
                    _collect(mvalue, meta_node.child(mkey), ("f:metadata", f"f:{mkey}"), out)
                continue
            _collect(value, root.child(key), (f"f:{key}",), out)
    return out


def _collect(value: Any, node: _Node, path: Path, out: FieldSet) -> None:
    if isinstance(value, dict) and value and not node.is_atomic_map():
        if node.is_granular_map():
            out.add(path)
        for key, child in value.items():
            if child is None:
                continue
            _collect(child, node.child(key), (*path, f"f:{key}"), out)
        return
    if isinstance(value, list) and value:
        kind, keys = node.list_kind()
        if kind == "map":
            items = node.items()
            for item in value:
                key = _item_key(item, keys)
                if key is None:
                    out.add(path)
                    return
            for item in value:
                key = _item_key(item, keys)
                item_path = (*path, f"k:{_key_json(key)}")
                out.add(item_path)
                for field, child in item.items():
                    if child is None:
                        continue
                    _collect(child, items.child(field), (*item_path, f"f:{field}"), out)
            return
        if kind == "set":
            for item in value:
                out.add((*path, f"v:{_key_json(item)}"))
            return
    out.add(path)


def fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """Encode a field set as a ``fieldsV1`` trie."""
    trie: dict[str, Any] = {}
    members: set[Path] = set(paths)
    for path in members:
        node = trie
        for element in path:
            node = node.setdefault(element, {})

    def mark(node: dict[str, Any], prefix: Path) -> None:
        for element, child in list(node.items()):
            if element == ".":
                continue
            here = (*prefix, element)
            mark(child, here)
            if child and here in members:
                node[element] = {".": {}, **child}

    mark(trie, ())
    return trie


def parse_fields_v1(trie: Any) -> FieldSet:
    """Decode a ``fieldsV1`` trie into a field set."""
    out: FieldSet = set()

    def walk(node: Any, prefix: Path) -> None:
        if not isinstance(node, dict):
            return
        for element, child in node.items():
            if element == ".":
                continue
            here = (*prefix, element)
            if not child or (isinstance(child, dict) and "." in child):
                out.add(here)
            walk(child, here)

    walk(trie, ())
    return out


def fields_v1_for(obj: Any, schema_hint: Any = None) -> dict[str, Any]:
    """``fieldsV1`` for everything ``obj`` sets."""
    return fields_v1(field_set(obj, schema_hint))


def path_string(path: Path) -> str:
    """Human form of a field path, e.g. ``.spec.containers[name="a"].image``."""
    out = ""
    for element in path:
        prefix, _, rest = element.partition(":")
        if prefix == "f":
            out += f".{rest}"
        elif prefix == "k":
            try:
                keys = json.loads(rest)
            except ValueError:
                keys = {}
            inner = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(keys.items()))
            out += f"[{inner}]"
        elif prefix == "v":
            out += f"[={rest}]"
    return out


# --------------------------------------------------------------------------- path access


def _value_at(obj: Any, path: Path) -> Any:
    node = obj
    for element in path:
        prefix, _, rest = element.partition(":")
        if prefix == "f":
            if not isinstance(node, dict) or rest not in node:
                return _MISSING
            node = node[rest]
        elif prefix == "k":
            if not isinstance(node, list):
                return _MISSING
            keys = json.loads(rest)
            node = next(
                (
                    item
                    for item in node
                    if isinstance(item, dict)
                    and all(_key_value(item, k) == v for k, v in keys.items())
                ),
                _MISSING,
            )
            if node is _MISSING:
                return _MISSING
        elif prefix == "v":
            if not isinstance(node, list):
                return _MISSING
            wanted = json.loads(rest)
            if wanted not in node:
                return _MISSING
            node = wanted
        else:
            return _MISSING
    return node


def _delete_at(obj: Any, path: Path) -> None:
    if not path:
        return
    parent = _value_at(obj, path[:-1])
    if parent is _MISSING:
        return
    prefix, _, rest = path[-1].partition(":")
    if prefix == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif prefix == "k" and isinstance(parent, list):
        keys = json.loads(rest)
        parent[:] = [
            item
            for item in parent
            if not (
                isinstance(item, dict)
                and all(_key_value(item, k) == v for k, v in keys.items())
            )
        ]
    elif prefix == "v" and isinstance(parent, list):
        wanted = json.loads(rest)
        parent[:] = [item for item in parent if item != wanted]


# --------------------------------------------------------------------------- merging


def _merge(live: Any, applied: Any, node: _Node) -> Any:
    if isinstance(applied, dict) and isinstance(live, dict) and not node.is_atomic_map():
        for key, value in applied.items():
            if value is None:
                continue
            if key in live:
                live[key] = _merge(live[key], value, node.child(key))
            else:
                live[key] = _strip_nulls(value)
        return live
    if isinstance(applied, list) and isinstance(live, list):
        kind, keys = node.list_kind()
        if kind == "map":
            items = node.items()
            result = list(live)
            for item in applied:
                key = _item_key(item, keys)
                position = None
                if key is not None:
                    position = next(
                        (
                            i
                            for i, existing in enumerate(result)
                            if _item_key(existing, keys) == key
                        ),
                        None,
                    )
                if position is None:
                    result.append(_strip_nulls(item))
                else:
                    result[position] = _merge(result[position], item, items)
            return result
        if kind == "set":
            result = list(live)
            for item in applied:
                if item not in result:
                    result.append(_copy_json(item))
            return result
    return _strip_nulls(applied)


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


# --------------------------------------------------------------------------- managedFields


def _now_text(now: datetime | None) -> str:
    moment = now or datetime.now(UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Entry:
    manager: str
    operation: str
    api_version: str
    subresource: str
    time: str
    fields: FieldSet

    def ident(self) -> tuple[str, str, str]:
        return self.manager, self.operation, self.subresource

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(self.fields),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def _entries(obj: Any) -> list[_Entry]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    raw = meta.get("managedFields") if isinstance(meta, dict) else None
    entries: list[_Entry] = []
    for item in raw or []:
        if not isinstance(item, dict):
            continue
        entries.append(
            _Entry(
                manager=str(item.get("manager", "")),
                operation=str(item.get("operation", "Update")),
                api_version=str(item.get("apiVersion", "")),
                subresource=str(item.get("subresource", "")),
                time=str(item.get("time", "")),
                fields=parse_fields_v1(item.get("fieldsV1") or {}),
            )
        )
    return entries


def _store(obj: dict[str, Any], entries: list[_Entry]) -> None:
    meta = obj.setdefault("metadata", {})
    kept = [e.to_dict() for e in entries if e.fields]
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)


def _ancestors(paths: FieldSet) -> FieldSet:
    """Every proper prefix of the paths (a path is a leaf iff it is not in here)."""
    return {p[:i] for p in paths for i in range(1, len(p))}


def apply(
    live: Mapping[str, Any] | None,
    applied: Mapping[str, Any],
    *,
    field_manager: str,
    force: bool,
    schema_hint: Any = None,
    subresource: str = "",
    now: datetime | None = None,
    ignored_fields: Collection[str] = (),
) -> dict[str, Any]:
    """Server-side apply ``applied`` onto ``live`` (None to create); returns the result.

    Raises :class:`ApplyConflict` when another manager owns a leaf field with a
    different value and ``force`` is false; with ``force`` the fields move to
    ``field_manager``. Top-level ``ignored_fields`` (e.g. ``status`` on the main
    resource of a kind with a status subresource) are neither applied nor owned.
    """
    if not field_manager:
        raise ValueError("fieldManager is required for apply patch")
    config = _copy_json(dict(applied))
    for name in ignored_fields:
        config.pop(name, None)
    if isinstance(config.get("metadata"), dict):
        config["metadata"].pop("managedFields", None)
    api_version = str(config.get("apiVersion") or (live or {}).get("apiVersion") or "")
    node = _root_node(schema_hint)
    new_set = field_set(config, schema_hint)
    stamp = _now_text(now)
    if live is None:
        result: dict[str, Any] = _strip_nulls(config)
        _store(
            result,
            [_Entry(field_manager, "Apply", api_version, subresource, stamp, new_set)],
        )
        return result
    result = _copy_json(dict(live))
    entries = _entries(result)
    me = (field_manager, "Apply", subresource)
    mine = next((e for e in entries if e.ident() == me), None)
    others = [e for e in entries if e.ident() != me]
    # ---- conflicts
    conflicts: list[tuple[str, str, str]] = []
    conflicting: dict[tuple[str, str, str], FieldSet] = {}
    inner = _ancestors(new_set)
    for entry in others:
        for path in sorted(new_set & entry.fields):
            if path in inner:
                continue
            live_value = _value_at(result, path)
            if live_value is _MISSING:
                continue
            if live_value != _value_at(config, path):
                conflicts.append((entry.manager, entry.api_version, path_string(path)))
                conflicting.setdefault(entry.ident(), set()).add(path)
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    for entry in others:
        taken = conflicting.get(entry.ident())
        if taken:
            entry.fields -= taken
    # ---- removals of fields this manager no longer applies
    if mine is not None:
        owned_by_others: FieldSet = set()
        for entry in others:
            owned_by_others |= entry.fields
        owned_above = _ancestors(owned_by_others)
        deleted: list[Path] = []
        for path in sorted(mine.fields - new_set, key=len):
            if any(path[: len(d)] == d for d in deleted):
                continue
            if path in owned_by_others or path in owned_above:
                continue
            if path in inner:
                continue
            _delete_at(result, path)
            deleted.append(path)
    # ---- merge
    for key, value in config.items():
        if value is None:
            continue
        if key == "metadata" and isinstance(value, dict):
            meta = result.setdefault("metadata", {})
            meta_node = node.child("metadata")
            for mkey, mvalue in value.items():
                if mkey in _UNTRACKED_META and mkey in meta:
                    continue
                if mvalue is None:
                    continue
                meta[mkey] = (
                    _merge(meta[mkey], mvalue, meta_node.child(mkey))
                    if mkey in meta
                    else _strip_nulls(mvalue)
                )
            continue
        result[key] = (
            _merge(result[key], value, node.child(key)) if key in result else _strip_nulls(value)
        )
    # ---- ownership
    new_entry = _Entry(field_manager, "Apply", api_version, subresource, stamp, new_set)
    ordered = [new_entry if e.ident() == me else e for e in entries]
    if mine is None:
        ordered.append(new_entry)
    _store(result, ordered)
    return result


def track_update(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    *,
    field_manager: str,
    operation: str = "Update",
    schema_hint: Any = None,
    subresource: str = "",
    now: datetime | None = None,
    ignored_fields: Collection[str] = (),
) -> dict[str, Any]:
    """Record the fields ``new`` changed relative to ``old`` as owned by ``field_manager``.

    Returns a copy of ``new`` with ``metadata.managedFields`` carried over from
    ``old`` and updated. Managed fields sent by the client are ignored, and so
    are changes under the top-level ``ignored_fields``.
    """
    result: dict[str, Any] = _copy_json(dict(new))
    skipped = {f"f:{name}" for name in ignored_fields}
    new_set = {p for p in field_set(result, schema_hint) if p[0] not in skipped}
    entries = _entries(old) if old is not None else []
    inner = _ancestors(new_set)
    if old is None:
        changed = new_set
    else:
        old_set = {p for p in field_set(old, schema_hint) if p[0] not in skipped}
        changed = {
            p
            for p in new_set
            if p not in old_set
            or (p not in inner and _value_at(result, p) != _value_at(old, p))
        }
        gone = old_set - new_set
        for entry in entries:
            entry.fields -= gone
    me = (field_manager or "unknown", operation, subresource)
    changed_leaves = {p for p in changed if p not in inner}
    for entry in entries:
        if entry.ident() != me:
            entry.fields -= changed_leaves
    api_version = str(result.get("apiVersion", ""))
    mine = next((e for e in entries if e.ident() == me), None)
    if changed:
        if mine is None:
            mine = _Entry(me[0], operation, api_version, subresource, _now_text(now), set())
            entries.append(mine)
        mine.fields |= changed
        mine.time = _now_text(now)
        mine.api_version = api_version or mine.api_version
    _store(result, entries)
    return result
