"""Event types and event handlers: how a watch event becomes queue keys.

controller-runtime's ``pkg/event`` and ``pkg/handler`` in one module. A
controller's sources turn informer callbacks into ``CreateEvent``,
``UpdateEvent``, ``DeleteEvent`` and ``GenericEvent``; predicates filter them;
an ``EventHandler`` maps what is left to ``Request`` keys on the workqueue:

* ``EnqueueRequestForObject``: the object itself (``for_``);
* ``EnqueueRequestForOwner``: the owner named by an ownerReference, matched on
  group and kind only, by default only the ``controller: true`` reference;
  on update the owners of both old and new object (``owns``);
* ``EnqueueRequestsFromMapFunc``: whatever a (sync or async) function returns
  (``watches``).

Handlers are plain functions, as in controller-runtime: the controller calls
them from the informer's callback and they put keys straight on the workqueue.
A map function that reads other objects reads the cache synchronously
(``Cache.list_nowait``/``get_nowait``). For an ``async`` map function the
handler returns an awaitable instead; the informer awaits it in that handler's
own in-order delivery task, so such events are still handled in order and a
slow map function delays only its own watch.

Keys from the initial list and from resyncs are queued at ``LOW_PRIORITY``
(controller-runtime's priority queue), so after a restart with thousands of
objects a fresh event is not stuck behind the whole list.

Objects are plain dicts in Kubernetes JSON shape.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from nimctl_runtime.reconcile import Request, request_for

__all__ = [
    "LOW_PRIORITY",
    "CreateEvent",
    "DeleteEvent",
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventHandler",
    "GenericEvent",
    "HandlerResult",
    "MapFunc",
    "RequestQueue",
    "UpdateEvent",
    "group_of",
    "unwrap_object",
]

from nimctl_runtime.meta import Obj


@dataclass(frozen=True, slots=True)
class CreateEvent:
    """An object appeared (also sent for every object of the initial list)."""

    object: Obj
    is_in_initial_list: bool = False


@dataclass(frozen=True, slots=True)
class UpdateEvent:
    """An object changed (or a resync re-delivered it: then both are equal)."""

    object_old: Obj
    object_new: Obj


@dataclass(frozen=True, slots=True)
class DeleteEvent:
    """An object went away; ``delete_state_unknown`` when it was missed and found by relist."""

    object: Obj
    delete_state_unknown: bool = False


@dataclass(frozen=True, slots=True)
class GenericEvent:
    """An event from outside the API server (a timer, an external system)."""

    object: Obj
    meta: dict[str, Any] = field(default_factory=dict)


class RequestQueue(Protocol):
    """The part of ``WorkQueue[Request]`` an event handler uses."""

    def add(self, item: Request, priority: int = 0) -> None: ...

    def add_after(self, item: Request, delay: float, priority: int = 0) -> None: ...


#: controller-runtime's ``handler.LowPriority`` (same value as ``workqueue.LOW_PRIORITY``).
LOW_PRIORITY = -100


def create_priority(event: CreateEvent) -> int:
    """Objects of the initial list are not news: they queue behind fresh events."""
    return LOW_PRIORITY if event.is_in_initial_list else 0


def update_priority(event: UpdateEvent) -> int:
    """A resync (same resourceVersion) is not news either."""
    old_rv = (event.object_old.get("metadata") or {}).get("resourceVersion")
    new_rv = (event.object_new.get("metadata") or {}).get("resourceVersion")
    return LOW_PRIORITY if old_rv is not None and old_rv == new_rv else 0


def generation_unchanged(event: UpdateEvent) -> bool:
    """Both objects carry a ``metadata.generation`` and it is the same: a change of
    status or metadata, not of the spec."""
    old_gen = (event.object_old.get("metadata") or {}).get("generation")
    new_gen = (event.object_new.get("metadata") or {}).get("generation")
    return old_gen is not None and old_gen == new_gen


HandlerResult = Awaitable[None] | None


class EventHandler(Protocol):
    """Maps events to requests (controller-runtime ``handler.TypedEventHandler``).

    Each method runs synchronously and returns None; one that must wait (an
    async map function) returns an awaitable the informer awaits, in order.
    """

    def create(self, event: CreateEvent, queue: RequestQueue) -> HandlerResult: ...

    def update(self, event: UpdateEvent, queue: RequestQueue) -> HandlerResult: ...

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> HandlerResult: ...

    def generic(self, event: GenericEvent, queue: RequestQueue) -> HandlerResult: ...


def unwrap_object(obj: Any) -> Obj:
    """The object dict of an event payload, seeing through delete tombstones.

    A cache may hand a ``DeletedFinalStateUnknown``-style wrapper (anything with
    an ``obj`` or ``object`` attribute holding the last known dict) to delete
    handlers; everything downstream wants the dict.
    """
    if isinstance(obj, dict):
        return obj
    for attr in ("obj", "object"):
        inner = getattr(obj, attr, None)
        if isinstance(inner, dict):
            return inner
    raise TypeError(f"event object is not a Kubernetes object dict: {type(obj).__name__}")


def group_of(api_version: str) -> str:
    """The API group of an ``apiVersion`` ("apps/v1" → "apps", "v1" → "")."""
    return api_version.rpartition("/")[0]


class EnqueueRequestForObject:
    """Enqueue the ``Request`` of the event's own object."""

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        queue.add(request_for(event.object), create_priority(event))

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        queue.add(request_for(event.object_new), update_priority(event))

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        queue.add(request_for(event.object))

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        queue.add(request_for(event.object))


