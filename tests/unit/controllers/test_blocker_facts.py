"""What the blocker watches pass on and what the Event cache keeps."""

from __future__ import annotations

from typing import Any

from controllers.blocker_facts import pod_blocker_changed, trim_event
from controllers.nimcache import nimcache_of_pod
from controllers.nimservice import nimservice_of_pod
from nimctl_runtime.handler import UpdateEvent


def _pod(waiting: str | None, *, ready: bool = False, restarts: int = 0) -> dict[str, Any]:
    state: dict[str, Any] = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    if waiting == "CreateContainerConfigError":
        state["waiting"]["message"] = 'secret "s" not found'
    return {
        "metadata": {"name": "llm-1", "uid": "u1"},
        "status": {
            "phase": "Pending" if waiting else "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "nim", "restartCount": restarts, "state": state}],
        },
    }


def test_a_pod_update_passes_only_when_its_blocker_or_readiness_changed() -> None:
    pred = pod_blocker_changed()
    blocked = _pod("CreateContainerConfigError")
    assert pred.update(UpdateEvent(_pod("ContainerCreating"), blocked))
    assert not pred.update(UpdateEvent(blocked, blocked)), "a resync is not a change"
    running, ready = _pod(None), _pod(None, ready=True)
    assert pred.update(UpdateEvent(blocked, running)), "the blocker went away"
    assert pred.update(UpdateEvent(running, ready))
    assert not pred.update(UpdateEvent(ready, _pod(None, ready=True, restarts=0)))


def test_the_event_cache_keeps_what_the_finder_reads_only() -> None:
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1", "namespace": "nim", "managedFields": [{}], "uid": "e"},
        "involvedObject": {"kind": "Pod", "name": "llm-1", "uid": "u1", "fieldPath": "x"},
        "reason": "FailedMount",
        "message": 'configmap "ca" not found',
        "type": "Warning",
        "source": {"component": "kubelet", "host": "gpu-1"},
        "lastTimestamp": "2026-11-28T00:00:00Z",
        "count": 3,
    }
    out = trim_event(event)
    assert out["involvedObject"] == {"kind": "Pod", "name": "llm-1", "uid": "u1"}
    assert "source" not in out and "managedFields" not in out["metadata"]
    assert (out["reason"], out["message"], out["count"]) == (
        "FailedMount",
        'configmap "ca" not found',
        3,
    )


def test_pods_map_to_their_owner_by_labels() -> None:
    nim_pod = {
        "metadata": {
            "labels": {
                "app.kubernetes.io/part-of": "nim-service",
                "app.kubernetes.io/instance": "llm",
            }
        }
    }
    cache_pod = {
        "metadata": {"labels": {"app": "k8s-nim-operator", "app.kubernetes.io/name": "llm-cache"}}
    }
    assert nimservice_of_pod(nim_pod) == "llm"
    assert nimservice_of_pod(cache_pod) is None
    assert nimcache_of_pod(cache_pod) == "llm-cache"
    assert nimcache_of_pod(nim_pod) is None
