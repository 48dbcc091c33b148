"""kube-apiserver's validation of a pod spec's scheduling: affinity and topology spread.

:func:`validate_affinity` checks ``spec.affinity`` as ``validateAffinity`` does:
node selector terms (at least one when required; operators In/NotIn/Exists/
DoesNotExist/Gt/Lt and the values each takes; label keys; label values of
required terms), preferred weights in 1-100, and pod (anti-)affinity terms (a
required topology key, valid label and namespace selectors, match/mismatch
label keys). :func:`validate_topology_spread` checks
``spec.topologySpreadConstraints`` as ``validateTopologySpreadConstraints``
does: a positive ``maxSkew``, a topology key, the ``whenUnsatisfiable`` enum,
no repeated ``{topologyKey, whenUnsatisfiable}``, ``minDomains`` rules, the node
inclusion policies and the label selector. Messages are kube-apiserver's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .validation_field import Errors, as_dict, as_list

NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
SCHEDULE_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
NODE_INCLUSION_POLICIES = ("Honor", "Ignore")
NOT_POSITIVE = "must be greater than zero"
_BOTH_LABEL_KEYS = "exists in both matchLabelKeys and labelSelector"


def validate_affinity(affinity: Mapping[str, Any], path: str, errs: Errors) -> None:
    node = affinity.get("nodeAffinity")
    if isinstance(node, Mapping):
        _node_affinity(node, f"{path}.nodeAffinity", errs)
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind)
        if isinstance(terms, Mapping):
            _pod_affinity(terms, f"{path}.{kind}", errs)


def _node_affinity(node: Mapping[str, Any], path: str, errs: Errors) -> None:
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, Mapping):
        where = f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = as_list(required.get("nodeSelectorTerms"))
        if not terms:
            errs.required(where, "must have at least one node selector term")
        for i, term in enumerate(terms):
            _node_selector_term(as_dict(term), f"{where}[{i}]", errs, check_values=True)
    preferred = path + ".preferredDuringSchedulingIgnoredDuringExecution"
    for i, raw in enumerate(as_list(node.get("preferredDuringSchedulingIgnoredDuringExecution"))):
        term = as_dict(raw)
        _weight(term.get("weight"), f"{preferred}[{i}].weight", errs)
        # preferred terms may name label values no node has yet (always allowed)
        _node_selector_term(
            as_dict(term.get("preference")),
            f"{preferred}[{i}].preference",
            errs,
            check_values=False,
        )


def _weight(weight: Any, path: str, errs: Errors) -> None:
    value = weight if isinstance(weight, int) and not isinstance(weight, bool) else 0
    if not 1 <= value <= 100:
        errs.invalid(path, value, "must be in the range 1-100")


def _node_selector_term(
    term: Mapping[str, Any], path: str, errs: Errors, *, check_values: bool
) -> None:
    for j, raw in enumerate(as_list(term.get("matchExpressions"))):
        expr, where = as_dict(raw), f"{path}.matchExpressions[{j}]"
        errs.selector_requirement(where, expr, NODE_OPERATORS)
        if check_values:
            for k, value in enumerate(as_list(expr.get("values"))):
                errs.label_value(f"{where}.values[{k}]", value)
    for j, raw in enumerate(as_list(term.get("matchFields"))):
        expr, where = as_dict(raw), f"{path}.matchFields[{j}]"
        operator, values = expr.get("operator"), as_list(expr.get("values"))
        if operator in ("In", "NotIn"):
            if len(values) != 1:
                errs.required(
                    f"{where}.values",
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field "
                    "selector",
                )
        else:
            errs.invalid(f"{where}.operator", operator or "", "not a valid selector operator")
        if expr.get("key") != "metadata.name":
            errs.invalid(f"{where}.key", expr.get("key") or "", "not a valid field selector key")
        else:
            for k, value in enumerate(values):
                errs.dns_subdomain(f"{where}.values[{k}]", str(value))


def _pod_affinity(affinity: Mapping[str, Any], path: str, errs: Errors) -> None:
    required = path + ".requiredDuringSchedulingIgnoredDuringExecution"
    for i, term in enumerate(
        as_list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    ):
        _pod_affinity_term(as_dict(term), f"{required}[{i}]", errs)
    preferred = path + ".preferredDuringSchedulingIgnoredDuringExecution"
    for i, raw in enumerate(
        as_list(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))
    ):
        weighted = as_dict(raw)
        _weight(weighted.get("weight"), f"{preferred}[{i}].weight", errs)
        term = as_dict(weighted.get("podAffinityTerm"))
        _pod_affinity_term(term, f"{preferred}[{i}].podAffinityTerm", errs)


def _pod_affinity_term(term: Mapping[str, Any], path: str, errs: Errors) -> None:
    selector = term.get("labelSelector")
    errs.label_selector(f"{path}.labelSelector", selector)
    errs.label_selector(f"{path}.namespaceSelector", term.get("namespaceSelector"))
    for namespace in as_list(term.get("namespaces")):
        errs.dns_label(f"{path}.namespace", str(namespace))
    match_keys = [str(k) for k in as_list(term.get("matchLabelKeys"))]
    mismatch_keys = [str(k) for k in as_list(term.get("mismatchLabelKeys"))]
    for name, keys in (("matchLabelKeys", match_keys), ("mismatchLabelKeys", mismatch_keys)):
        if keys and not isinstance(selector, Mapping):
            errs.forbidden(f"{path}.{name}", "must not be specified when labelSelector is not set")
        elif keys:
            for i, key in enumerate(keys):
                errs.label_name(f"{path}.{name}[{i}]", key)
    if isinstance(selector, Mapping):
        indexes = {key: i for i, key in enumerate(match_keys)}
        seen = set(as_dict(selector.get("matchLabels")))
        for raw in as_list(selector.get("matchExpressions")):
            key = str(as_dict(raw).get("key", ""))
            if key in indexes and key in seen:
                errs.invalid(f"{path}[{indexes[key]}]", key, _BOTH_LABEL_KEYS)
            seen.add(key)
    for i, key in enumerate(match_keys):
        if key in mismatch_keys:
            errs.invalid(
                f"{path}.matchLabelKeys[{i}]",
                key,
                "exists in both matchLabelKeys and mismatchLabelKeys",
            )
    topology_key = str(term.get("topologyKey") or "")
    if not topology_key:
        errs.required(f"{path}.topologyKey", "can not be empty")
    errs.label_name(f"{path}.topologyKey", topology_key)


def validate_topology_spread(constraints: list[Any], path: str, errs: Errors) -> None:
    for i, raw in enumerate(constraints):
        _spread_constraint(as_dict(raw), constraints[i + 1 :], f"{path}[{i}]", errs)


def _spread_constraint(
    constraint: Mapping[str, Any], rest: list[Any], where: str, errs: Errors
) -> None:
    skew = constraint.get("maxSkew")
    skew = skew if isinstance(skew, int) and not isinstance(skew, bool) else 0
    if skew <= 0:
        errs.invalid(f"{where}.maxSkew", skew, NOT_POSITIVE)
    key = constraint.get("topologyKey") or ""
    if not key:
        errs.required(f"{where}.topologyKey", "can not be empty")
    action = constraint.get("whenUnsatisfiable") or ""
    if action not in SCHEDULE_ACTIONS:
        errs.not_supported(f"{where}.whenUnsatisfiable", action, SCHEDULE_ACTIONS)
    pairs = [
        (as_dict(o).get("topologyKey") or "", as_dict(o).get("whenUnsatisfiable") or "")
        for o in rest
    ]
    if (key, action) in pairs:
        errs.duplicate(f"{where}.{{topologyKey, whenUnsatisfiable}}", f"{{{key}, {action}}}")
    min_domains = constraint.get("minDomains")
    if isinstance(min_domains, int) and not isinstance(min_domains, bool):
        if min_domains <= 0:
            errs.invalid(f"{where}.minDomains", min_domains, NOT_POSITIVE)
        if action != "DoNotSchedule":
            errs.invalid(
                f"{where}.minDomains",
                min_domains,
                f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}",
            )
    for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        errs.enum(f"{where}.{policy}", constraint.get(policy), NODE_INCLUSION_POLICIES)
    selector = constraint.get("labelSelector")
    match_keys = as_list(constraint.get("matchLabelKeys"))
    if match_keys:
        selector_keys: set[str] = set()
        if isinstance(selector, Mapping):
            selector_keys = set(as_dict(selector.get("matchLabels"))) | {
                str(as_dict(e).get("key", "")) for e in as_list(selector.get("matchExpressions"))
            }
        else:
            errs.forbidden(
                f"{where}.matchLabelKeys", "must not be specified when labelSelector is not set"
            )
        for j, key_name in enumerate(match_keys):
            errs.label_name(f"{where}.matchLabelKeys[{j}]", key_name)
            if key_name in selector_keys:
                errs.invalid(f"{where}.matchLabelKeys[{j}]", key_name, _BOTH_LABEL_KEYS)
    errs.label_selector(f"{where}.labelSelector", selector)
