"""Fault injection for reliability tests: break the API server on purpose.

In process (``cluster.faults`` or ``Extensions.faults``) and, when the cluster
runs with ``debug_api=True``, over HTTP under ``/debug/faults/``:

* ``close_watches()`` ends every open watch now; ``close_watches_every(n)``
  keeps doing it every *n* seconds (clients must re-watch and miss nothing);
* ``inject_errors(code=500|503|429, fraction, verbs, resources, users,
  retry_after, times)`` answers matching requests with that error (429 carries
  ``Retry-After``);
* ``add_latency(seconds, verbs, resources, users)`` delays matching requests;
* ``compact()`` drops the watch history, so a watch from an older
  resourceVersion gets ``410 Gone``;
* ``stall_simulator()`` / ``resume_simulator()`` freeze the simulated cluster;
* ``unreachable(seconds)`` drops every connection (and open watch) for a while.

Randomness (for fractions below 1) comes from a seeded generator, so a test
run is repeatable.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from localcluster.errors import StatusError
from localcluster.hooks import Handler, RequestInfo

DEBUG_PREFIX = "/debug/"
ERROR_CODES = (500, 503, 429)


def _names(values: Iterable[str] | str | None) -> frozenset[str]:
    if values is None:
        return frozenset()
    if isinstance(values, str):
        return frozenset(v.strip() for v in values.split(",") if v.strip())
    return frozenset(values)


@dataclass
class RequestMatch:
    """Which requests a fault applies to; an empty set means "any"."""

    verbs: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()

    def matches(self, info: RequestInfo) -> bool:
        if not info.is_resource_request:
            return False
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        return (
            (not self.verbs or info.verb in self.verbs)
            and (
                not self.resources or info.resource in self.resources or resource in self.resources
            )
            and (not self.users or info.user in self.users)
            and (not self.namespaces or (info.namespace or "") in self.namespaces)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "verbs": sorted(self.verbs),
            "resources": sorted(self.resources),
            "users": sorted(self.users),
            "namespaces": sorted(self.namespaces),
        }


@dataclass
class ErrorRule:
    """Answer a *fraction* of matching requests with *code* (at most *times* times)."""

    id: int
    code: int
    fraction: float
    match: RequestMatch
    retry_after: int = 1
    times: int | None = None
    injected: int = 0

    def error(self) -> StatusError:
        if self.code == 429:
            return StatusError(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
                {"causes": [{"message": "injected by localcluster fault injection"}]},
                retry_after=self.retry_after,
            )
        if self.code == 503:
            return StatusError(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
                retry_after=self.retry_after,
            )
        return StatusError(
            500,
            "InternalError",
            "Internal error occurred: injected by localcluster fault injection",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "code": self.code,
            "fraction": self.fraction,
            "retryAfter": self.retry_after,
            "times": self.times,
            "injected": self.injected,
            **self.match.to_json(),
        }


@dataclass
class LatencyRule:
    """Delay matching requests by *seconds*."""

    id: int
    seconds: float
    match: RequestMatch

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "seconds": self.seconds, **self.match.to_json()}


@dataclass
class FaultInjector:
    """The fault state of one cluster and the request hook that applies it."""

    storage: Any
    simulator: Any = None
    seed: int = 0
    error_rules: list[ErrorRule] = field(default_factory=list)
    latency_rules: list[LatencyRule] = field(default_factory=list)
    unreachable_until: float = 0.0
    watch_close_interval: float | None = None
    watches_closed: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._ids = itertools.count(1)
        self._closer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ API

    def close_watches(self) -> None:
        """End every open watch stream now."""
        self.watches_closed += 1
        self.storage.close_watchers()

    def close_watches_every(self, seconds: float | None) -> None:
        """Close all watches every *seconds* (``None`` stops it)."""
        if self._closer is not None:
            self._closer.cancel()
            self._closer = None
        self.watch_close_interval = seconds
        if seconds:
            self._closer = asyncio.create_task(self._close_loop(seconds))

    async def _close_loop(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            self.close_watches()

    def inject_errors(
        self,
        code: int = 500,
        *,
        fraction: float = 1.0,
        verbs: Iterable[str] | str | None = None,
        resources: Iterable[str] | str | None = None,
        users: Iterable[str] | str | None = None,
        retry_after: int = 1,
        times: int | None = None,
        namespaces: Iterable[str] | str | None = None,
    ) -> ErrorRule:
        """Answer matching requests with *code* (500, 503 or 429); returns the rule."""
        if code not in ERROR_CODES:
            raise ValueError(f"injected error code must be one of {ERROR_CODES}, got {code}")
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be between 0 and 1, got {fraction}")
        rule = ErrorRule(
            id=next(self._ids),
            code=code,
            fraction=fraction,
            match=RequestMatch(
                _names(verbs), _names(resources), _names(users), _names(namespaces)
            ),
            retry_after=retry_after,
            times=times,
        )
        self.error_rules.append(rule)
        return rule

    def add_latency(
        self,
        seconds: float,
        *,
        verbs: Iterable[str] | str | None = None,
        resources: Iterable[str] | str | None = None,
        users: Iterable[str] | str | None = None,
    ) -> LatencyRule:
        """Delay matching requests by *seconds*; returns the rule."""
        rule = LatencyRule(
            next(self._ids), seconds, RequestMatch(_names(verbs), _names(resources), _names(users))
        )
        self.latency_rules.append(rule)
        return rule

    def remove(self, rule_id: int) -> None:
        self.error_rules = [r for r in self.error_rules if r.id != rule_id]
        self.latency_rules = [r for r in self.latency_rules if r.id != rule_id]

    def compact(self) -> None:
        """Forget the watch history: watching from an older resourceVersion gets 410 Gone."""
        self.storage.compact()

    def stall_simulator(self) -> None:
        if self.simulator is not None:
            self.simulator.stall()

    def resume_simulator(self) -> None:
        if self.simulator is not None:
            self.simulator.resume()

    def unreachable(self, seconds: float) -> None:
        """Drop every connection and open watch for *seconds*."""
        self.unreachable_until = time.monotonic() + seconds
        self.storage.close_watchers()

    @property
    def is_unreachable(self) -> bool:
        return time.monotonic() < self.unreachable_until

    def reset(self) -> None:
        """Clear every fault (and resume a stalled simulator)."""
        self.error_rules.clear()
        self.latency_rules.clear()
        self.unreachable_until = 0.0
        self.close_watches_every(None)
        self.resume_simulator()

    async def close(self) -> None:
        if self._closer is not None:
            self._closer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._closer
            self._closer = None

    def state(self) -> dict[str, Any]:
        return {
            "errors": [r.to_json() for r in self.error_rules],
            "latency": [r.to_json() for r in self.latency_rules],
            "unreachableSeconds": max(0.0, self.unreachable_until - time.monotonic()),
            "closeWatchesEverySeconds": self.watch_close_interval,
            "watchesClosed": self.watches_closed,
            "simulatorStalled": bool(self.simulator is not None and self.simulator.stalled),
        }

    # ------------------------------------------------------------------ hook

    async def hook(
        self, request: web.Request, info: RequestInfo, handler: Handler
    ) -> web.StreamResponse:
        """The request hook: unreachable, then latency, then injected errors."""
        if request.path.startswith(DEBUG_PREFIX):
            return await handler(request)
        if self.is_unreachable:
            transport = request.transport
            if transport is not None:
                transport.abort()
            raise ConnectionResetError("localcluster is unreachable (fault injection)")
        delay = sum(r.seconds for r in self.latency_rules if r.match.matches(info))
        if delay > 0:
            await asyncio.sleep(delay)
        for rule in self.error_rules:
            if rule.times is not None and rule.injected >= rule.times:
                continue
            if not rule.match.matches(info):
                continue
            if rule.fraction < 1.0 and self._rng.random() >= rule.fraction:
                continue
            rule.injected += 1
            raise rule.error()
        return await handler(request)
