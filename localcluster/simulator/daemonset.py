"""The DaemonSet controller as pure logic: one pod per eligible node.

A node is eligible when the pod template (plus the tolerations DaemonSet pods
always get) matches its nodeSelector, required node affinity and taints. Each
pod is pinned to its node with a ``matchFields metadata.name`` affinity (as the
real controller does) and labelled with ``controller-revision-hash`` and
``pod-template-generation``. ``RollingUpdate`` replaces old-revision pods at
most ``maxUnavailable`` at a time; ``OnDelete`` waits until the user deletes
them.
"""

from __future__ import annotations

import copy

from localcluster.simulator.deployment import available
from localcluster.simulator.kubelet import is_pod_ready
from localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    Delete,
    Requeue,
    UpdateStatus,
    generation_of,
    int_or_percent,
    is_deleting,
    labels_of,
    name_of,
    namespace_of,
    pod_from_template,
    status_changed,
    with_status,
)
from localcluster.simulator.revisions import REVISION_HASH, sync_revisions
from localcluster.simulator.scheduling import (
    node_affinity_matches,
    node_selector_matches,
    untolerated_taint,
)
from nimctl_runtime.meta import Obj

DAEMON_TOLERATIONS: tuple[Obj, ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)


def daemon_pod_template(ds: Obj) -> Obj:
    """The template with DaemonSet's default tolerations added."""
    template = copy.deepcopy((ds.get("spec") or {}).get("template") or {})
    spec = template.setdefault("spec", {})
    tolerations = list(spec.get("tolerations") or [])
    for tol in DAEMON_TOLERATIONS:
        if not any(
            t.get("key") == tol["key"] and t.get("effect") == tol["effect"] for t in tolerations
        ):
            tolerations.append(dict(tol))
    spec["tolerations"] = tolerations
    return template


def should_run(ds: Obj, node: Obj, template: Obj | None = None) -> bool:
    """Whether *ds* wants a pod on *node* (nodeSelector, affinity, taints).

    *template* is ``daemon_pod_template(ds)`` when the caller already has it (one
    copy for every node, not one per node).
    """
    pod = template if template is not None else daemon_pod_template(ds)
    return (
        node_selector_matches(pod, node)
        and node_affinity_matches(pod, node)
        and untolerated_taint(pod, node) is None
    )


def _pod_for_node(ds: Obj, node_name: str, revision_hash: str) -> Obj:
    template = daemon_pod_template(ds)
    affinity = template["spec"].setdefault("affinity", {})
    affinity["nodeAffinity"] = {
        **(affinity.get("nodeAffinity") or {}),
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
            ]
        },
    }
    return pod_from_template(
        template,
        ds,
        generate_name=f"{name_of(ds)}-",
        extra_labels={
            REVISION_HASH: revision_hash,
            "pod-template-generation": str(generation_of(ds)),
        },
    )


def _pod_node(pod: Obj) -> str:
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return str(node)
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    terms = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms"
    ) or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return ""


def reconcile_daemonset(ds: Obj, ctx: Context) -> list[Action]:
    """Create, replace and delete pods so each eligible node runs one; report status."""
    actions, _, current_hash = sync_revisions(ds, ctx)
    spec = ds.get("spec") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    nodes = {name_of(n): n for n in ctx.view.list("Node")}
    template = daemon_pod_template(ds)
    eligible_nodes = {n for n, node in nodes.items() if should_run(ds, node, template)}
    eligible = sorted(eligible_nodes)
    by_node: dict[str, list[Obj]] = {}
    for pod in ctx.view.owned(ds, "Pod"):
        by_node.setdefault(_pod_node(pod), []).append(pod)

    for node_name, pods in sorted(by_node.items()):
        live = [p for p in pods if not is_deleting(p)]
        if node_name not in eligible_nodes:
            for pod in live:
                actions.append(Delete("v1", "Pod", namespace_of(pod), name_of(pod)))
            continue
        for pod in live:
            if (pod.get("status") or {}).get("phase") == "Failed":
                actions.append(Delete("v1", "Pod", namespace_of(pod), name_of(pod)))
        extra = [p for p in live if (p.get("status") or {}).get("phase") != "Failed"][1:]
        for pod in extra:
            actions.append(Delete("v1", "Pod", namespace_of(pod), name_of(pod)))

    for node_name in eligible:
        pods = [
            p
            for p in by_node.get(node_name, [])
            if (p.get("status") or {}).get("phase") != "Failed"
        ]
        if not pods:
            actions.append(Create(_pod_for_node(ds, node_name, current_hash)))

    strategy = spec.get("updateStrategy") or {}
    if (strategy.get("type") or "RollingUpdate") == "RollingUpdate":
        max_unavailable = int_or_percent(
            (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1),
            len(eligible),
            round_up=True,
        )
        max_unavailable = max(max_unavailable, 1)
        unavailable = 0
        old_available: list[Obj] = []
        for node_name in eligible:
            pods = [p for p in by_node.get(node_name, []) if not is_deleting(p)]
            if not pods:
                unavailable += 1
                continue
            pod = pods[0]
            ok = available(pod, min_ready, ctx)
            if not ok:
                unavailable += 1
            if labels_of(pod).get(REVISION_HASH) != current_hash:
                if not ok:
                    actions.append(Delete("v1", "Pod", namespace_of(pod), name_of(pod)))
                else:
                    old_available.append(pod)
            elif any(is_deleting(p) for p in by_node.get(node_name, [])):
                unavailable += 1
        for pod in old_available[: max(0, max_unavailable - unavailable)]:
            actions.append(Delete("v1", "Pod", namespace_of(pod), name_of(pod)))

    scheduled = ready = avail = updated = misscheduled = 0
    for node_name, pods in by_node.items():
        live = [p for p in pods if not is_deleting(p)]
        if not live:
            continue
        if node_name not in eligible_nodes:
            misscheduled += 1
            continue
        scheduled += 1
        pod = live[0]
        if is_pod_ready(pod):
            ready += 1
        if available(pod, min_ready, ctx):
            avail += 1
        elif is_pod_ready(pod):
            actions.append(Requeue(float(min_ready)))
        if labels_of(pod).get(REVISION_HASH) == current_hash:
            updated += 1
    status: Obj = {
        "currentNumberScheduled": scheduled,
        "numberMisscheduled": misscheduled,
        "desiredNumberScheduled": len(eligible),
        "numberReady": ready,
        "observedGeneration": generation_of(ds),
        "updatedNumberScheduled": updated,
        "numberAvailable": avail,
        "numberUnavailable": len(eligible) - avail,
    }
    for key in ("updatedNumberScheduled", "numberAvailable", "numberUnavailable"):
        if not status[key]:
            del status[key]
    collision = (ds.get("status") or {}).get("collisionCount")
    if collision:
        status["collisionCount"] = collision
    if status_changed(ds, status):
        actions.append(UpdateStatus(with_status(ds, status)))
    return actions
