"""A controller: watches feeding a workqueue, drained by reconcile workers.

controller-runtime's ``pkg/internal/controller`` on asyncio. Each watch registers
plain callbacks on the shared ``Cache``'s informer for one kind; a callback
filters the event through the watch's predicates and calls its
``EventHandler``, which puts ``Request`` keys straight on the controller's
``WorkQueue`` (no queue in between, as in controller-runtime). ``max_concurrent_reconciles``
worker tasks take keys off the queue; the queue guarantees a key is never
reconciled by two workers at once.

What happens after a reconcile (runtime.md §1.6):

=========================  ==========================  ==================
outcome                    queue                       ``result`` label
=========================  ==========================  ==================
exception (not terminal)   ``add_rate_limited``        ``error``
``TerminalError``          nothing                     ``error``
``Result(requeue_after)``  ``forget`` + ``add_after``  ``requeue_after``
``Result(requeue=True)``   ``add_rate_limited``        ``requeue``
``Result()``               ``forget``                  ``success``
=========================  ==========================  ==================

An exception never kills a worker: it is logged with its traceback, counted
(``controller_runtime_reconcile_errors_total``; programming errors such as
``KeyError`` or ``TypeError`` also in ``..._panics_total``) and retried with
backoff. An optional ``reconcile_timeout`` bounds each call and counts into
``controller_runtime_reconcile_timeouts_total``.

A controller is a manager Runnable that needs leader election: its informers
start when the controller starts, and ``run`` returns once ``stop`` is set,
after in-flight reconciles finished (the manager bounds that wait by
cancelling the task). It can run again after it returned (a replica that lost
its Lease and won it back): a fresh queue, the informers' handlers again.

Fencing: the manager sets ``leader_fence``; a worker calls it for every key it
takes off the queue. When it raises (``NotLeaderError``: the Lease is no longer
held, e.g. the process was paused past it) the key goes back on the queue
unreconciled and the worker stops; a reconcile whose write the client refused
for the same reason is requeued the same way, without counting as an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from nimctl_runtime import metrics
from nimctl_runtime.client.errors import ApiError, NotLeaderError
from nimctl_runtime.handler import (
    CreateEvent,
    DeleteEvent,
    EnqueueRequestForOwner,
    EventHandler,
    GenericEvent,
    UpdateEvent,
    unwrap_object,
)
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.predicate import Predicate
from nimctl_runtime.reconcile import (
    Reconciler,
    ReportedError,
    Request,
    Result,
    error_chain,
    is_terminal,
)
from nimctl_runtime.workqueue import RateLimiter, ShutDown, WorkQueue

__all__ = [
    "CacheSyncTimeoutError",
    "Controller",
    "InformerSource",
    "ReconcileTimeoutError",
    "Watch",
]


Event = CreateEvent | UpdateEvent | DeleteEvent | GenericEvent

#: Exceptions that mean a bug in the reconciler rather than a failed call:
#: counted as "panics" too (controller-runtime recovers panics into errors).
_PANIC_TYPES: tuple[type[BaseException], ...] = (
    AssertionError,
    AttributeError,
    IndexError,
    KeyError,
    NameError,
    RecursionError,
    TypeError,
    UnboundLocalError,
    ZeroDivisionError,
)


def _not_leader(exc: BaseException) -> NotLeaderError | None:
    """The ``NotLeaderError`` in *exc*'s cause/context chain (a reconciler may wrap it)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, NotLeaderError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


class ReconcileTimeoutError(TimeoutError):
    """A reconcile ran longer than the controller's ``reconcile_timeout``."""


class CacheSyncTimeoutError(Exception):
    """The controller's informers did not sync within ``cache_sync_timeout``."""


class InformerSource(Protocol):
    """What a controller needs from the cache: an informer per kind and a sync wait."""

    async def get_informer(self, api_version: str, kind: str) -> Any: ...

    async def wait_for_sync(self, timeout: float) -> bool: ...  # noqa: ASYNC109


ScopeResolver = Callable[[str, str], Awaitable[bool]]


@dataclass
class Watch:
    """One event source of a controller: a kind, its predicates and its handler."""

    api_version: str
    kind: str
    handler: EventHandler
    predicates: Sequence[Predicate] = field(default_factory=tuple)


