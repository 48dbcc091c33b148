"""The driver upgrade gauges, with NVIDIA's names (gpu-operator.md §4.4)."""

from __future__ import annotations

from prometheus_client import Gauge

from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade.plan import Plan
from nimctl_runtime.metrics import REGISTRY

auto_upgrade_enabled = Gauge(
    "gpu_operator_driver_auto_upgrade_enabled",
    "1 if driver auto upgrade is enabled, 0 otherwise",
    registry=REGISTRY,
)
upgrades_in_progress = Gauge(
    "gpu_operator_nodes_upgrades_in_progress",
    "Total number of nodes on which the driver upgrade is in progress",
    registry=REGISTRY,
)
upgrades_done = Gauge(
    "gpu_operator_nodes_upgrades_done",
    "Total number of nodes on which the driver upgrade is done",
    registry=REGISTRY,
)
upgrades_failed = Gauge(
    "gpu_operator_nodes_upgrades_failed",
    "Total number of nodes on which the driver upgrade failed",
    registry=REGISTRY,
)
upgrades_available = Gauge(
    "gpu_operator_nodes_upgrades_available",
    "Total number of upgrade slots available",
    registry=REGISTRY,
)
upgrades_pending = Gauge(
    "gpu_operator_nodes_upgrades_pending",
    "Total number of nodes waiting for a driver upgrade",
    registry=REGISTRY,
)

__all__ = ["observe_disabled", "observe_plan", "observe_plans"]


def observe_plan(plan: Plan) -> None:
    """Set the gauges from the states a pass started with (as NVIDIA sets them before
    ``ApplyState``)."""
    count = plan.counts_by_state
    auto_upgrade_enabled.set(1)
    upgrades_in_progress.set(plan.counts.in_progress - count.get(c.FAILED, 0))
    upgrades_done.set(count.get(c.DONE, 0))
    upgrades_failed.set(count.get(c.FAILED, 0))
    upgrades_available.set(max(plan.available, 0))
    upgrades_pending.set(count.get(c.REQUIRED, 0))


def observe_plans(plans: list[Plan]) -> None:
    """The gauges summed over the plans of a pass (one per NVIDIADriver)."""
    if not plans:
        observe_disabled()
        return
    auto_upgrade_enabled.set(1)
    in_progress = done = failed = available = pending = 0
    for plan in plans:
        count = plan.counts_by_state
        in_progress += plan.counts.in_progress - count.get(c.FAILED, 0)
        done += count.get(c.DONE, 0)
        failed += count.get(c.FAILED, 0)
        available += max(plan.available, 0)
        pending += count.get(c.REQUIRED, 0)
    upgrades_in_progress.set(in_progress)
    upgrades_done.set(done)
    upgrades_failed.set(failed)
    upgrades_available.set(available)
    upgrades_pending.set(pending)


def observe_disabled() -> None:
    """Auto upgrade is off: every gauge at 0."""
    for gauge in (auto_upgrade_enabled, upgrades_in_progress, upgrades_done, upgrades_failed,
                  upgrades_available, upgrades_pending):  # fmt: skip
        gauge.set(0)
