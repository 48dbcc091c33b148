"""What the upgrade tells users: node Events and the ClusterPolicy's ``DriverUpgrade`` condition.

NVIDIA's upgrade controller says nothing while a node sits in a state; users
find out from the label alone (gpu-operator.md §9 items 5-7). nimctl answers
"why is this node stuck?" in ``kubectl describe node`` and in
``kubectl describe clusterpolicy``:

- each node in a non-final state gets an Event with what it waits for when
  that changes (``DriverUpgradeWaiting``; Warning ``DriverUpgradeFailed`` and
  ``DriverUpgradeStalled``), and one per state change (``DriverUpgradeState``);
- the ClusterPolicy carries a condition ``DriverUpgrade`` (True while any node
  is not done), with a short summary and the nodes that wait, fail or stall;
  with NVIDIADriver-managed drivers it sums up every NVIDIADriver's nodes.
  The message holds no ticking counters, so it is written only when it changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade.executor import Outcome
from controllers.gpu.upgrade.plan import Plan
from controllers.gpu.upgrade.slots import SlotCounts

CONDITION_DRIVER_UPGRADE: Final = "DriverUpgrade"
REASON_IN_PROGRESS: Final = "UpgradeInProgress"
REASON_FAILED: Final = "UpgradeFailed"
REASON_STALLED: Final = "UpgradeStalled"
REASON_DONE: Final = "UpgradeDone"
REASON_DISABLED: Final = "UpgradeDisabled"
EVENT_STATE: Final = "DriverUpgradeState"
EVENT_WAITING: Final = "DriverUpgradeWaiting"
EVENT_FAILED: Final = "DriverUpgradeFailed"
EVENT_STALLED: Final = "DriverUpgradeStalled"
MAX_NODES_IN_MESSAGE: Final = 5

__all__ = [
    "CONDITION_DRIVER_UPGRADE",
    "NodeReport",
    "combined",
    "condition",
    "node_reports",
]


@dataclass(frozen=True)
class NodeReport:
    """What one node says (an Event when it changes)."""

    state: str
    message: str
    type: str
    reason: str


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m"


def node_reports(plan: Plan, outcome: Outcome) -> dict[str, NodeReport]:
    """One report per node in a non-final state after the pass."""
    out: dict[str, NodeReport] = {}
    for node, state in sorted(plan.states.items()):
        if state in c.FINAL_STATES:
            continue
        parts = [plan.waiting.get(node, "")] if plan.waiting.get(node) else []
        parts.extend(outcome.refused.get(node, []))
        text = "; ".join(parts) or "in progress"
        type_, reason = "Normal", EVENT_WAITING
        if state == c.FAILED:
            type_, reason = "Warning", EVENT_FAILED
        elif node in plan.stalled:
            type_, reason = "Warning", EVENT_STALLED
            text += f" (no progress for {_minutes(plan.stalled[node])})"
        out[node] = NodeReport(state, f"{state}: {text}", type_, reason)
    return out


def combined(plans: list[Plan]) -> Plan:
    """One plan's view of several (one per NVIDIADriver), for the ``DriverUpgrade`` condition."""
    out = Plan()
    stalls = [p.rollout_stalled for p in plans if p.rollout_stalled is not None]
    out.rollout_stalled = max(stalls) if stalls else None
    total = in_progress = required = unavailable = 0
    for p in plans:
        out.states.update(p.states)
        out.stalled.update(p.stalled)
        total += p.counts.total
        in_progress += p.counts.in_progress
        required += p.counts.upgrade_required
        unavailable += p.counts.unavailable
    out.counts = SlotCounts(total, in_progress, required, unavailable)
    return out


def condition(plan: Plan, reports: Mapping[str, NodeReport]) -> dict[str, Any]:
    """The ``DriverUpgrade`` condition (no ``lastTransitionTime``; the caller keeps it)."""
    total = plan.counts.total
    done = sum(1 for s in plan.states.values() if s == c.DONE)
    failed = sorted(n for n, s in plan.states.items() if s == c.FAILED)
    if not reports:
        return {"type": CONDITION_DRIVER_UPGRADE, "status": "False", "reason": REASON_DONE,
                "message": f"{done} of {total} nodes run the current driver"}  # fmt: skip
    if failed:
        reason = REASON_FAILED
    elif plan.stalled or plan.rollout_stalled is not None:
        reason = REASON_STALLED
    else:
        reason = REASON_IN_PROGRESS
    summary = f"{done} of {total} nodes upgraded"
    if failed:
        summary += f", {len(failed)} failed"
    if plan.rollout_stalled is not None:
        summary += f"; no node changed state for {_minutes(plan.rollout_stalled)}"
    queued = [n for n, r in reports.items() if r.state == c.REQUIRED]
    busy = [n for n in reports if n not in queued]
    lines = [f"{n} {reports[n].message}" for n in busy[:MAX_NODES_IN_MESSAGE]]
    if len(busy) > MAX_NODES_IN_MESSAGE:
        lines.append(f"and {len(busy) - MAX_NODES_IN_MESSAGE} more nodes in progress")
    if queued:
        first = reports[queued[0]].message
        lines.append(f"{len(queued)} nodes in {c.REQUIRED} (first: {queued[0]} {first})")
    return {
        "type": CONDITION_DRIVER_UPGRADE,
        "status": "True",
        "reason": reason,
        "message": summary + ". " + "; ".join(lines),
    }


def merged_conditions(
    current: list[dict[str, Any]], wanted: dict[str, Any]
) -> list[dict[str, Any]] | None:
    """The conditions with ``wanted`` set, or None when nothing changed."""
    out = [dict(x) for x in current]
    for cond in out:
        if cond.get("type") != wanted["type"]:
            continue
        if all(cond.get(k) == wanted[k] for k in ("status", "reason", "message")):
            return None
        if cond.get("status") != wanted["status"]:
            cond["lastTransitionTime"] = _now()
        cond.update(wanted)
        return out
    out.append({**wanted, "lastTransitionTime": _now()})
    return out


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
