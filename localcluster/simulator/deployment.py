"""The ReplicaSet and Deployment controllers (kube-controller-manager), as pure logic.

A ReplicaSet keeps ``spec.replicas`` pods from its template. A Deployment
owns one ReplicaSet per pod template (named ``<deployment>-<pod-template-hash>``)
and moves pods from old to new ones honouring ``maxSurge``/``maxUnavailable``
(RollingUpdate) or all at once (Recreate); its status and the ``Available`` and
``Progressing`` conditions carry Kubernetes' reasons and messages, including
``ProgressDeadlineExceeded`` after ``progressDeadlineSeconds``.
"""

from __future__ import annotations

from localcluster.simulator.kubelet import is_pod_ready, ready_since
from localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    Delete,
    Emit,
    Requeue,
    Update,
    UpdateStatus,
    annotations_of,
    generation_of,
    get_condition,
    int_or_percent,
    json_copy,
    name_of,
    namespace_of,
    owner_reference,
    owner_template_hash,
    pod_from_template,
    pods_active,
    set_condition,
    status_changed,
    with_status,
)
from nimctl_runtime.meta import Obj

REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
HASH_LABEL = "pod-template-hash"
# The simulator never runs more pods than this for one ReplicaSet or StatefulSet:
# an absurd spec.replicas (2^64 got through once) is capped, with a Warning Event,
# instead of growing the process without bound.
MAX_SIMULATED_REPLICAS = 5000


def capped_replicas(obj: Obj, replicas: int, running: int) -> tuple[int, list[Action]]:
    """*replicas* bounded by :data:`MAX_SIMULATED_REPLICAS`, and the Event saying so
    (while *running*, the pods there are, is still short of the cap)."""
    if replicas <= MAX_SIMULATED_REPLICAS:
        return replicas, []
    if running >= MAX_SIMULATED_REPLICAS:
        return MAX_SIMULATED_REPLICAS, []
    message = (
        f"spec.replicas {replicas} is more than the simulator runs; "
        f"running {MAX_SIMULATED_REPLICAS} pods"
    )
    return MAX_SIMULATED_REPLICAS, [Emit(obj, "Warning", "ReplicasCapped", message)]


