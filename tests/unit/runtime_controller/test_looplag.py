"""LoopLagMonitor: lag samples reach the metric, and high lag is logged at a bounded rate."""

from __future__ import annotations

import asyncio
import time

from structlog.testing import capture_logs

from nimctl_runtime import metrics
from nimctl_runtime.looplag import LoopLagMonitor


def test_samples_reach_the_metrics_and_late_ones_are_logged_once_per_period() -> None:
    now = [0.0]
    monitor = LoopLagMonitor(warn_after=0.5, warn_every=10.0, clock=lambda: now[0])
    before = metrics.REGISTRY.get_sample_value("nimctl_event_loop_lag_seconds_count") or 0.0
    with capture_logs() as logs:
        for lag in (0.001, 0.7, 2.0, 0.01, -0.002):  # a timer that fired early counts as 0
            monitor.observe(lag)
            now[0] += 1.0
        now[0] += 10.0
        monitor.observe(0.9)
    assert monitor.samples == 6
    assert monitor.max_lag == 2.0
    assert monitor.late == 3
    after = metrics.REGISTRY.get_sample_value("nimctl_event_loop_lag_seconds_count")
    assert after == before + 6
    assert metrics.REGISTRY.get_sample_value("nimctl_event_loop_lag_max_seconds") >= 2.0
    lagged = [e for e in logs if e["event"] == "event loop lagged"]
    # the first late wake-up logs at once; the 2.0 s one 1 s later waits for the next
    # line, which reports the worst lag since the last one
    assert [(e["lag_seconds"], e["late_wakeups"]) for e in lagged] == [(0.7, 1), (2.0, 3)]


async def test_a_blocked_loop_is_measured_and_stop_ends_the_monitor() -> None:
    monitor = LoopLagMonitor(interval=0.01, warn_after=10.0)
    stop = asyncio.Event()
    task = asyncio.create_task(monitor.run(stop))
    while monitor.samples < 2:
        await asyncio.sleep(0.005)
    seen = monitor.samples
    # hold the loop (what decoding a huge body inline does) until the timer is overdue
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline:
        pass
    while monitor.samples == seen:
        await asyncio.sleep(0.005)
    assert monitor.max_lag >= 0.1
    stop.set()
    await asyncio.wait_for(task, 5)
