"""kube-apiserver's validation of a HorizontalPodAutoscaler (autoscaling/v2), in its words.

The replica bounds, the scale target reference, every metric (its source type, that
exactly the matching source is filled in, metric names, target types and positive
targets, utilization above 0) and the scaling behavior (stabilization windows
0-3600 s, the ``selectPolicy`` enum, at least one policy per direction, policy
types, positive values and periods up to 1800 s). NIMService's ``spec.scale.hpa``
is rendered into such an object, so a bad one is refused as on a real cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .validation_field import Errors, as_dict, as_list, quantity

METRIC_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")
TARGET_TYPES = ("Utilization", "Value", "AverageValue")
SELECT_POLICIES = ("Disabled", "Max", "Min")
POLICY_TYPES = ("Percent", "Pods")
MAX_STABILIZATION_WINDOW = 3600
MAX_PERIOD = 1800
_SOURCES = {
    "Object": "object",
    "External": "external",
    "Pods": "pods",
    "Resource": "resource",
    "ContainerResource": "containerResource",
}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _path_segment(errs: Errors, path: str, value: str) -> None:
    """IsValidPathSegmentName: no ``.``/``..`` and no ``/`` or ``%``."""
    if value in (".", ".."):
        errs.invalid(path, value, f"may not be '{value}'")
    for bad in ("/", "%"):
        if bad in value:
            errs.invalid(path, value, f"may not contain '{bad}'")


def _reference(ref: Mapping[str, Any], path: str, errs: Errors) -> None:
    for key in ("kind", "name"):
        value = str(ref.get(key) or "")
        if not value:
            errs.required(f"{path}.{key}")
        else:
            _path_segment(errs, f"{path}.{key}", value)


def validate_hpa(spec: Mapping[str, Any], errs: Errors) -> None:
    low, high = _int(spec.get("minReplicas")), _int(spec.get("maxReplicas")) or 0
    if low is not None and low < 1:
        errs.invalid("spec.minReplicas", low, "must be greater than or equal to 1")
    if high < 1:
        errs.invalid("spec.maxReplicas", high, "must be greater than 0")
    if low is not None and high < low:
        errs.invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`")
    _reference(as_dict(spec.get("scaleTargetRef")), "spec.scaleTargetRef", errs)
    for i, metric in enumerate(as_list(spec.get("metrics"))):
        _metric(as_dict(metric), f"spec.metrics[{i}]", errs)
    behavior = spec.get("behavior")
    if isinstance(behavior, Mapping):
        for direction in ("scaleUp", "scaleDown"):
            rules = behavior.get(direction)
            if isinstance(rules, Mapping):
                _rules(rules, f"spec.behavior.{direction}", errs)


def _rules(rules: Mapping[str, Any], path: str, errs: Errors) -> None:
    window = _int(rules.get("stabilizationWindowSeconds"))
    if window is not None and window < 0:
        errs.invalid(
            f"{path}.stabilizationWindowSeconds", window, "must be greater than or equal to zero"
        )
    if window is not None and window > MAX_STABILIZATION_WINDOW:
        errs.invalid(
            f"{path}.stabilizationWindowSeconds",
            window,
            f"must be less than or equal to {MAX_STABILIZATION_WINDOW}",
        )
    errs.enum(f"{path}.selectPolicy", rules.get("selectPolicy"), SELECT_POLICIES)
    policies = as_list(rules.get("policies"))
    if not policies:
        errs.required(f"{path}.policies", "must specify at least one Policy")
    for i, raw in enumerate(policies):
        policy, where = as_dict(raw), f"{path}.policies[{i}]"
        if policy.get("type") not in POLICY_TYPES:
            errs.not_supported(f"{where}.type", policy.get("type") or "", POLICY_TYPES)
        value = _int(policy.get("value")) or 0
        if value <= 0:
            errs.invalid(f"{where}.value", value, "must be greater than zero")
        period = _int(policy.get("periodSeconds")) or 0
        if period <= 0:
            errs.invalid(f"{where}.periodSeconds", period, "must be greater than zero")
        if period > MAX_PERIOD:
            errs.invalid(
                f"{where}.periodSeconds", period, f"must be less than or equal to {MAX_PERIOD}"
            )


def _metric(metric: Mapping[str, Any], path: str, errs: Errors) -> None:
    kind = metric.get("type") or ""
    if not kind:
        errs.required(f"{path}.type", "must specify a metric source type")
    if kind not in METRIC_TYPES:
        errs.not_supported(f"{path}.type", kind, METRIC_TYPES)
    present = [name for name in _SOURCES.values() if metric.get(name) is not None]
    if present:
        first = present[0]
        _source(first, as_dict(metric.get(first)), f"{path}.{first}", errs)
    expected = _SOURCES.get(str(kind))
    if expected is not None and metric.get(expected) is None:
        errs.required(f"{path}.{expected}", "must populate information for the given metric source")
    if len(present) != 1:
        for name in sorted(set(present) - {expected}):
            errs.forbidden(f"{path}.{name}", "must populate the given metric source only")


def _source(kind: str, src: Mapping[str, Any], path: str, errs: Errors) -> None:
    target = as_dict(src.get("target"))
    if kind == "object":
        _reference(as_dict(src.get("describedObject")), f"{path}.describedObject", errs)
    if kind in ("object", "external", "pods"):
        name = str(as_dict(src.get("metric")).get("name") or "")
        if not name:
            errs.required(f"{path}.metric.name", "must specify a metric name")
        else:
            _path_segment(errs, f"{path}.metric.name", name)
    if kind in ("resource", "containerResource") and not src.get("name"):
        errs.required(f"{path}.name", "must specify a resource name")
    if kind == "containerResource":
        container = str(src.get("container") or "")
        if not container:
            errs.required(f"{path}.container", "must specify a container")
        else:
            errs.dns_label(f"{path}.container", container)
    _target(target, f"{path}.target", errs)
    value, average = target.get("value"), target.get("averageValue")
    if kind == "object" and value is None and average is None:
        errs.required(
            f"{path}.target.averageValue", "must set either a target value or averageValue"
        )
    if kind == "external":
        if value is None and average is None:
            errs.required(
                f"{path}.target.averageValue",
                "must set either a target value for metric or a per-pod target",
            )
        if value is not None and average is not None:
            errs.forbidden(
                f"{path}.target.value",
                "may not set both a target value for metric and a per-pod target",
            )
    if kind == "pods" and average is None:
        errs.required(f"{path}.target.averageValue", "must specify a positive target averageValue")
    if kind in ("resource", "containerResource"):
        utilization = target.get("averageUtilization")
        if utilization is None and average is None:
            errs.required(
                f"{path}.target.averageUtilization",
                "must set either a target raw value or a target utilization",
            )
        if utilization is not None and average is not None:
            errs.forbidden(
                f"{path}.target.averageValue",
                "may not set both a target raw value and a target utilization",
            )


def _target(target: Mapping[str, Any], path: str, errs: Errors) -> None:
    kind = target.get("type") or ""
    if not kind:
        errs.required(f"{path}.type", "must specify a metric target type")
    if kind not in TARGET_TYPES:
        errs.invalid(f"{path}.type", kind, "must be either Utilization, Value, or AverageValue")
    for key in ("value", "averageValue"):
        amount = quantity(target.get(key))
        if target.get(key) is not None and (amount is None or amount <= 0):
            errs.invalid(f"{path}.{key}", str(target.get(key)), "must be positive")
    utilization = _int(target.get("averageUtilization"))
    if utilization is not None and utilization < 1:
        errs.invalid(f"{path}.averageUtilization", utilization, "must be greater than 0")
