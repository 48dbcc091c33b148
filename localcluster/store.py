"""The keyed object store of localcluster: what etcd is to kube-apiserver.

Objects are kept per (group, resource) bucket, keyed by (namespace, name), as
compact JSON bytes decoded on read, so memory stays close to the JSON size.
Next to the bytes each :class:`Entry` keeps what label/field selectors and the
garbage collector need without decoding (labels, selectable fields, owner
uids). The store also owns the one global, monotonically increasing
resourceVersion and two indexes: uid -> key and owner uid -> dependents.

It knows nothing of object semantics (names, metadata rules, finalizers: see
``strategy``) nor of watchers (``watchcache``); ``storage.Storage`` composes
the three.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from nimctl_runtime.labels import FieldSelector, Selector
from nimctl_runtime.meta import Obj

Key = tuple[str, str, str, str]  # group, resource, namespace, name

GroupResource = tuple[str, str]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

# orjson writes the same compact JSON as the encoder above (same escapes, UTF-8
# kept, keys in order) except for floats (``1e-05`` is ``0.00001``, ``1e+16`` is
# ``1e16``), and it refuses what the encoder takes (integers beyond 64 bits, keys
# that are not exactly str). Output holding a float (or a bare value) is written
# again by the encoder, so the bytes are json's. The one difference left: a NaN
# or infinite float is written ``null`` where json wrote ``NaN``/``Infinity``,
# which no JSON reader (Go's included) takes.


def _holds_float(data: bytes) -> bool:
    """Whether orjson's output *data* holds a float: a point or an exponent outside strings.

    Strings are cut out by splitting at quotes once escaped backslashes and
    escaped quotes are gone; what is left is structure, numbers, true, false and
    null. All in C: a regular expression over the bytes costs ten times more.
    """
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(data.split(b'"')[::2])
    if b"." in outside:
        return True
    if b"e" in outside or b"E" in outside:
        outside = outside.replace(b"true", b"").replace(b"false", b"")
        return b"e" in outside or b"E" in outside
    return False


# orjson reads an integer beyond 64 bits as a float; json keeps it an int. Every
# integer of 18 digits or fewer fits, so bytes with a longer run of digits
# (inside strings too: a false alarm only costs the slower decoder) go to json.
_DIGITS_AS_ZERO = bytes(ord("0") if chr(c).isdigit() and c < 128 else ord(" ") for c in range(256))
_LONG_RUN = b"0" * 19


def _long_digit_run(data: bytes) -> bool:
    return _LONG_RUN in data.translate(_DIGITS_AS_ZERO)


def encode(obj: Any) -> bytes:
    """Compact JSON bytes of *obj*, as stored and as sent on the wire.

    Byte for byte what ``json`` writes with ``separators=(",", ":")`` and
    ``ensure_ascii=False``; orjson writes it when it can (about 5x faster).
    """
    try:
        data = orjson.dumps(obj)
    except TypeError:
        return _dumps(obj).encode()
    if data[:1] not in (b"{", b"[") or _holds_float(data):
        return _dumps(obj).encode()
    return data


def decode(data: bytes | str) -> Obj:
    """The object of JSON *data*: what ``json.loads`` gives, read by orjson when it can."""
    obj: Obj = loads(data)
    return obj


def loads(data: bytes | str, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """``json.loads`` semantics (its values, its errors), with orjson's speed where the two agree.

    orjson refuses what json reads (NaN, ``1e400``, lone surrogates, other
    encodings than UTF-8): json reads those, or raises its own error. Integers
    beyond 64 bits never reach orjson (see ``_long_digit_run``). *parse_constant*
    is json's: called for ``NaN``, ``Infinity`` and ``-Infinity``.
    """
    raw = data.encode() if isinstance(data, str) else data
    if not _long_digit_run(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data, parse_constant=parse_constant)


def field_value(obj: Mapping[str, Any], path: str) -> str | None:
    """The string value of a dotted field path (``spec.nodeName``), as field selectors see it."""
    if path == "source":
        src = obj.get("source") or {}
        return str(src.get("component", "")) if isinstance(src, dict) else None
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
        if cur is None:
            return None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, (dict, list)):
        return None
    return str(cur)


def field_getter(
    fields: Mapping[str, str] | None, namespace: str, name: str
) -> Callable[[str], str | None]:
    """Field values for field selectors: the stored fields plus metadata.name/namespace."""

    def get(path: str) -> str | None:
        if path == "metadata.name":
            return name
        if path == "metadata.namespace":
            return namespace
        return fields.get(path) if fields else None

    return get


def owner_uids(meta: Mapping[str, Any]) -> tuple[str, ...]:
    refs = meta.get("ownerReferences") or []
    return tuple(str(r.get("uid", "")) for r in refs if isinstance(r, dict))


class Entry:
    """One stored object: JSON bytes plus what selectors and the GC need without decoding."""

    __slots__ = ("data", "fields", "labels", "name", "namespace", "owners", "rv", "uid")

    def __init__(  # noqa: PLR0917
        self,
        namespace: str,
        name: str,
        data: bytes,
        rv: int,
        uid: str,
        labels: dict[str, str],
        fields: dict[str, str] | None,
        owners: tuple[str, ...],
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.data = data
        self.rv = rv
        self.uid = uid
        self.labels = labels
        self.fields = fields
        self.owners = owners

    @classmethod
    def of(
        cls,
        obj: Obj,
        rv: int,
        field_labels: tuple[str, ...] | list[str] = (),
        data: bytes | None = None,
    ) -> Entry:
        """The entry of *obj* at *rv*, with the values of the resource's selectable fields.
        *data*: ``encode(obj)`` when the caller has it already."""
        meta = obj["metadata"]
        fields: dict[str, str] | None = None
        if field_labels:
            fields = {}
            for f in field_labels:
                v = field_value(obj, f)
                if v is not None:
                    fields[f] = v
        return cls(
            meta.get("namespace", "") or "",
            meta["name"],
            encode(obj) if data is None else data,
            rv,
            str(meta.get("uid", "")),
            dict(meta.get("labels") or {}),
            fields,
            owner_uids(meta),
        )

    def decode(self) -> Obj:
        return decode(self.data)


class ObjectStore:
    """Entries by key, the global resourceVersion, and the uid/owner indexes."""

    def __init__(self) -> None:
        self._objects: dict[GroupResource, dict[tuple[str, str], Entry]] = {}
        self._rv = 1
        self._uids: dict[str, Key] = {}
        self._dependents: dict[str, set[Key]] = {}

    @property
    def resource_version(self) -> int:
        """The current (latest committed) global resourceVersion."""
        return self._rv

    def next_resource_version(self) -> int:
        """Advance the global resourceVersion and return it (one per committed change)."""
        self._rv += 1
        return self._rv

    def bucket(self, group_resource: GroupResource) -> dict[tuple[str, str], Entry]:
        """The live (namespace, name) -> Entry map of one resource."""
        bucket = self._objects.get(group_resource)
        if bucket is None:
            bucket = self._objects[group_resource] = {}
        return bucket

    def get(self, key: Key) -> Entry | None:
        bucket = self._objects.get((key[0], key[1]))
        return bucket.get((key[2], key[3])) if bucket else None

    def put(self, key: Key, entry: Entry, old: Entry | None) -> None:
        """Store *entry* under *key*, replacing *old* (None on create)."""
        self.bucket((key[0], key[1]))[(key[2], key[3])] = entry
        self._index(key, old, entry)

    def remove(self, key: Key, entry: Entry) -> None:
        self._objects.get((key[0], key[1]), {}).pop((key[2], key[3]), None)
        self._index(key, entry, None)

    def _index(self, key: Key, old: Entry | None, new: Entry | None) -> None:
        if old is not None:
            if new is None or new.uid != old.uid:
                self._uids.pop(old.uid, None)
            for o in old.owners:
                deps = self._dependents.get(o)
                if deps is not None:
                    deps.discard(key)
                    if not deps:
                        del self._dependents[o]
        if new is not None:
            self._uids[new.uid] = key
            for o in new.owners:
                self._dependents.setdefault(o, set()).add(key)

    def lookup_uid(self, uid: str) -> Key | None:
        return self._uids.get(uid)

    def dependents_of(self, uid: str) -> list[Key]:
        return sorted(self._dependents.get(uid, ()))

    def namespaced_resources(self) -> list[GroupResource]:
        return [
            gr for gr, bucket in self._objects.items() if bucket and any(ns for ns, _ in bucket)
        ]

    def keys_in_namespace(self, namespace: str) -> list[Key]:
        out: list[Key] = []
        for (g, r), bucket in self._objects.items():
            for ns, name in bucket:
                if ns == namespace:
                    out.append((g, r, ns, name))
        return out

    def list(
        self,
        group_resource: GroupResource,
        namespace: str | None = None,
        label_selector: Selector | None = None,
        field_selector: FieldSelector | None = None,
        *,
        start_after: tuple[str, str] | None = None,
        limit: int = 0,
    ) -> tuple[list[Entry], tuple[str, str] | None, int]:
        """Entries sorted by (namespace, name).

        Returns (page, key of the page's last entry when more follow, number of
        further matching entries).
        """
        bucket = self.bucket(group_resource)
        keys = sorted(bucket)
        if start_after is not None:
            keys = keys[bisect.bisect_right(keys, start_after) :]
        lsel = label_selector if label_selector is not None and not label_selector.empty() else None
        fsel = field_selector if field_selector is not None and not field_selector.empty() else None
        out: list[Entry] = []
        remaining = 0
        for k in keys:
            if namespace and k[0] != namespace:
                continue
            entry = bucket[k]
            if lsel is not None and not lsel.matches(entry.labels):
                continue
            if fsel is not None and not fsel.matches(field_getter(entry.fields, k[0], k[1])):
                continue
            if limit and len(out) >= limit:
                remaining += 1
                continue
            out.append(entry)
        last = (out[-1].namespace, out[-1].name) if remaining and out else None
        return out, last, remaining
