"""SharedInformer: one Reflector feeding one Store and any number of event handlers.

client-go semantics (runtime.md §1.2-§1.3): the store is updated *before* handlers
are told, so a handler (or a reconciler it wakes) never reads a cache behind the
event; each handler has its own unbounded, in-order queue and task, so a handler
that waits (an async map function) delays only itself; a handler that raises is
logged and the informer goes on; a relist delivers adds, updates and
``DeletedFinalStateUnknown`` tombstones for objects that vanished while
disconnected; resync re-delivers ``on_update(obj, obj)`` from the cache (never
from the API) to handlers that asked for it.

A notification for a handler whose queue is empty and whose task is idle is
delivered at once, in the notifier's task: a synchronous handler (the
controllers' predicates and enqueuers) then costs one call, not a wake-up of its
task per event (~5% of the operator's busy samples while creating NIMServices,
issue 30). Order is kept: a notification queues behind any pending one, and an
awaitable a handler returns is awaited by its task before the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from nimctl_runtime.cache.reflector import ListerWatcher, Reflector
from nimctl_runtime.cache.store import (
    DeletedFinalStateUnknown,
    IndexFunc,
    PreparedObject,
    Store,
    Transform,
    decode,
    object_key,
    strip_managed_fields,
)
from nimctl_runtime.client.client import gc_paused
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import Obj

OnAdd = Callable[..., Any]
OnUpdate = Callable[[Obj, Obj], Any]
OnDelete = Callable[[Any], Any]

MINIMUM_RESYNC_PERIOD = 1.0

_log = get_logger("nimctl.informer")


def _accepts_initial_flag(fn: Callable[..., Any]) -> bool:
    """Whether *fn* takes client-go's ``(obj, is_in_initial_list)`` rather than ``(obj)``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= 2 or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


class _Decoded:
    """Stored bytes decoded on first use and shared by every handler (like a watch event)."""

    __slots__ = ("_data", "_obj")

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data
        self._obj: Obj | None = None

    def get(self) -> Obj:
        if self._obj is None:
            assert self._data is not None
            self._obj = decode(self._data)
            self._data = None
        return self._obj


class HandlerRegistration:
    """One handler's listener: its queue, its task and whether it has seen the initial list."""

    def __init__(
        self,
        informer: SharedInformer,
        on_add: OnAdd | None,
        on_update: OnUpdate | None,
        on_delete: OnDelete | None,
        resync_period: float | None,
    ) -> None:
        self._informer = informer
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete
        self._add_takes_flag = on_add is not None and _accepts_initial_flag(on_add)
        self.resync_period = max(resync_period, MINIMUM_RESYNC_PERIOD) if resync_period else None
        self._pending: deque[tuple[str, Any, Any]] = deque()
        self._wakeup = asyncio.Event()
        self._synced = False
        self._tasks: list[asyncio.Task[None]] = []
        #: The task waits for work (nothing pending, nothing being delivered).
        self._idle = False
        #: Notifications delivered in the notifier's task (not the handler's).
        self.delivered_inline = 0

    def has_synced(self) -> bool:
        """True once every notification of the informer's initial list reached this handler."""
        return self._synced

    def _push(self, kind: str, a: Any, b: Any = None) -> None:
        if self._idle and not self._pending:
            self.delivered_inline += 1
            if kind == "synced":
                self._synced = True
                return
            waiting = self._call(kind, a, b)
            if waiting is None:
                return
            kind, a, b = "await", waiting, None  # the task awaits it before the next
        self._pending.append((kind, a, b))
        self._wakeup.set()

    def _start(self) -> None:
        if self._tasks:
            return
        self._tasks.append(asyncio.get_running_loop().create_task(self._run()))
        if self.resync_period:
            self._tasks.append(asyncio.get_running_loop().create_task(self._resync_loop()))

    async def _stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        self._idle = False
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for kind, a, _ in self._pending:
            if kind == "await" and inspect.iscoroutine(a):
                a.close()  # never awaited: stopped first

    async def _run(self) -> None:
        try:
            while True:
                while not self._pending:
                    self._wakeup.clear()
                    self._idle = True
                    await self._wakeup.wait()
                    self._idle = False
                kind, a, b = self._pending.popleft()
                if kind == "synced":
                    self._synced = True
                    continue
                waiting = a if kind == "await" else self._call(kind, a, b)
                if waiting is not None:
                    await waiting
        finally:
            self._idle = False

    def _call(self, kind: str, a: Any, b: Any) -> Awaitable[None] | None:
        """Call the handler for one notification; what it returns to await, if anything."""
        # Relist notifications carry the stored bytes, decoded once for all handlers.
        if isinstance(a, _Decoded):
            a = a.get()
        if isinstance(b, _Decoded):
            b = b.get()
        try:
            result: Any = None
            if kind == "add" and self.on_add is not None:
                result = self.on_add(a, b) if self._add_takes_flag else self.on_add(a)
            elif kind == "update" and self.on_update is not None:
                result = self.on_update(a, b)
            elif kind == "delete" and self.on_delete is not None:
                result = self.on_delete(a)
            if result is not None and isinstance(result, Awaitable):
                return self._finish(result, kind, a, b)
        except Exception:
            self._failed(kind, a, b)
        return None

    async def _finish(self, result: Awaitable[Any], kind: str, a: Any, b: Any) -> None:
        try:
            await result
        except asyncio.CancelledError:
            raise
        except Exception:
            self._failed(kind, a, b)

    def _failed(self, kind: str, a: Any, b: Any) -> None:
        obj = b if kind == "update" else a
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        meta = (obj.get("metadata") or {}) if isinstance(obj, dict) else {}
        _log.exception(
            "event handler failed",
            informer=self._informer.name,
            notification=kind,
            namespace=meta.get("namespace"),
            name=meta.get("name"),
        )

    async def _resync_loop(self) -> None:
        assert self.resync_period is not None
        while True:
            await asyncio.sleep(self.resync_period * random.uniform(0.9, 1.1))
            if not self._informer.has_synced():
                continue
            pending_keys = {
                object_key(item[2] if item[0] == "update" else item[1])
                for item in self._pending
                if item[0] in ("add", "update") and isinstance(item[1], dict)
            }
            for key, obj in self._informer.store.iter_items():
                if key not in pending_keys:
                    self._push("update", obj, obj)


