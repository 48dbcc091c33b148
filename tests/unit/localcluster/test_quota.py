"""The ResourceQuota admission plugin: what a pod counts, and Kubernetes' refusal words."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from localcluster.quota import pod_usage, quota_refusal, quota_status


def _pod(name: str, *, gpus: int = 0, cpu: str = "", phase: str = "Pending") -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": gpus}
    if cpu:
        resources.setdefault("requests", {})["cpu"] = cpu
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "nim", "resources": resources}]},
        "status": {"phase": phase},
    }


def _quota(name: str, **hard: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"hard": dict(hard)}}


def test_a_pod_counts_gpus_as_requests_only_and_cpu_both_ways() -> None:
    usage = pod_usage(_pod("a", gpus=2, cpu="500m"))
    assert usage["requests.nvidia.com/gpu"] == 2 and "nvidia.com/gpu" not in usage
    assert usage["cpu"] == usage["requests.cpu"] == Fraction(1, 2)
    assert usage["pods"] == usage["count/pods"] == 1
    # a finished pod counts only as an object
    assert pod_usage(_pod("b", gpus=2, phase="Succeeded")) == {"count/pods": 1}


def test_exceeded_quota_is_refused_in_kubernetes_words() -> None:
    running = [_pod("old", gpus=1, phase="Running"), _pod("done", gpus=4, phase="Failed")]
    quota = _quota("gpu", **{"requests.nvidia.com/gpu": "2", "pods": "10"})
    assert quota_refusal(_pod("new", gpus=1), [quota], running) == ""
    assert quota_refusal(_pod("new", gpus=2), [quota], running) == (
        "exceeded quota: gpu, requested: requests.nvidia.com/gpu=2, "
        "used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=2"
    )


def test_a_quota_on_cpu_makes_every_container_state_it() -> None:
    quota = _quota("compute", **{"limits.cpu": "4", "requests.memory": "8Gi"})
    assert quota_refusal(_pod("new", gpus=1), [quota], []) == (
        "failed quota: compute: must specify limits.cpu for: nim; requests.memory for: nim"
    )


def test_scopes_select_the_pods_a_quota_counts() -> None:
    best_effort = {"metadata": {"name": "be"}, "spec": {"hard": {"pods": "0"},
                                                         "scopes": ["BestEffort"]}}  # fmt: skip
    assert quota_refusal(_pod("gpu", cpu="1"), [best_effort], []) == ""
    assert quota_refusal(_pod("plain"), [best_effort], []).startswith("exceeded quota: be")


def test_the_quota_controller_reports_hard_and_used() -> None:
    quota = _quota("gpu", **{"requests.nvidia.com/gpu": "4", "requests.memory": "64Gi"})
    pods = [
        _pod("a", gpus=1, phase="Running"),
        _pod("b", gpus=2),
        _pod("c", gpus=8, phase="Failed"),
    ]
    pods[0]["spec"]["containers"][0]["resources"]["requests"] = {"memory": "16Gi"}
    assert quota_status(quota, pods) == {
        "hard": {"requests.nvidia.com/gpu": "4", "requests.memory": "64Gi"},
        "used": {"requests.nvidia.com/gpu": "3", "requests.memory": "16Gi"},
    }
