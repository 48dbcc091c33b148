"""The LeaderWorkerSet controller (``leaderworkerset.x-k8s.io/v1``) as pure logic.

Used only when the LeaderWorkerSet CRD is installed. Like the upstream
controller it runs one leader StatefulSet ``<lws>`` with ``replicas`` pods and,
per leader, a worker StatefulSet ``<lws>-<i>`` with ``size-1`` pods
(ordinals from 1). A group is ready when its leader and all its workers are;
``Available`` turns True with reason ``AllGroupsReady`` once every group is.
"""

from __future__ import annotations

import copy

from localcluster.simulator.kubelet import is_pod_ready
from localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    Update,
    UpdateStatus,
    generation_of,
    name_of,
    namespace_of,
    owner_reference,
    set_condition,
    status_changed,
    with_status,
)
from nimctl_runtime.meta import Obj

NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"


def _statefulset(
    lws: Obj, name: str, replicas: int, template: Obj, labels: dict[str, str], *, start: int
) -> Obj:
    template = copy.deepcopy(template)
    meta = template.setdefault("metadata", {})
    # The controller copies a typed template: the StatefulSet's always reads back
    # ``creationTimestamp: null``, whether the LeaderWorkerSet's JSON had it or not
    # (Go clients write it, others do not), so that difference never rolls pods.
    meta["creationTimestamp"] = None
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    size = int(((lws.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size", 1))
    meta["annotations"] = {**(meta.get("annotations") or {}), SIZE_ANNOTATION: str(size)}
    spec: Obj = {
        "replicas": replicas,
        "selector": {"matchLabels": dict(labels)},
        "serviceName": name_of(lws),
        "podManagementPolicy": "Parallel",
        "template": template,
    }
    if start:
        spec["ordinals"] = {"start": start}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": namespace_of(lws),
            "labels": dict(labels),
            "ownerReferences": [owner_reference(lws)],
        },
        "spec": spec,
    }


def _desired_differs(current: Obj, desired: Obj) -> bool:
    cur, want = current.get("spec") or {}, desired["spec"]
    return bool(cur.get("replicas") != want["replicas"] or cur.get("template") != want["template"])


def reconcile_leaderworkerset(lws: Obj, ctx: Context) -> list[Action]:
    """Keep the leader and worker StatefulSets in shape; report group readiness."""
    actions: list[Action] = []
    spec = lws.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    lwt = spec.get("leaderWorkerTemplate") or {}
    size = int(lwt.get("size", 1))
    worker_template = lwt.get("workerTemplate") or {}
    leader_template = lwt.get("leaderTemplate") or worker_template
    name = name_of(lws)
    namespace = namespace_of(lws)
    owned = {name_of(s): s for s in ctx.view.owned(lws, "StatefulSet")}

    leader_labels = {NAME_LABEL: name, WORKER_INDEX_LABEL: "0"}
    desired_leader = _statefulset(lws, name, replicas, leader_template, leader_labels, start=0)
    leader = owned.get(name)
    if leader is None:
        actions.append(Create(desired_leader))
    elif _desired_differs(leader, desired_leader):
        updated = copy.deepcopy(leader)
        updated["spec"]["replicas"] = replicas
        updated["spec"]["template"] = desired_leader["spec"]["template"]
        actions.append(Update(updated))

    ready_groups = 0
    groups = 0
    for index in range(replicas):
        leader_pod = ctx.view.get("Pod", namespace, f"{name}-{index}")
        if leader_pod is None:
            continue
        groups += 1
        group_ready = is_pod_ready(leader_pod)
        if size > 1:
            worker_name = f"{name}-{index}"
            labels = {NAME_LABEL: name, GROUP_INDEX_LABEL: str(index)}
            desired = _statefulset(lws, worker_name, size - 1, worker_template, labels, start=1)
            worker = owned.get(worker_name)
            if worker is None:
                actions.append(Create(desired))
                group_ready = False
            else:
                if _desired_differs(worker, desired):
                    updated = copy.deepcopy(worker)
                    updated["spec"]["replicas"] = size - 1
                    updated["spec"]["template"] = desired["spec"]["template"]
                    actions.append(Update(updated))
                ready_workers = int((worker.get("status") or {}).get("readyReplicas") or 0)
                group_ready = group_ready and ready_workers == size - 1
        if group_ready:
            ready_groups += 1

    stamp = ctx.stamp()
    conditions = list((lws.get("status") or {}).get("conditions") or [])
    if ready_groups == replicas:
        conditions = set_condition(
            conditions,
            "Available",
            "True",
            reason="AllGroupsReady",
            message="All replicas are ready",
            stamp=stamp,
        )
        conditions = set_condition(
            conditions,
            "Progressing",
            "False",
            reason="Ready",
            message="Replicas are ready",
            stamp=stamp,
        )
    else:
        conditions = set_condition(
            conditions,
            "Available",
            "False",
            reason="AllGroupsReady",
            message="All replicas are ready",
            stamp=stamp,
        )
        conditions = set_condition(
            conditions,
            "Progressing",
            "True",
            reason="GroupsProgressing",
            message="Replicas are progressing",
            stamp=stamp,
        )
    status: Obj = {
        "observedGeneration": generation_of(lws),
        "replicas": groups,
        "readyReplicas": ready_groups,
        "updatedReplicas": groups,
        "hpaPodSelector": f"{NAME_LABEL}={name},{WORKER_INDEX_LABEL}=0",
        "conditions": conditions,
    }
    if status_changed(lws, status):
        actions.append(UpdateStatus(with_status(lws, status)))
    return actions
