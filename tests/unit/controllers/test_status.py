"""NIMCache and NIMService status transitions, conditions and messages."""

from __future__ import annotations

from typing import Any

import pytest

from controllers import nimcache_status as ncs
from controllers import nimservice_status as nss
from nimctl_runtime.meta import find_condition, set_condition

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:01:00Z"


def test_condition_time_moves_only_when_status_changes() -> None:
    c = set_condition([], "Ready", "False", "NotReady", "a", now=T0)
    c2 = set_condition(c, "Ready", "False", "NotReady", "b", now=T1)
    assert c2[0]["lastTransitionTime"] == T0 and c2[0]["message"] == "b"
    c3 = set_condition(c2, "Ready", "True", "Ready", "", now=T1)
    assert c3[0]["lastTransitionTime"] == T1
    assert set_condition(c, "Ready", "False", "NotReady", "a", now=T1) == c


def test_nimcache_happy_path() -> None:
    st: dict[str, Any] = ncs.pvc_created({}, now=T0)
    assert st["state"] == "PVC-Created"
    assert find_condition(st["conditions"], "NIM_CACHE_PVC_CREATED") == {
        "type": "NIM_CACHE_PVC_CREATED",
        "status": "True",
        "lastTransitionTime": T0,
        "reason": "PVCCreated",
        "message": "The PVC has been created for caching NIM model",
    }
    st = ncs.job_created(st, now=T0)
    assert st["state"] == "Started" and st["profiles"] == []
    st = ncs.job_observed(st, ncs.JobCounts(active=1), pvc_name="c-pvc", profiles=[], now=T0)
    assert st["state"] == "InProgress"
    assert find_condition(st["conditions"], "NIM_CACHE_JOB_PENDING")["reason"] == "JobRunning"  # type: ignore[index]
    prof = [{"name": "p", "model": "m", "release": "r", "config": {}}]
    st = ncs.job_observed(st, ncs.JobCounts(succeeded=1), pvc_name="c-pvc", profiles=prof, now=T0)
    assert st["state"] == "Ready" and st["pvc"] == "c-pvc" and st["profiles"] == prof
    cond = find_condition(st["conditions"], "NIM_CACHE_JOB_COMPLETED")
    assert cond is not None and cond["message"] == "The Job to cache NIM has successfully completed"
    # A Ready cache stays Ready (and unchanged) whatever its TTL-deleted Job says.
    assert ncs.job_observed(st, ncs.JobCounts(), pvc_name="c-pvc", profiles=[], now=T1) == st


@pytest.mark.parametrize(
    ("job", "state", "reason"),
    [
        ({"status": {}}, "Pending", "JobPending"),
        ({"status": {"active": 1}}, "InProgress", "JobRunning"),
        ({"status": {"active": 1, "failed": 1}}, "InProgress", "JobRunning"),
        ({"spec": {"backoffLimit": 5}, "status": {"failed": 6}}, "Failed", "JobFailed"),
        (
            {"status": {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]}},
            "Failed",
            "JobFailed",
        ),
        ({"status": {"succeeded": 1}}, "Ready", "JobCompleted"),
    ],
)
def test_nimcache_follows_job(job: dict[str, Any], state: str, reason: str) -> None:
    st = ncs.job_observed(
        {"state": "Started"}, ncs.JobCounts.from_job(job), pvc_name="x", profiles=[], now=T0
    )
    assert st["state"] == state
    assert any(c["reason"] == reason for c in st["conditions"])


def test_nimcache_error_and_recovery() -> None:
    st = ncs.reconcile_failed({"state": "Started"}, "error getting SA for NIMCache", now=T0)
    assert st["state"] == "NotReady"
    c = find_condition(st["conditions"], "NIM_CACHE_RECONCILE_FAILED")
    assert (
        c is not None and c["status"] == "True" and c["message"] == "error getting SA for NIMCache"
    )
    st = ncs.reconciled(st, now=T1)
    c = find_condition(st["conditions"], "NIM_CACHE_RECONCILE_FAILED")
    assert c is not None and c["status"] == "False" and c["reason"] == "Reconciled"
    assert ncs.reconciled({"state": "Ready"}) == {"state": "Ready"}


