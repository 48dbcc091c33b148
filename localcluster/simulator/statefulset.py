"""The StatefulSet controller as pure logic: stable pod names ``<set>-<ordinal>``.

``OrderedReady`` (the default) creates pod *n* only once pods 0..n-1 are
Running and Ready and removes the highest ordinal first; ``Parallel`` does both
at once. Each ``volumeClaimTemplates`` entry gets a PVC ``<claim>-<set>-<ordinal>``
before its pod. ``RollingUpdate`` (with ``partition``) replaces pods of an old
revision from the highest ordinal down, one at a time once the rest are ready;
``OnDelete`` replaces only pods the user deletes.
"""

from __future__ import annotations

import copy

from localcluster.simulator.deployment import available, capped_replicas
from localcluster.simulator.kubelet import is_pod_ready
from localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    Delete,
    Requeue,
    UpdateStatus,
    generation_of,
    is_deleting,
    labels_of,
    name_of,
    namespace_of,
    owner_reference,
    pod_from_template,
    status_changed,
    with_status,
)
from localcluster.simulator.revisions import REVISION_HASH, sync_revisions
from nimctl_runtime.meta import Obj

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def _claim_name(template: Obj, sts: Obj, ordinal: int) -> str:
    return f"{name_of(template)}-{name_of(sts)}-{ordinal}"


def _pod(sts: Obj, ordinal: int, revision: str) -> Obj:
    spec = sts.get("spec") or {}
    name = f"{name_of(sts)}-{ordinal}"
    pod = pod_from_template(
        spec.get("template") or {},
        sts,
        name=name,
        extra_labels={
            REVISION_HASH: revision,
            POD_NAME_LABEL: name,
            POD_INDEX_LABEL: str(ordinal),
        },
    )
    pod["spec"]["hostname"] = name
    if spec.get("serviceName"):
        pod["spec"]["subdomain"] = spec["serviceName"]
    volumes = [
        v
        for v in pod["spec"].get("volumes") or []
        if v.get("name") not in {name_of(t) for t in spec.get("volumeClaimTemplates") or []}
    ]
    for claim in spec.get("volumeClaimTemplates") or []:
        volumes.append(
            {
                "name": name_of(claim),
                "persistentVolumeClaim": {"claimName": _claim_name(claim, sts, ordinal)},
            }
        )
    if volumes:
        pod["spec"]["volumes"] = volumes
    return pod


def _claim(sts: Obj, template: Obj, ordinal: int) -> Obj:
    claim = copy.deepcopy(template)
    meta = claim.setdefault("metadata", {})
    meta["name"] = _claim_name(template, sts, ordinal)
    meta["namespace"] = namespace_of(sts)
    labels = dict(meta.get("labels") or {})
    labels.update(((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
    meta["labels"] = labels
    policy = (sts.get("spec") or {}).get("persistentVolumeClaimRetentionPolicy") or {}
    if policy.get("whenDeleted") == "Delete":
        meta["ownerReferences"] = [owner_reference(sts)]
    claim["apiVersion"] = "v1"
    claim["kind"] = "PersistentVolumeClaim"
    claim.pop("status", None)
    return claim


def _ordinal(pod: Obj, sts: Obj) -> int:
    suffix = name_of(pod)[len(name_of(sts)) + 1 :]
    return int(suffix) if suffix.isdigit() else -1


def reconcile_statefulset(sts: Obj, ctx: Context) -> list[Action]:
    """Create, replace and delete pods by ordinal; report status."""
    actions, update_revision, _ = sync_revisions(sts, ctx)
    spec = sts.get("spec") or {}
    start = int((spec.get("ordinals") or {}).get("start", 0))
    parallel = spec.get("podManagementPolicy") == "Parallel"
    min_ready = int(spec.get("minReadySeconds") or 0)
    pods = {_ordinal(p, sts): p for p in ctx.view.owned(sts, "Pod")}
    replicas, capped = capped_replicas(sts, int(spec.get("replicas", 1)), len(pods))
    actions += capped
    wanted = range(start, start + replicas)
    namespace = namespace_of(sts)

    blocked = False
    for ordinal in wanted:
        pod = pods.get(ordinal)
        if pod is None:
            for template in spec.get("volumeClaimTemplates") or []:
                if (
                    ctx.view.get(
                        "PersistentVolumeClaim", namespace, _claim_name(template, sts, ordinal)
                    )
                    is None
                ):
                    actions.append(Create(_claim(sts, template, ordinal)))
            actions.append(Create(_pod(sts, ordinal, update_revision)))
            if not parallel:
                blocked = True
                break
            continue
        if is_deleting(pod):
            if not parallel:
                blocked = True
                break
            continue
        if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
            actions.append(Delete("v1", "Pod", namespace, name_of(pod)))
            if not parallel:
                blocked = True
                break
            continue
        if not parallel and not is_pod_ready(pod):
            blocked = True
            break

    condemned = sorted((o for o in pods if o not in wanted), reverse=True)
    if condemned and (parallel or not blocked):
        victims = condemned if parallel else condemned[:1]
        for ordinal in victims:
            if not is_deleting(pods[ordinal]):
                actions.append(Delete("v1", "Pod", namespace, name_of(pods[ordinal])))

    strategy = spec.get("updateStrategy") or {}
    if (
        (strategy.get("type") or "RollingUpdate") == "RollingUpdate"
        and not blocked
        and not condemned
    ):
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        live = [pods[o] for o in wanted if o in pods]
        all_ready = len(live) == replicas and all(
            is_pod_ready(p) and not is_deleting(p) for p in live
        )
        if all_ready:
            for ordinal in sorted(wanted, reverse=True):
                if ordinal < partition:
                    break
                pod = pods[ordinal]
                if labels_of(pod).get(REVISION_HASH) != update_revision:
                    actions.append(Delete("v1", "Pod", namespace, name_of(pod)))
                    break

    live_pods = [p for o, p in pods.items() if not is_deleting(p)]
    ready = [p for p in live_pods if is_pod_ready(p)]
    avail = [p for p in ready if available(p, min_ready, ctx)]
    if len(avail) != len(ready):
        actions.append(Requeue(float(min_ready)))
    updated = [p for p in live_pods if labels_of(p).get(REVISION_HASH) == update_revision]
    previous = dict(sts.get("status") or {})
    current_revision = previous.get("currentRevision") or update_revision
    if len(updated) == replicas and len(live_pods) == replicas:
        current_revision = update_revision
    current = [p for p in live_pods if labels_of(p).get(REVISION_HASH) == current_revision]
    status: Obj = {
        "observedGeneration": generation_of(sts),
        "replicas": len(live_pods),
        "readyReplicas": len(ready),
        "currentReplicas": len(current),
        "updatedReplicas": len(updated),
        "availableReplicas": len(avail),
        "currentRevision": current_revision,
        "updateRevision": update_revision,
        "collisionCount": int(previous.get("collisionCount") or 0),
    }
    for key in ("readyReplicas", "currentReplicas", "updatedReplicas"):
        if not status[key]:
            del status[key]
    if status_changed(sts, status):
        actions.append(UpdateStatus(with_status(sts, status)))
    return actions
