"""Admission checks for what Go's typed decoding would refuse: types, integer ranges, quantities.

NVIDIA's webhook decodes the object into Go structs, so an ``int32`` field holding
``18446744073709551616``, or a list where a string belongs, never reaches its rules
(the decode fails). We validate the raw dict instead, so we check what the decode
would have caught, with a field path, before any rule runs (a rule written for a
list must never meet an integer): every value against the ``type`` of the kind's
CRD schema, and every integer against its ``format`` (``int32``/``int64``).
Integers of ``x-kubernetes-int-or-string`` fields are Go's ``intstr.IntOrString``,
an ``int32``; ``null`` is Go's zero value and always decodes. :func:`quantity_errors` checks strings
the operator later parses as quantities (``storage.pvc.size``), so
``"50Gi50Gi50Gi"`` is refused at admission instead of failing every reconcile.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from nimctl_runtime import field
from nimctl_runtime.field import FieldError
from nimctl_runtime.quantity import QuantityError, parse_quantity

INT_RANGES: Mapping[str, tuple[int, int]] = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


@functools.cache
def spec_schema(api_version: str, kind: str) -> Mapping[str, Any]:
    """The ``spec`` schema of *kind*'s generated CRD (computed once per kind)."""
    from api.crdgen import generate_crd
    from api.serialize import model_for

    crd = generate_crd(model_for(api_version, kind))
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec: Mapping[str, Any] = (root.get("properties") or {}).get("spec") or {}
    return spec


def _range_error(path: str, value: int, fmt: str) -> FieldError:
    low, high = INT_RANGES[fmt]
    bits = fmt.removeprefix("int")
    return field.invalid(
        path, value, f"must be a {bits}-bit integer (between {low} and {high} inclusive)"
    )


def integer_range_errors(value: Any, schema: Mapping[str, Any], path: str) -> list[FieldError]:
    """Values of the wrong JSON type, and integers outside their ``format`` (int64 by default)."""
    errs: list[FieldError] = []
    _walk(value, schema, path, errs)
    return errs


_JSON_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "array": (list,),
    "object": (dict,),
}


def _type_error(value: Any, schema: Mapping[str, Any], path: str) -> FieldError | None:
    if value is None:
        return None
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return None
        return field.type_invalid(path, value, "must be an integer or a string")
    expected = schema.get("type")
    allowed = _JSON_TYPES.get(str(expected)) if expected else None
    if allowed is None:
        return None
    if isinstance(value, bool) and expected != "boolean":
        ok = False
    elif expected == "integer" and isinstance(value, float):
        ok = value.is_integer()
    else:
        ok = isinstance(value, allowed)
    return None if ok else field.type_invalid(path, value, f"must be of type {expected}")


def _walk(value: Any, schema: Mapping[str, Any], path: str, errs: list[FieldError]) -> None:
    wrong = _type_error(value, schema, path)
    if wrong is not None:
        errs.append(wrong)
        return
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if schema.get("type") == "integer" or schema.get("x-kubernetes-int-or-string"):
            fmt = str(schema.get("format") or "int64")
            if schema.get("x-kubernetes-int-or-string"):
                fmt = "int32"
            low, high = INT_RANGES.get(fmt, INT_RANGES["int64"])
            if not low <= value <= high:
                errs.append(_range_error(path, value, fmt if fmt in INT_RANGES else "int64"))
        return
    if isinstance(value, Mapping):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            sub = properties.get(key)
            if sub is None and isinstance(additional, Mapping):
                sub = additional
            if sub is not None:
                _walk(child, sub, f"{path}.{key}", errs)
        return
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, child in enumerate(value):
                _walk(child, items, f"{path}[{i}]", errs)


def quantity_errors(value: Any, path: str) -> list[FieldError]:
    """A field error unless *value* (when set) is a Kubernetes quantity such as ``50Gi``."""
    if value is None or value == "":
        return []
    try:
        parse_quantity(value if isinstance(value, str | int | float) else str(value))
    except QuantityError as exc:
        return [field.invalid(path, value, f"must be a quantity such as 50Gi: {exc}")]
    return []
