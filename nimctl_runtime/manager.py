"""The Manager: runs caches, servers and controllers with controller-runtime's lifecycle.

One process, several kinds of Runnable (anything with
``async def run(stop: asyncio.Event)`` and ``needs_leader_election``):

* on **every** replica: the health-probe server, the metrics server, the
  event broadcaster, the webhook server and other runnables that do not need
  leader election, then the shared ``Cache``;
* only **while leading** (or at once without leader election): the
  controllers.

Start order (runtime.md §1.11): HTTP servers → other non-leader runnables
(webhooks) → cache (wait for sync, bounded by ``cache_sync_timeout``) → leader
election → controllers. ``/readyz`` fails until the caches have synced.

Stop (``stop`` set, or SIGTERM/SIGINT when the manager installs its own
handlers; a second signal exits at once with status 1): controllers take no
new keys and drain in-flight reconciles, bounded by
``graceful_shutdown_timeout`` (then cancelled); the Lease is released at once
(``leader_election_release_on_cancel``, on by default) so a standby takes
over without waiting for expiry; then the other runnables, the cache and the
servers stop. ``start`` returns normally: exit 0.

Fencing (issue 26): under leader election the manager sets the client's
``fence`` to :meth:`Manager.fence`, so every write (reconcilers, the Event
broadcaster, anything using ``manager.client``) is refused unsent unless this
process holds the Lease and its hold is still valid on its own monotonic
clock (see ``leaderelection``). Controllers check the same fence for every key
they take off their queue, before reconciling it.

Losing the Lease is not a stop: controllers are cancelled with no drain and
pending Events are dropped. Then, by default, the manager rejoins the
election as a candidate (the webhook server, the probes and the caches keep
running throughout) and restarts the controllers when it leads again. With
``leader_election_exit_on_loss`` it keeps controller-runtime's behaviour
instead: ``start`` raises ``LeaderElectionLostError`` and the process must
exit non-zero. A runnable that fails stops the manager and ``start``
re-raises its error.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ipaddress
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from nimctl_runtime.authfilter import AuthenticationAndAuthorization
from nimctl_runtime.cache import ByObject, Cache
from nimctl_runtime.client import Client, NotLeaderError, RestConfig
from nimctl_runtime.events import EventBroadcaster, EventRecorder
from nimctl_runtime.health import Checker, HealthProbeServer, parse_bind_address
from nimctl_runtime.leaderelection import (
    LeaderElectionConfig,
    LeaderElector,
    default_identity,
    default_namespace,
)
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.metrics import MetricsServer

__all__ = [
    "LeaderElectionLostError",
    "Manager",
    "ManagerOptions",
    "Runnable",
]


class Runnable(Protocol):
    """What a manager runs: serve until ``stop`` is set, then shut down and return."""

    async def run(self, stop: asyncio.Event) -> None: ...


class LeaderElectionLostError(RuntimeError):
    """The manager lost its Lease; the process must exit non-zero."""


GVK = tuple[str, str]


@dataclass
class ManagerOptions:
    """Manager settings; names follow controller-runtime's ``manager.Options``.

    Bind addresses use Go's spelling (``":8081"``, ``"127.0.0.1:0"``); ``"0"``
    or ``""`` disables the server. Durations are in seconds.
    """

    leader_election: bool = False
    leader_election_id: str = ""
    leader_election_namespace: str | None = None
    leader_election_release_on_cancel: bool = True
    # controller-runtime's os.Exit(1) on a lost Lease; False: rejoin as a candidate
    leader_election_exit_on_loss: bool = False
    # seconds before the lease could expire for others that writes stop (None: 10 %)
    leader_election_safety_margin: float | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str | None = None
    metrics_bind_address: str = "0"
    # HTTPS for /metrics (``--metrics-secure``); certificates from metrics_cert_dir
    # or self-signed. metrics_auth: the TokenReview + SubjectAccessReview filter;
    # None means on unless the bind address is loopback only (see docs/operations.md).
    metrics_secure: bool = False
    metrics_cert_dir: str | None = None
    metrics_auth: bool | None = None
    health_probe_bind_address: str = "0"
    liveness_endpoint_name: str = "/healthz"
    readiness_endpoint_name: str = "/readyz"
    graceful_shutdown_timeout: float = 30.0
    cache_sync_timeout: float = 120.0
    cache_by_object: Mapping[GVK, ByObject] = field(default_factory=dict)
    cache_namespace: str | None = None
    cache_resync_period: float | None = None
    event_queue_size: int = 1000

    @classmethod
    def from_args(cls, args: argparse.Namespace, **overrides: Any) -> ManagerOptions:
        """Options from the CLI flags (``--leader-elect``, ``--metrics-bind-address``, ...)."""
        values: dict[str, Any] = {
            "leader_election": bool(getattr(args, "leader_elect", False)),
            "leader_election_id": getattr(args, "leader_election_id", "") or "",
            "leader_election_namespace": getattr(args, "leader_election_namespace", None),
            "leader_election_exit_on_loss": bool(
                getattr(args, "leader_election_exit_on_loss", False)
            ),
            "metrics_bind_address": getattr(args, "metrics_bind_address", "0") or "0",
            "metrics_secure": bool(getattr(args, "metrics_secure", False)),
            "metrics_cert_dir": getattr(args, "metrics_cert_dir", None) or None,
            "health_probe_bind_address": getattr(args, "health_probe_bind_address", "0") or "0",
            "cache_namespace": getattr(args, "watch_namespace", None) or None,
        }
        for flag, name in (
            ("leader_election_lease_duration", "lease_duration"),
            ("leader_election_renew_deadline", "renew_deadline"),
            ("leader_election_retry_period", "retry_period"),
            ("leader_election_safety_margin", "leader_election_safety_margin"),
        ):
            value = getattr(args, flag, None)
            if value is not None:
                values[name] = float(value)
        values.update(overrides)
        return cls(**values)


def _loopback(host: str | None) -> bool:
    """True when *host* binds the loopback interface only (not every interface)."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Slot:
    """A runnable with its own stop event and task."""

    def __init__(self, runnable: Any, name: str) -> None:
        self.runnable = runnable
        self.name = name
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


