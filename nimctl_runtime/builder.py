"""A fluent builder for controllers, like controller-runtime's ``builder``.

::

    Builder(manager).named("nimservice")
        .for_("apps.nvidia.com/v1alpha1", "NIMService", predicates=[GenerationChangedPredicate()])
        .owns("apps/v1", "Deployment")
        .watches("apps.nvidia.com/v1alpha1", "NIMCache", map_nimcache_to_services)
        .with_options(max_concurrent_reconciles=4)
        .complete(reconciler)

``for_`` enqueues the object itself; ``owns`` enqueues the ``controller: true``
owner of the given kind when it is the ``for_`` kind (every owner of that kind
with ``match_every_owner=True``); ``watches`` enqueues what a map function
returns (or uses any ``EventHandler`` given instead). ``with_event_filter``
adds predicates to every watch. ``with_cache`` makes the watches read a
cache of the controller's own instead of the manager's (the GPU controllers
keep their trimmed Nodes apart). A controller that reconciles one request for
the whole cluster has no ``for_``: it is ``named`` and only ``watches``, as
controller-runtime allows. ``complete`` builds the ``Controller``, adds it to
the manager (it runs only while leading) and returns it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from nimctl_runtime.controller import Controller
from nimctl_runtime.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    EventHandler,
    MapFunc,
)
from nimctl_runtime.predicate import Predicate
from nimctl_runtime.reconcile import Reconciler, Request
from nimctl_runtime.workqueue import RateLimiter

if TYPE_CHECKING:
    from nimctl_runtime.cache.cache import Cache
    from nimctl_runtime.manager import Manager

__all__ = ["Builder"]


class Builder:
    """Collects a controller's watches and options; ``complete`` builds it."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self._name: str | None = None
        self._for: tuple[str, str, tuple[Predicate, ...]] | None = None
        self._owns: list[tuple[str, str, tuple[Predicate, ...], bool]] = []
        self._watches: list[tuple[str, str, EventHandler, tuple[Predicate, ...]]] = []
        self._global_predicates: list[Predicate] = []
        self._max_concurrent_reconciles = 1
        self._rate_limiter: RateLimiter[Request] | None = None
        self._reconcile_timeout: float | None = None
        self._cache_sync_timeout: float | None = None
        self._needs_leader_election = True
        self._cache: Cache | None = None
        self._owned_state_priority = 0

    def named(self, name: str) -> Builder:
        """The controller's name: metric label, log field, workqueue name (must be unique)."""
        self._name = name
        return self

    def for_(
        self, api_version: str, kind: str, *, predicates: Iterable[Predicate] = ()
    ) -> Builder:
        """The kind this controller reconciles (exactly once per builder)."""
        if self._for is not None:
            raise ValueError("for_ may only be called once: a controller reconciles one kind")
        self._for = (api_version, kind, tuple(predicates))
        return self

    def owns(
        self,
        api_version: str,
        kind: str,
        *,
        predicates: Iterable[Predicate] = (),
        match_every_owner: bool = False,
    ) -> Builder:
        """Reconcile the ``for_`` object that owns objects of this kind."""
        self._owns.append((api_version, kind, tuple(predicates), match_every_owner))
        return self

    def watches(
        self,
        api_version: str,
        kind: str,
        map_fn_or_handler: MapFunc | EventHandler,
        *,
        predicates: Iterable[Predicate] = (),
        priority: int = 0,
    ) -> Builder:
        """Reconcile the requests a map function (sync or async) returns for this kind's
        events (``priority`` caps theirs: see ``EnqueueRequestsFromMapFunc``)."""
        handler: EventHandler
        if callable(map_fn_or_handler) and not hasattr(map_fn_or_handler, "create"):
            handler = EnqueueRequestsFromMapFunc(map_fn_or_handler, priority=priority)
        else:
            handler = map_fn_or_handler  # type: ignore[assignment]
        self._watches.append((api_version, kind, handler, tuple(predicates)))
        return self

    def with_event_filter(self, predicate: Predicate) -> Builder:
        """A predicate applied to every watch of this controller."""
        self._global_predicates.append(predicate)
        return self

    def with_cache(self, cache: Cache) -> Builder:
        """The cache this controller's watches read (default: the manager's)."""
        self._cache = cache
        return self

    def with_options(
        self,
        *,
        max_concurrent_reconciles: int | None = None,
        rate_limiter: RateLimiter[Request] | None = None,
        reconcile_timeout: float | None = None,
        cache_sync_timeout: float | None = None,
        needs_leader_election: bool | None = None,
        owned_state_priority: int | None = None,
    ) -> Builder:
        """Controller options; ``owned_state_priority`` is every ``owns`` handler's
        ``EnqueueRequestForOwner.state_priority`` (e.g. ``LOW_PRIORITY``)."""
        if owned_state_priority is not None:
            self._owned_state_priority = owned_state_priority
        if max_concurrent_reconciles is not None:
            self._max_concurrent_reconciles = max_concurrent_reconciles
        if rate_limiter is not None:
            self._rate_limiter = rate_limiter
        if reconcile_timeout is not None:
            self._reconcile_timeout = reconcile_timeout
        if cache_sync_timeout is not None:
            self._cache_sync_timeout = cache_sync_timeout
        if needs_leader_election is not None:
            self._needs_leader_election = needs_leader_election
        return self

    def build(self, reconciler: Reconciler) -> Controller:
        """Build the controller and add it to the manager."""
        if self._for is None and (self._name is None or not self._watches):
            raise ValueError(
                "must call for_() (or named(), for a controller of watches only) before "
                "complete(): which kind is reconciled?"
            )
        if self._for is None and self._owns:
            raise ValueError("owns() needs for_(): the owner kind to enqueue")
        name = self._name or (self._for[1].lower() if self._for else "")
        if self.manager.has_controller(name):
            raise ValueError(
                f"controller name {name!r} is already used; give each controller a unique "
                "name with named()"
            )
        mapper = self.manager.client.mapper
        ctrl = Controller(
            name,
            reconciler,
            self._cache if self._cache is not None else self.manager.cache,
            max_concurrent_reconciles=self._max_concurrent_reconciles,
            rate_limiter=self._rate_limiter,
            reconcile_timeout=self._reconcile_timeout,
            cache_sync_timeout=(
                self._cache_sync_timeout
                if self._cache_sync_timeout is not None
                else self.manager.options.cache_sync_timeout
            ),
            scope_resolver=mapper.is_namespaced,
            needs_leader_election=self._needs_leader_election,
        )
        common = tuple(self._global_predicates)
        if self._for is not None:
            for_av, for_kind, for_preds = self._for
            ctrl.watch(for_av, for_kind, EnqueueRequestForObject(), *for_preds, *common)
            for av, kind, preds, every in self._owns:
                owner = EnqueueRequestForOwner(
                    for_av,
                    for_kind,
                    only_controller=not every,
                    state_priority=self._owned_state_priority,
                )
                ctrl.watch(av, kind, owner, *preds, *common)
        for av, kind, handler, preds in self._watches:
            ctrl.watch(av, kind, handler, *preds, *common)
        self.manager.add(ctrl)
        return ctrl

    complete = build
