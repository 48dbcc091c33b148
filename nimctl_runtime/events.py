"""Kubernetes Events from controllers, without ever slowing a reconcile down.

``kubectl describe`` shows a resource's core/v1 Events; users read them to
learn what the operator did (``Created``, ``Failed``...). client-go's event
machinery is copied in spirit:

* ``EventRecorder.event(obj, type, reason, message)`` is synchronous, never
  raises and never waits: it puts the event on a bounded queue and returns
  (the event is dropped, and counted, when the queue is full);
* an ``EventBroadcaster`` (a manager Runnable on every replica) drains the
  queue and writes through the client;
* repeats of the same event (same object, type, reason, message, source) are
  aggregated: the existing Event gets ``count + 1`` and a new
  ``lastTimestamp`` instead of a new object (client-go's ``EventCorrelator``);
* more than 10 different messages for the same object, type and reason
  within 10 minutes are combined into one Event whose message starts with
  ``(combined from similar events):`` (client-go's ``EventAggregator``);
* a per-object token bucket (burst 25, one more every 5 minutes, like
  client-go's spam filter) stops a hot loop from flooding the API server;
* a write that fails is retried, up to 12 tries ``retry_interval`` apart (the
  first wait randomised), as client-go's ``recordToSink`` does; an Event
  whose namespace is gone or terminating, or that already exists, is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
import socket
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from nimctl_runtime.client.client import PatchType
from nimctl_runtime.client.errors import NotLeaderError
from nimctl_runtime.logsetup import get_logger

__all__ = [
    "EVENT_TYPE_NORMAL",
    "EVENT_TYPE_WARNING",
    "EventBroadcaster",
    "EventClient",
    "EventRecorder",
]

EVENT_TYPE_NORMAL = "Normal"
EVENT_TYPE_WARNING = "Warning"
_MAX_MESSAGE = 1024
_CACHE_SIZE = 4096
#: client-go's EventAggregator: past 10 distinct messages for the same object,
#: type and reason within 10 minutes, further ones are combined into one Event.
_SIMILAR_MAX_EVENTS = 10
_SIMILAR_INTERVAL = 600.0
_COMBINED_PREFIX = "(combined from similar events): "


class EventClient(Protocol):
    """The client calls the broadcaster makes (a subset of ``nimctl_runtime.client.Client``)."""

    async def create(
        self, obj: dict[str, Any], *, field_manager: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]: ...

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        field_manager: str | None = None,
        force: bool | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...


@dataclass(slots=True)
class _PendingEvent:
    involved: dict[str, str]
    namespace: str
    type: str
    reason: str
    message: str
    component: str
    host: str
    at: dt.datetime
    annotations: dict[str, str] = field(default_factory=dict)
    attempts: int = 0
    dedupe_key: tuple[str, ...] | None = None

    def aggregate_key(self) -> tuple[str, ...]:
        """Everything but the message: events that differ only in their text."""
        inv = self.involved
        return (
            inv.get("kind", ""),
            inv.get("namespace", ""),
            inv.get("name", ""),
            inv.get("uid", ""),
            self.type,
            self.reason,
            self.component,
            self.host,
        )

    def key(self) -> tuple[str, ...]:
        return (*self.aggregate_key(), self.message)


@dataclass(slots=True)
class _Seen:
    name: str
    namespace: str
    count: int
    first_timestamp: str


class _TokenBucket:
    def __init__(self, burst: int, qps: float, now: float) -> None:
        self.tokens = float(burst)
        self.burst = burst
        self.qps = qps
        self.last = now

    def take(self, now: float) -> bool:
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


def _retryable(exc: Exception) -> bool:
    """client-go gives up on an Event that exists already or whose namespace is going."""
    if isinstance(exc, NotLeaderError):
        return False  # not sent: this process no longer holds the Lease
    status = getattr(exc, "status", None)
    if status == 409 and getattr(exc, "reason", "") == "AlreadyExists":
        return False
    return not (status in (403, 404) and "namespace" in str(exc).lower())


def _timestamp(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Records Events for one component (``source.component``); see the module docstring."""

    def __init__(self, broadcaster: EventBroadcaster, component: str, host: str) -> None:
        self.broadcaster = broadcaster
        self.component = component
        self.host = host

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Record an event about ``obj``; returns at once and never raises."""
        self.annotated_event(obj, None, type, reason, message)

    def eventf(
        self, obj: Mapping[str, Any], type: str, reason: str, message_fmt: str, *args: Any
    ) -> None:
        """``event`` with a %-format message."""
        try:
            message = message_fmt % args if args else message_fmt
        except (TypeError, ValueError):
            message = f"{message_fmt} {args!r}"
        self.annotated_event(obj, None, type, reason, message)

    def annotated_event(
        self,
        obj: Mapping[str, Any],
        annotations: Mapping[str, str] | None,
        type: str,
        reason: str,
        message: str,
    ) -> None:
        """``event`` with annotations on the Event object."""
        try:
            self._record(obj, annotations, type, reason, message)
        except Exception:
            self.broadcaster.log.exception("dropping event that could not be built", reason=reason)

    def _record(
        self,
        obj: Mapping[str, Any],
        annotations: Mapping[str, str] | None,
        type: str,
        reason: str,
        message: str,
    ) -> None:
        if type not in (EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING):
            self.broadcaster.log.error(
                "unsupported event type; use Normal or Warning", type=type, reason=reason
            )
            return
        meta = obj.get("metadata") or {}
        involved = {
            "apiVersion": str(obj.get("apiVersion", "")),
            "kind": str(obj.get("kind", "")),
            "name": str(meta.get("name", "")),
        }
        for src, dst in (("namespace", "namespace"), ("uid", "uid")):
            if meta.get(src):
                involved[dst] = str(meta[src])
        if meta.get("resourceVersion"):
            involved["resourceVersion"] = str(meta["resourceVersion"])
        if len(message) > _MAX_MESSAGE:
            message = message[: _MAX_MESSAGE - 3] + "..."
        self.broadcaster.enqueue(
            _PendingEvent(
                involved=involved,
                namespace=involved.get("namespace") or "default",
                type=type,
                reason=reason,
                message=message,
                component=self.component,
                host=self.host,
                at=dt.datetime.now(dt.UTC),
                annotations=dict(annotations or {}),
            )
        )


class EventBroadcaster:
    """Writes recorded Events in the background; a Runnable without leader election.

    ``queue_size`` bounds memory: when the API server is slow, events beyond it
    are dropped (``dropped`` counts them) rather than blocking reconciles.
    """

    needs_leader_election = False

    def __init__(
        self,
        client: EventClient,
        *,
        queue_size: int = 1000,
        burst: int = 25,
        qps: float = 1.0 / 300.0,
        host: str | None = None,
        max_tries: int = 12,
        retry_interval: float = 10.0,
    ) -> None:
        self.client = client
        self.max_tries = max_tries
        self.retry_interval = retry_interval
        self.queue_size = queue_size
        self.burst = burst
        self.qps = qps
        self.host = host or socket.gethostname()
        self.log = get_logger("events")
        self.dropped = 0
        self.written = 0
        self._queue: deque[_PendingEvent] = deque()
        self._wake = asyncio.Event()
        self._seen: OrderedDict[tuple[str, ...], _Seen] = OrderedDict()
        self._similar: OrderedDict[tuple[str, ...], tuple[set[str], float]] = OrderedDict()
        self._buckets: OrderedDict[tuple[str, ...], _TokenBucket] = OrderedDict()
        self._retries: set[asyncio.TimerHandle] = set()
        self._running = False

    def new_recorder(self, component: str, host: str | None = None) -> EventRecorder:
        return EventRecorder(self, component, host or self.host)

    def enqueue(self, event: _PendingEvent) -> None:
        if len(self._queue) >= self.queue_size:
            self.dropped += 1
            return
        self._queue.append(event)
        self._wake.set()

    def pending(self) -> int:
        return len(self._queue)

    def discard_pending(self) -> int:
        """Drop every queued event (a replica that lost its Lease stops writing at once)."""
        dropped = len(self._queue) + len(self._retries)
        self._queue.clear()
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()
        self.dropped += dropped
        return dropped

    async def run(self, stop: asyncio.Event) -> None:
        """Write events until ``stop``; then flush what is queued (bounded by a short timeout)."""
        self._running = True
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                if not self._queue:
                    self._wake.clear()
                    woke = asyncio.ensure_future(self._wake.wait())
                    await asyncio.wait({woke, stopped}, return_when=asyncio.FIRST_COMPLETED)
                    woke.cancel()
                    continue
                await self._write(self._queue.popleft())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    while self._queue:
                        await self._write(self._queue.popleft())
        finally:
            stopped.cancel()
            self._running = False

    async def flush(self) -> None:
        """Write everything queued now (for callers that do not run the broadcaster)."""
        while self._queue:
            await self._write(self._queue.popleft())

    def _allowed(self, ev: _PendingEvent) -> bool:
        inv = ev.involved
        key = (
            ev.component,
            ev.host,
            inv.get("kind", ""),
            inv.get("namespace", ""),
            inv.get("name", ""),
            inv.get("uid", ""),
        )
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _TokenBucket(self.burst, self.qps, now)
            self._buckets[key] = bucket
            if len(self._buckets) > _CACHE_SIZE:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
        return bucket.take(now)

    async def _write(self, ev: _PendingEvent) -> None:
        try:
            if ev.attempts == 0 and not self._allowed(ev):
                self.dropped += 1
                self.log.debug("event rate-limited", reason=ev.reason, object=ev.involved["name"])
                return
            if ev.dedupe_key is None:
                ev.dedupe_key = self._aggregate(ev)
            key = ev.dedupe_key
            seen = self._seen.get(key)
            now = _timestamp(ev.at)
            if seen is not None:
                self._seen.move_to_end(key)
                if await self._bump(seen, now, ev.message):
                    return
            created = await self._create(ev, now)
            if created is not None:
                self._seen[key] = created
                if len(self._seen) > _CACHE_SIZE:
                    self._seen.popitem(last=False)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            ev.attempts += 1
            if ev.attempts < self.max_tries and _retryable(exc):
                self._retry_later(ev)
                self.log.debug(
                    "could not write event; will retry",
                    reason=ev.reason,
                    object=ev.involved.get("name"),
                    attempt=ev.attempts,
                    error=str(exc),
                )
                return
            self.dropped += 1
            self.log.warning(
                "could not write event; dropped",
                reason=ev.reason,
                object=ev.involved.get("name"),
                attempts=ev.attempts,
                error=str(exc),
            )

    def _retry_later(self, ev: _PendingEvent) -> None:
        delay = self.retry_interval
        if ev.attempts == 1:
            delay *= random.random()  # spread the first retries of a burst (client-go)
        loop = asyncio.get_running_loop()

        def requeue() -> None:
            self._retries.discard(handle)
            self._queue.append(ev)
            self._wake.set()

        handle = loop.call_later(delay, requeue)
        self._retries.add(handle)

    def _aggregate(self, ev: _PendingEvent) -> tuple[str, ...]:
        """The dedupe key of ``ev``, combining it with similar events past the limit."""
        agg = ev.aggregate_key()
        now = time.monotonic()
        messages, since = self._similar.get(agg, (set(), now))
        if now - since > _SIMILAR_INTERVAL:
            messages, since = set(), now
        self._similar[agg] = (messages, since)
        self._similar.move_to_end(agg)
        if len(self._similar) > _CACHE_SIZE:
            self._similar.popitem(last=False)
        if ev.message in messages or len(messages) < _SIMILAR_MAX_EVENTS:
            messages.add(ev.message)
            return ev.key()
        ev.message = (_COMBINED_PREFIX + ev.message)[:_MAX_MESSAGE]
        return (*agg, _COMBINED_PREFIX)

    async def _bump(self, seen: _Seen, now: str, message: str) -> bool:
        from nimctl_runtime.client.errors import NotFound

        count = seen.count + 1
        try:
            await self.client.patch(
                "v1",
                "Event",
                seen.name,
                {"count": count, "lastTimestamp": now, "message": message},
                namespace=seen.namespace,
                patch_type="merge",
            )
        except NotFound:
            return False  # the Event expired (TTL): start a new one
        seen.count = count
        self.written += 1
        return True

    async def _create(self, ev: _PendingEvent, now: str) -> _Seen | None:
        name = f"{ev.involved['name']}.{time.time_ns():x}"
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ev.namespace},
            "involvedObject": ev.involved,
            "reason": ev.reason,
            "message": ev.message,
            "type": ev.type,
            "source": {"component": ev.component, "host": ev.host},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": ev.component,
            "reportingInstance": ev.host,
        }
        if ev.annotations:
            body["metadata"]["annotations"] = ev.annotations
        await self.client.create(body)
        self.written += 1
        return _Seen(name=name, namespace=ev.namespace, count=1, first_timestamp=now)
