"""Garbage collection and namespace termination, as kube-controller-manager does them.

``GarbageCollector`` follows storage events (a listener that only queues) and
works through them in its own task:

* an object whose owners (by ownerReference uid) are all gone is deleted in the
  background; references to owners that are gone are removed when other owners
  remain;
* an owner deleted with ``propagationPolicy=Foreground`` (finalizer
  ``foregroundDeletion``) first has its dependents deleted; the finalizer is
  removed once no dependent with ``blockOwnerDeletion: true`` is left;
* an owner deleted with ``Orphan`` (finalizer ``orphan``) has its dependents'
  references to it removed, then the finalizer;
* a namespace being deleted has its pods deleted first, then (once no pod is
  left) everything else, with the namespace controller's status conditions saying
  what remains (``namespaces.py``); when it is empty its ``kubernetes`` finalizer
  goes and the namespace disappears.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections import deque
from typing import Any

from nimctl_runtime.logsetup import get_logger

from . import namespaces
from .errors import StatusError
from .storage import Storage
from .store import Key
from .strategy import FOREGROUND_FINALIZER, NAMESPACE_FINALIZER, ORPHAN_FINALIZER
from .watchcache import DELETED, StoredEvent

log = get_logger(__name__)
_DELETION_MARK = b'"deletionTimestamp"'


_SLICE = 0.002  # seconds of collection steps between turns of the event loop


class GarbageCollector:
    """Owner-reference GC plus the namespace controller's content deletion."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._queue: deque[StoredEvent] = deque()
        self._wakeup = asyncio.Event()
        self._unsubscribe = storage.subscribe(self._on_event)
        self._task: asyncio.Task[None] | None = None
        # objects decoded while processing events (a counting test reads it)
        self.decoded = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="localcluster-gc")

    async def stop(self) -> None:
        self._unsubscribe()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _on_event(self, ev: StoredEvent) -> None:
        if ev.type == DELETED or _DELETION_MARK in ev.data or b'"ownerReferences"' in ev.data:
            self._queue.append(ev)
            self._wakeup.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            # Events are taken in slices of at most _SLICE seconds, then the loop gets
            # its turn: a step per event (5 per NIMService created) cost a loop pass each.
            deadline = loop.time() + _SLICE
            while self._queue:
                ev = self._queue.popleft()
                try:
                    self.process(ev)
                except StatusError as exc:
                    if exc.code not in (404, 409):
                        log.warning("gc step failed", name=ev.name, error=exc.message)
                except Exception:
                    log.exception("gc step crashed", name=ev.name, namespace=ev.namespace)
                if loop.time() >= deadline:
                    await asyncio.sleep(0)
                    deadline = loop.time() + _SLICE

    # ------------------------------------------------------------------ steps

    def process(self, ev: StoredEvent) -> None:
        key: Key = (ev.group, ev.resource, ev.namespace, ev.name)
        if ev.type == DELETED:
            meta = ev.object.get("metadata") or {}
            uid = str(meta.get("uid", ""))
            for dep in self.storage.dependents_of(uid):
                self._check_dependent(dep)
            for ref in meta.get("ownerReferences") or []:
                owner_key = self.storage.lookup_uid(str(ref.get("uid", "")))
                if owner_key is not None:
                    self._check_owner_in_deletion(owner_key)
            if ev.namespace:
                self._check_namespace(ev.namespace)
            return
        entry = self.storage.entry(key)
        if entry is None or entry.rv != ev.rv:
            return  # superseded; a later event will be processed
        # Decoded only when it may be deleting: a live owned object's status write (most
        # events here) needs only the entry's owner uids.
        if _DELETION_MARK in ev.data:
            self.decoded += 1
            if (ev.object.get("metadata") or {}).get("deletionTimestamp"):
                self._check_owner_in_deletion(key)
                if ev.group == "" and ev.resource == "namespaces":
                    self._check_namespace(ev.name)
        if entry.owners:
            self._check_dependent(key)

    def _info(self, key: Key) -> Any:
        return self.storage.info_for(key[0], key[1])

    def _read(self, key: Key) -> dict[str, Any] | None:
        entry = self.storage.entry(key)
        return entry.decode() if entry is not None else None

    def _check_dependent(self, key: Key) -> None:
        entry = self.storage.entry(key)
        if entry is None or all(self.storage.lookup_uid(uid) is not None for uid in entry.owners):
            return  # every owner lives: nothing to collect or trim (read without decoding)
        self.decoded += 1
        obj = entry.decode()
        info = self._info(key)
        if obj is None or info is None:
            return
        refs = obj["metadata"].get("ownerReferences") or []
        if not refs:
            return
        alive = [r for r in refs if self.storage.lookup_uid(str(r.get("uid", ""))) is not None]
        if not alive:
            if not obj["metadata"].get("deletionTimestamp"):
                self.storage.delete_object(info, key[2], key[3], propagation_policy="Background")
            return
        if len(alive) != len(refs):
            obj["metadata"]["ownerReferences"] = alive
            self.storage.update_object(info, obj)

    def _check_owner_in_deletion(self, key: Key) -> None:
        obj = self._read(key)
        info = self._info(key)
        if obj is None or info is None or not obj["metadata"].get("deletionTimestamp"):
            return
        finalizers = list(obj["metadata"].get("finalizers") or [])
        uid = str(obj["metadata"].get("uid", ""))
        deps = self.storage.dependents_of(uid)
        if ORPHAN_FINALIZER in finalizers:
            for dep in deps:
                dobj, dinfo = self._read(dep), self._info(dep)
                if dobj is None or dinfo is None:
                    continue
                refs = dobj["metadata"].get("ownerReferences") or []
                dobj["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
                if not dobj["metadata"]["ownerReferences"]:
                    del dobj["metadata"]["ownerReferences"]
                self.storage.update_object(dinfo, dobj)
            self._remove_finalizer(key, ORPHAN_FINALIZER)
            return
        if FOREGROUND_FINALIZER in finalizers:
            blocking = 0
            for dep in deps:
                dobj, dinfo = self._read(dep), self._info(dep)
                if dobj is None or dinfo is None:
                    continue
                ref: dict[str, Any] = next(
                    (
                        r
                        for r in dobj["metadata"].get("ownerReferences") or []
                        if r.get("uid") == uid
                    ),
                    {},
                )
                if ref.get("blockOwnerDeletion"):
                    blocking += 1
                if not dobj["metadata"].get("deletionTimestamp"):
                    self.storage.delete_object(
                        dinfo, dep[2], dep[3], propagation_policy="Foreground"
                    )
            if blocking == 0 or not self.storage.dependents_of(uid):
                self._remove_finalizer(key, FOREGROUND_FINALIZER)

    def _remove_finalizer(self, key: Key, finalizer: str) -> None:
        obj = self._read(key)
        info = self._info(key)
        if obj is None or info is None:
            return
        finalizers = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        obj["metadata"]["finalizers"] = finalizers
        if not finalizers:
            del obj["metadata"]["finalizers"]
        self.storage.update_object(info, obj)

    def _check_namespace(self, namespace: str) -> None:
        key: Key = ("", "namespaces", "", namespace)
        ns_obj = self._read(key)
        info = self._info(key)
        if ns_obj is None or info is None or not ns_obj["metadata"].get("deletionTimestamp"):
            return
        batch, pods_first = namespaces.deletion_phase(self.storage.keys_in_namespace(namespace))
        for k in batch:
            kinfo = self._info(k)
            entry = self.storage.entry(k)
            if kinfo is None or entry is None or _DELETION_MARK in entry.data:
                continue
            try:
                self.storage.delete_object(kinfo, k[2], k[3], propagation_policy="Background")
            except StatusError as exc:
                if exc.code != 404:
                    raise
        remaining = self.storage.keys_in_namespace(namespace)
        self._report_namespace(info, key, [(k, self._read(k) or {}) for k in remaining])
        if remaining or pods_first:
            return
        ns_obj = self._read(key) or ns_obj
        spec = ns_obj.get("spec") or {}
        if NAMESPACE_FINALIZER in (spec.get("finalizers") or []):
            spec["finalizers"] = [f for f in spec["finalizers"] if f != NAMESPACE_FINALIZER]
            ns_obj["spec"] = spec
            self.storage.update_object(info, ns_obj)

    def _report_namespace(
        self, info: Any, key: Key, remaining: list[tuple[Key, dict[str, Any]]]
    ) -> None:
        """Write the namespace controller's conditions when they say something new."""
        ns_obj = self._read(key)
        if ns_obj is None:
            return
        status = ns_obj.setdefault("status", {})
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        wanted = namespaces.conditions(remaining, stamp)
        if namespaces.same_conditions(status.get("conditions") or [], wanted):
            return
        status["conditions"] = wanted
        status["phase"] = "Terminating"
        self.storage.update_object(info, ns_obj, subresource="status")