def test_nimcache_state_event_only_on_change() -> None:
    assert ncs.state_event("c", "Started", "Started") is None
    assert ncs.state_event("c", "Started", "Ready") == (
        "Ready",
        "NIMCache c reconcile success, new state: Ready",
    )


def test_nimservice_conditions() -> None:
    st = nss.set_not_ready({}, "NotReady", "waiting", now=T0)
    assert st["state"] == "NotReady"
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in st["conditions"]] == [
        ("Ready", "False", "NotReady", "waiting"),
        ("Failed", "False", "Ready", "waiting"),
    ]
    st = nss.set_failed(st, "NIMCacheNotFound", "NIMCache c not found", now=T0)
    assert st["state"] == "Failed"
    assert find_condition(st["conditions"], "Failed")["reason"] == "NIMCacheNotFound"  # type: ignore[index]
    st = nss.set_ready(st, "ok", now=T1)
    assert st["state"] == "Ready"
    assert find_condition(st["conditions"], "Ready")["status"] == "True"  # type: ignore[index]
    assert nss.set_ready(st, "ok", now="later") == st


def _deploy(replicas: int | None, **status: Any) -> dict[str, Any]:
    spec = {} if replicas is None else {"replicas": replicas}
    return {"metadata": {"name": "llm"}, "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("deploy", "message", "ready"),
    [
        (None, "", False),
        (_deploy(0), 'deployment "llm" is scaled down', False),
        (
            _deploy(1, conditions=[{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]),
            'deployment "llm" exceeded its progress deadline',
            False,
        ),
        (
            _deploy(2, updatedReplicas=1),
            'Waiting for deployment "llm" rollout to finish: 1 out of 2 new replicas have been '
            "updated...\n",
            False,
        ),
        (
            _deploy(2, updatedReplicas=2, availableReplicas=1),
            'Waiting for deployment "llm" rollout to finish: 1 of 2 updated replicas are '
            "available...\n",
            False,
        ),
        (
            _deploy(1, updatedReplicas=1, availableReplicas=1),
            'deployment "llm" successfully rolled out\n',
            True,
        ),
    ],
)
def test_deployment_readiness(deploy: dict[str, Any] | None, message: str, ready: bool) -> None:
    assert nss.deployment_readiness(deploy) == (message, ready)


def test_endpoints() -> None:
    svc = {"spec": {"clusterIP": "10.0.0.5", "type": "ClusterIP"}}
    assert nss.cluster_endpoint(svc, 8000) == "10.0.0.5:8000"
    assert nss.cluster_endpoint({"spec": {}}, 8000) == ""
    ing = {
        "spec": {
            "rules": [
                {
                    "host": "llm.default.example.com",
                    "http": {"paths": [{"backend": {"service": {"name": "llm"}}}]},
                }
            ]
        }
    }
    assert nss.external_endpoint("llm", svc, ing, 8000, ingress_enabled=True) == (
        "llm.default.example.com"
    )
    lb = {"spec": {"type": "LoadBalancer", "loadBalancerIP": "1.2.3.4"}}
    assert nss.external_endpoint("llm", lb, None, 8000, ingress_enabled=False) == "1.2.3.4:8000"
    assert nss.external_endpoint("llm", svc, None, 8000, ingress_enabled=False) == ""


@pytest.mark.parametrize(
    ("body", "name"),
    [
        ('{"object": "list", "data": [{"id": "meta/llama3"}]}', "meta/llama3"),
        (
            '{"object": "list", "data": [{"id": "lora1", "object": "model", "root": "base"},'
            ' {"id": "base", "object": "model", "root": "base"}]}',
            "base",
        ),
        ('{"object": "list", "data": []}', ""),
    ],
)
def test_model_name(body: str, name: str) -> None:
    assert nss.model_name_from_models(body) == name


def test_model_name_errors_and_metadata() -> None:
    with pytest.raises(nss.ModelListError):
        nss.model_name_from_models('{"object": "model"}')
    with pytest.raises(nss.ModelListError):
        nss.model_name_from_models("<html>")
    assert nss.model_name_from_metadata({"modelInfo": [{"shortName": "llama:1.0"}]}) == "llama"
