"""The NIMCache state machine as pure functions on ``status`` dicts.

``"" -> PVC-Created -> Started -> (Pending <-> InProgress) -> Ready | Failed``,
any reconcile error -> ``NotReady`` with ``NIM_CACHE_RECONCILE_FAILED``. The
states, condition types, reasons and messages are NVIDIA's (nim-operator.md
§1.3, §3.2) so dashboards and scripts written for NVIDIA's operator work.
Each function returns a new status dict and never mutates its input.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.apps.v1alpha1.nimcache import (
    CONDITION_JOB_COMPLETED as COND_JOB_COMPLETED,
)
from api.apps.v1alpha1.nimcache import (
    CONDITION_JOB_CREATED as COND_JOB_CREATED,
)
from api.apps.v1alpha1.nimcache import (
    CONDITION_JOB_PENDING as COND_JOB_PENDING,
)
from api.apps.v1alpha1.nimcache import (
    CONDITION_PVC_CREATED as COND_PVC_CREATED,
)
from api.apps.v1alpha1.nimcache import (
    CONDITION_RECONCILE_FAILED as COND_RECONCILE_FAILED,
)
from api.apps.v1alpha1.nimcache import (
    REASON_JOB_COMPLETED,
    REASON_JOB_CREATED,
    REASON_JOB_FAILED,
    REASON_JOB_PENDING,
    REASON_JOB_RUNNING,
    REASON_PVC_CREATED,
    REASON_RECONCILE_FAILED,
    REASON_RECONCILED,
    STATE_FAILED,
    STATE_IN_PROGRESS,
    STATE_NOT_READY,
    STATE_PENDING,
    STATE_PVC_CREATED,
    STATE_READY,
    STATE_STARTED,
    TYPE_MODEL_FREE,
    TYPE_NATIVE,
)
from nimctl_runtime.meta import find_condition, set_condition

__all__ = [
    "COND_JOB_COMPLETED",
    "COND_JOB_CREATED",
    "COND_JOB_PENDING",
    "COND_PVC_CREATED",
    "COND_RECONCILE_FAILED",
    "STATE_FAILED",
    "STATE_IN_PROGRESS",
    "STATE_NOT_READY",
    "STATE_PENDING",
    "STATE_PVC_CREATED",
    "STATE_READY",
    "STATE_STARTED",
    "TYPE_MODEL_FREE",
    "TYPE_NATIVE",
    "JobCounts",
    "blocked",
    "job_created",
    "job_failed_because",
    "job_observed",
    "pvc_created",
    "reconcile_failed",
    "reconciled",
    "state_event",
]

# NVIDIA's condition messages (nim-operator.md §3.2): what users read in status.
MSG_PVC_CREATED = "The PVC has been created for caching NIM model"
MSG_JOB_CREATED = "The Job to cache NIM has been created"
MSG_JOB_COMPLETED = "The Job to cache NIM has successfully completed"
MSG_JOB_FAILED = "The Job to cache NIM has failed"
MSG_JOB_RUNNING = "The Job to cache NIM is in progress"
MSG_JOB_PENDING = "The Job to cache NIM is in pending state"


@dataclass(frozen=True)
class JobCounts:
    """The parts of a Job's status the state machine reads."""

    active: int = 0
    succeeded: int = 0
    failed: int = 0
    gave_up: bool = False
    """The Job controller stopped retrying (condition ``Failed=True`` or backoffLimit spent)."""

    @classmethod
    def from_job(cls, job: Mapping[str, Any]) -> JobCounts:
        st = job.get("status") or {}
        failed = int(st.get("failed") or 0)
        backoff_limit = int((job.get("spec") or {}).get("backoffLimit", 6))
        gave_up = failed > backoff_limit or any(
            c.get("type") == "Failed" and c.get("status") == "True"
            for c in st.get("conditions") or ()
        )
        return cls(
            active=int(st.get("active") or 0),
            succeeded=int(st.get("succeeded") or 0),
            failed=failed,
            gave_up=gave_up,
        )


def _copy(status: Mapping[str, Any] | None) -> dict[str, Any]:
    return copy.deepcopy(dict(status or {}))


def pvc_created(status: Mapping[str, Any] | None, *, now: str | None = None) -> dict[str, Any]:
    """The operator just created the cache's PVC."""
    out = _copy(status)
    out["conditions"] = set_condition(
        out.get("conditions"),
        COND_PVC_CREATED,
        "True",
        REASON_PVC_CREATED,
        MSG_PVC_CREATED,
        now=now,
    )
    out["state"] = STATE_PVC_CREATED
    return out