class SharedInformer:
    """List+watch one resource into a :class:`Store` and fan events out to handlers."""

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        *,
        name: str = "",
        api_version: str | None = None,
        kind: str | None = None,
        indexers: dict[str, IndexFunc] | None = None,
        transform: Transform | None = strip_managed_fields,
        resync_period: float | None = None,
        use_watch_list: bool = False,
        index_labels: bool = True,
        keep_labels: bool = True,
    ) -> None:
        self.name = name or (f"{api_version}/{kind}" if kind else "informer")
        self.store = Store(
            indexers, transform=transform, index_labels=index_labels, keep_labels=keep_labels
        )
        self.reflector = Reflector(
            lister_watcher,
            self,
            name=self.name,
            api_version=api_version,
            kind=kind,
            use_watch_list=use_watch_list,
        )
        self.default_resync_period = resync_period
        self._handlers: list[HandlerRegistration] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    # -- handlers ----------------------------------------------------------------

    def add_event_handler(
        self,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
        *,
        resync_period: float | None = None,
    ) -> HandlerRegistration:
        """Register handlers (sync or async). ``on_add`` may take ``(obj)`` or
        ``(obj, is_in_initial_list)``; ``on_delete`` may receive a
        :class:`DeletedFinalStateUnknown`. A handler added late first gets an add for
        every object already cached.
        """
        registration = HandlerRegistration(
            self, on_add, on_update, on_delete, resync_period or self.default_resync_period
        )
        self._handlers.append(registration)
        if self._synced.is_set():
            for _, obj in self.store.iter_items():
                registration._push("add", obj, True)
            registration._push("synced", None)
        if self._task is not None:
            registration._start()
        return registration

    async def remove_event_handler(self, registration: HandlerRegistration) -> None:
        if registration in self._handlers:
            self._handlers.remove(registration)
            await registration._stop()

    def add_indexers(self, indexers: dict[str, IndexFunc]) -> None:
        self.store.add_indexers(indexers)

    # -- lifecycle ---------------------------------------------------------------

    def has_synced(self) -> bool:
        """True once the first list has been stored."""
        return self._synced.is_set()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        try:
            async with asyncio.timeout(timeout):
                await self._synced.wait()
        except TimeoutError:
            return False
        return True

    def start(self) -> None:
        """Start listing and watching in the background (idempotent)."""
        if self._task is not None:
            return
        self._stop = asyncio.Event()
        for registration in self._handlers:
            registration._start()
        self._task = asyncio.get_running_loop().create_task(self.reflector.run(self._stop))

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._stop.set()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for registration in self._handlers:
            await registration._stop()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def run(self, stop: asyncio.Event) -> None:
        """Runnable form: run until *stop* is set."""
        self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    # -- the reflector's sink --------------------------------------------------------

    def _notify(self, kind: str, a: Any, b: Any = None) -> None:
        for registration in self._handlers:
            registration._push(kind, a, b)

    def prepare(self, obj: Obj) -> PreparedObject:
        return self.store.prepare(obj)

    def replace(self, items: list[Any], resource_version: str) -> None:
        """A (re)list: store exactly *items* (dicts or prepared), tell handlers what changed."""
        initial = not self._synced.is_set()
        with gc_paused():
            added, updated, deleted = self.store.replace(items)
        for data in added:
            self._notify("add", _Decoded(data), initial)
        for old_data, new_data in updated:
            self._notify("update", _Decoded(old_data), _Decoded(new_data))
        for tombstone in deleted:
            self._notify("delete", tombstone)
        if initial:
            self._synced.set()
            self._notify("synced", None)

    def add(self, obj: Obj) -> None:
        result = self.store.upsert(obj)
        if result is None:
            return
        old, new = result
        if old is None:
            self._notify("add", new, False)
        else:
            self._notify("update", old, new)

    def update(self, obj: Obj) -> None:
        self.add(obj)

    def delete(self, obj: Obj) -> None:
        self.store.delete(object_key(obj))
        transform = self.store.transform
        self._notify("delete", transform(obj) if transform is not None else obj)
