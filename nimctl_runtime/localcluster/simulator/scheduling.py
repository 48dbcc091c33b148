"""kube-scheduler's filter and score steps as pure functions.

A pod fits a node when the node matches its ``nodeSelector`` and required node
affinity (``matchExpressions`` and ``matchFields``), every ``NoSchedule``/
``NoExecute`` taint is tolerated, the node is schedulable, and the pod's
requests (``cpu``, ``memory``, ``pods``, extended resources such as
``nvidia.com/gpu``) fit in what the node's other pods leave of its
allocatable. A pod that fits nowhere gets kube-scheduler's message, e.g.
``0/3 nodes are available: 3 Insufficient nvidia.com/gpu.``
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from nimctl_runtime.localcluster.simulator.quantity import parse_quantity

Obj = dict[str, Any]

REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_TOO_MANY_PODS = "Too many pods"


@dataclass(frozen=True)
class ScheduleResult:
    """Where a pod goes (``node_name``), or why it can go nowhere (``message``)."""

    node_name: str | None
    message: str = ""


def _resources(spec: Mapping[str, Any] | None, key: str) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, value in ((spec or {}).get(key) or {}).items():
        out[name] = parse_quantity(value)
    return out


def container_requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
    """A container's requests, falling back to its limits as the API server defaults them."""
    resources = container.get("resources") or {}
    requests = _resources(resources, "limits")
    requests.update(_resources(resources, "requests"))
    return requests


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    """Effective requests: max(sum of containers, largest init container) plus overhead."""
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        for name, qty in container_requests(container).items():
            total[name] = total.get(name, Fraction(0)) + qty
    for container in spec.get("initContainers") or []:
        for name, qty in container_requests(container).items():
            total[name] = max(total.get(name, Fraction(0)), qty)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Fraction(0)) + parse_quantity(value)
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


def node_allocatable(node: Mapping[str, Any]) -> dict[str, Fraction]:
    """A node's ``status.allocatable`` (``capacity`` where allocatable is absent)."""
    status = node.get("status") or {}
    out = _resources(status, "capacity")
    out.update(_resources(status, "allocatable"))
    return out


def _used(pods: Iterable[Mapping[str, Any]]) -> dict[str, Fraction]:
    used: dict[str, Fraction] = {"pods": Fraction(0)}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        used["pods"] += 1
        for name, qty in pod_requests(pod).items():
            used[name] = used.get(name, Fraction(0)) + qty
    return used


def fit_failures(
    pod: Mapping[str, Any], node: Mapping[str, Any], pods_on_node: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Why *pod* cannot run on *node* (kube-scheduler's per-node reasons); empty when it fits."""
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
        return [f"node(s) had untolerated taint {{{key}: {value}}}"]
    allocatable = node_allocatable(node)
    used = _used(pods_on_node)
    reasons: list[str] = []
    if "pods" in allocatable and used["pods"] + 1 > allocatable["pods"]:
        reasons.append(REASON_TOO_MANY_PODS)
    for name, qty in sorted(pod_requests(pod).items()):
        if qty <= 0:
            continue
        if used.get(name, Fraction(0)) + qty > allocatable.get(name, Fraction(0)):
            reasons.append(f"Insufficient {name}")
    return reasons


def _free_score(
    pod: Mapping[str, Any], node: Mapping[str, Any], pods: Collection[Mapping[str, Any]]
) -> Fraction:
    """NodeResourcesFit LeastAllocated: the mean free share of cpu and memory after placing."""
    allocatable = node_allocatable(node)
    used = _used(pods)
    requests = pod_requests(pod)
    score = Fraction(0)
    for name in ("cpu", "memory"):
        cap = allocatable.get(name, Fraction(0))
        if cap <= 0:
            continue
        score += (cap - used.get(name, Fraction(0)) - requests.get(name, Fraction(0))) / cap
    return score / 2


def schedule(
    pod: Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    pods_by_node: Mapping[str, Collection[Mapping[str, Any]]],
) -> ScheduleResult:
    """Pick the feasible node with most free cpu/memory (ties by name), or say why none fits."""
    node_list = sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name", ""))
    reasons: Counter[str] = Counter()
    best: tuple[Fraction, int, str] | None = None
    for node in node_list:
        name = (node.get("metadata") or {}).get("name", "")
        pods = pods_by_node.get(name, ())
        failures = fit_failures(pod, node, pods)
        if failures:
            reasons.update(failures)
            continue
        # Most free cpu/memory first, then the node running fewest pods (spreading).
        score = (_free_score(pod, node, pods), -len(pods), name)
        if best is None or score[:2] > best[:2]:
            best = score
    if best is not None:
        return ScheduleResult(best[2])
    total = len(node_list)
    if not total:
        return ScheduleResult(None, "no nodes available to schedule pods")
    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    message = (
        f"0/{total} nodes are available: {detail}. preemption: 0/{total} nodes are available: "
        f"{total} Preemption is not helpful for scheduling."
    )
    return ScheduleResult(None, message)