class Manager:
    """See the module docstring. ``Manager(config_or_client, options, **overrides)``.

    ``config_or_client`` is a ``Client`` (used as is), a ``RestConfig`` or a
    kubeconfig path (the manager then owns and closes the client).
    ``overrides`` set ``ManagerOptions`` fields by name.
    """

    def __init__(
        self,
        config_or_client: Client | RestConfig | str,
        options: ManagerOptions | None = None,
        **overrides: Any,
    ) -> None:
        opts = options or ManagerOptions()
        if overrides:
            opts = dataclasses.replace(opts, **overrides)
        self.options = opts
        if isinstance(config_or_client, Client):
            self.client = config_or_client
            self._owns_client = False
        else:
            self.client = Client(config_or_client)
            self._owns_client = True
        self.cache = Cache(
            self.client,
            by_object=opts.cache_by_object,
            namespace=opts.cache_namespace,
            resync_period=opts.cache_resync_period,
        )
        self.log = get_logger("manager")
        self._healthz: dict[str, Checker] = {}
        self._readyz: dict[str, Checker] = {}
        self._leader_runnables: list[_Slot] = []
        self._other_runnables: list[_Slot] = []
        self._servers: list[_Slot] = []
        self._cache_slot: _Slot | None = None
        self._broadcaster = EventBroadcaster(self.client, queue_size=opts.event_queue_size)
        self._started = False
        self._stopping = False
        self._caches_synced = False
        self._leading = False
        self._failed = asyncio.Event()
        self._lost = asyncio.Event()
        self._errors: list[BaseException] = []
        self.elected = asyncio.Event()
        self.losses = 0  # Leases lost and rejoined (without leader_election_exit_on_loss)
        self.elector: LeaderElector | None = None
        self._identity = default_identity()
        self.health_server: HealthProbeServer | None = None
        self.metrics_server: MetricsServer | None = None
        self.add(self._broadcaster)
        if opts.leader_election:
            # validate the settings now; the elector itself is made in start(),
            # where finding the pod's namespace may read a file off the loop
            self._election_config(opts.leader_election_namespace or "-").validate()
            self._healthz["leaderElection"] = self._leader_election_check
        self._readyz["cacheSync"] = self._cache_sync_check
        # Fails with the reason (TLS verification, refused, ...) while the API
        # server cannot be reached: /readyz/apiServer says why nothing happens.
        self._readyz["apiServer"] = self.client.connection.check

    # -- registration ---------------------------------------------------------------

    def add(self, runnable: Any) -> None:
        """Run ``runnable``; ``needs_leader_election`` (default True) decides when."""
        if not callable(getattr(runnable, "run", None)):
            raise TypeError(f"{runnable!r} is not a Runnable: it has no run(stop) coroutine")
        slot = _Slot(runnable, getattr(runnable, "name", None) or type(runnable).__name__)
        if getattr(runnable, "needs_leader_election", True):
            if hasattr(runnable, "leader_fence"):
                runnable.leader_fence = self.fence
            self._leader_runnables.append(slot)
            if self._started and self._leading and not self._stopping:
                self._launch(slot)
        else:
            self._other_runnables.append(slot)
            if self._started and not self._stopping:
                self._launch(slot)

    def runnables(self) -> list[Any]:
        """Every runnable added, controllers first (what tests wait on to see it idle)."""
        return [s.runnable for s in (*self._leader_runnables, *self._other_runnables)]

    def has_controller(self, name: str) -> bool:
        """Whether a runnable with this ``name`` (a controller's name) was added."""
        return any(
            getattr(s.runnable, "name", None) == name
            for s in (*self._leader_runnables, *self._other_runnables)
        )

    def add_healthz_check(self, name: str, check: Checker) -> None:
        self._add_check(self._healthz, name, check)

    def add_readyz_check(self, name: str, check: Checker) -> None:
        self._add_check(self._readyz, name, check)

    def _add_check(self, checks: dict[str, Checker], name: str, check: Checker) -> None:
        if self._started:
            raise RuntimeError("health checks must be added before the manager starts")
        if name in checks:
            raise ValueError(f"a health check named {name!r} already exists")
        checks[name] = check

    def event_recorder(self, component: str) -> EventRecorder:
        """An EventRecorder whose Events name ``component`` as their source."""
        return self._broadcaster.new_recorder(component)

    @property
    def api_reader(self) -> Client:
        """Uncached reads (objects the filtered cache does not hold)."""
        return self.client

    def is_leader(self) -> bool:
        return self._leading

    def fence(self) -> None:
        """Raise ``NotLeaderError`` unless this process may write now (no API call).

        Without leader election every write may go. With it, the elector must
        lead and its hold be valid (``LeaderElector.fence``).
        """
        if not self.options.leader_election:
            return
        if self.elector is None:
            raise NotLeaderError("write not sent: leader election has not started")
        self.elector.fence()

    def _election_config(self, namespace: str) -> LeaderElectionConfig:
        opts = self.options
        return LeaderElectionConfig(
            name=opts.leader_election_id,
            namespace=namespace,
            identity=opts.identity or self._identity,
            lease_duration=opts.lease_duration,
            renew_deadline=opts.renew_deadline,
            retry_period=opts.retry_period,
            release_on_cancel=opts.leader_election_release_on_cancel,
            safety_margin=opts.leader_election_safety_margin,
        )

    async def _make_elector(self) -> LeaderElector:
        namespace = self.options.leader_election_namespace
        if not namespace:
            namespace = await asyncio.to_thread(default_namespace)
        if not namespace:
            namespace = "default"
            self.log.warning(
                "leader election namespace unknown (not in a pod); using 'default': "
                "pass --leader-election-namespace to choose"
            )
        return LeaderElector(
            self.client,
            self._election_config(namespace),
            on_started_leading=self._on_started_leading,
            on_stopped_leading=self._on_stopped_leading,
        )

    # -- checks -----------------------------------------------------------------------

    def _leader_election_check(self) -> None:
        """Fails when this replica leads but renewals stalled past the lease + renew deadline."""
        if self.elector is not None:
            self.elector.check(self.options.renew_deadline)()

    def _cache_sync_check(self) -> None:
        if not self._caches_synced:
            raise RuntimeError("caches have not synced yet")
        if not self.cache.has_synced():
            raise RuntimeError("informers have not synced yet")
        for slot in self._leader_runnables:
            has_synced = getattr(slot.runnable, "has_synced", None)
            if slot.task is not None and callable(has_synced) and not has_synced():
                raise RuntimeError(f"{slot.name} has not synced yet")

    # -- lifecycle ------------------------------------------------------------------------

    def _launch(self, slot: _Slot) -> None:
        slot.task = asyncio.create_task(self._run_slot(slot), name=f"runnable-{slot.name}")

    async def _run_slot(self, slot: _Slot) -> None:
        try:
            await slot.runnable.run(slot.stop)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not self._stopping:
                self.log.error("runnable failed; stopping the manager", runnable=slot.name,
                               exc_info=exc)  # fmt: skip
                self._errors.append(exc)
                self._failed.set()
            else:
                self.log.warning("runnable failed while stopping", runnable=slot.name,
                                 error=str(exc))  # fmt: skip

    async def _on_started_leading(self) -> None:
        if self._stopping:
            return
        self._leading = True
        self.elected.set()
        self.log.info("elected leader: starting controllers", count=len(self._leader_runnables))
        for slot in self._leader_runnables:
            if slot.task is None:
                self._launch(slot)

    def _on_stopped_leading(self) -> None:
        was = self._leading
        self._leading = False
        self.elected.clear()
        # only a manager shutdown stops leading on purpose; anything else is a loss
        if was and not self._stopping:
            self.log.error("leader election lost")
            self._broadcaster.discard_pending()
            if self.options.leader_election_exit_on_loss:
                self._lost.set()

    async def _stand_down(self) -> None:
        """After a lost Lease: cancel the controllers (no drain) so they can start again."""
        self.log.info("stopping controllers after the lost lease")
        now = asyncio.get_running_loop().time()
        await self._stop_slots(self._leader_runnables, now, "controllers")
        for slot in self._leader_runnables:
            slot.task = None
            slot.stop = asyncio.Event()
        self.losses += 1

    async def _run_elector(self, elector: LeaderElector, stop: asyncio.Event) -> None:
        while True:
            try:
                await elector.run(stop)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not self._stopping:
                    self.log.error("leader election failed; stopping the manager", exc_info=exc)
                    self._errors.append(exc)
                    self._failed.set()
                return
            if stop.is_set() or self._stopping or self._lost.is_set():
                return
            if not elector.lost:
                self._errors.append(RuntimeError("leader election ended unexpectedly"))
                self._failed.set()
                return
            await self._stand_down()
            if stop.is_set() or self._stopping:
                return
            self.log.info("rejoining leader election as a candidate")

    async def _start_servers(self) -> None:
        opts = self.options
        if parse_bind_address(opts.health_probe_bind_address) is not None:
            self.health_server = HealthProbeServer(
                opts.health_probe_bind_address,
                healthz=self._healthz,
                readyz=self._readyz,
                liveness_endpoint=opts.liveness_endpoint_name,
                readiness_endpoint=opts.readiness_endpoint_name,
            )
            self._servers.append(_Slot(self.health_server, "health-probe-server"))
        bind = parse_bind_address(opts.metrics_bind_address)
        if bind is not None:
            auth = opts.metrics_auth
            if auth is None:
                auth = not _loopback(bind[0])
            self.metrics_server = MetricsServer(
                opts.metrics_bind_address,
                secure=opts.metrics_secure,
                cert_dir=opts.metrics_cert_dir,
                auth=AuthenticationAndAuthorization(self.client) if auth else None,
            )
            if not auth:
                self.log.info(
                    "metrics are served without authentication to loopback clients only",
                    address=opts.metrics_bind_address,
                )
            self._servers.append(_Slot(self.metrics_server, "metrics-server"))
        for slot in self._servers:
            self._launch(slot)
            server = slot.runnable
            started = asyncio.ensure_future(server.started.wait())
            assert slot.task is not None
            await asyncio.wait({started, slot.task}, return_when=asyncio.FIRST_COMPLETED)
            started.cancel()
            if slot.task.done():
                cause = self._errors[-1] if self._errors else None
                raise RuntimeError(
                    f"{slot.name} could not start on {server.host or '0.0.0.0'}:{server.port}: "
                    f"{cause}; choose a free address with the bind-address flag"
                )

    async def _wait_any(self, stop: asyncio.Event) -> None:
        """Wait until stopped, a runnable failed or the Lease was lost."""
        waiters = [asyncio.ensure_future(e.wait()) for e in (stop, self._failed, self._lost)]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    async def start(self, stop: asyncio.Event | None = None) -> None:
        """Run everything until ``stop`` is set (or SIGTERM/SIGINT when ``stop`` is None)."""
        if self._started:
            raise RuntimeError("the manager was already started")
        self._started = True
        own_signals = stop is None
        stop_event = stop if stop is not None else asyncio.Event()
        removers = self._install_signal_handlers(stop_event) if own_signals else []
        elector_stop = asyncio.Event()
        elector_task: asyncio.Task[None] | None = None
        try:
            await self._start_servers()
            for slot in self._other_runnables:
                if slot.task is None:
                    self._launch(slot)
            self._cache_slot = _Slot(self.cache, "cache")
            self._launch(self._cache_slot)
            sync = asyncio.ensure_future(self.cache.wait_for_sync(self.options.cache_sync_timeout))
            waiter = asyncio.ensure_future(self._wait_any(stop_event))
            await asyncio.wait({sync, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if sync.done():
                if not sync.result():
                    raise RuntimeError(
                        f"caches did not sync within {self.options.cache_sync_timeout:g}s"
                    )
                self._caches_synced = True
            else:
                sync.cancel()
            if not self._should_stop(stop_event):
                if self.options.leader_election:
                    self.elector = await self._make_elector()
                    self.client.fence = self.fence
                    elector_task = asyncio.create_task(
                        self._run_elector(self.elector, elector_stop), name="leader-election"
                    )
                else:
                    await self._on_started_leading()
                await self._wait_any(stop_event)
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
                self._errors.append(exc)
            await self._shutdown(elector_stop, elector_task, lost=False)
            for remove in removers:
                remove()
            if self._owns_client:
                await self.client.close()
            raise
        lost = self._lost.is_set()
        await self._shutdown(elector_stop, elector_task, lost=lost)
        for remove in removers:
            remove()
        if self._owns_client:
            await self.client.close()
        if lost:
            raise LeaderElectionLostError("leader election lost")
        if self._errors:
            raise self._errors[0]

    def _should_stop(self, stop: asyncio.Event) -> bool:
        return stop.is_set() or self._failed.is_set() or self._lost.is_set()

    async def _stop_slots(self, slots: list[_Slot], deadline: float | None, what: str) -> None:
        running = [s for s in slots if s.task is not None and not s.task.done()]
        for s in slots:
            s.stop.set()
        if not running:
            return
        tasks = [s.task for s in running if s.task is not None]
        loop = asyncio.get_running_loop()
        timeout = None if deadline is None else max(0.0, deadline - loop.time())
        if timeout == 0.0:
            pending = set(tasks)
        else:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
        if pending:
            if timeout != 0.0:
                self.log.error(
                    "failed waiting for all runnables to end within grace period",
                    group=what,
                    grace_period=self.options.graceful_shutdown_timeout,
                )
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _shutdown(
        self, elector_stop: asyncio.Event, elector_task: asyncio.Task[None] | None, *, lost: bool
    ) -> None:
        self._stopping = True
        loop = asyncio.get_running_loop()
        grace = 0.0 if lost else self.options.graceful_shutdown_timeout
        deadline = None if grace < 0 else loop.time() + grace
        if lost:
            self.log.error("leader election lost: cancelling controllers without draining")
            self._broadcaster.discard_pending()
        else:
            self.log.info("stopping: draining controllers", grace_period=grace)
        if self.elector is not None and not self.elector.is_leader():
            elector_stop.set()  # not leading: stop trying to acquire
        await self._stop_slots(self._leader_runnables, deadline, "controllers")
        if not lost and self.elector is not None and self.elector.is_leader():
            # the drained reconciles' Events, while this replica may still write them
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                async with asyncio.timeout(remaining):
                    await self._broadcaster.flush()
            except Exception as exc:
                self.log.warning("could not write every pending Event", error=str(exc))
        # controllers are done: give the Lease up so a standby takes over at once
        elector_stop.set()
        if elector_task is not None:
            try:
                async with asyncio.timeout(self.options.renew_deadline + 1.0):
                    await elector_task
            except TimeoutError:
                self.log.error("leader election did not stop in time")
            except Exception as exc:
                self.log.error("leader election failed while stopping", error=str(exc))
        await self._stop_slots(self._other_runnables, deadline, "runnables")
        if self._cache_slot is not None:
            await self._stop_slots([self._cache_slot], deadline, "cache")
        await self._stop_slots(self._servers, deadline, "servers")
        self.log.info("manager stopped")

    def _install_signal_handlers(self, stop: asyncio.Event) -> list[Any]:
        loop = asyncio.get_running_loop()
        installed: list[Any] = []
        received = 0

        def on_signal(signame: str) -> None:
            nonlocal received
            received += 1
            if received == 1:
                self.log.info("received signal: stopping", signal=signame)
                stop.set()
            else:
                self.log.error("second signal: exiting immediately", signal=signame)
                os._exit(1)

        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, on_signal, sig.name)
            except (NotImplementedError, RuntimeError, ValueError):
                continue
            installed.append(lambda s=sig: loop.remove_signal_handler(s))
        return installed

