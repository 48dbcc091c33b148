"""The storage engine of localcluster: objects, resourceVersions and watch events.

Pure and synchronous (every method runs to completion on the event loop without
awaiting), so each write is atomic with respect to other requests and watch
registration never races a write. It implements the object semantics a
kube-apiserver + etcd give clients:

* objects keyed by (group, resource, namespace, name) and stored compactly as
  JSON bytes, decoded on read (memory stays close to the JSON size);
* one global, monotonically increasing resourceVersion;
* uid, creationTimestamp, generateName, ``metadata.generation`` bumped on spec
  changes only, optimistic concurrency (409), status subresource rules;
* finalizers and deletionTimestamp, propagation policies (the Foreground/Orphan
  finalizers are handled by ``gc.GarbageCollector``);
* a bounded history of events for watch replay, and watchers fed through
  bounded buffers: a watcher that falls too far behind is closed with an error
  rather than slowing writers down.

The friendly methods (``create``, ``get``, ``list``, ``update``,
``update_status``, ``delete``, ``watch``) take plain dicts and
apiVersion/kind, for in-process users such as the simulator. The HTTP handlers
call the ``*_object`` methods with an already-resolved ``ResourceInfo``.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import datetime
import json
import random
import re
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nimctl_runtime.labels import (
    FieldSelector,
    Selector,
    SelectorParseError,
    validate_label_key,
    validate_label_value,
)

from . import errors
from .errors import StatusError
from .registry import Registry, ResourceInfo

Key = tuple[str, str, str, str]  # group, resource, namespace, name
Obj = dict[str, Any]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_loads = json.loads
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_PATH_SEGMENT_BAD = re.compile(r"[/%]")
_PATH_SEGMENT_NAMES = {"roles", "rolebindings", "clusterroles", "clusterrolebindings"}
_DNS1123_LABEL_RESOURCES = {"namespaces", "services"}
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

_UNDELETABLE_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"
FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
NAMESPACE_FINALIZER = "kubernetes"


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def encode(obj: Any) -> bytes:
    return _dumps(obj).encode()


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


def _getter(
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

    def decode(self) -> Obj:
        obj: Obj = _loads(self.data)
        return obj


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """A committed change, as kept in the history and delivered to watchers."""

    type: str
    rv: int
    group: str
    resource: str
    namespace: str
    name: str
    data: bytes
    labels: Mapping[str, str]
    fields: Mapping[str, str] | None
    old_labels: Mapping[str, str] | None
    old_fields: Mapping[str, str] | None

    @property
    def object(self) -> Obj:
        obj: Obj = _loads(self.data)
        return obj


class WatchClosed(Exception):
    """Raised by ``Watcher.next`` when the watch has been closed with an error."""

    def __init__(self, error: StatusError) -> None:
        super().__init__(error.message)
        self.error = error


class Watcher:
    """A subscription to one resource's changes, optionally filtered.

    Events wait in a bounded buffer; if it overflows the watcher is closed with
    an error (the client re-watches from its last resourceVersion).
    """

    def __init__(  # noqa: PLR0917
        self,
        storage: Storage,
        group_resource: tuple[str, str],
        namespace: str | None,
        label_selector: Selector,
        field_selector: FieldSelector,
        max_buffer: int,
    ) -> None:
        self._storage = storage
        self.group_resource = group_resource
        self.namespace = namespace or None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._max = max_buffer
        self._buf: deque[StoredEvent] = deque()
        self._wakeup = asyncio.Event()
        self.closed = False
        self.error: StatusError | None = None
        self._filtered = not label_selector.empty() or not field_selector.empty()

    def _matches(
        self, ev: StoredEvent, labels: Mapping[str, str] | None, fields: Mapping[str, str] | None
    ) -> bool:
        if labels is None:
            return False
        if not self.label_selector.matches(labels):
            return False
        return self.field_selector.empty() or self.field_selector.matches(
            _getter(fields, ev.namespace, ev.name)
        )

    def _transform(self, ev: StoredEvent) -> StoredEvent | None:
        if self.namespace is not None and ev.namespace != self.namespace:
            return None
        if not self._filtered:
            return ev
        new_ok = self._matches(ev, ev.labels, ev.fields)
        if ev.type == MODIFIED:
            old_ok = self._matches(ev, ev.old_labels, ev.old_fields)
            if new_ok and old_ok:
                return ev
            if new_ok:
                return _retype(ev, ADDED)
            if old_ok:
                return _retype(ev, DELETED)
            return None
        return ev if new_ok else None

    def _offer(self, ev: StoredEvent) -> None:
        if self.closed:
            return
        out = self._transform(ev)
        if out is None:
            return
        if len(self._buf) >= self._max:
            self.close(
                errors.StatusError(
                    500,
                    "InternalError",
                    "watch closed: the client is not reading events fast enough",
                )
            )
            return
        self._buf.append(out)
        self._wakeup.set()

    def _preload(self, events: Iterable[StoredEvent]) -> None:
        for ev in events:
            out = self._transform(ev)
            if out is not None:
                self._buf.append(out)
        if self._buf:
            self._wakeup.set()

    def close(self, error: StatusError | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        if error is not None and self.error is None:
            self.error = error
        self._storage._unsubscribe(self)
        self._wakeup.set()

    def pending(self) -> int:
        return len(self._buf)

    def drain(self) -> list[StoredEvent]:
        """Take every buffered event without waiting."""
        out = list(self._buf)
        self._buf.clear()
        if not self.closed:
            self._wakeup.clear()
        return out

    async def next_batch(self, timeout: float | None = None) -> list[StoredEvent]:  # noqa: ASYNC109
        """Wait up to *timeout* for events; [] on timeout or when closed without error.

        Raises WatchClosed when the watch was closed with an error and nothing is left.
        """
        if not self._buf and not self.closed:
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                return []
        batch = self.drain()
        if not batch and self.closed and self.error is not None:
            raise WatchClosed(self.error)
        return batch

    def __aiter__(self) -> AsyncIterator[StoredEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[StoredEvent]:
        while True:
            batch = await self.next_batch()
            if not batch and self.closed:
                return
            for ev in batch:
                yield ev


def _retype(ev: StoredEvent, typ: str) -> StoredEvent:
    return StoredEvent(
        typ,
        ev.rv,
        ev.group,
        ev.resource,
        ev.namespace,
        ev.name,
        ev.data,
        ev.labels,
        ev.fields,
        ev.old_labels,
        ev.old_fields,
    )


def _cause(field: str, message: str, reason: str = "FieldValueInvalid") -> dict[str, str]:
    return {"reason": reason, "message": message, "field": field}


_OMIT_EMPTY_META = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")


def _normalize_meta(meta: dict[str, Any]) -> None:
    """Drop empty ObjectMeta collections, as Go's ``omitempty`` encoding does."""
    for key in _OMIT_EMPTY_META:
        if key in meta and not meta[key]:
            del meta[key]


