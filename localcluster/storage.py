"""The storage engine of localcluster: kube-apiserver's generic registry over a store.

Pure and synchronous (every method runs to completion on the event loop without
awaiting), so each write is atomic with respect to other requests and watch
registration never races a write. :class:`Storage` composes three parts, as
kube-apiserver's ``registry/generic`` store does:

* ``store.ObjectStore``: objects keyed by (group, resource, namespace, name) as
  compact JSON bytes, the one global resourceVersion, uid and owner indexes;
* ``watchcache.WatchCache``: the bounded event history for watch replay (410
  Gone after compaction) and the watchers, each fed through a bounded buffer;
* ``strategy``: name, metadata and namespace checks, server-owned fields,
  ``metadata.generation``, the status subresource, finalizers and propagation
  policies (the Foreground/Orphan finalizers are handled by
  ``gc.GarbageCollector``).

Here live the verbs that tie them together: optimistic concurrency (409),
create/update/delete/watch and the commit of each change.

The friendly methods (``create``, ``get``, ``list``, ``update``,
``update_status``, ``delete``, ``watch``) take plain dicts and
apiVersion/kind, for in-process users such as the simulator. The HTTP handlers
call the ``*_object`` methods with an already-resolved ``ResourceInfo``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from nimctl_runtime.labels import FieldSelector, Selector
from nimctl_runtime.meta import Obj

from . import errors, strategy
from .errors import StatusError
from .registry import Registry, ResourceInfo
from .store import Entry, Key, ObjectStore, decode, encode
from .watchcache import ADDED, DELETED, MODIFIED, StoredEvent, WatchCache, Watcher


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
        self.objects = ObjectStore()
        self.watch_cache = WatchCache(history_size=history_size, watch_buffer=watch_buffer)
        self._last_stored: tuple[Obj, bytes] | None = None
        # namespace name -> (its entry, the entry decoded): every namespaced create checks
        # its namespace, which changes rarely (read-only here, never handed out)
        self._namespaces: dict[str, tuple[Entry, Obj]] = {}
        # decodes of a namespace for the check above (a counting test reads it)
        self.namespace_decodes = 0
        # updates whose caller held the stored object (``update(current=)``, ``update_status``)
        self.decodes_spared = 0
        # writes stored as orjson wrote them, without the float check (a counting test)
        self.plain_writes = 0

    # ------------------------------------------------------------------ basics

    @property
    def resource_version(self) -> int:
        """The current (latest committed) global resourceVersion."""
        return self.objects.resource_version

    @property
    def oldest_resource_version(self) -> int:
        """Watches from a resourceVersion below this get 410 Gone."""
        return self.watch_cache.oldest_resource_version

    def compact(self) -> None:
        """Forget the event history: later watches from older resourceVersions get 410."""
        self.watch_cache.compact(self.objects.resource_version)

    def subscribe(self, listener: Callable[[StoredEvent], None]) -> Callable[[], None]:
        """Call *listener* synchronously after every committed change; returns an unsubscribe."""
        return self.watch_cache.subscribe(listener)

    def _bucket(self, info: ResourceInfo) -> dict[tuple[str, str], Entry]:
        return self.objects.bucket(info.group_resource)

    def drop_resource(self, group: str, resource: str) -> None:
        """Remove every object of a resource (its CRD was deleted), emitting DELETED events."""
        bucket = self.objects.bucket((group, resource))
        for (ns, name), entry in sorted(bucket.items()):
            obj = entry.decode()
            self._remove((group, resource, ns, name), entry, obj)
        self.watch_cache.close_resource((group, resource))

    def lookup_uid(self, uid: str) -> Key | None:
        return self.objects.lookup_uid(uid)

    def dependents_of(self, uid: str) -> list[Key]:
        return self.objects.dependents_of(uid)

    def entry(self, key: Key) -> Entry | None:
        return self.objects.get(key)

    def info_for(self, group: str, resource: str) -> ResourceInfo | None:
        versions = self.registry.versions_of(group, resource)
        if not versions:
            return None
        for info in versions:
            if info.version == info.storage_version:
                return info
        return versions[0]

    def namespaced_resources(self) -> list[tuple[str, str]]:
        return self.objects.namespaced_resources()

    def keys_in_namespace(self, namespace: str) -> list[Key]:
        return self.objects.keys_in_namespace(namespace)

    # ------------------------------------------------------------------ commit

    def stored_bytes(self, obj: Obj) -> bytes | None:
        """The stored bytes of *obj* when it is the object this storage stored last.

        A write's response is the object it stored: the handler sends these bytes
        instead of encoding the object again. Only the last one is kept, by identity,
        and the handler asks before anything else runs.
        """
        last = self._last_stored
        if last is not None and last[0] is obj:
            return last[1]
        return None

    def _store(
        self, info: ResourceInfo, obj: Obj, typ: str, old: Entry | None, *, plain: bool = False
    ) -> Entry:
        """Commit *obj*. *plain*: orjson is known to write *obj* as ``encode`` does (see
        :meth:`update_object`), so its bytes are stored without ``encode``'s float check."""
        meta = obj["metadata"]
        ns = meta.get("namespace", "") or ""
        name = meta["name"]
        rv = self.objects.next_resource_version()
        meta["resourceVersion"] = str(rv)
        self.plain_writes += plain
        entry = Entry.of(obj, rv, info.field_labels, orjson.dumps(obj) if plain else None)
        self._last_stored = (obj, entry.data)
        self.objects.put((info.group, info.resource, ns, name), entry, old)
        self.watch_cache.emit(
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
        self.objects.remove(key, entry)
        rv = self.objects.next_resource_version()
        obj["metadata"]["resourceVersion"] = str(rv)
        self.watch_cache.emit(
            StoredEvent(
                DELETED,
                rv,
                group,
                resource,
                ns,
                name,
                encode(obj),
                entry.labels,
                entry.fields,
                None,
                None,
            )
        )
        return obj

    def _namespace_obj(self, namespace: str) -> Obj | None:
        """The stored namespace *namespace* (None when absent), decoded once per version."""
        entry = self.objects.get(("", "namespaces", "", namespace)) if namespace else None
        if entry is None:
            self._namespaces.pop(namespace, None)
            return None
        cached = self._namespaces.get(namespace)
        if cached is not None and cached[0] is entry:
            return cached[1]
        self.namespace_decodes += 1
        obj = entry.decode()
        self._namespaces[namespace] = (entry, obj)
        return obj

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
        return self.objects.list(
            info.group_resource,
            namespace,
            label_selector,
            field_selector,
            start_after=start_after,
            limit=limit,
        )

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
        bucket = self._bucket(info)
        name = meta.get("name") or ""
        if not name:
            prefix = meta.get("generateName") or ""
            if not prefix:
                raise strategy.require_name(info, "name or generateName is required")
            gen_ns = meta.get("namespace", "") if info.namespaced else ""
            name = meta["name"] = strategy.generate_name(
                prefix, lambda candidate: (gen_ns, candidate) in bucket
            )
        strategy.check_name(info, name)
        strategy.check_metadata(info, name, meta)
        ns = (meta.get("namespace") or "") if info.namespaced else ""
        if not info.namespaced:
            meta.pop("namespace", None)
        if info.namespaced:
            strategy.check_namespace(info, ns, name, self._namespace_obj(ns))
        if (ns, name) in bucket:
            raise errors.already_exists(info.group, info.resource, name)
        strategy.prepare_for_create(info, obj, reset_status=reset_status)
        if dry_run:
            meta.pop("resourceVersion", None)
            return obj
        self._store(info, obj, ADDED, None)
        return obj

    def update_object(
        self,
        info: ResourceInfo,
        obj: Obj,
        *,
        subresource: str = "",
        dry_run: bool = False,
        current: Mapping[str, Any] | None = None,
    ) -> Obj:
        """Replace an object (PUT). ``subresource="status"`` changes only status.

        *current*: what the caller holds as the stored object (see
        :meth:`update_status`); used instead of decoding the stored one when its JSON is
        the stored bytes.
        """
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise strategy.require_name(info, "name is required")
        name = meta["name"]
        ns = (meta.get("namespace") or "") if info.namespaced else ""
        entry = self._bucket(info).get((ns, name))
        if entry is None:
            raise errors.not_found(info.group, info.resource, name)
        old = self._stored_or_decoded(info, entry, current)
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
        # A status write over the caller's own copy of the stored object (its orjson JSON
        # is the stored bytes, so json and orjson write all of it alike) changes only the
        # status and strings (resourceVersion, apiVersion, kind): when orjson writes the
        # new status as json does too, it writes the whole new object as ``encode`` would,
        # and the float check over the whole object (8-17 us for a pod or a Deployment,
        # where orjson writes it in ~1.5 us) is needed for the status alone.
        plain = False
        if subresource == "status":
            new = strategy.prepare_for_status_update(obj, old)
            plain = old is current and _written_alike(new.get("status"))
        else:
            new = strategy.prepare_for_update(info, obj, old, ns)
        strategy.normalize_meta(new["metadata"])
        new["apiVersion"] = old.get("apiVersion", info.api_version)
        new["kind"] = info.kind
        new["metadata"]["resourceVersion"] = old_meta.get("resourceVersion")
        if new == old:
            return old
        if dry_run:
            return new
        if strategy.finished_deleting(info, new):
            return self._remove((info.group, info.resource, ns, name), entry, new)
        self._store(info, new, MODIFIED, entry, plain=plain)
        return new

    def _stored_or_decoded(
        self, info: ResourceInfo, entry: Entry, current: Mapping[str, Any] | None
    ) -> Obj:
        """The stored object of *entry*: *current* itself when its JSON is the stored
        bytes, byte for byte (so it is that object: same resourceVersion, same
        everything), else decoded. orjson writes a pod in ~1.5 us where decoding it
        costs ~7 us and allocates a whole new tree that a status write then keeps."""
        if current is not None and type(current) is dict and not info.crd:
            try:
                same = orjson.dumps(current) == entry.data
            except TypeError:  # orjson.JSONEncodeError
                same = False
            if same:
                self.decodes_spared += 1
                return current
        return entry.decode()

    def delete_object(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        *,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        grace_period_seconds: Any = None,
    ) -> Obj:
        """Delete (or start deleting) an object; returns its last state.

        A pod on a node is deleted gracefully (``strategy.pod_grace_period``): it
        stays, Terminating, until deleted again with a grace period of 0.
        """
        ns = namespace if info.namespaced else ""
        key = (info.group, info.resource, ns, name)
        entry = self._bucket(info).get((ns, name))
        if entry is None:
            raise errors.not_found(info.group, info.resource, name)
        obj = entry.decode()
        meta = obj["metadata"]
        strategy.check_preconditions(info, name, meta, preconditions or {})
        finalizers, changed = strategy.deletion_finalizers(meta, propagation_policy)
        strategy.check_deletable(info, name)
        is_ns = info.resource == "namespaces" and not info.group
        grace = strategy.pod_grace_period(info, obj, grace_period_seconds)
        if not finalizers and not is_ns and not grace:
            if dry_run:
                return obj
            return self._remove(key, entry, obj)
        current = meta.get("deletionGracePeriodSeconds")
        shorter = bool(grace and current and grace < current)
        if meta.get("deletionTimestamp") and not changed and not shorter:
            if grace == 0 and current:
                # the kubelet's final delete (or --force) while finalizers remain
                meta["deletionGracePeriodSeconds"] = 0
                if not dry_run:
                    self._store(info, obj, MODIFIED, entry)
            return obj
        strategy.mark_deleting(info, obj, finalizers, grace)
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
        lsel = label_selector or Selector.everything()
        fsel = field_selector or FieldSelector.everything()
        if send_initial_events or resource_version in (None, "", "0"):
            entries, _, _ = self.list_entries(info, namespace)
            initial = [
                StoredEvent(
                    ADDED,
                    entry.rv,
                    info.group,
                    info.resource,
                    entry.namespace,
                    entry.name,
                    entry.data,
                    entry.labels,
                    entry.fields,
                    None,
                    None,
                )
                for entry in entries
            ]
            return self.watch_cache.watch(
                info.group_resource, namespace, lsel, fsel, initial_events=initial
            )
        since = self.watch_cache.check_resource_version(resource_version)
        return self.watch_cache.watch(info.group_resource, namespace, lsel, fsel, since=since)

    def close_watchers(self, error: StatusError | None = None) -> None:
        self.watch_cache.close_watchers(error)

    def watcher_count(self) -> int:
        return self.watch_cache.watcher_count()

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
        # No selector: nothing to parse (in-process callers such as admission list a
        # resource on every request).
        lsel = Selector.parse(label_selector) if isinstance(label_selector, str) else label_selector
        fsel = (
            FieldSelector.parse(field_selector)
            if isinstance(field_selector, str)
            else field_selector
        )
        if not self._bucket(info):
            # Nothing stored (webhook configurations, quotas: admission lists them for
            # every create, the simulator's included): no sort, no selector to match.
            return []
        entries, _, _ = self.list_entries(info, namespace, lsel, fsel)
        return [self._versioned(info, e.decode()) for e in entries]

    def update(self, obj: Mapping[str, Any], *, current: Mapping[str, Any] | None = None) -> Obj:
        """Replace an object with a copy of *obj* (PUT); returns the stored object.
        *current*: as for :meth:`update_status` (the status and managedFields kept from
        the stored object are then shared with it)."""
        info = self.resolve(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        return self._versioned(info, self.update_object(info, _copy(obj), current=current))

    def update_status(
        self, obj: Mapping[str, Any], *, current: Mapping[str, Any] | None = None
    ) -> Obj:
        """Write the status of *obj* (PUT .../status); returns the stored object.

        *current* (optional): the object the caller believes is stored, as an informer
        cache holds it (the simulator's view). When its JSON is the stored bytes it
        stands for the stored object, which is then not decoded again: the returned
        object shares its unchanged parts (spec, metadata values) with *current*, so
        the caller must treat both as read-only, as it must its cache anyway. Anything
        else (an older or changed *current*) is ignored and the stored object decoded.
        """
        info = self.resolve(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if not info.has_status:
            return self._versioned(info, self.update_object(info, _copy(obj)))
        # A status write reads only the metadata (name, preconditions) and the status of
        # *obj*, and stores only the status: copying the spec too (a pod's, for every
        # kubelet update) was wasted work, and the metadata is read, never kept or changed.
        slim: Obj = {"metadata": dict(obj.get("metadata") or {})}
        if "status" in obj:
            slim["status"] = _copy(obj["status"])
        return self._versioned(
            info, self.update_object(info, slim, subresource="status", current=current)
        )

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, Any] | None = None,
        grace_period_seconds: int | None = None,
    ) -> Obj:
        info = self.resolve(api_version, kind)
        return self.delete_object(
            info,
            namespace or "",
            name,
            propagation_policy=propagation_policy,
            preconditions=preconditions,
            grace_period_seconds=grace_period_seconds,
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


def _written_alike(value: Any) -> bool:
    """Whether orjson writes *value* as ``encode`` does (no float, or only floats both
    write the same way; a NaN is written null by both here, as ``encode`` documents)."""
    try:
        return encode(value) == orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: integers beyond 64 bits
        return False


def _copy(obj: Mapping[str, Any]) -> Obj:
    """A deep copy of JSON-shaped *obj*, with the values ``decode(encode(obj))`` gives.

    Through orjson alone: its bytes are read back by orjson, so the float check and the
    long-integer check that make ``encode``/``decode`` agree with ``json`` byte for byte
    are not needed for a copy (orjson writes floats in their shortest round-tripping
    form and refuses integers beyond 64 bits, which go the long way). About three times
    cheaper for a pod than the long way, and every in-process write makes one.
    """
    try:
        out: Obj = orjson.loads(orjson.dumps(obj))
    except TypeError:  # orjson.JSONEncodeError: big integers, keys that are not str
        out = decode(encode(obj))
    return out
