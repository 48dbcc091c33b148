"""kube-scheduler's filter and score steps as pure functions.

A pod fits a node when the node matches its ``nodeSelector`` and required node
affinity (``matchExpressions`` and ``matchFields``), every ``NoSchedule``/
``NoExecute`` taint is tolerated, the node is schedulable, and the pod's
requests (``cpu``, ``memory``, ``pods``, extended resources such as
``nvidia.com/gpu``) fit in what the node's other pods leave of its
allocatable, and the InterPodAffinity filter passes (required pod affinity and
anti-affinity, ``interpod``). A pod that fits nowhere gets kube-scheduler's
message: the per-node reasons counted and sorted as it sorts them, then what
preemption found, e.g. ``0/3 nodes are available: 1 node(s) didn't match pod
anti-affinity rules, 2 node(s) didn't match Pod's node affinity/selector.
preemption: 0/3 nodes are available: 1 No preemption victims found for incoming
pod, 2 Preemption is not helpful for scheduling.`` Nothing is ever preempted:
a node that fails a filter preemption could help with (resources, pod count,
anti-affinity) reports "No preemption victims found", as it does on a cluster
whose pods share one priority.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from localcluster.simulator.interpod import (
    REASON_AFFINITY_RULES,
    InterPodState,
)
from nimctl_runtime.quantity import parse_milli

REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_TOO_MANY_PODS = "Too many pods"
UNTOLERATED_TAINT_PREFIX = "node(s) had untolerated taint"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
_UNRESOLVABLE = (REASON_AFFINITY, REASON_UNSCHEDULABLE, REASON_AFFINITY_RULES)


@dataclass(frozen=True)
class ScheduleResult:
    """Where a pod goes (``node_name``), or why it can go nowhere (``message``)."""

    node_name: str | None
    message: str = ""


Usage = dict[str, int]  # resource name -> amount in thousandths ("pods" counts pods x 1000)


def _resources(spec: Mapping[str, Any] | None, key: str) -> Usage:
    out: Usage = {}
    for name, value in ((spec or {}).get(key) or {}).items():
        out[name] = parse_milli(value)
    return out


def container_requests(container: Mapping[str, Any]) -> Usage:
    """A container's requests, falling back to its limits as the API server defaults them."""
    resources = container.get("resources") or {}
    requests = _resources(resources, "limits")
    requests.update(_resources(resources, "requests"))
    return requests


def pod_requests(pod: Mapping[str, Any]) -> Usage:
    """Effective requests: max(sum of containers, largest init container) plus overhead."""
    spec = pod.get("spec") or {}
    total: Usage = {}
    for container in spec.get("containers") or []:
        for name, qty in container_requests(container).items():
            total[name] = total.get(name, 0) + qty
    for container in spec.get("initContainers") or []:
        for name, qty in container_requests(container).items():
            total[name] = max(total.get(name, 0), qty)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + parse_milli(value)
    return total


