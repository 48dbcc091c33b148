"""The Job and TTL-after-finished controllers as pure logic.

A Job runs ``parallelism`` pods at a time until ``completions`` succeeded (the
``Complete`` condition) or more than ``backoffLimit`` failed (``Failed`` with
reason ``BackoffLimitExceeded``), or it outlives ``activeDeadlineSeconds``
(``DeadlineExceeded``). Pods carry ``batch.kubernetes.io/job-name`` and
``batch.kubernetes.io/controller-uid`` (plus the legacy ``job-name`` and
``controller-uid``). A finished Job with ``ttlSecondsAfterFinished`` is deleted
(foreground) that many seconds after it finished. ``suspend: true`` removes
active pods and sets the ``Suspended`` condition.
"""

from __future__ import annotations

import copy

from localcluster.simulator.kubelet import is_pod_ready
from localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    Delete,
    Emit,
    Requeue,
    Update,
    UpdateStatus,
    get_condition,
    is_deleting,
    name_of,
    namespace_of,
    pod_from_template,
    set_condition,
    status_changed,
    uid_of,
    with_status,
)
from nimctl_runtime.meta import Obj


def job_pod_labels(job: Obj) -> dict[str, str]:
    uid = uid_of(job)
    return {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name_of(job),
        "controller-uid": uid,
        "job-name": name_of(job),
    }


def with_generated_selector(job: Obj) -> Obj:
    """The Job with the selector and pod-template labels the API server generates."""
    out = copy.deepcopy(job)
    labels = job_pod_labels(job)
    out["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid_of(job)}}
    meta = out["spec"].setdefault("template", {}).setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    return out


def _finished(job: Obj) -> Obj | None:
    for type_ in ("Complete", "Failed"):
        cond = get_condition(job, type_)
        if cond is not None and cond.get("status") == "True":
            return cond
    return None


def reconcile_job(job: Obj, ctx: Context) -> list[Action]:
    """Run pods to completion or failure; report counts and conditions; apply the TTL."""
    actions: list[Action] = []
    spec = job.get("spec") or {}
    namespace = namespace_of(job)
    if not spec.get("selector") and not spec.get("manualSelector"):
        # kube-apiserver generates these on create; localcluster's storage does not, so
        # the Job controller fills them in before anything else (as the API would have).
        return [Update(with_generated_selector(job))]
    previous = dict(job.get("status") or {})
    stamp = ctx.stamp()
    done = _finished(job)
    pods = ctx.view.owned(job, "Pod")
    live = [p for p in pods if not is_deleting(p)]
    active = [
        p for p in live if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]

    if done is not None:
        for pod in active:
            actions.append(Delete("v1", "Pod", namespace, name_of(pod)))
        ttl = spec.get("ttlSecondsAfterFinished")
        if ttl is not None:
            finished_at = previous.get("completionTime") or done.get("lastTransitionTime")
            remaining = (
                float(ttl) - (ctx.now - ctx.sim_of(str(finished_at))) if finished_at else 0.0
            )
            if remaining <= 0:
                actions.append(
                    Delete(
                        "batch/v1", "Job", namespace, name_of(job), propagation_policy="Foreground"
                    )
                )
            else:
                actions.append(Requeue(remaining))
        return actions

    succeeded_now = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
    failed_now = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
    succeeded = max(int(previous.get("succeeded") or 0), succeeded_now)
    failed = max(int(previous.get("failed") or 0), failed_now)
    completions = spec.get("completions")
    parallelism = int(spec.get("parallelism", 1))
    backoff_limit = int(spec.get("backoffLimit", 6))
    conditions = list(previous.get("conditions") or [])
    status: Obj = dict(previous)
    status.setdefault("startTime", stamp)

    failure: tuple[str, str] | None = None
    if failed > backoff_limit:
        failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    deadline = spec.get("activeDeadlineSeconds")
    if failure is None and deadline is not None:
        elapsed = ctx.now - ctx.sim_of(str(status["startTime"]))
        if elapsed >= float(deadline):
            failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
        else:
            actions.append(Requeue(float(deadline) - elapsed))
    complete = (completions is None and succeeded > 0 and not active) or (
        completions is not None and succeeded >= int(completions)
    )

    if spec.get("suspend"):
        for pod in active:
            actions.append(Delete("v1", "Pod", namespace, name_of(pod)))
        conditions = set_condition(
            conditions,
            "Suspended",
            "True",
            reason="JobSuspended",
            message="Job suspended",
            stamp=stamp,
        )
        active = []
    elif failure is not None:
        for pod in active:
            actions.append(Delete("v1", "Pod", namespace, name_of(pod)))
        conditions = set_condition(
            conditions, "FailureTarget", "True", reason=failure[0], message=failure[1], stamp=stamp
        )
        conditions = set_condition(
            conditions, "Failed", "True", reason=failure[0], message=failure[1], stamp=stamp
        )
        actions.append(Emit(job, "Warning", failure[0], failure[1]))
        active = []
    elif complete:
        conditions = set_condition(
            conditions,
            "SuccessCriteriaMet",
            "True",
            reason="CompletionsReached",
            message="Reached expected number of succeeded pods",
            stamp=stamp,
        )
        conditions = set_condition(
            conditions,
            "Complete",
            "True",
            reason="CompletionsReached",
            message="Reached expected number of succeeded pods",
            stamp=stamp,
        )
        status["completionTime"] = stamp
        actions.append(Emit(job, "Normal", "Completed", "Job completed"))
    else:
        if get_condition(job, "Suspended") is not None:
            conditions = set_condition(
                conditions,
                "Suspended",
                "False",
                reason="JobResumed",
                message="Job resumed",
                stamp=stamp,
            )
        remaining = parallelism
        if completions is not None:
            remaining = min(parallelism, int(completions) - succeeded)
        elif succeeded > 0:
            remaining = 0
        missing = remaining - len(active)
        for _ in range(max(missing, 0)):
            actions.append(
                Create(
                    pod_from_template(
                        spec.get("template") or {},
                        job,
                        generate_name=f"{name_of(job)}-",
                        extra_labels=job_pod_labels(job),
                    )
                )
            )
        if missing > 0:
            actions.append(Emit(job, "Normal", "SuccessfulCreate", f"Created {missing} pod(s)"))
    status["active"] = len(active)
    status["ready"] = sum(1 for p in active if is_pod_ready(p))
    status["succeeded"] = succeeded
    status["failed"] = failed
    status["terminating"] = sum(1 for p in pods if is_deleting(p))
    status["uncountedTerminatedPods"] = {}
    for key in ("active", "succeeded", "failed"):
        if not status[key]:
            del status[key]
    if conditions:
        status["conditions"] = conditions
    if status_changed(job, status):
        actions.append(UpdateStatus(with_status(job, status)))
    if (failure is not None or complete) and spec.get("ttlSecondsAfterFinished") is not None:
        actions.append(Requeue(float(spec["ttlSecondsAfterFinished"])))
    return actions
