"""kube-scheduler's InterPodAffinity filter (required terms only) as pure functions.

A pod's ``requiredDuringSchedulingIgnoredDuringExecution`` ``podAffinity`` and
``podAntiAffinity`` terms, and the required anti-affinity terms of the pods
already bound, decide which nodes it may go to, as kube-scheduler's
InterPodAffinity plugin decides (PreFilter counts, Filter per node):

- a term selects pods by ``labelSelector`` (missing: none; ``{}``: all) in its
  ``namespaces`` and the namespaces its ``namespaceSelector`` matches (``{}``:
  every namespace); with neither, the pod's own namespace. ``matchLabelKeys``
  and ``mismatchLabelKeys`` add ``key in (value)`` / ``key notin (value)`` for
  the pod's own label values, as kube-apiserver merges them;
- a topology domain is a node label value (``topologyKey``); a pod counts in
  the domain of the node it is bound to. Pods that finished (``Succeeded``,
  ``Failed``) do not count; terminating pods still do, as in kube-scheduler;
- affinity: every term needs a matching pod in the node's domain (a node
  without the topology label never fits), except for the first pod of a group
  that matches its own terms while no pod anywhere matches them;
- anti-affinity: no pod matching any term in the node's domain; and no bound
  pod whose own anti-affinity terms match the incoming pod in that domain.

The per-node reasons are kube-scheduler's words, checked in its order:
``node(s) didn't match pod affinity rules``, ``node(s) didn't match pod
anti-affinity rules``, ``node(s) didn't satisfy existing pods anti-affinity
rules``. Preferred (scored) terms are not modelled.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from nimctl_runtime.labels import Requirement, Selector, SelectorParseError

NamespaceLabels = Mapping[str, Mapping[str, str]]
"""Namespace name -> its labels (only read by terms with a ``namespaceSelector``)."""

REASON_AFFINITY_RULES: Final = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY_RULES: Final = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"

REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"

__all__ = [
    "REASON_AFFINITY_RULES",
    "REASON_ANTI_AFFINITY_RULES",
    "REASON_EXISTING_ANTI_AFFINITY",
    "AffinityTerm",
    "InterPodState",
    "has_required_anti_affinity",
    "has_required_pod_affinity",
    "prefilter",
    "required_terms",
    "uses_namespace_selector",
]


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def _raw_terms(pod: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(affinity.get(REQUIRED) or [])


def has_required_pod_affinity(pod: Mapping[str, Any]) -> bool:
    """Whether *pod* carries required ``podAffinity`` terms."""
    return bool(_raw_terms(pod, "podAffinity"))


def has_required_anti_affinity(pod: Mapping[str, Any]) -> bool:
    """Whether *pod* carries required ``podAntiAffinity`` terms."""
    return bool(_raw_terms(pod, "podAntiAffinity"))


def uses_namespace_selector(pod: Mapping[str, Any]) -> bool:
    """Whether a required term of *pod* has a ``namespaceSelector`` (needs namespace labels)."""
    return any(
        "namespaceSelector" in raw and raw["namespaceSelector"] is not None
        for kind in ("podAffinity", "podAntiAffinity")
        for raw in _raw_terms(pod, kind)
    )


@dataclass(frozen=True)
class AffinityTerm:
    """One ``PodAffinityTerm`` resolved for the pod that carries it."""

    namespaces: frozenset[str]
    namespace_selector: Selector
    selector: Selector
    topology_key: str

    def matches(self, pod: Mapping[str, Any], namespace_labels: NamespaceLabels) -> bool:
        """Whether *pod* is one this term selects (namespace, then labels)."""
        namespace = str(_meta(pod).get("namespace") or "")
        in_scope = namespace in self.namespaces or self.namespace_selector.matches(
            namespace_labels.get(namespace, {})
        )
        return in_scope and self.selector.matches(_labels(pod))


def _selector(raw: Mapping[str, Any] | None) -> Selector:
    try:
        return Selector.from_label_selector(raw)
    except SelectorParseError:  # kube-apiserver refuses these; never match
        return Selector.nothing()


def _term(owner: Mapping[str, Any], raw: Mapping[str, Any]) -> AffinityTerm:
    namespaces = frozenset(str(n) for n in raw.get("namespaces") or [])
    ns_selector_raw = raw.get("namespaceSelector")
    if not namespaces and ns_selector_raw is None:
        namespaces = frozenset({str(_meta(owner).get("namespace") or "")})
    selector = _selector(raw.get("labelSelector"))
    own = _labels(owner)
    extra = [
        Requirement(str(k), "in", (own[k],)) for k in raw.get("matchLabelKeys") or [] if k in own
    ] + [
        Requirement(str(k), "notin", (own[k],))
        for k in raw.get("mismatchLabelKeys") or []
        if k in own
    ]
    if extra and raw.get("labelSelector") is not None:
        selector = Selector([*selector.requirements, *extra])
    return AffinityTerm(
        namespaces=namespaces,
        namespace_selector=Selector.nothing()
        if ns_selector_raw is None
        else _selector(ns_selector_raw),
        selector=selector,
        topology_key=str(raw.get("topologyKey") or ""),
    )


def required_terms(pod: Mapping[str, Any], kind: str) -> tuple[AffinityTerm, ...]:
    """The pod's required ``podAffinity`` or ``podAntiAffinity`` (*kind*) terms."""
    return tuple(_term(pod, raw) for raw in _raw_terms(pod, kind))


