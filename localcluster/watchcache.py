"""The watch cache of localcluster: event history, watchers and in-process listeners.

Every committed change becomes a :class:`StoredEvent`. The cache keeps a
bounded history of them (a watch from an older resourceVersion than the
history holds gets 410 Gone, as after an etcd compaction), hands each one to
the watchers of its resource and to synchronous in-process listeners (garbage
collector, CRD controller, simulator).

A :class:`Watcher` filters by namespace, label and field selector, turning a
MODIFIED event into ADDED or DELETED when the object moves into or out of its
selection, as kube-apiserver's cacher does. Events wait in a bounded buffer; a
watcher that falls too far behind is closed with an error rather than slowing
writers down (the client re-watches from its last resourceVersion).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from nimctl_runtime.labels import FieldSelector, Selector

from . import errors
from .errors import StatusError
from .store import GroupResource, decode, field_getter

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"


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
    def object(self) -> dict[str, Any]:
        obj: dict[str, Any] = decode(self.data)
        return obj


class WatchClosed(Exception):
    """Raised by ``Watcher.next_batch`` when the watch has been closed with an error."""

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
        cache: WatchCache,
        group_resource: GroupResource,
        namespace: str | None,
        label_selector: Selector,
        field_selector: FieldSelector,
        max_buffer: int,
    ) -> None:
        self._cache = cache
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
            field_getter(fields, ev.namespace, ev.name)
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
                return replace(ev, type=ADDED)
            if old_ok:
                return replace(ev, type=DELETED)
            return None
        return ev if new_ok else None

    def offer(self, ev: StoredEvent) -> None:
        """Buffer *ev* if it passes the filters; close the watch when the buffer is full."""
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

    def preload(self, events: Iterable[StoredEvent]) -> None:
        """Buffer the initial events (synthetic ADDs or replayed history) without a bound."""
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
        self._cache.unsubscribe(self)
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
            # asyncio.timeout, not wait_for: no task wrapped around each wait (a busy
            # watch waits once per batch of events)
            try:
                async with asyncio.timeout(timeout):
                    await self._wakeup.wait()
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


class WatchCache:
    """The bounded event history, the open watchers and the in-process listeners."""

    def __init__(self, *, history_size: int = 20000, watch_buffer: int = 100000) -> None:
        self._history: deque[StoredEvent] = deque(maxlen=history_size)
        self._compacted_rv = 1
        self._watchers: dict[GroupResource, set[Watcher]] = {}
        self._listeners: list[Callable[[StoredEvent], None]] = []
        self._watch_buffer = watch_buffer

    @property
    def oldest_resource_version(self) -> int:
        """Watches from a resourceVersion below this get 410 Gone."""
        if self._history:
            return max(self._history[0].rv - 1, self._compacted_rv)
        return self._compacted_rv

    def compact(self, resource_version: int) -> None:
        """Forget the history up to *resource_version*: older watches get 410."""
        self._history.clear()
        self._compacted_rv = resource_version

    def subscribe(self, listener: Callable[[StoredEvent], None]) -> Callable[[], None]:
        """Call *listener* synchronously after every committed change; returns an unsubscribe."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def emit(self, ev: StoredEvent) -> None:
        """Record a committed change and deliver it to watchers, then to listeners."""
        self._history.append(ev)
        for w in list(self._watchers.get((ev.group, ev.resource), ())):
            w.offer(ev)
        for listener in list(self._listeners):
            listener(ev)

    def check_resource_version(self, resource_version: str | None) -> int:
        """The integer resourceVersion to watch from (400 if malformed, 410 if compacted)."""
        try:
            rv = int(resource_version or "0")
        except ValueError as exc:
            raise errors.bad_request(f'invalid resource version "{resource_version}"') from exc
        if rv < self.oldest_resource_version:
            raise errors.gone(
                f"too old resource version: {rv} ({self.oldest_resource_version + 1})"
            )
        return rv

    def watch(
        self,
        group_resource: GroupResource,
        namespace: str | None,
        label_selector: Selector,
        field_selector: FieldSelector,
        *,
        initial_events: Iterable[StoredEvent] | None = None,
        since: int = 0,
    ) -> Watcher:
        """Open a watcher: starts with *initial_events*, or else replays history after *since*."""
        watcher = Watcher(
            self, group_resource, namespace, label_selector, field_selector, self._watch_buffer
        )
        if initial_events is not None:
            watcher.preload(initial_events)
        else:
            watcher.preload(
                ev
                for ev in self._history
                if ev.rv > since and (ev.group, ev.resource) == group_resource
            )
        self._watchers.setdefault(group_resource, set()).add(watcher)
        return watcher

    def unsubscribe(self, watcher: Watcher) -> None:
        ws = self._watchers.get(watcher.group_resource)
        if ws is not None:
            ws.discard(watcher)

    def close_resource(self, group_resource: GroupResource) -> None:
        """Close (without error) every watch of one resource, e.g. when its CRD is deleted."""
        for watcher in list(self._watchers.get(group_resource, ())):
            watcher.close()

    def close_watchers(self, error: StatusError | None = None) -> None:
        for ws in list(self._watchers.values()):
            for w in list(ws):
                w.close(error)

    def watcher_count(self) -> int:
        return sum(len(ws) for ws in self._watchers.values())