class _Source:
    """One watch's informer callbacks: predicates, then the handler, straight into the queue.

    controller-runtime's ``source.Kind`` + ``internal.EventHandler``: plain
    functions the informer calls in order, per watch. Each builds the event,
    runs the predicates and lets the ``EventHandler`` add keys to the
    controller's ``WorkQueue``; there is no queue in between. When the handler
    returns an awaitable (an async map function) it is handed back to the
    informer, whose delivery task for this watch awaits it before the next
    event. A failing predicate or handler drops that one event, logged.
    """

    def __init__(self, watch: Watch, queue: WorkQueue[Request], log: Any) -> None:
        self.watch = watch
        self.queue = queue
        self.log = log
        self.closed = False

    # informer callbacks ------------------------------------------------------------

    def on_add(self, obj: Any, is_in_initial_list: bool = False) -> Awaitable[None] | None:
        return self._handle(CreateEvent(unwrap_object(obj), is_in_initial_list))

    def on_update(self, old: Any, new: Any) -> Awaitable[None] | None:
        return self._handle(UpdateEvent(unwrap_object(old), unwrap_object(new)))

    def on_delete(self, obj: Any) -> Awaitable[None] | None:
        unknown = not isinstance(obj, dict)
        return self._handle(DeleteEvent(unwrap_object(obj), delete_state_unknown=unknown))

    def _handle(self, event: Event) -> Awaitable[None] | None:
        if self.closed:
            return None
        try:
            if not self._passes(event):
                return None
        except Exception:
            self.log.exception("predicate failed; event dropped", kind=self.watch.kind)
            return None
        handler = self.watch.handler
        try:
            if isinstance(event, CreateEvent):
                result = handler.create(event, self.queue)
            elif isinstance(event, UpdateEvent):
                result = handler.update(event, self.queue)
            elif isinstance(event, DeleteEvent):
                result = handler.delete(event, self.queue)
            else:
                result = handler.generic(event, self.queue)
        except Exception:
            self.log.exception("event handler failed; event dropped", kind=self.watch.kind)
            return None
        return None if result is None else self._finish(result)

    async def _finish(self, pending: Awaitable[None]) -> None:
        try:
            await pending
        except Exception:
            self.log.exception("event handler failed; event dropped", kind=self.watch.kind)

    def _passes(self, event: Event) -> bool:
        for p in self.watch.predicates:
            if isinstance(event, CreateEvent):
                ok = p.create(event)
            elif isinstance(event, UpdateEvent):
                ok = p.update(event)
            elif isinstance(event, DeleteEvent):
                ok = p.delete(event)
            else:
                ok = p.generic(event)
            if not ok:
                return False
        return True