def available(pod: Obj, min_ready_seconds: int, ctx: Context) -> bool:
    """Ready for at least minReadySeconds."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = ready_since(pod)
    return since is not None and ctx.now - ctx.sim_of(since) >= min_ready_seconds


def _delete_rank(pod: Obj) -> tuple[int, int, int]:
    """Pods deleted first when scaling down: unscheduled, pending, not ready (like ActivePods)."""
    status = pod.get("status") or {}
    scheduled = 1 if (pod.get("spec") or {}).get("nodeName") else 0
    phase = {"Pending": 0, "Unknown": 1, "Running": 2}.get(str(status.get("phase")), 0)
    return (scheduled, phase, 1 if is_pod_ready(pod) else 0)


def reconcile_replicaset(rs: Obj, ctx: Context) -> list[Action]:
    """Create or delete pods towards ``spec.replicas``; report status."""
    spec = rs.get("spec") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    pods = ctx.view.owned(rs, "Pod")
    active = pods_active(pods)
    replicas, actions = capped_replicas(rs, int(spec.get("replicas", 1)), len(active))
    diff = replicas - len(active)
    if diff > 0:
        for _ in range(min(diff, 500)):
            actions.append(
                Create(
                    pod_from_template(
                        spec.get("template") or {}, rs, generate_name=f"{name_of(rs)}-"
                    )
                )
            )
        actions.append(Emit(rs, "Normal", "SuccessfulCreate", f"Created {diff} pod(s)"))
    elif diff < 0:
        victims = sorted(active, key=_delete_rank)[:-diff]
        for pod in victims:
            actions.append(Delete("v1", "Pod", namespace_of(pod), name_of(pod)))
        actions.append(Emit(rs, "Normal", "SuccessfulDelete", f"Deleted {len(victims)} pod(s)"))
    ready = [p for p in active if is_pod_ready(p)]
    avail = [p for p in ready if available(p, min_ready, ctx)]
    if len(ready) != len(avail):
        actions.append(Requeue(float(min_ready)))
    status: Obj = {
        "replicas": len(active),
        "fullyLabeledReplicas": len(active),
        "readyReplicas": len(ready),
        "availableReplicas": len(avail),
        "observedGeneration": generation_of(rs),
    }
    for key in ("readyReplicas", "availableReplicas", "fullyLabeledReplicas"):
        if not status[key]:
            del status[key]
    conditions = _replica_failure(rs, ctx, short=diff > 0)
    if conditions:
        status["conditions"] = conditions
    if status_changed(rs, status):
        actions.append(UpdateStatus(with_status(rs, status)))
    return actions


def _replica_failure(rs: Obj, ctx: Context, *, short: bool) -> list[Obj]:
    """The ReplicaSet's conditions with ``ReplicaFailure`` as Kubernetes keeps it: set
    (reason ``FailedCreate``, the API's error) while pods it lacks cannot be created
    (a ResourceQuota, an admission webhook), removed once a create succeeds."""
    conditions = list((rs.get("status") or {}).get("conditions") or [])
    failures: dict[str, str] = ctx.options.get("create_failures") or {}
    error = failures.get(str((rs.get("metadata") or {}).get("uid", ""))) if short else None
    if error:
        if get_condition(rs, "ReplicaFailure") is None:
            conditions = set_condition(
                conditions,
                "ReplicaFailure",
                "True",
                reason="FailedCreate",
                message=error,
                stamp=ctx.stamp(),
            )
        return conditions
    return [c for c in conditions if c.get("type") != "ReplicaFailure"]


def _replica_failures(new_rs: Obj | None, old_rs: list[Obj]) -> Obj | None:
    """The Deployment's ``ReplicaFailure``: the new ReplicaSet's, else an old one's."""
    for rs in ([new_rs] if new_rs is not None else []) + old_rs:
        found = get_condition(rs, "ReplicaFailure")
        if found is not None:
            return found
    return None


def _rs_replicas(rs: Obj) -> int:
    return int((rs.get("spec") or {}).get("replicas", 0))


def _rs_status(rs: Obj, key: str) -> int:
    return int((rs.get("status") or {}).get(key) or 0)


def _revision(rs: Obj) -> int:
    try:
        return int(annotations_of(rs).get(REVISION, "0"))
    except ValueError:
        return 0


def _new_rs_object(d: Obj, pod_hash: str, replicas: int, revision: int, max_surge: int) -> Obj:
    spec = d.get("spec") or {}
    template = json_copy(spec.get("template") or {})
    template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = pod_hash
    selector = json_copy(spec.get("selector") or {})
    selector.setdefault("matchLabels", {})[HASH_LABEL] = pod_hash
    desired = int(spec.get("replicas", 1))
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{name_of(d)}-{pod_hash}",
            "namespace": namespace_of(d),
            "labels": dict(template["metadata"]["labels"]),
            "annotations": {
                REVISION: str(revision),
                DESIRED_REPLICAS: str(desired),
                MAX_REPLICAS: str(desired + max_surge),
            },
            "ownerReferences": [owner_reference(d)],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": int(spec.get("minReadySeconds") or 0),
            "selector": selector,
            "template": template,
        },
    }


def _scaled(rs: Obj, replicas: int) -> Obj:
    out: Obj = json_copy(rs)
    out["spec"]["replicas"] = replicas
    return out