def _normalize_builtin(info: ResourceInfo, obj: Obj) -> None:
    """Server-side normalisation of built-in kinds (Secret ``stringData`` -> ``data``)."""
    if info.group == "" and info.resource == "secrets":
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict) and string_data:
            data = obj.get("data")
            if not isinstance(data, dict):
                data = obj["data"] = {}
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
        obj.setdefault("type", "Opaque")


def _strip_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _owner_uids(meta: Mapping[str, Any]) -> tuple[str, ...]:
    refs = meta.get("ownerReferences") or []
    return tuple(str(r.get("uid", "")) for r in refs if isinstance(r, dict))


class Storage:
    """Objects, the global resourceVersion, event history and watchers."""

    def __init__(
        self,
        registry: Registry,
        *,
        history_size: int = 20000,
        watch_buffer: int = 100000,
    ) -> None:
        self.registry = registry
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Entry]] = {}
        self._rv = 1
        self._history: deque[StoredEvent] = deque(maxlen=history_size)
        self._compacted_rv = 1
        self._watchers: dict[tuple[str, str], set[Watcher]] = {}
        self._listeners: list[Callable[[StoredEvent], None]] = []
        self._uids: dict[str, Key] = {}
        self._dependents: dict[str, set[Key]] = {}
        self._watch_buffer = watch_buffer

    # ------------------------------------------------------------------ basics

    @property
    def resource_version(self) -> int:
        """The current (latest committed) global resourceVersion."""
        return self._rv

    @property
    def oldest_resource_version(self) -> int:
        """Watches from a resourceVersion below this get 410 Gone."""
        if self._history:
            return max(self._history[0].rv - 1, self._compacted_rv)
        return self._compacted_rv

    def compact(self) -> None:
        """Forget the event history: later watches from older resourceVersions get 410."""
        self._history.clear()
        self._compacted_rv = self._rv

    def subscribe(self, listener: Callable[[StoredEvent], None]) -> Callable[[], None]:
        """Call *listener* synchronously after every committed change; returns an unsubscribe."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _bucket(self, info: ResourceInfo) -> dict[tuple[str, str], Entry]:
        gr = info.group_resource
        bucket = self._objects.get(gr)
        if bucket is None:
            bucket = self._objects[gr] = {}
        return bucket

    def drop_resource(self, group: str, resource: str) -> None:
        """Remove every object of a resource (its CRD was deleted), emitting DELETED events."""
        bucket = self._objects.get((group, resource))
        for (ns, name), entry in sorted((bucket or {}).items()):
            obj = entry.decode()
            self._remove((group, resource, ns, name), entry, obj)
        for watcher in list(self._watchers.get((group, resource), ())):
            watcher.close()

    def lookup_uid(self, uid: str) -> Key | None:
        return self._uids.get(uid)

    def dependents_of(self, uid: str) -> list[Key]:
        return sorted(self._dependents.get(uid, ()))

    def entry(self, key: Key) -> Entry | None:
        bucket = self._objects.get((key[0], key[1]))
        return bucket.get((key[2], key[3])) if bucket else None

    def info_for(self, group: str, resource: str) -> ResourceInfo | None:
        versions = self.registry.versions_of(group, resource)
        if not versions:
            return None
        for info in versions:
            if info.version == info.storage_version:
                return info
        return versions[0]

    def namespaced_resources(self) -> list[tuple[str, str]]:
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

    # ------------------------------------------------------------------ commit

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _emit(self, ev: StoredEvent) -> None:
        self._history.append(ev)
        for w in list(self._watchers.get((ev.group, ev.resource), ())):
            w._offer(ev)
        for listener in list(self._listeners):
            listener(ev)

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

    def _make_entry(self, info: ResourceInfo, obj: Obj, rv: int) -> Entry:
        meta = obj["metadata"]
        labels = dict(meta.get("labels") or {})
        fields: dict[str, str] | None = None
        if info.field_labels:
            fields = {}
            for f in info.field_labels:
                v = field_value(obj, f)
                if v is not None:
                    fields[f] = v
        return Entry(
            meta.get("namespace", "") or "",
            meta["name"],
            encode(obj),
            rv,
            str(meta.get("uid", "")),
            labels,
            fields,
            _owner_uids(meta),
        )

    def _store(self, info: ResourceInfo, obj: Obj, typ: str, old: Entry | None) -> Entry:
        meta = obj["metadata"]
        ns = meta.get("namespace", "") or ""
        name = meta["name"]
        rv = self._next_rv()
        meta["resourceVersion"] = str(rv)
        entry = self._make_entry(info, obj, rv)
        key = (info.group, info.resource, ns, name)
        self._bucket(info)[(ns, name)] = entry
        self._index(key, old, entry)
        self._emit(
            StoredEvent(
                typ,
                rv,
                info.group,
                info.resource,
                ns,
                name,
                entry.data,
                entry.labels,
                entry.fields,
                old.labels if old is not None else None,
                old.fields if old is not None else None,
            )
        )
        return entry

    def _remove(self, key: Key, entry: Entry, obj: Obj) -> Obj:
        group, resource, ns, name = key
        bucket = self._objects.get((group, resource), {})
        bucket.pop((ns, name), None)
        self._index(key, entry, None)
        rv = self._next_rv()
        obj["metadata"]["resourceVersion"] = str(rv)
        data = encode(obj)
        fields = entry.fields
        self._emit(
            StoredEvent(
                DELETED, rv, group, resource, ns, name, data, entry.labels, fields, None, None
            )
        )
        return obj

    # ------------------------------------------------------------------ validation

    def _check_name(self, info: ResourceInfo, name: str) -> None:
        if info.resource in _PATH_SEGMENT_NAMES:
            ok = name not in (".", "..") and not _PATH_SEGMENT_BAD.search(name)
            rule = "may not contain '/' or '%'"
        elif info.resource in _DNS1123_LABEL_RESOURCES:
            ok = len(name) <= 63 and bool(_DNS1123_LABEL.match(name))
            rule = (
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character"
            )
        else:
            ok = len(name) <= 253 and bool(_DNS1123_SUBDOMAIN.match(name))
            rule = (
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character"
            )
        if not ok:
            raise errors.invalid(
                info.group,
                info.kind,
                name,
                [
                    {
                        "reason": "FieldValueInvalid",
                        "message": f'Invalid value: "{name}": {rule}',
                        "field": "metadata.name",
                    }
                ],
            )

    def _check_metadata(self, info: ResourceInfo, name: str, meta: Mapping[str, Any]) -> None:
        """Labels, annotations and ownerReferences as kube-apiserver validates them."""
        causes: list[dict[str, str]] = []
        labels = meta.get("labels")
        if labels is not None and not isinstance(labels, dict):
            causes.append(_cause("metadata.labels", "Invalid value: must be a map of strings"))
        for key, value in (labels or {}).items() if isinstance(labels, dict) else ():
            try:
                validate_label_key(str(key))
                if not isinstance(value, str):
                    raise SelectorParseError(f"label value for {key!r} must be a string")
                validate_label_value(value)
            except SelectorParseError as exc:
                causes.append(_cause("metadata.labels", f"Invalid value: {exc}"))
        annotations = meta.get("annotations")
        if annotations is not None and (
            not isinstance(annotations, dict)
            or not all(isinstance(v, str) for v in annotations.values())
        ):
            causes.append(
                _cause(
                    "metadata.annotations", "Invalid value: annotations must be a map of strings"
                )
            )
        refs = meta.get("ownerReferences")
        if refs is not None:
            if not isinstance(refs, list):
                causes.append(_cause("metadata.ownerReferences", "Invalid value: must be a list"))
                refs = []
            controllers = 0
            for i, ref in enumerate(refs):
                path = f"metadata.ownerReferences[{i}]"
                if not isinstance(ref, dict):
                    causes.append(_cause(path, "Invalid value: must be an object"))
                    continue
                for f in ("apiVersion", "kind", "name", "uid"):
                    if not ref.get(f):
                        causes.append(_cause(f"{path}.{f}", "Required value", "FieldValueRequired"))
                if ref.get("controller"):
                    controllers += 1
            if controllers > 1:
                causes.append(
                    _cause(
                        "metadata.ownerReferences",
                        "Invalid value: Only one reference can have Controller set to true",
                    )
                )
        finalizers = meta.get("finalizers")
        if finalizers is not None and (
            not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
        ):
            causes.append(_cause("metadata.finalizers", "Invalid value: must be a list of strings"))
        if causes:
            raise errors.invalid(info.group, info.kind, name, causes)

    def _check_namespace(self, info: ResourceInfo, namespace: str, name: str) -> None:
        if not info.namespaced:
            return
        if not namespace:
            raise errors.bad_request("the namespace of the object must be set")
        ns_entry = self._objects.get(("", "namespaces"), {}).get(("", namespace))
        if ns_entry is None:
            raise errors.not_found("", "namespaces", namespace)
        ns_obj = ns_entry.decode()
        if ns_obj["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                f'{info.qualified} "{name}" is forbidden: unable to create new content in '
                f"namespace {namespace} because it is being terminated",
                info.group,
                info.resource,
                name,
            )

    # ------------------------------------------------------------------ engine API

    def read_object(self, info: ResourceInfo, namespace: str, name: str) -> Obj:
        entry = self._bucket(info).get((namespace if info.namespaced else "", name))
        if entry is None:
            raise errors.not_found(info.group, info.resource, name)
        return entry.decode()

    def get_entry(self, info: ResourceInfo, namespace: str, name: str) -> Entry | None:
        return self._bucket(info).get((namespace if info.namespaced else "", name))

    def list_entries(
        self,
        info: ResourceInfo,
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
        bucket = self._bucket(info)
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
            if fsel is not None and not fsel.matches(_getter(entry.fields, k[0], k[1])):
                continue
            if limit and len(out) >= limit:
                remaining += 1
                continue
            out.append(entry)
        last = (out[-1].namespace, out[-1].name) if remaining and out else None
        return out, last, remaining

    def create_object(
        self,
        info: ResourceInfo,
        obj: Obj,
        *,
        dry_run: bool = False,
        reset_status: bool | None = None,
    ) -> Obj:
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        name = meta.get("name") or ""
        if not name:
            prefix = meta.get("generateName") or ""
            if not prefix:
                raise errors.invalid(
                    info.group,
                    info.kind,
                    "",
                    [
                        {
                            "reason": "FieldValueRequired",
                            "message": "Required value: name or generateName is required",
                            "field": "metadata.name",
                        }
                    ],
                )
            for _ in range(8):
                candidate = prefix + "".join(random.choices(_SUFFIX_ALPHABET, k=5))
                if (meta.get("namespace", "") if info.namespaced else "", candidate) not in (
                    self._bucket(info)
                ):
                    break
            name = meta["name"] = candidate
        self._check_name(info, name)
        self._check_metadata(info, name, meta)
        ns = (meta.get("namespace") or "") if info.namespaced else ""
        if not info.namespaced:
            meta.pop("namespace", None)
        self._check_namespace(info, ns, name)
        if (ns, name) in self._bucket(info):
            raise errors.already_exists(info.group, info.resource, name)
        obj["apiVersion"] = f"{info.group}/{info.storage_version}" if info.group else "v1"
        obj["kind"] = info.kind
        if reset_status is None:
            reset_status = info.has_status and info.resource != "nodes"
        if reset_status:
            obj.pop("status", None)
        for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(server_owned, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if info.crd or "spec" in obj:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        self._prepare_builtin_create(info, obj)
        _normalize_meta(meta)
        if dry_run:
            meta["resourceVersion"] = ""
            meta.pop("resourceVersion")
            return obj
        self._store(info, obj, ADDED, None)
        return obj

    def _prepare_builtin_create(self, info: ResourceInfo, obj: Obj) -> None:
        if info.crd:
            return
        _normalize_builtin(info, obj)
        if info.resource == "namespaces":
            obj.setdefault("spec", {})["finalizers"] = [NAMESPACE_FINALIZER]
            obj["status"] = {"phase": "Active"}
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj[
                "metadata"
            ]["name"]
        elif info.resource == "pods" and "status" not in obj:
            obj["status"] = {"phase": "Pending"}

    def update_object(
        self,
        info: ResourceInfo,
        obj: Obj,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Obj:
        """Replace an object (PUT). ``subresource="status"`` changes only status."""
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise errors.invalid(
                info.group,
                info.kind,
                "",
                [
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value: name is required",
                        "field": "metadata.name",
                    }
                ],
            )
        name = meta["name"]
        ns = (meta.get("namespace") or "") if info.namespaced else ""
        entry = self._bucket(info).get((ns, name))
        if entry is None:
            raise errors.not_found(info.group, info.resource, name)
        old = entry.decode()
        old_meta = old["metadata"]
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != old_meta.get("resourceVersion"):
            raise errors.conflict(
                info.group,
                info.resource,
                name,
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
            )
        uid = meta.get("uid")
        if uid and uid != old_meta.get("uid"):
            raise errors.conflict(
                info.group,
                info.resource,
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{old_meta.get('uid')}",
            )
        if subresource == "status":
            new = {k: v for k, v in old.items() if k != "status"}
            if "status" in obj:
                new["status"] = obj["status"]
            new["metadata"] = dict(old_meta)
        else:
            new = dict(obj)
            new_meta = dict(meta)
            new["metadata"] = new_meta
            for owned in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if owned in old_meta:
                    new_meta[owned] = old_meta[owned]
                else:
                    new_meta.pop(owned, None)
            new_meta["name"] = name
            if info.namespaced:
                new_meta["namespace"] = ns
            else:
                new_meta.pop("namespace", None)
            if "managedFields" not in meta and "managedFields" in old_meta:
                new_meta["managedFields"] = old_meta["managedFields"]
            if info.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            self._check_metadata(info, name, new_meta)
            if not info.crd:
                _normalize_builtin(info, new)
            if "generation" in old_meta and _strip_spec(new) != _strip_spec(old):
                new_meta["generation"] = int(old_meta.get("generation", 1)) + 1
            if old_meta.get("deletionTimestamp"):
                added = set(new_meta.get("finalizers") or []) - set(
                    old_meta.get("finalizers") or []
                )
                added -= {FOREGROUND_FINALIZER, ORPHAN_FINALIZER}
                if added:
                    raise errors.invalid(
                        info.group,
                        info.kind,
                        name,
                        [
                            {
                                "reason": "FieldValueForbidden",
                                "message": "Forbidden: no new finalizers can be added if the "
                                f"object is being deleted, found new finalizers {sorted(added)}",
                                "field": "metadata.finalizers",
                            }
                        ],
                    )
        _normalize_meta(new["metadata"])
        new["apiVersion"] = old.get("apiVersion", info.api_version)
        new["kind"] = info.kind
        new["metadata"]["resourceVersion"] = old_meta.get("resourceVersion")
        if new == old:
            return old
        if dry_run:
            return new
        if (
            new["metadata"].get("deletionTimestamp")
            and not new["metadata"].get("finalizers")
            and not (info.resource == "namespaces" and (new.get("spec") or {}).get("finalizers"))
        ):
            return self._remove((info.group, info.resource, ns, name), entry, new)
        self._store(info, new, MODIFIED, entry)
        return new

    def delete_object(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        *,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Delete (or start deleting) an object; returns its last state."""
        ns = namespace if info.namespaced else ""
        key = (info.group, info.resource, ns, name)
        entry = self._bucket(info).get((ns, name))
        if entry is None:
            raise errors.not_found(info.group, info.resource, name)
        obj = entry.decode()
        meta = obj["metadata"]
        pre = preconditions or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise errors.conflict(
                info.group,
                info.resource,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                f"{meta.get('uid')}",
            )
        if pre.get("resourceVersion") and str(pre["resourceVersion"]) != meta.get(
            "resourceVersion"
        ):
            raise errors.conflict(
                info.group,
                info.resource,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )
        if propagation_policy not in (None, "", "Background", "Foreground", "Orphan"):
            raise errors.bad_request(
                f'Unsupported value: "{propagation_policy}": supported values: "Orphan", '
                '"Background", "Foreground"'
            )
        finalizers = list(meta.get("finalizers") or [])
        changed = False
        if propagation_policy == "Foreground" and FOREGROUND_FINALIZER not in finalizers:
            if ORPHAN_FINALIZER in finalizers:
                finalizers.remove(ORPHAN_FINALIZER)
            finalizers.append(FOREGROUND_FINALIZER)
            changed = True
        elif propagation_policy == "Orphan" and ORPHAN_FINALIZER not in finalizers:
            if FOREGROUND_FINALIZER in finalizers:
                finalizers.remove(FOREGROUND_FINALIZER)
            finalizers.append(ORPHAN_FINALIZER)
            changed = True
        is_ns = info.resource == "namespaces" and not info.group
        if is_ns and name in _UNDELETABLE_NAMESPACES:
            raise errors.forbidden(
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                "",
                "namespaces",
                name,
            )
        if not finalizers and not is_ns:
            if dry_run:
                return obj
            return self._remove(key, entry, obj)
        if meta.get("deletionTimestamp") and not changed:
            return obj
        if finalizers:
            meta["finalizers"] = finalizers
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = 0
        if is_ns:
            obj.setdefault("status", {})["phase"] = "Terminating"
        if dry_run:
            return obj
        self._store(info, obj, MODIFIED, entry)
        return obj

    def watch_resource(
        self,
        info: ResourceInfo,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: Selector | None = None,
        field_selector: FieldSelector | None = None,
        *,
        send_initial_events: bool | None = None,
    ) -> Watcher:
        """Start a watch; replays history after *resource_version* (410 if compacted).

        ``resource_version`` None/"" /"0" (or ``send_initial_events``) starts with
        synthetic ADDED events for the current objects.
        """
        watcher = Watcher(
            self,
            info.group_resource,
            namespace,
            label_selector or Selector.everything(),
            field_selector or FieldSelector.everything(),
            self._watch_buffer,
        )
        initial = send_initial_events or resource_version in (None, "", "0")
        if initial:
            events: list[StoredEvent] = []
            entries, _, _ = self.list_entries(info, namespace)
            for entry in entries:
                ns, name = entry.namespace, entry.name
                events.append(
                    StoredEvent(
                        ADDED,
                        entry.rv,
                        info.group,
                        info.resource,
                        ns,
                        name,
                        entry.data,
                        entry.labels,
                        entry.fields,
                        None,
                        None,
                    )
                )
            watcher._preload(events)
        else:
            rv = self._check_rv_not_too_old(resource_version)
            watcher._preload(
                ev
                for ev in self._history
                if ev.rv > rv and (ev.group, ev.resource) == info.group_resource
            )
        self._watchers.setdefault(info.group_resource, set()).add(watcher)
        return watcher

    def _check_rv_not_too_old(self, resource_version: str | None) -> int:
        try:
            rv = int(resource_version or "0")
        except ValueError as exc:
            raise errors.bad_request(f'invalid resource version "{resource_version}"') from exc
        if rv < self.oldest_resource_version:
            raise errors.gone(
                f"too old resource version: {rv} ({self.oldest_resource_version + 1})"
            )
        return rv

    def _unsubscribe(self, watcher: Watcher) -> None:
        ws = self._watchers.get(watcher.group_resource)
        if ws is not None:
            ws.discard(watcher)

    def close_watchers(self, error: StatusError | None = None) -> None:
        for ws in list(self._watchers.values()):
            for w in list(ws):
                w.close(error)

    def watcher_count(self) -> int:
        return sum(len(ws) for ws in self._watchers.values())

    # ------------------------------------------------------------------ friendly API

    def resolve(self, api_version: str, kind: str) -> ResourceInfo:
        """The served resource for apiVersion/kind (404 NotFound if unknown)."""
        info = self.registry.get_by_kind(api_version, kind)
        if info is None:
            raise StatusError(
                404,
                "NotFound",
                f'no matches for kind "{kind}" in version "{api_version}"',
            )
        return info

    def create(self, obj: Mapping[str, Any], *, reset_status: bool | None = False) -> Obj:
        """Create a copy of *obj* (status kept unless *reset_status*); returns the stored object."""
        info = self.resolve(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        return self.create_object(info, _copy(obj), reset_status=reset_status)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj:
        info = self.resolve(api_version, kind)
        return self._versioned(info, self.read_object(info, namespace or "", name))

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | Selector | None = None,
        field_selector: str | FieldSelector | None = None,
    ) -> list[Obj]:
        info = self.resolve(api_version, kind)
        lsel = (
            Selector.parse(label_selector)
            if isinstance(label_selector, str) or label_selector is None
            else label_selector
        )
        fsel = (
            FieldSelector.parse(field_selector)
            if isinstance(field_selector, str) or field_selector is None
            else field_selector
        )
        entries, _, _ = self.list_entries(info, namespace, lsel, fsel)
        return [self._versioned(info, e.decode()) for e in entries]

    def update(self, obj: Mapping[str, Any]) -> Obj:
        info = self.resolve(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        return self._versioned(info, self.update_object(info, _copy(obj)))

    def update_status(self, obj: Mapping[str, Any]) -> Obj:
        info = self.resolve(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        sub = "status" if info.has_status else ""
        return self._versioned(info, self.update_object(info, _copy(obj), subresource=sub))

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, Any] | None = None,
    ) -> Obj:
        info = self.resolve(api_version, kind)
        return self.delete_object(
            info,
            namespace or "",
            name,
            propagation_policy=propagation_policy,
            preconditions=preconditions,
        )

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Watcher:
        """An in-process watch; iterate it with ``async for event in watcher``."""
        info = self.resolve(api_version, kind)
        return self.watch_resource(
            info,
            namespace,
            resource_version,
            Selector.parse(label_selector),
            FieldSelector.parse(field_selector),
        )

    def _versioned(self, info: ResourceInfo, obj: Obj) -> Obj:
        if info.crd and info.version != info.storage_version:
            obj["apiVersion"] = info.api_version
        return obj


def _copy(obj: Mapping[str, Any]) -> Obj:
    out: Obj = _loads(encode(obj))
    return out