Pair = tuple[str, str]


def _count(counts: Counter[Pair], node_labels: Mapping[str, str], key: str) -> None:
    if key in node_labels:
        counts[(key, node_labels[key])] += 1


@dataclass(frozen=True)
class InterPodState:
    """PreFilter's counts for one pod; :meth:`failure` is the Filter for one node."""

    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    affinity_counts: Counter[Pair]
    anti_affinity_counts: Counter[Pair]
    existing_anti_affinity_counts: Counter[Pair]
    matches_own_affinity: bool

    def failure(self, node: Mapping[str, Any]) -> str | None:
        """Why *node* fails the InterPodAffinity filter (kube-scheduler's words), or None."""
        labels = _labels(node)
        if self.affinity:
            pods_exist = True
            for term in self.affinity:
                if term.topology_key not in labels:
                    return REASON_AFFINITY_RULES
                if self.affinity_counts[(term.topology_key, labels[term.topology_key])] <= 0:
                    pods_exist = False
            if not pods_exist and not (not self.affinity_counts and self.matches_own_affinity):
                return REASON_AFFINITY_RULES
        if self.anti_affinity_counts:
            for term in self.anti_affinity:
                value = labels.get(term.topology_key)
                if value is not None and self.anti_affinity_counts[(term.topology_key, value)] > 0:
                    return REASON_ANTI_AFFINITY_RULES
        if self.existing_anti_affinity_counts:
            for pair in labels.items():
                if self.existing_anti_affinity_counts[pair] > 0:
                    return REASON_EXISTING_ANTI_AFFINITY
        return None


def prefilter(
    pod: Mapping[str, Any],
    bound: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]],
    with_anti_affinity: Iterable[
        tuple[Mapping[str, Any], Mapping[str, Any], tuple[AffinityTerm, ...]]
    ],
    namespace_labels: NamespaceLabels | None = None,
) -> InterPodState | None:
    """Count, per topology pair, the bound pods the incoming *pod*'s terms select and the
    bound pods whose anti-affinity selects it; None when nothing can constrain it.

    *bound* yields ``(pod, node)`` for every bound pod (read only when *pod* has
    terms); *with_anti_affinity* ``(pod, node, required_terms(pod,
    "podAntiAffinity"))`` for the bound pods that carry required anti-affinity
    (resolved once per pod by the caller). Finished pods are skipped.
    """
    ns_labels: NamespaceLabels = namespace_labels or {}
    affinity = required_terms(pod, "podAffinity")
    anti = required_terms(pod, "podAntiAffinity")
    existing: Counter[Pair] = Counter()
    for other, node, other_terms in with_anti_affinity:
        if _finished(other):
            continue
        node_labels = _labels(node)
        for term in other_terms:
            if term.matches(pod, ns_labels):
                _count(existing, node_labels, term.topology_key)
    if not affinity and not anti and not existing:
        return None
    affinity_counts: Counter[Pair] = Counter()
    anti_counts: Counter[Pair] = Counter()
    if affinity or anti:
        for other, node in bound:
            if _finished(other):
                continue
            node_labels = _labels(node)
            if affinity and all(t.matches(other, ns_labels) for t in affinity):
                for term in affinity:
                    _count(affinity_counts, node_labels, term.topology_key)
            for term in anti:
                if term.matches(other, ns_labels):
                    _count(anti_counts, node_labels, term.topology_key)
    return InterPodState(
        affinity=affinity,
        anti_affinity=anti,
        affinity_counts=affinity_counts,
        anti_affinity_counts=anti_counts,
        existing_anti_affinity_counts=existing,
        matches_own_affinity=bool(affinity) and all(t.matches(pod, ns_labels) for t in affinity),
    )


def _finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