class EnqueueRequestForOwner:
    """Enqueue the owner(s) of the event's object, found through ``ownerReferences``.

    References match on the owner's group and kind (the version is ignored).
    With ``only_controller`` (the ``owns`` default) only the reference with
    ``controller: true`` counts. The request's namespace is the object's own,
    or none when the owner kind is cluster-scoped (``owner_namespaced=False``;
    ``None`` means not known yet: the controller asks the REST mapper at start,
    and until then the owner is taken as namespaced).

    ``state_priority`` (default 0: as any event) queues the owner of an owned
    object that reports its state rather than a change to undo: its creation
    (mostly the owner's own write coming back) and an update that leaves its
    ``generation`` unchanged (status, a rollout's progress). ``LOW_PRIORITY``
    lets the owners with news (a CR created or edited, an owned object deleted
    or its spec changed) go first while many are queued. A key already queued
    keeps the higher of its priorities.
    """

    def __init__(
        self,
        owner_api_version: str,
        owner_kind: str,
        *,
        only_controller: bool = True,
        owner_namespaced: bool | None = None,
        state_priority: int = 0,
    ) -> None:
        self.owner_api_version = owner_api_version
        self.owner_group = group_of(owner_api_version)
        self.owner_kind = owner_kind
        self.state_priority = state_priority
        self.only_controller = only_controller
        self.owner_namespaced = owner_namespaced

    def requests(self, obj: Obj) -> list[Request]:
        """The owner requests one object maps to."""
        meta = obj.get("metadata") or {}
        out: list[Request] = []
        for ref in meta.get("ownerReferences") or ():
            if ref.get("kind") != self.owner_kind:
                continue
            if group_of(str(ref.get("apiVersion", ""))) != self.owner_group:
                continue
            if self.only_controller and not ref.get("controller"):
                continue
            namespace = meta.get("namespace") if self.owner_namespaced is not False else None
            req = Request(namespace or None, str(ref.get("name", "")))
            if req not in out:
                out.append(req)
        return out

    def _add_all(self, objs: Iterable[Obj], queue: RequestQueue, priority: int = 0) -> None:
        seen: set[Request] = set()
        for obj in objs:
            for req in self.requests(obj):
                if req not in seen:
                    seen.add(req)
                    queue.add(req, priority)

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        priority = create_priority(event)
        self._add_all([event.object], queue, min(priority, self.state_priority))

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        priority = update_priority(event)
        if generation_unchanged(event):
            priority = min(priority, self.state_priority)
        self._add_all([event.object_old, event.object_new], queue, priority)

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        self._add_all([event.object], queue)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        self._add_all([event.object], queue)


MapFunc = Callable[[Obj], "Iterable[Request] | Awaitable[Iterable[Request]]"]


class EnqueueRequestsFromMapFunc:
    """Enqueue whatever ``map_fn(object)`` returns; ``map_fn`` may be a coroutine function.

    On update both the old and the new object are mapped, so a reference that
    moved from one owner to another wakes both. A plain ``map_fn`` enqueues
    before the handler returns; a coroutine function's results are enqueued by
    the awaitable the handler returns (see the module docstring).

    ``priority`` (default 0) caps every request's priority: ``LOW_PRIORITY``
    for a watch that only reports state (a pod's progress, a Warning Event),
    so that requests with news go first while many are queued.
    """

    def __init__(self, map_fn: MapFunc, *, priority: int = 0) -> None:
        self.map_fn = map_fn
        self.priority = priority

    def _add_all(
        self, objs: Sequence[Obj], queue: RequestQueue, priority: int = 0
    ) -> HandlerResult:
        priority = min(priority, self.priority)
        mapped = [self.map_fn(obj) for obj in objs]
        if not any(inspect.isawaitable(out) for out in mapped):
            _add_unique(cast("list[Iterable[Request]]", mapped), queue, priority)
            return None
        return _await_then_add(mapped, queue, priority)

    def create(self, event: CreateEvent, queue: RequestQueue) -> HandlerResult:
        return self._add_all([event.object], queue, create_priority(event))

    def update(self, event: UpdateEvent, queue: RequestQueue) -> HandlerResult:
        return self._add_all([event.object_old, event.object_new], queue, update_priority(event))

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> HandlerResult:
        return self._add_all([event.object], queue)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> HandlerResult:
        return self._add_all([event.object], queue)


def _add_unique(results: Iterable[Iterable[Request]], queue: RequestQueue, priority: int) -> None:
    seen: set[Request] = set()
    for requests in results:
        for req in requests:
            if req not in seen:
                seen.add(req)
                queue.add(req, priority)


async def _await_then_add(
    mapped: list[Iterable[Request] | Awaitable[Iterable[Request]]],
    queue: RequestQueue,
    priority: int,
) -> None:
    results: list[Iterable[Request]] = []
    for out in mapped:
        results.append(list(await out) if inspect.isawaitable(out) else list(out))
    _add_unique(results, queue, priority)