class Controller:
    """Watches + workqueue + workers around one ``Reconciler``.

    Build it with ``builder.Builder``; or construct it, call ``watch`` for each
    source, and hand it to ``Manager.add``.
    """

    needs_leader_election = True

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        cache: InformerSource,
        *,
        max_concurrent_reconciles: int = 1,
        rate_limiter: RateLimiter[Request] | None = None,
        reconcile_timeout: float | None = None,
        cache_sync_timeout: float = 120.0,
        scope_resolver: ScopeResolver | None = None,
        needs_leader_election: bool = True,
    ) -> None:
        if max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1")
        if reconcile_timeout is not None and reconcile_timeout <= 0:
            raise ValueError("reconcile_timeout must be positive")
        self.name = name
        self.reconciler = reconciler
        self.cache = cache
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.reconcile_timeout = reconcile_timeout
        self.cache_sync_timeout = cache_sync_timeout
        self.scope_resolver = scope_resolver
        self.needs_leader_election = needs_leader_election
        self.queue: WorkQueue[Request] = WorkQueue(name, rate_limiter=rate_limiter)
        self.watches: list[Watch] = []
        self.log = get_logger("controller").bind(controller=name)
        self._sources: list[tuple[Any, _Source, Any]] = []  # (informer, source, registration)
        self._started = False
        self._running = False
        self._stopping = False
        self._synced = False
        self._in_flight = 0
        # Raises NotLeaderError when this process may not act (set by the manager).
        self.leader_fence: Callable[[], None] | None = None
        self.fenced = 0  # keys put back unreconciled because the fence refused
        # The last error logged per key and how often it repeated since.
        self._failures: dict[Request, tuple[str, int]] = {}
        self._m_total = {
            r: metrics.controller_runtime_reconcile_total.labels(name, r)
            for r in metrics.RECONCILE_RESULTS
        }
        self._m_errors = metrics.controller_runtime_reconcile_errors_total.labels(name)
        self._m_terminal = metrics.controller_runtime_terminal_reconcile_errors_total.labels(name)
        self._m_panics = metrics.controller_runtime_reconcile_panics_total.labels(name)
        self._m_timeouts = metrics.controller_runtime_reconcile_timeouts_total.labels(name)
        self._m_time = metrics.controller_runtime_reconcile_time_seconds.labels(name)
        self._m_active = metrics.controller_runtime_active_workers.labels(name)
        metrics.controller_runtime_max_concurrent_reconciles.labels(name).set(
            max_concurrent_reconciles
        )
        self._m_active.set(0)

    # -- configuration -------------------------------------------------------------

    def watch(
        self,
        api_version: str,
        kind: str,
        handler: EventHandler,
        *predicates: Predicate,
    ) -> None:
        """Add an event source; only before ``run``."""
        if self._started:
            raise RuntimeError(f"controller {self.name!r}: watches must be added before it starts")
        self.watches.append(Watch(api_version, kind, handler, tuple(predicates)))

    # -- state -----------------------------------------------------------------------

    def has_synced(self) -> bool:
        """True once every watch's informer has synced and the workers run."""
        return self._synced

    def in_flight(self) -> int:
        """Reconciles running right now."""
        return self._in_flight

    # -- run ---------------------------------------------------------------------------

    async def _resolve_owner_scopes(self) -> None:
        if self.scope_resolver is None:
            return
        for w in self.watches:
            h = w.handler
            if isinstance(h, EnqueueRequestForOwner) and h.owner_namespaced is None:
                with contextlib.suppress(Exception):
                    h.owner_namespaced = await self.scope_resolver(
                        h.owner_api_version, h.owner_kind
                    )

    async def _start_sources(self) -> None:
        for w in self.watches:
            source = _Source(w, self.queue, self.log)
            informer = await self.cache.get_informer(w.api_version, w.kind)
            registration = informer.add_event_handler(
                source.on_add, source.on_update, source.on_delete
            )
            self._sources.append((informer, source, registration))
        synced = await self.cache.wait_for_sync(self.cache_sync_timeout)
        if not synced:
            kinds = ", ".join(f"{w.api_version}/{w.kind}" for w in self.watches)
            raise CacheSyncTimeoutError(
                f"controller {self.name!r}: timed out after {self.cache_sync_timeout:g}s "
                f"waiting for the caches of {kinds} to sync; check the API server is "
                "reachable and the operator may list and watch these kinds"
            )

    async def run(self, stop: asyncio.Event) -> None:
        """Start the watches, wait for their caches, run workers until ``stop`` is set.

        On stop the controller takes no new keys, waits for in-flight reconciles
        to return, and returns. Cancelling the task cancels in-flight reconciles.
        """
        if self._running:
            raise RuntimeError(f"controller {self.name!r} is already running")
        if self._started:  # a second run after leadership came back: start clean
            self.queue = WorkQueue(self.name, rate_limiter=self.queue.rate_limiter)
            self._stopping = False
            self._synced = False
            self._failures.clear()
        self._started = True
        self._running = True
        self.log.info("starting controller", workers=self.max_concurrent_reconciles)
        workers: list[asyncio.Task[None]] = []
        try:
            await self._resolve_owner_scopes()
            sync = asyncio.ensure_future(self._start_sources())
            stopped = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({sync, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not sync.done():
                    sync.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await sync
                stopped.cancel()
            if sync.cancelled():
                return  # stopped while waiting for the caches
            sync.result()  # raise CacheSyncTimeoutError
            workers = [
                asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}")
                for i in range(self.max_concurrent_reconciles)
            ]
            self._synced = True
            self.log.info("controller started workers", workers=len(workers))
            await stop.wait()
            self.log.info("stopping controller: no new work, waiting for in-flight reconciles")
            self._stopping = True
            self._close_sources()
            self.queue.shut_down()
            await asyncio.gather(*workers)
            self.log.info("all workers finished")
        finally:
            self._stopping = True
            self._synced = False
            self.queue.shut_down()
            self._close_sources()
            for t in workers:
                t.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await self._remove_sources()
            self._running = False

    def _close_sources(self) -> None:
        for _, source, _ in self._sources:
            source.closed = True

    async def _remove_sources(self) -> None:
        """Unregister from the shared informers (the cache outlives a controller)."""
        sources, self._sources = self._sources, []
        for informer, _, registration in sources:
            remove = getattr(informer, "remove_event_handler", None)
            if remove is not None and registration is not None:
                with contextlib.suppress(Exception):
                    await remove(registration)

    def enqueue(self, request: Request) -> None:
        """Queue a key directly (a ``GenericEvent`` without an object)."""
        self.queue.add(request)

    # -- workers -----------------------------------------------------------------------

    async def _worker(self) -> None:
        while not self._stopping:
            try:
                req = await self.queue.get()
            except ShutDown:
                return
            if self._stopping:
                self.queue.done(req)
                return
            if not self._may_act(req):
                return
            self._in_flight += 1
            self._m_active.inc()
            refused = False
            try:
                refused = await self._reconcile_handler(req)
            except Exception as exc:  # a bug of ours must not kill the worker either
                self.log.error("internal error handling a reconcile result", exc_info=exc)
                self.queue.add_rate_limited(req)
            finally:
                self._in_flight -= 1
                self._m_active.dec()
                self.queue.done(req)
            if refused:
                return  # not the leader now: the manager stops this controller

    def _may_act(self, req: Request) -> bool:
        """The fence for a dequeued key: False (key put back, worker to stop) when refused."""
        if self.leader_fence is None:
            return True
        try:
            self.leader_fence()
        except NotLeaderError as exc:
            self._put_back(req, exc)
            self.queue.done(req)
            return False
        return True

    def _put_back(self, req: Request, exc: NotLeaderError) -> None:
        self.fenced += 1
        if self.fenced == 1 or self.fenced % 100 == 0:
            self.log.info("not the leader now: work put back", error=str(exc), fenced=self.fenced)
        self.queue.add(req)

    async def _reconcile_handler(self, req: Request) -> bool:
        """Reconcile one key and act on the outcome; True when the fence refused a write."""
        # A random version-4 UUID, as controller-runtime's reconcileID, from the
        # process's PRNG: uuid4() reads the OS's entropy on every reconcile.
        reconcile_id = str(uuid.UUID(int=random.getrandbits(128), version=4))
        log = self.log.bind(namespace=req.namespace or "", name=req.name, reconcileID=reconcile_id)
        started = time.monotonic()
        try:
            with structlog.contextvars.bound_contextvars(
                controller=self.name,
                namespace=req.namespace or "",
                name=req.name,
                reconcileID=reconcile_id,
            ):
                result = await self._call_reconcile(req)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            refused = _not_leader(exc)
            if refused is not None:  # a write the fence stopped: not a failure of the object
                self._put_back(req, refused)
                return True
            self._m_time.observe(time.monotonic() - started)
            self._m_total["error"].inc()
            self._m_errors.inc()
            if isinstance(exc, ReconcileTimeoutError):
                self._m_timeouts.inc()
                log.error("reconcile timed out", timeout=self.reconcile_timeout)
                self.queue.add_rate_limited(req)
                return False
            if isinstance(exc, _PANIC_TYPES):
                self._m_panics.inc()
            if is_terminal(exc):
                self._m_terminal.inc()
                log.error(
                    "reconciler error (terminal, not requeued)", error=str(exc), exc_info=exc
                )
                return False
            self._log_failure(log, req, exc)
            self.queue.add_rate_limited(req)
            return False
        self._m_time.observe(time.monotonic() - started)
        if not isinstance(result, Result):
            log.error(
                "reconciler returned a non-Result value; treating it as Result()",
                returned=type(result).__name__,
            )
            result = Result()
        if result.requeue_after:
            self.queue.forget(req)
            self.queue.add_after(req, result.requeue_after)
            self._m_total["requeue_after"].inc()
        elif result.requeue:
            self.queue.add_rate_limited(req)
            self._m_total["requeue"].inc()
        else:
            self.queue.forget(req)
            self._m_total["success"].inc()
        self._failures.pop(req, None)
        return False

    def _log_failure(self, log: Any, req: Request, exc: Exception) -> None:
        """Log a failure once per change of its error; repeats go to debug with a count.

        Expected failures (API errors, and errors the reconciler already
        reported in status or an Event) are one line with the error chain;
        anything else keeps its traceback, since it is a bug.
        """
        chain = error_chain(exc)
        last = self._failures.get(req)
        if last is not None and last[0] == chain:
            repeats = last[1] + 1
            self._failures[req] = (chain, repeats)
            log.debug("reconciler error (repeated)", error=chain, repeats=repeats)
            return
        self._failures[req] = (chain, 0)
        if isinstance(exc, ApiError | ReportedError):
            log.error("reconciler error", error=chain, reason=getattr(exc, "reason", None))
        else:
            log.error("reconciler error", error=chain, exc_info=exc)

    async def _call_reconcile(self, req: Request) -> Result:
        if self.reconcile_timeout is None:
            return await self.reconciler.reconcile(req)
        cm = asyncio.timeout(self.reconcile_timeout)
        try:
            async with cm:
                return await self.reconciler.reconcile(req)
        except TimeoutError as exc:
            if cm.expired():
                raise ReconcileTimeoutError(
                    f"reconcile of {req} took longer than {self.reconcile_timeout:g}s"
                ) from exc
            raise