def job_created(status: Mapping[str, Any] | None, *, now: str | None = None) -> dict[str, Any]:
    """The caching Job was just created."""
    out = _copy(status)
    out["conditions"] = set_condition(
        out.get("conditions"),
        COND_JOB_CREATED,
        "True",
        REASON_JOB_CREATED,
        MSG_JOB_CREATED,
        now=now,
    )
    out["state"] = STATE_STARTED
    out["profiles"] = []
    return out


def job_observed(
    status: Mapping[str, Any] | None,
    job: JobCounts,
    *,
    pvc_name: str,
    profiles: Sequence[Mapping[str, Any]],
    now: str | None = None,
) -> dict[str, Any]:
    """Follow the caching Job's status (first matching case wins, as upstream).

    Unlike NVIDIA's operator, a pod failure the Job will retry does not flip
    the cache to ``Failed`` and back: ``Failed`` means the Job gave up.
    """
    out = _copy(status)
    state = out.get("state", "")
    conds = out.get("conditions")
    if job.succeeded > 0:
        if state != STATE_READY:
            out["conditions"] = set_condition(
                conds, COND_JOB_COMPLETED, "True", REASON_JOB_COMPLETED, MSG_JOB_COMPLETED, now=now
            )
            out["state"] = STATE_READY
            out["pvc"] = pvc_name
            out["profiles"] = [dict(p) for p in profiles]
    elif job.gave_up:
        if state != STATE_FAILED:
            out["conditions"] = set_condition(
                conds, COND_JOB_COMPLETED, "False", REASON_JOB_FAILED, MSG_JOB_FAILED, now=now
            )
            out["state"] = STATE_FAILED
            out["profiles"] = []
    elif job.active > 0:
        if state != STATE_IN_PROGRESS:
            out["conditions"] = set_condition(
                conds, COND_JOB_PENDING, "False", REASON_JOB_RUNNING, MSG_JOB_RUNNING, now=now
            )
            out["state"] = STATE_IN_PROGRESS
    elif state not in (STATE_READY, STATE_PENDING):
        out["conditions"] = set_condition(
            conds, COND_JOB_PENDING, "True", REASON_JOB_PENDING, MSG_JOB_PENDING, now=now
        )
        out["state"] = STATE_PENDING
    return out


def blocked(
    status: Mapping[str, Any] | None, reason: str, message: str, *, now: str | None = None
) -> dict[str, Any]:
    """Caching waits on something outside it (a missing Secret, an image that cannot be
    pulled, no GPU): state ``Pending``, ``NIM_CACHE_JOB_PENDING=True`` naming the blocker.

    Pending is not Failed: once the cause is fixed the Job's pod starts and the
    next pass moves on to ``InProgress``.
    """
    out = _copy(status)
    out["conditions"] = set_condition(
        out.get("conditions"), COND_JOB_PENDING, "True", reason, message, now=now
    )
    out["state"] = STATE_PENDING
    return out


def job_failed_because(
    status: Mapping[str, Any] | None, message: str, *, now: str | None = None
) -> dict[str, Any]:
    """The Job gave up: NVIDIA's ``JobFailed`` condition, its message naming the pod's exit."""
    out = _copy(status)
    out["conditions"] = set_condition(
        out.get("conditions"),
        COND_JOB_COMPLETED,
        "False",
        REASON_JOB_FAILED,
        f"{MSG_JOB_FAILED}: {message}",
        now=now,
    )
    out["state"] = STATE_FAILED
    out["profiles"] = []
    return out


def reconcile_failed(
    status: Mapping[str, Any] | None, message: str, *, now: str | None = None
) -> dict[str, Any]:
    """Any reconcile error: NotReady with the error text."""
    out = _copy(status)
    out["conditions"] = set_condition(
        out.get("conditions"),
        COND_RECONCILE_FAILED,
        "True",
        REASON_RECONCILE_FAILED,
        message,
        now=now,
    )
    out["state"] = STATE_NOT_READY
    return out


def reconciled(status: Mapping[str, Any] | None, *, now: str | None = None) -> dict[str, Any]:
    """A clean pass: clear ``NIM_CACHE_RECONCILE_FAILED`` if it was ever set."""
    out = _copy(status)
    if find_condition(out.get("conditions"), COND_RECONCILE_FAILED) is not None:
        out["conditions"] = set_condition(
            out.get("conditions"), COND_RECONCILE_FAILED, "False", REASON_RECONCILED, "", now=now
        )
    return out


def state_event(name: str, old_state: str, new_state: str) -> tuple[str, str] | None:
    """(reason, message) of the Normal Event for a state change, or None."""
    if not new_state or new_state == old_state:
        return None
    return new_state, f"NIMCache {name} reconcile success, new state: {new_state}"
