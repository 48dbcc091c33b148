"""Field errors in kube-apiserver's words, and the small checks every built-in kind shares.

kube-apiserver reports each invalid field as a ``StatusCause`` whose message is
``<path>: <kind of error>: <detail>`` (``spec.type: Unsupported value: "ClusterIp":
supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"``).
:class:`Errors` collects the shared :mod:`nimctl_runtime.field` errors (Required,
Invalid, NotSupported, Forbidden, Duplicate, NotFound) and adds the checks built-in
kinds share (enums, DNS names, port numbers and names, non-negative numbers).
Values are printed as Go prints strings and numbers (``"x"``, ``3``); composite
values as compact JSON (kube-apiserver prints a Go struct dump there).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from fractions import Fraction
from typing import Any

from nimctl_runtime import field
from nimctl_runtime.field import Cause
from nimctl_runtime.quantity import QuantityError, parse_quantity

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
PORT_RANGE = "must be between 1 and 65535, inclusive"


def go_value(value: Any) -> str:
    """A value as kube-apiserver's field errors print it."""
    return field.format_bad_value(value)


@dataclass
class Errors:
    """A field.ErrorList being built: the shared ``nimctl_runtime.field`` errors, in order."""

    errors: list[field.FieldError] = dataclass_field(default_factory=list)

    @property
    def causes(self) -> list[Cause]:
        """The Status causes of a 422 (repeats dropped, as ToAggregate does)."""
        out: list[Cause] = []
        for error in self.errors:
            cause = error.cause()
            if cause not in out:
                out.append(cause)
        return out

    def required(self, path: str, detail: str = "") -> None:
        self.errors.append(field.required(path, detail))

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self.errors.append(field.invalid(path, value, detail))

    def not_supported(self, path: str, value: Any, supported: Iterable[str]) -> None:
        self.errors.append(field.not_supported(path, value, supported))

    def forbidden(self, path: str, detail: str) -> None:
        self.errors.append(field.forbidden(path, detail))

    def duplicate(self, path: str, value: Any) -> None:
        self.errors.append(field.duplicate(path, value))

    def not_found(self, path: str, value: Any) -> None:
        self.errors.append(field.not_found(path, value))

    def too_long(self, path: str, limit: int) -> None:
        self.errors.append(field.too_long(path, limit))

    # -- shared checks ---------------------------------------------------------

    def enum(self, path: str, value: Any, supported: tuple[str, ...]) -> None:
        """NotSupported when *value* is set and not one of *supported*."""
        if value is not None and value not in supported:
            self.not_supported(path, value, supported)

    def non_negative(self, path: str, value: Any) -> None:
        if isinstance(value, int) and value < 0:
            self.invalid(path, value, "must be greater than or equal to 0")

    def dns_label(self, path: str, value: str) -> None:
        if len(value) > 63:
            self.invalid(path, value, "must be no more than 63 characters")
        if not DNS1123_LABEL.match(value):
            self.invalid(path, value, LABEL_MESSAGE)

    def dns_subdomain(self, path: str, value: str) -> None:
        if len(value) > 253:
            self.invalid(path, value, "must be no more than 253 characters")
        if not DNS1123_SUBDOMAIN.match(value):
            self.invalid(path, value, SUBDOMAIN_MESSAGE)

    def port_number(self, path: str, value: Any) -> None:
        if isinstance(value, int) and not 1 <= value <= 65535:
            self.invalid(path, value, PORT_RANGE)

    def port_name(self, path: str, value: str) -> None:
        """An IANA service name, as container port names and named target ports are."""
        for problem in iana_service_name_problems(value):
            self.invalid(path, value, problem)

    def label_name(self, path: str, value: Any) -> None:
        """ValidateLabelName: a qualified name (label keys, topology keys)."""
        for problem in qualified_name_problems(str(value)):
            self.invalid(path, value, problem)

    def label_value(self, path: str, value: Any) -> None:
        for problem in label_value_problems(str(value)):
            self.invalid(path, value, problem)

    def label_selector(self, path: str, selector: Any) -> None:
        """metav1 ValidateLabelSelector: label keys and values, operators and their values."""
        if not isinstance(selector, Mapping):
            return
        for key, value in as_dict(selector.get("matchLabels")).items():
            self.label_name(f"{path}.matchLabels", key)
            self.label_value(f"{path}.matchLabels", value)
        for i, raw in enumerate(as_list(selector.get("matchExpressions"))):
            expr, where = as_dict(raw), f"{path}.matchExpressions[{i}]"
            self.selector_requirement(where, expr, ("In", "NotIn", "Exists", "DoesNotExist"))
            for j, value in enumerate(as_list(expr.get("values"))):
                self.label_value(f"{where}.values[{j}]", value)

    def selector_requirement(
        self, path: str, expr: Mapping[str, Any], operators: tuple[str, ...]
    ) -> None:
        """A label (or node) selector requirement's operator, values and key."""
        operator, values = expr.get("operator"), as_list(expr.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                self.required(
                    f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                self.forbidden(
                    f"{path}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
        elif operator in ("Gt", "Lt") and operator in operators:
            if len(values) != 1:
                self.required(
                    f"{path}.values",
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                )
        else:
            self.invalid(f"{path}.operator", operator or "", "not a valid selector operator")
        self.label_name(f"{path}.key", expr.get("key") or "")

    def int_or_port_name(self, path: str, value: Any) -> None:
        if isinstance(value, int):
            self.port_number(path, value)
        elif isinstance(value, str):
            self.port_name(path, value)


def iana_service_name_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 15:
        problems.append("must be no more than 15 characters")
    if not re.fullmatch(r"[-a-z0-9]*", value):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        problems.append("must not contain consecutive hyphens")
    if not re.search(r"[a-z]", value):
        problems.append("must contain at least one letter (a-z)")
    if value.startswith("-") or value.endswith("-"):
        problems.append("must not begin or end with a hyphen")
    return problems


_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_QUALIFIED_NAME_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_QUALIFIED_NAME_FMT}')"
)
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    f"'my_value',  or '12345', regex used for validation is '{_LABEL_VALUE_FMT}')"
)


