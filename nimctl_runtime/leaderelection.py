"""Leader election on a coordination.k8s.io/v1 Lease (client-go ``leaderelection``), fenced.

Several replicas of the operator may run; only the holder of the Lease runs
controllers (runtime.md §1.5). The algorithm is client-go's:

* ``try_acquire_or_renew``: while leading, renew optimistically with no GET
  (the fast path); otherwise GET the Lease (create it when absent). Whenever
  the record changed since the last look, remember the *local monotonic time*
  of that observation. Someone else's lease is valid until
  ``observed_time + leaseDurationSeconds``: expiry is never judged from the
  record's ``renewTime``, so clock skew between replicas does not matter.
  Taking over from another holder increments ``leaseTransitions``.
* acquiring retries every ``retry_period`` (jittered by 1.2; while someone
  else holds the lease, every ``retry_period`` with 10 % jitter and never
  past the observed expiry, for a fast failover); one acquisition attempt is
  bounded by ``max(renew_deadline / 2, 1 s)``;
* with ``release_on_cancel``, a voluntary stop writes an empty holder with a
  1 s duration so a successor takes over at once.

Where it differs from client-go, on purpose (issue 26):

* **Fencing.** Our hold is valid until ``last_renew + lease_duration -
  safety_margin`` on this process's monotonic clock, where ``last_renew`` is
  the *start* of the last successful renewal (so always before any other
  replica can see the lease expire). :meth:`LeaderElector.fence` checks that
  bound; the client calls it before every write, so a process that was
  paused (SIGSTOP, a long GC, a VM migration) past its lease sends nothing
  when it resumes, and the failed check wakes the renew loop to step down.
* **A slow server is not a lost lease.** Renewals are retried every
  ``retry_period`` for as long as the hold is valid, and one renewal may take
  all of the remaining validity: a renewal answered after 8 s still counts.
  Leadership ends only when the hold's validity ran out (``renew_deadline``
  no longer ends it).

Defaults are controller-runtime's: 15 s / 10 s / 2 s, and
``LeaseDuration > RenewDeadline > 1.2 · RetryPeriod`` is enforced.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import inspect
import math
import os
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nimctl_runtime import metrics
from nimctl_runtime.client.client import unfenced
from nimctl_runtime.client.errors import AlreadyExists, Conflict, NotFound, NotLeaderError
from nimctl_runtime.logsetup import get_logger

__all__ = [
    "JITTER_FACTOR",
    "LeaderElectionConfig",
    "LeaderElector",
    "LeaseClient",
    "default_identity",
    "default_namespace",
]

JITTER_FACTOR = 1.2
LEASE_API_VERSION = "coordination.k8s.io/v1"
_SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

Callback = Callable[[], Awaitable[None] | None]


class LeaseClient(Protocol):
    """The client calls the elector makes (a subset of ``nimctl_runtime.client.Client``)."""

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def create(
        self, obj: dict[str, Any], *, field_manager: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]: ...

    async def update(self, obj: dict[str, Any]) -> dict[str, Any]: ...


def default_identity() -> str:
    """``hostname_uuid``, unique per process (controller-runtime's identity)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def default_namespace() -> str | None:
    """The namespace the pod runs in (service-account file or ``POD_NAMESPACE``), if known."""
    env = os.environ.get("POD_NAMESPACE", "").strip()
    if env:
        return env
    try:
        text = Path(_SA_NAMESPACE_FILE).read_text().strip()
    except OSError:
        return None
    return text or None


def _micro_time(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElectionConfig:
    """Where the Lease lives, who we are, and the timings (seconds)."""

    name: str
    namespace: str
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = False
    # How long before the lease could expire for others this process stops
    # writing; None: 10 % of the lease, at least min(1 s, a quarter of it).
    safety_margin: float | None = None

    def validate(self) -> None:
        if not self.name:
            raise ValueError("leader election needs a Lease name (--leader-election-id)")
        if not self.namespace:
            raise ValueError(
                "leader election needs a namespace: pass --leader-election-namespace "
                "(it is found automatically only when running in a pod)"
            )
        if not self.identity:
            raise ValueError("leader election identity must not be empty")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if self.retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")
        if self.safety_margin is not None and not (
            0 <= self.safety_margin < self.lease_duration - self.retry_period
        ):
            raise ValueError(
                "the leader-election safety margin must be at least 0 and leave more than "
                "one retry period of the lease duration"
            )

    @property
    def margin(self) -> float:
        """The safety margin in seconds (see ``safety_margin``)."""
        if self.safety_margin is not None:
            return self.safety_margin
        return max(0.1 * self.lease_duration, min(1.0, 0.25 * self.lease_duration))

    @property
    def request_timeout(self) -> float:
        """Bound of one Lease request: a hung call must not cost the leadership."""
        return max(self.renew_deadline / 2, 1.0)


async def _call(cb: Callback | None) -> None:
    if cb is None:
        return
    out = cb()
    if inspect.isawaitable(out):
        await out


class LeaderElector:
    """Acquires and holds one Lease; see the module docstring.

    ``run(stop)`` acquires (until ``stop``), calls ``on_started_leading``, renews
    until leadership is lost or ``stop`` is set, releases the Lease on a
    voluntary stop when ``release_on_cancel``, and calls ``on_stopped_leading``
    if it had been leading. ``lost`` tells the two endings apart.
    """

    def __init__(
        self,
        client: LeaseClient,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        config.validate()
        self.client = client
        self.config = config
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._clock = clock
        self.log = get_logger("leaderelection").bind(
            lease=f"{config.namespace}/{config.name}", identity=config.identity
        )
        self._observed_spec: dict[str, Any] | None = None
        self._observed_rv: str | None = None
        self._observed_time = 0.0
        self._last_renew = 0.0
        self._leading = False
        self._reported_leader: str | None = None
        self.lost = False
        self.leading = asyncio.Event()
        # set by a failed fence check: wakes the renew loop to step down at once
        self._expired = asyncio.Event()
        self.fenced = 0
        self._m_status = metrics.leader_election_master_status.labels(config.name)
        self._m_slowpath = metrics.leader_election_slowpath_total.labels(config.name)
        self._m_status.set(0)

    # -- state ----------------------------------------------------------------------

    def is_leader(self) -> bool:
        return self._leading

    def get_leader(self) -> str:
        """The holder identity last observed ("" when unknown or released)."""
        if self._observed_spec is None:
            return ""
        return str(self._observed_spec.get("holderIdentity") or "")

    def seconds_since_renew(self) -> float:
        return self._clock() - self._last_renew

    def valid_until(self) -> float:
        """Monotonic time until which this process may act as leader (-inf when not leading)."""
        if not self._leading:
            return -math.inf
        return self._last_renew + self.config.lease_duration - self.config.margin

    def fence(self) -> None:
        """Raise ``NotLeaderError`` unless we lead and our hold is still valid (no API call).

        A failed check past the validity also wakes the renew loop, which then
        steps down: the caller does not have to.
        """
        if not self._leading:
            raise NotLeaderError(
                f"write not sent: this process ({self.config.identity}) does not hold "
                f"the Lease {self.config.namespace}/{self.config.name}"
            )
        now = self._clock()
        if now >= self.valid_until():
            self.fenced += 1
            self._expired.set()
            raise NotLeaderError(
                f"write not sent: the Lease {self.config.namespace}/{self.config.name} was "
                f"last renewed {now - self._last_renew:.1f}s ago (lease "
                f"{self.config.lease_duration:g}s, safety margin {self.config.margin:g}s); "
                "stepping down"
            )

    def check(self, max_tolerable_expired_lease: float) -> Callable[[], None]:
        """A healthz check failing when we lead but renewals stalled past the lease + tolerance."""

        def leader_election_check() -> None:
            if not self._leading:
                return
            stalled = self._clock() - self._last_renew
            if stalled > self.config.lease_duration + max_tolerable_expired_lease:
                raise RuntimeError(
                    f"failed election to renew leadership on lease {self.config.name}: "
                    f"no renewal for {stalled:.1f}s"
                )

        return leader_election_check

    # -- one attempt ---------------------------------------------------------------------

    def _desired(
        self, now: dt.datetime, acquire_time: str | None, transitions: int
    ) -> dict[str, Any]:
        stamp = _micro_time(now)
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration)),
            "acquireTime": acquire_time or stamp,
            "renewTime": stamp,
            "leaseTransitions": transitions,
        }

    def _lease(self, spec: dict[str, Any], rv: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.config.name, "namespace": self.config.namespace}
        if rv is not None:
            meta["resourceVersion"] = rv
        return {"apiVersion": LEASE_API_VERSION, "kind": "Lease", "metadata": meta, "spec": spec}

    def _observe(self, spec: dict[str, Any], rv: str | None, when: float) -> None:
        if spec != self._observed_spec:
            self._observed_spec = copy.deepcopy(spec)
            self._observed_time = when
        self._observed_rv = rv
        holder = str(spec.get("holderIdentity") or "")
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            if holder != self.config.identity:
                self.log.info("new leader elected", leader=holder)
            if self.on_new_leader is not None:
                try:
                    self.on_new_leader(holder)
                except Exception:
                    self.log.exception("on_new_leader callback failed")

    def _valid_for_others(self, now: float) -> bool:
        spec = self._observed_spec or {}
        duration = float(spec.get("leaseDurationSeconds") or 0)
        return self._observed_time + duration > now

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the Lease; True when we hold it afterwards."""
        started = self._clock()
        now = dt.datetime.now(dt.UTC)
        # 1. fast path: we lead and our record is still valid, so update without a GET
        if self._leading and self._observed_spec is not None and self._valid_for_others(started):
            spec = self._desired(
                now,
                self._observed_spec.get("acquireTime"),
                int(self._observed_spec.get("leaseTransitions") or 0),
            )
            try:
                updated = await self.client.update(self._lease(spec, self._observed_rv))
            except Exception as exc:  # any failure: take the slow path
                self.log.info("lease fast-path renew failed; falling back", error=str(exc))
                self._m_slowpath.inc()
            else:
                self._observe(spec, _rv(updated), started)
                self._last_renew = started
                return True
        # 2. get (or create) the current record
        try:
            current = await self.client.get(
                LEASE_API_VERSION, "Lease", self.config.name, self.config.namespace
            )
        except NotFound:
            spec = self._desired(now, None, 0)
            try:
                created = await self.client.create(self._lease(spec, None))
            except (AlreadyExists, Conflict):
                return False
            self._observe(spec, _rv(created), started)
            self._last_renew = started
            return True
        old_spec = dict(current.get("spec") or {})
        # 3. note when the record last changed, on our own clock
        self._observe(old_spec, _rv(current), self._clock())
        holder = str(old_spec.get("holderIdentity") or "")
        # 4. someone else holds a lease that is still valid by our observation
        if holder and holder != self.config.identity and self._valid_for_others(self._clock()):
            return False
        # 5. take or renew it
        transitions = int(old_spec.get("leaseTransitions") or 0)
        if holder == self.config.identity:
            acquire_time = old_spec.get("acquireTime")
        else:
            acquire_time = None
            transitions += 1
        spec = self._desired(now, acquire_time, transitions)
        try:
            updated = await self.client.update(self._lease(spec, _rv(current)))
        except (Conflict, NotFound):
            return False
        self._observe(spec, _rv(updated), started)
        self._last_renew = started
        return True

    async def _attempt(self, budget: float) -> bool:
        try:
            async with asyncio.timeout(budget):
                with unfenced():
                    return await self.try_acquire_or_renew()
        except TimeoutError:
            self.log.info("lease request timed out")
            return False
        except Exception as exc:  # a failed attempt, whatever the client raised
            self.log.info("error retrieving or updating the lease", error=str(exc))
            return False

    # -- loops --------------------------------------------------------------------------

    async def _sleep_or_stop(
        self, seconds: float, stop: asyncio.Event, wake: asyncio.Event | None = None
    ) -> bool:
        """Sleep (cut short when ``wake`` is set); True when ``stop`` was set meanwhile."""
        if seconds <= 0 or stop.is_set() or (wake is not None and wake.is_set()):
            return stop.is_set()
        waiters = [asyncio.ensure_future(stop.wait())]
        if wake is not None:
            waiters.append(asyncio.ensure_future(wake.wait()))
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
        return stop.is_set()

    def _standby_wait(self) -> float:
        """How long a candidate waits before its next attempt.

        client-go waits ``retry_period`` plus up to 1.2 times as much jitter. While another
        replica holds a valid lease we poll every ``retry_period`` with only
        10 % jitter, and never sleep past the moment the observed lease
        expires, so a dead leader is replaced within about
        ``lease_duration + retry_period`` (client-go: up to 2.2 retry periods
        more).
        """
        retry = self.config.retry_period
        holder = self.get_leader()
        if not holder or holder == self.config.identity:
            return retry * (1 + random.uniform(0, JITTER_FACTOR))
        spec = self._observed_spec or {}
        expires = self._observed_time + float(spec.get("leaseDurationSeconds") or 0)
        until_expiry = max(0.0, expires - self._clock()) + 0.01
        return min(retry * (1 + random.uniform(0, 0.1)), until_expiry)

    async def _acquire(self, stop: asyncio.Event) -> bool:
        self.log.info("attempting to acquire leader lease")
        while not stop.is_set():
            if await self._attempt(min(self.config.request_timeout, self.config.renew_deadline)):
                return True
            if await self._sleep_or_stop(self._standby_wait(), stop):
                return False
        return False

    async def _renew(self, stop: asyncio.Event) -> bool:
        """Renew until ``stop`` (True) or the hold's validity runs out (False).

        One renewal may use all of the remaining validity, so a slow answer
        still counts; a failed one is retried every ``retry_period``.
        """
        cfg = self.config
        while True:
            if await self._sleep_or_stop(cfg.retry_period, stop, self._expired):
                return True
            while True:
                remaining = self.valid_until() - self._clock()
                if remaining <= 0 or self._expired.is_set():
                    return False
                if await self._attempt(remaining) and self.valid_until() > self._clock():
                    break
                if stop.is_set():
                    return True
                remaining = self.valid_until() - self._clock()
                pause = min(cfg.retry_period, max(0.0, remaining))
                if await self._sleep_or_stop(pause, stop, self._expired):
                    return True

    async def release(self) -> bool:
        """Give the Lease up: empty holder, 1 s duration (only when we hold it)."""
        if not self._leading or self._observed_spec is None:
            return True
        now = dt.datetime.now(dt.UTC)
        spec = {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": _micro_time(now),
            "renewTime": _micro_time(now),
            "leaseTransitions": int(self._observed_spec.get("leaseTransitions") or 0),
        }
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                with unfenced():
                    updated = await self._release(spec)
        except Exception as exc:  # the lease then simply expires
            self.log.error("failed to release the lease", error=str(exc))
            return False
        if updated is None:
            return True  # someone else already holds it
        self._observe(spec, _rv(updated), self._clock())
        self.log.info("released the leader lease")
        return True

    async def _release(self, spec: dict[str, Any]) -> dict[str, Any] | None:
        """Write the released record; None when someone else holds the Lease already."""
        try:
            return await self.client.update(self._lease(spec, self._observed_rv))
        except Conflict:
            current = await self.client.get(
                LEASE_API_VERSION, "Lease", self.config.name, self.config.namespace
            )
            holder = (current.get("spec") or {}).get("holderIdentity")
            if holder != self.config.identity:
                return None
            return await self.client.update(self._lease(spec, _rv(current)))

    async def run(self, stop: asyncio.Event) -> None:
        """Acquire, lead, renew; see the class docstring."""
        self.lost = False
        self._expired.clear()
        try:
            if not await self._acquire(stop):
                return
            self._leading = True
            self._m_status.set(1)
            self.leading.set()
            self.log.info("successfully acquired lease")
            await _call(self.on_started_leading)
            voluntary = await self._renew(stop)
            if voluntary:
                if self.config.release_on_cancel:
                    await self.release()
            else:
                self.lost = True
                self.log.error(
                    "the lease was not renewed within its validity; leadership lost",
                    lease_duration=self.config.lease_duration,
                    safety_margin=self.config.margin,
                    since_renew=round(self.seconds_since_renew(), 2),
                )
        finally:
            was_leading = self._leading
            self._leading = False
            self.leading.clear()
            self._m_status.set(0)
            if was_leading:
                await _call(self.on_stopped_leading)


def _rv(obj: dict[str, Any]) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv is not None else None