def reconcile_deployment(d: Obj, ctx: Context) -> list[Action]:
    """Roll ReplicaSets towards the current template; report status and conditions."""
    actions: list[Action] = []
    spec = d.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    strategy = spec.get("strategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    recreate = strategy.get("type") == "Recreate"
    max_surge = (
        0 if recreate else int_or_percent(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    )
    max_unavailable = (
        0
        if recreate
        else int_or_percent(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    )
    if not recreate and max_surge == 0 and max_unavailable == 0:
        max_unavailable = 1
    collision = int((d.get("status") or {}).get("collisionCount") or 0)
    pod_hash = owner_template_hash(d, collision)
    all_rs = [rs for rs in ctx.view.owned(d, "ReplicaSet")]
    new_rs = next(
        (
            rs
            for rs in all_rs
            if (rs.get("metadata") or {}).get("labels", {}).get(HASH_LABEL) == pod_hash
        ),
        None,
    )
    old_rs = sorted((rs for rs in all_rs if rs is not new_rs), key=_revision)
    paused = bool(spec.get("paused"))
    max_revision = max([_revision(rs) for rs in all_rs] or [0])

    if new_rs is None and not paused:
        old_total = sum(_rs_replicas(rs) for rs in old_rs)
        initial = replicas if recreate and not old_total else 0
        if not recreate:
            initial = max(0, min(replicas, replicas + max_surge - old_total))
        if recreate and old_total:
            initial = 0
        new_obj = _new_rs_object(d, pod_hash, initial, max_revision + 1, max_surge)
        actions.append(Create(new_obj))
        actions.append(
            Emit(
                d,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled up replica set {name_of(new_obj)} from 0 to {initial}",
            )
        )
        if annotations_of(d).get(REVISION) != str(max_revision + 1):
            updated = json_copy(d)
            updated["metadata"].setdefault("annotations", {})[REVISION] = str(max_revision + 1)
            actions.append(Update(updated))
        conditions = set_condition(
            list((d.get("status") or {}).get("conditions") or []),
            "Progressing",
            "True",
            reason="NewReplicaSetCreated",
            message=f'Created new replica set "{name_of(new_obj)}"',
            stamp=ctx.stamp(),
            with_update_time=True,
        )
        status = dict(d.get("status") or {})
        status["conditions"] = conditions
        status["observedGeneration"] = generation_of(d)
        actions.append(UpdateStatus(with_status(d, status)))
        return actions

    if new_rs is not None and not paused:
        if _revision(new_rs) < max_revision or annotations_of(d).get(REVISION) != str(
            _revision(new_rs)
        ):
            if _revision(new_rs) < max_revision:
                bumped = json_copy(new_rs)
                bumped["metadata"].setdefault("annotations", {})[REVISION] = str(max_revision + 1)
                actions.append(Update(bumped))
                new_rs = bumped
            updated = json_copy(d)
            updated["metadata"].setdefault("annotations", {})[REVISION] = str(_revision(new_rs))
            actions.append(Update(updated))
        actions.extend(
            _rollout(
                d,
                new_rs=new_rs,
                old_rs=old_rs,
                replicas=replicas,
                max_surge=max_surge,
                max_unavailable=max_unavailable,
                recreate=recreate,
            )
        )

    # Old ReplicaSets beyond revisionHistoryLimit that are scaled to zero are removed.
    limit = int(spec.get("revisionHistoryLimit", 10))
    empty_old = [rs for rs in old_rs if _rs_replicas(rs) == 0 and _rs_status(rs, "replicas") == 0]
    for rs in empty_old[: max(0, len(empty_old) - limit)]:
        actions.append(Delete("apps/v1", "ReplicaSet", namespace_of(rs), name_of(rs)))

    actions.extend(
        _deployment_status(
            d, ctx, new_rs=new_rs, old_rs=old_rs, replicas=replicas, max_unavailable=max_unavailable
        )
    )
    return actions


def _rollout(
    d: Obj,
    *,
    new_rs: Obj,
    old_rs: list[Obj],
    replicas: int,
    max_surge: int,
    max_unavailable: int,
    recreate: bool,
) -> list[Action]:
    actions: list[Action] = []
    new_replicas = _rs_replicas(new_rs)
    old_pods = sum(_rs_status(rs, "replicas") for rs in old_rs)
    if recreate:
        for rs in old_rs:
            if _rs_replicas(rs):
                actions.append(Update(_scaled(rs, 0)))
                actions.append(
                    Emit(
                        d,
                        "Normal",
                        "ScalingReplicaSet",
                        f"Scaled down replica set {name_of(rs)} from {_rs_replicas(rs)} to 0",
                    )
                )
        if not old_pods and not any(_rs_replicas(rs) for rs in old_rs) and new_replicas != replicas:
            actions.append(Update(_scaled(new_rs, replicas)))
            actions.append(
                Emit(
                    d,
                    "Normal",
                    "ScalingReplicaSet",
                    f"Scaled up replica set {name_of(new_rs)} from {new_replicas} to {replicas}",
                )
            )
        return actions
    # Scale the new ReplicaSet up within maxSurge (or straight down when the Deployment shrank).
    total = new_replicas + sum(_rs_replicas(rs) for rs in old_rs)
    target = new_replicas
    if new_replicas > replicas:
        target = replicas
    elif new_replicas < replicas:
        allowed = replicas + max_surge
        if total < allowed:
            target = min(replicas, new_replicas + (allowed - total))
    if target != new_replicas:
        actions.append(Update(_scaled(new_rs, target)))
        verb = "up" if target > new_replicas else "down"
        actions.append(
            Emit(
                d,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled {verb} replica set {name_of(new_rs)} from {new_replicas} to {target}",
            )
        )
        total += target - new_replicas
    # Scale old ReplicaSets down as far as availability allows.
    min_available = replicas - max_unavailable
    new_unavailable = target - _rs_status(new_rs, "availableReplicas")
    budget = max(total - min_available - max(new_unavailable, 0), 0)
    # Unavailable old pods can always go: they do not count towards availability.
    for rs in old_rs:
        have = _rs_replicas(rs)
        if not have:
            continue
        unhealthy = max(0, have - _rs_status(rs, "availableReplicas"))
        cut = min(have, unhealthy + budget)
        if cut <= 0:
            continue
        budget -= max(0, cut - unhealthy)
        actions.append(Update(_scaled(rs, have - cut)))
        actions.append(
            Emit(
                d,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled down replica set {name_of(rs)} from {have} to {have - cut}",
            )
        )
    return actions


def _deployment_status(
    d: Obj,
    ctx: Context,
    *,
    new_rs: Obj | None,
    old_rs: list[Obj],
    replicas: int,
    max_unavailable: int,
) -> list[Action]:
    all_rs = ([new_rs] if new_rs is not None else []) + old_rs
    total = sum(_rs_status(rs, "replicas") for rs in all_rs)
    ready = sum(_rs_status(rs, "readyReplicas") for rs in all_rs)
    avail = sum(_rs_status(rs, "availableReplicas") for rs in all_rs)
    updated = _rs_status(new_rs, "replicas") if new_rs is not None else 0
    status: Obj = dict(json_copy(d.get("status") or {}))
    status.update(
        observedGeneration=generation_of(d),
        replicas=total,
        updatedReplicas=updated,
        readyReplicas=ready,
        availableReplicas=avail,
        unavailableReplicas=max(replicas - avail, 0),
    )
    for key in (
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
    ):
        if not status[key]:
            del status[key]
    stamp = ctx.stamp()
    conditions = list(status.get("conditions") or [])
    if avail >= replicas - max_unavailable:
        conditions = set_condition(
            conditions,
            "Available",
            "True",
            reason="MinimumReplicasAvailable",
            message="Deployment has minimum availability.",
            stamp=stamp,
            with_update_time=True,
        )
    else:
        conditions = set_condition(
            conditions,
            "Available",
            "False",
            reason="MinimumReplicasUnavailable",
            message="Deployment does not have minimum availability.",
            stamp=stamp,
            with_update_time=True,
        )
    actions: list[Action] = []
    spec = d.get("spec") or {}
    if new_rs is not None and not spec.get("paused"):
        rs_name = name_of(new_rs)
        old_pods = sum(_rs_status(rs, "replicas") for rs in old_rs)
        complete = (
            updated == replicas
            and _rs_status(new_rs, "availableReplicas") == replicas
            and old_pods == 0
        )
        progressing = get_condition({"status": {"conditions": conditions}}, "Progressing")
        deadline = spec.get("progressDeadlineSeconds", 600)
        if complete:
            conditions = set_condition(
                conditions,
                "Progressing",
                "True",
                reason="NewReplicaSetAvailable",
                message=f'ReplicaSet "{rs_name}" has successfully progressed.',
                stamp=stamp,
                with_update_time=True,
            )
        elif progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
            pass
        else:
            previous = d.get("status") or {}
            moved = (
                previous.get("updatedReplicas", 0) != updated
                or previous.get("availableReplicas", 0) != avail
                or previous.get("readyReplicas", 0) != ready
                or progressing is None
                or progressing.get("reason") == "NewReplicaSetAvailable"
            )
            last = progressing.get("lastUpdateTime") if progressing else None
            if moved or last is None:
                conditions = set_condition(
                    conditions,
                    "Progressing",
                    "True",
                    reason="ReplicaSetUpdated",
                    message=f'ReplicaSet "{rs_name}" is progressing.',
                    stamp=stamp,
                    with_update_time=True,
                )
                for cond in conditions:
                    if cond.get("type") == "Progressing":
                        cond["lastUpdateTime"] = stamp
                if deadline is not None:
                    actions.append(Requeue(float(deadline) + 1.0))
            elif deadline is not None:
                elapsed = ctx.now - ctx.sim_of(str(last))
                if elapsed > float(deadline):
                    conditions = set_condition(
                        conditions,
                        "Progressing",
                        "False",
                        reason="ProgressDeadlineExceeded",
                        message=f'ReplicaSet "{rs_name}" has timed out progressing.',
                        stamp=stamp,
                        with_update_time=True,
                    )
                else:
                    actions.append(Requeue(float(deadline) - elapsed + 1.0))
    failure = _replica_failures(new_rs, old_rs)
    if failure is not None:
        conditions = set_condition(
            conditions,
            "ReplicaFailure",
            str(failure.get("status", "True")),
            reason=str(failure.get("reason", "")),
            message=str(failure.get("message", "")),
            stamp=str(failure.get("lastTransitionTime") or stamp),
            with_update_time=True,
        )
    else:
        conditions = [c for c in conditions if c.get("type") != "ReplicaFailure"]
    status["conditions"] = conditions
    if status_changed(d, status):
        actions.append(UpdateStatus(with_status(d, status)))
    return actions