def qualified_name_problems(value: str) -> list[str]:
    """apimachinery's IsQualifiedName: ``[prefix/]name`` (label keys, topology keys)."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {_QUALIFIED_NAME_MESSAGE} with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    problems = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                problems.append("prefix part must be no more than 253 characters")
            if not DNS1123_SUBDOMAIN.match(prefix):
                problems.append(f"prefix part {SUBDOMAIN_MESSAGE}")
    name = parts[-1]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.match(name):
        problems.append(f"name part {_QUALIFIED_NAME_MESSAGE}")
    return problems


def label_value_problems(value: str) -> list[str]:
    """apimachinery's IsValidLabelValue."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        problems.append(LABEL_VALUE_MESSAGE)
    return problems


def quantity(value: Any) -> Fraction | None:
    """The quantity's value, or None when it does not parse (the decoder refused it already)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return parse_quantity(value)
    except (QuantityError, ValueError):
        return None


def as_dict(value: Any) -> Mapping[str, Any]:
    # decoded JSON is plain dicts: settled without the ABC check (a few dozen per Pod template)
    if type(value) is dict or isinstance(value, Mapping):
        return value
    return {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def finalizer_warnings(obj: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> list[str]:
    """kube-apiserver's Warning headers for finalizer names without a domain-qualified path.

    Only the finalizers a write adds are reported (all of them on create); the
    standard Kubernetes finalizers are exempt.
    """
    if obj is None:
        return []
    before = set(as_list(as_dict((old or {}).get("metadata")).get("finalizers")))
    return [
        f"metadata.finalizers: {field.go_quote(str(name))}: prefer a domain-qualified finalizer "
        "name including a path (/) to avoid accidental conflicts with other finalizer writers"
        for name in as_list(as_dict(obj.get("metadata")).get("finalizers"))
        if name not in before and name not in STANDARD_FINALIZERS and "/" not in str(name)
    ]