def node_selector_matches(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The pod's ``spec.nodeSelector`` is a subset of the node's labels."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _requirement_matches(req: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, op = req.get("key", ""), req.get("operator", "")
    wanted = [str(v) for v in req.get("values") or []]
    present = key in values
    value = values.get(key)
    if op == "In":
        return present and value in wanted
    if op == "NotIn":
        return not present or value not in wanted
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(wanted) != 1:
            return False
        try:
            have, bound = int(str(value)), int(wanted[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def node_selector_term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """One ``nodeSelectorTerm``: all its expressions and fields hold (empty matches nothing)."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    labels = (node.get("metadata") or {}).get("labels") or {}
    field_values = {"metadata.name": (node.get("metadata") or {}).get("name", "")}
    return all(_requirement_matches(r, labels) for r in expressions) and all(
        _requirement_matches(r, field_values) for r in fields
    )


def node_affinity_matches(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Required node affinity: any of the ``nodeSelectorTerms`` matches."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    terms = required.get("nodeSelectorTerms") or []
    return any(node_selector_term_matches(t, node) for t in terms)


def pinned_node_names(pod: Mapping[str, Any]) -> set[str] | None:
    """The only nodes the pod's required node affinity can match, or None when any may.

    kube-scheduler's NodeAffinity PreFilter: when every ``nodeSelectorTerm`` has a
    ``matchFields metadata.name In`` requirement (how DaemonSet pods are pinned),
    the union of those names bounds the feasible nodes, so the others need no check.
    """
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    terms = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms"
    ) or []
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        pins = [
            {str(v) for v in req.get("values") or []}
            for req in term.get("matchFields") or []
            if req.get("key") == "metadata.name" and req.get("operator") == "In"
        ]
        if not pins:
            return None
        names |= set.intersection(*pins)
    return names


def toleration_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether one toleration tolerates one taint (core/v1 ``Toleration.ToleratesTaint``)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(pod: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first ``NoSchedule``/``NoExecute`` taint of the node that the pod does not tolerate."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(toleration_tolerates(t, taint) for t in tolerations):
            found: Mapping[str, Any] = taint
            return found
    return None


def node_allocatable(node: Mapping[str, Any]) -> Usage:
    """A node's ``status.allocatable`` (``capacity`` where allocatable is absent)."""
    status = node.get("status") or {}
    out = _resources(status, "capacity")
    out.update(_resources(status, "allocatable"))
    return out


def usage_of(pods: Iterable[Mapping[str, Any]]) -> Usage:
    """What running or pending pods request together (finished pods free their share)."""
    used: Usage = {"pods": 0}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        add_usage(used, pod_requests(pod), 1)
    return used


def add_usage(used: Usage, requests: Mapping[str, int], sign: int) -> None:
    """Add (*sign*=1) or remove (-1) one pod's *requests* from *used*, in place."""
    used["pods"] = used.get("pods", 0) + sign * 1000
    for name, qty in requests.items():
        used[name] = used.get(name, 0) + sign * qty


def fit_failures(
    pod: Mapping[str, Any],
    node: Mapping[str, Any],
    pods_on_node: Iterable[Mapping[str, Any]] = (),
    *,
    used: Mapping[str, int] | None = None,
    requests: Mapping[str, int] | None = None,
    allocatable: Mapping[str, int] | None = None,
) -> list[str]:
    """Why *pod* cannot run on *node* (kube-scheduler's per-node reasons); empty when it fits.

    *used*, *requests* and *allocatable* may be given precomputed (the engine
    keeps them incrementally); otherwise they are derived from the objects.
    """
    if (node.get("spec") or {}).get("unschedulable"):
        tolerated = any(
            toleration_tolerates(
                t, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
            )
            for t in (pod.get("spec") or {}).get("tolerations") or []
        )
        if not tolerated:
            return [REASON_UNSCHEDULABLE]
    if not node_selector_matches(pod, node) or not node_affinity_matches(pod, node):
        return [REASON_AFFINITY]
    taint = untolerated_taint(pod, node)
    if taint is not None:
        key, value = taint.get("key", ""), taint.get("value", "")
        return [f"{UNTOLERATED_TAINT_PREFIX} {{{key}: {value}}}"]
    allocatable = node_allocatable(node) if allocatable is None else allocatable
    used = usage_of(pods_on_node) if used is None else used
    requests = pod_requests(pod) if requests is None else requests
    reasons: list[str] = []
    if "pods" in allocatable and used.get("pods", 0) + 1000 > allocatable["pods"]:
        reasons.append(REASON_TOO_MANY_PODS)
    for name, qty in sorted(requests.items()):
        if qty <= 0:
            continue
        if used.get(name, 0) + qty > allocatable.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def _free_score(
    requests: Mapping[str, int], allocatable: Mapping[str, int], used: Mapping[str, int]
) -> float:
    """NodeResourcesFit LeastAllocated: the mean free share of cpu and memory after placing."""
    score = 0.0
    for name in ("cpu", "memory"):
        cap = allocatable.get(name, 0)
        if cap <= 0:
            continue
        score += (cap - used.get(name, 0) - requests.get(name, 0)) / cap
    return score / 2


def _histogram(counts: Counter[str]) -> str:
    """kube-scheduler's ``<count> <reason>`` list, sorted as strings (as it sorts them)."""
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))


def _unresolvable(reasons: list[str]) -> bool:
    """A node whose filter status is UnschedulableAndUnresolvable: preemption cannot help."""
    return any(r in _UNRESOLVABLE or r.startswith(UNTOLERATED_TAINT_PREFIX) for r in reasons)


def unschedulable_message(pod: Mapping[str, Any], total: int, per_node: Iterable[list[str]]) -> str:
    """The FailedScheduling message for a pod no node took (*per_node*: each node's reasons)."""
    reasons: Counter[str] = Counter()
    preemption: Counter[str] = Counter()
    for node_reasons in per_node:
        reasons.update(node_reasons)
        preemption[NOT_HELPFUL if _unresolvable(node_reasons) else NO_VICTIMS] += 1
    message = f"0/{total} nodes are available: {_histogram(reasons)}."
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return f"{message} preemption: not eligible due to preemptionPolicy=Never."
    return f"{message} preemption: 0/{total} nodes are available: {_histogram(preemption)}."


def schedule(
    pod: Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    pods_by_node: Mapping[str, Iterable[Mapping[str, Any]]] | None = None,
    *,
    usage: Mapping[str, Mapping[str, int]] | None = None,
    allocatable: Mapping[str, Mapping[str, int]] | None = None,
    inter_pod: InterPodState | None = None,
) -> ScheduleResult:
    """Pick the feasible node with most free cpu/memory, then fewest pods (ties by name),
    or say why none fits. Node usage comes from *usage* or is summed from *pods_by_node*;
    *inter_pod* (``interpod.prefilter``) adds the InterPodAffinity filter.
    """
    node_list = sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name", ""))
    requests = pod_requests(pod)
    failed: list[list[str]] = []
    best: tuple[float, int, str] | None = None
    for node in node_list:
        name = (node.get("metadata") or {}).get("name", "")
        if usage is not None:
            used: Mapping[str, int] = usage.get(name) or {"pods": 0}
        else:
            used = usage_of((pods_by_node or {}).get(name, ()))
        alloc = (allocatable or {}).get(name) or node_allocatable(node)
        failures = fit_failures(pod, node, used=used, requests=requests, allocatable=alloc)
        if not failures and inter_pod is not None:
            reason = inter_pod.failure(node)
            failures = [reason] if reason else []
        if failures:
            failed.append(failures)
            continue
        # Most free cpu/memory first, then the node running fewest pods (spreading).
        score = (_free_score(requests, alloc, used), -used.get("pods", 0), name)
        if best is None or score[:2] > best[:2]:
            best = score
    if best is not None:
        return ScheduleResult(best[2])
    total = len(node_list)
    if not total:
        return ScheduleResult(None, "no nodes available to schedule pods")
    return ScheduleResult(None, unschedulable_message(pod, total, failed))
