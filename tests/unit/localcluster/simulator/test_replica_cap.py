"""Issue 19 item 2: an absurd spec.replicas never makes the simulator grow without bound.

``spec.replicas: 18446744073709551616`` once made the simulator create 23,000 pods
a minute. ReplicaSets and StatefulSets now run at most MAX_SIMULATED_REPLICAS pods
and say so with a Warning Event.
"""

from __future__ import annotations

from typing import Any

from localcluster.simulator.deployment import (
    MAX_SIMULATED_REPLICAS,
    reconcile_replicaset,
)
from localcluster.simulator.objects import (
    Context,
    Create,
    Emit,
    ObjectLookup,
)
from localcluster.simulator.statefulset import reconcile_statefulset

HUGE = 18446744073709551616
TEMPLATE = {
    "metadata": {"labels": {"app": "x"}},
    "spec": {"containers": [{"name": "c", "image": "i"}]},
}


def workload(kind: str, replicas: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "big", "namespace": "ns", "uid": f"{kind}-uid", "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "x"}},
            "template": TEMPLATE,
            **spec,
        },
    }


def pod(i: int, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"big-{i}",
            "namespace": "ns",
            "uid": f"p{i}",
            "ownerReferences": [
                {
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "kind": owner["kind"],
                    "name": "big",
                }
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running"},
    }


def context(*objs: dict[str, Any]) -> Context:
    view = ObjectLookup()
    for o in objs:
        view.put(o)
    return Context(view=view, now=0.0, stamp=lambda: "2026-01-01T00:00:00Z", sim_of=lambda _s: 0.0)


def warnings(actions: list[Any]) -> list[str]:
    return [a.message for a in actions if isinstance(a, Emit) and a.reason == "ReplicasCapped"]


def test_replicaset_with_2_to_the_64_replicas_is_capped_with_a_warning() -> None:
    rs = workload("ReplicaSet", HUGE)
    actions = reconcile_replicaset(rs, context(rs))
    assert 0 < sum(isinstance(a, Create) for a in actions) <= MAX_SIMULATED_REPLICAS
    assert warnings(actions) == [
        f"spec.replicas {HUGE} is more than the simulator runs; "
        f"running {MAX_SIMULATED_REPLICAS} pods"
    ]


def test_replicaset_at_the_cap_creates_nothing_more() -> None:
    rs = workload("ReplicaSet", HUGE)
    pods = [pod(i, rs) for i in range(MAX_SIMULATED_REPLICAS)]
    actions = reconcile_replicaset(rs, context(rs, *pods))
    assert not [a for a in actions if isinstance(a, Create)]
    assert warnings(actions) == []


def test_parallel_statefulset_with_2_to_the_64_replicas_terminates_and_is_capped() -> None:
    sts = workload("StatefulSet", HUGE, podManagementPolicy="Parallel", serviceName="big")
    actions = reconcile_statefulset(sts, context(sts))
    created_pods = [a for a in actions if isinstance(a, Create) and a.obj["kind"] == "Pod"]
    assert len(created_pods) == MAX_SIMULATED_REPLICAS
    assert len(warnings(actions)) == 1


def test_ordinary_replica_counts_are_untouched() -> None:
    rs = workload("ReplicaSet", 3)
    actions = reconcile_replicaset(rs, context(rs))
    assert sum(isinstance(a, Create) for a in actions) == 3
    assert warnings(actions) == []
