"""Coalescing event handler: the cluster-wide ClusterPolicy reconcile runs at most once per window.

A ClusterPolicy reconcile reads every Node and driver pod, and while the
operands roll out on N nodes the Node, driver-pod and DaemonSet-status events
that wake it come in O(N). Queued immediately, each reconcile finishing starts
the next one, so the work grows as N events x N objects. ``Coalesced`` wraps a
handler so the keys it queues wait ``delay`` seconds (``add_after``: a key
already waiting keeps its earlier time), and every event of that window is
served by one reconcile, reading the latest state. Changes to the ClusterPolicy
itself are not wrapped and are reconciled at once.
"""

from __future__ import annotations

from nimctl_runtime.handler import (
    CreateEvent,
    DeleteEvent,
    EventHandler,
    GenericEvent,
    HandlerResult,
    RequestQueue,
    UpdateEvent,
)
from nimctl_runtime.reconcile import Request

#: How long a Node/pod/operand event waits for others to share its reconcile.
COALESCE_SECONDS = 1.0


class _Deferred:
    """A queue whose ``add`` is ``add_after(delay)``."""

    def __init__(self, queue: RequestQueue, delay: float) -> None:
        self._queue = queue
        self._delay = delay

    def add(self, item: Request, priority: int = 0) -> None:
        self._queue.add_after(item, self._delay, priority)

    def add_after(self, item: Request, delay: float, priority: int = 0) -> None:
        self._queue.add_after(item, max(delay, self._delay), priority)


class Coalesced:
    """``inner``'s requests, each queued ``delay`` seconds later (events in between share it)."""

    def __init__(self, inner: EventHandler, delay: float = COALESCE_SECONDS) -> None:
        if delay <= 0:
            raise ValueError(f"coalescing delay must be positive, got {delay}")
        self.inner = inner
        self.delay = delay

    def create(self, event: CreateEvent, queue: RequestQueue) -> HandlerResult:
        return self.inner.create(event, _Deferred(queue, self.delay))

    def update(self, event: UpdateEvent, queue: RequestQueue) -> HandlerResult:
        return self.inner.update(event, _Deferred(queue, self.delay))

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> HandlerResult:
        return self.inner.delete(event, _Deferred(queue, self.delay))

    def generic(self, event: GenericEvent, queue: RequestQueue) -> HandlerResult:
        return self.inner.generic(event, _Deferred(queue, self.delay))
