"""The simulated disruption controller: PodDisruptionBudget status from the pods it selects."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.simulator.disruption import reconcile_pdb
from localcluster.simulator.objects import Context, ObjectLookup, UpdateStatus
from nimctl_runtime.meta import Obj


def pod(name: str, *, ready: bool = True, app: str = "web", deleting: bool = False) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "labels": {"app": app}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"kind": "Pod", "metadata": meta,
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}  # fmt: skip


def pdb(**spec: Any) -> Obj:
    return {"kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default",
            "generation": 2}, "spec": {**spec, "selector": {"matchLabels": {"app": "web"}}}}  # fmt: skip


def status(budget: Obj, pods: list[Obj], now: float = 0.0) -> Obj:
    view = ObjectLookup()
    for p in pods:
        view.put(p)
    ctx = Context(view=view, now=now, stamp=lambda: "2026-01-01T00:00:00Z", sim_of=lambda _: 0.0)
    actions = [a for a in reconcile_pdb(budget, ctx) if isinstance(a, UpdateStatus)]
    assert len(actions) == 1
    result: Obj = actions[0].obj["status"]
    return result


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"minAvailable": 2}, (3, 2, 1)),
        ({"minAvailable": 3}, (3, 3, 0)),
        ({"minAvailable": "50%"}, (3, 2, 1)),  # 1.5 rounded up
        ({"maxUnavailable": 1}, (3, 2, 1)),
        ({"maxUnavailable": "34%"}, (3, 1, 2)),  # 34% of 3 = 2 (rounded up)
    ],
)
def test_disruptions_allowed(spec: Obj, want: tuple[int, int, int]) -> None:
    out = status(pdb(**spec), [pod("a"), pod("b"), pod("c"), pod("other", app="db")])
    assert (out["currentHealthy"], out["desiredHealthy"], out["disruptionsAllowed"]) == want
    assert out["expectedPods"] == 3 and out["observedGeneration"] == 2
    cond = out["conditions"][0]
    assert cond["type"] == "DisruptionAllowed"
    assert cond["reason"] == ("SufficientPods" if want[2] else "InsufficientPods")


def test_unready_terminating_and_recently_evicted_pods_are_not_healthy() -> None:
    budget = pdb(minAvailable=1)
    budget["status"] = {"disruptedPods": {"c": "2026-01-01T00:00:00Z"}}
    out = status(budget, [pod("a"), pod("b", ready=False), pod("c"), pod("d", deleting=True)], 10)
    assert out["currentHealthy"] == 1 and out["disruptionsAllowed"] == 0
    assert out["disruptedPods"] == {"c": "2026-01-01T00:00:00Z"}
    later = status(budget, [pod("a"), pod("c")], now=121.0)
    assert "disruptedPods" not in later and later["disruptionsAllowed"] == 1
