"""kube-controller-manager's disruption controller as pure logic: PodDisruptionBudget status.

For each PDB: the pods of its namespace its selector matches (policy/v1: an
empty selector matches every pod), ``expectedPods`` (those not finished),
``currentHealthy`` (Ready, not being deleted, not recently evicted),
``desiredHealthy`` from ``minAvailable`` (a number or a percentage of the
expected pods, rounded up) or ``expectedPods - maxUnavailable`` (rounded up),
and ``disruptionsAllowed = max(0, currentHealthy - desiredHealthy)`` with the
``DisruptionAllowed`` condition (``SufficientPods``/``InsufficientPods``).

``disruptedPods`` is written by the eviction subresource; an entry is kept
while the pod exists and for at most two minutes, as the real controller does.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final

from localcluster.simulator.objects import (
    Action,
    Context,
    Requeue,
    UpdateStatus,
    generation_of,
    int_or_percent,
    is_deleting,
    labels_of,
    name_of,
    namespace_of,
    set_condition,
    status_changed,
    with_status,
)
from nimctl_runtime.labels import Selector
from nimctl_runtime.meta import Obj

DISRUPTED_POD_TIMEOUT: Final = 120.0

__all__ = ["DISRUPTED_POD_TIMEOUT", "pdb_selects", "pod_healthy", "reconcile_pdb"]


def pdb_selects(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """The PDB's selector matches the pod (same namespace; empty selector: every pod)."""
    if namespace_of(pdb) != namespace_of(pod):
        return False
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    return Selector.from_label_selector(selector).matches(labels_of(pod))


def pod_healthy(pod: Mapping[str, Any]) -> bool:
    """Ready and not being deleted."""
    if is_deleting(pod):
        return False
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _stamp_age(stamp: str, ctx: Context) -> float:
    try:
        datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return DISRUPTED_POD_TIMEOUT
    return ctx.now - ctx.sim_of(stamp)


def reconcile_pdb(pdb: Obj, ctx: Context) -> list[Action]:
    """The PDB's status from the pods it selects (see the module docstring)."""
    spec = pdb.get("spec") or {}
    pods = [p for p in ctx.view.list("Pod", namespace_of(pdb)) if pdb_selects(pdb, p)]
    expected = [
        p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    status = dict(pdb.get("status") or {})
    existing = {name_of(p) for p in pods if not is_deleting(p)}
    disrupted: dict[str, str] = {}
    requeue: float | None = None
    for name, stamp in (status.get("disruptedPods") or {}).items():
        age = _stamp_age(str(stamp), ctx)
        if name in existing and age < DISRUPTED_POD_TIMEOUT:
            disrupted[name] = stamp
            left = DISRUPTED_POD_TIMEOUT - age
            requeue = left if requeue is None else min(requeue, left)
    healthy = sum(1 for p in expected if pod_healthy(p) and name_of(p) not in disrupted)
    total = len(expected)
    if spec.get("maxUnavailable") is not None:
        desired = max(0, total - int_or_percent(spec["maxUnavailable"], total, round_up=True))
    elif spec.get("minAvailable") is not None:
        desired = int_or_percent(spec["minAvailable"], total, round_up=True)
    else:
        desired = 0
    allowed = max(0, healthy - desired) if total else 0
    new: Obj = {
        **status,
        "observedGeneration": generation_of(pdb),
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": total,
    }
    if disrupted:
        new["disruptedPods"] = disrupted
    else:
        new.pop("disruptedPods", None)
    new["conditions"] = set_condition(
        list(status.get("conditions") or []),
        "DisruptionAllowed",
        "True" if allowed > 0 else "False",
        reason="SufficientPods" if allowed > 0 else "InsufficientPods",
        message="",
        stamp=ctx.stamp(),
    )
    for cond in new["conditions"]:
        cond.setdefault("observedGeneration", generation_of(pdb))
    actions: list[Action] = []
    if status_changed(pdb, new):
        actions.append(UpdateStatus(with_status(pdb, new)))
    if requeue is not None:
        actions.append(Requeue(requeue + 0.01))
    return actions
