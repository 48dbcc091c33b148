"""Event-loop lag: how late the operator's asyncio loop runs what is due.

Everything of one operator shares one loop: Lease renewals, watch decoding,
admission reviews, reconciles. A callback that holds the loop (decoding a 1 MB
body, validating a huge spec) delays all of them, and a delayed renewal is a
lost Lease. ``LoopLagMonitor`` is a manager Runnable, on every replica
(``needs_leader_election = False``): it sleeps ``interval`` seconds again and
again and records how much later than asked it woke up:

* the histogram ``nimctl_event_loop_lag_seconds`` and the gauge
  ``nimctl_event_loop_lag_max_seconds`` (the largest since start) on
  ``/metrics``;
* a warning log line ``event loop lagged`` when one wake-up was more than
  ``warn_after`` seconds late (at most one line per ``warn_every`` seconds,
  with the largest lag since the last line), so a slow renewal in the log can
  be told apart from a slow API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from nimctl_runtime import metrics
from nimctl_runtime.logsetup import get_logger

log = get_logger("looplag")


class LoopLagMonitor:
    """Measures the event loop's lag; see the module docstring."""

    needs_leader_election = False

    def __init__(
        self,
        *,
        interval: float = 0.1,
        warn_after: float = 0.5,
        warn_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.warn_after = warn_after
        self.warn_every = warn_every
        self._clock = clock
        self.samples = 0
        self.max_lag = 0.0
        self.late = 0  # wake-ups more than warn_after late
        self._last_warning = float("-inf")
        self._worst_since_warning = 0.0

    def observe(self, lag: float) -> None:
        """Record one wake-up that came *lag* seconds late."""
        lag = max(0.0, lag)
        self.samples += 1
        metrics.nimctl_event_loop_lag_seconds.observe(lag)
        if lag > self.max_lag:
            self.max_lag = lag
            metrics.nimctl_event_loop_lag_max_seconds.set(lag)
        if lag <= self.warn_after:
            return
        self.late += 1
        self._worst_since_warning = max(self._worst_since_warning, lag)
        now = self._clock()
        if now - self._last_warning >= self.warn_every:
            log.warning(
                "event loop lagged",
                lag_seconds=round(self._worst_since_warning, 3),
                late_wakeups=self.late,
            )
            self._last_warning = now
            self._worst_since_warning = 0.0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            asked = self._clock()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
            if stop.is_set():
                return
            self.observe(self._clock() - asked - self.interval)
