"""Job controller decisions: parallelism, deadline, suspend."""

from __future__ import annotations

from typing import Any

from localcluster.simulator.job import reconcile_job
from localcluster.simulator.objects import (
    Context,
    Create,
    Delete,
    ObjectLookup,
    UpdateStatus,
)


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid"},
        "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
            **spec,
        },
    }


def running_pod(name: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "ownerReferences": [{"uid": "job-uid", "controller": True, "kind": "Job", "name": "j"}],
        },
        "status": {"phase": "Running"},
    }


def ctx(now: float, *objs: dict[str, Any]) -> Context:
    view = ObjectLookup()
    for o in objs:
        view.put(o)
    return Context(view=view, now=now, stamp=lambda: "2026-01-01T00:01:40Z", sim_of=lambda _s: 0.0)


def test_parallelism_bounds_the_pods_created() -> None:
    actions = reconcile_job(job(parallelism=3, completions=5), ctx(0.0))
    pods = [a.obj for a in actions if isinstance(a, Create)]
    assert len(pods) == 3
    assert pods[0]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "j"


def test_active_deadline_fails_the_job_and_stops_its_pods() -> None:
    j = job(activeDeadlineSeconds=10)
    j["status"] = {"startTime": "2026-01-01T00:00:00Z", "active": 1}
    actions = reconcile_job(j, ctx(100.0, j, running_pod("j-abc")))
    assert any(isinstance(a, Delete) and a.name == "j-abc" for a in actions)
    status = next(a.obj["status"] for a in actions if isinstance(a, UpdateStatus))
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "DeadlineExceeded")


def test_suspended_job_removes_active_pods() -> None:
    j = job(suspend=True)
    actions = reconcile_job(j, ctx(0.0, j, running_pod("j-xyz")))
    assert any(isinstance(a, Delete) and a.name == "j-xyz" for a in actions)
    status = next(a.obj["status"] for a in actions if isinstance(a, UpdateStatus))
    assert {c["type"]: c["status"] for c in status["conditions"]}["Suspended"] == "True"
    assert not any(isinstance(a, Create) for a in actions)
