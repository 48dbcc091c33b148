"""OpenAPI v3 value validation of custom resources (the structural subset).

:func:`validate` checks a decoded object against a structural schema the way
kube-apiserver's apiextensions validator does (type, enum, string, number,
array, object and list-type keywords, ``allOf``/``anyOf``/``oneOf``/``not``)
and returns the Status causes, worded like apimachinery's ``field.Error``
around kube-openapi's messages, e.g.
``Invalid value: "string": spec.replicas in body must be of type integer: "string"``.
CEL rules are not evaluated here (``cel``); :func:`validate_metadata` applies
the schema's ``metadata.name``/``generateName`` restrictions.

The helpers other schema modules share live here too: JSON type names, JSON
equality and map-list keys.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from nimctl_runtime import field
from nimctl_runtime.field import (
    Cause,
    ErrorList,
    Unstructured,
    child_path,
    go_float,
    go_quote,
    index_path,
)

from .schema_formats import check_format


def _format_number(value: Any) -> str:
    if isinstance(value, float):
        return go_float(value)
    return str(value)


# kube-apiserver decodes JSON integers into int64; one that does not fit becomes a
# float64, which is an "integer" only while it is exactly representable (2^53).
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MAX_EXACT_FLOAT = float(2**53)


def json_type_name(value: Any) -> str:
    """The OpenAPI type name of a decoded JSON value, as kube-apiserver sees it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if _INT64_MIN <= value <= _INT64_MAX else "number"
    if isinstance(value, float):
        exact = value.is_integer() and abs(value) <= _MAX_EXACT_FLOAT
        return "integer" if exact else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _matches_type(expected: str, value: Any) -> bool:
    actual = json_type_name(value)
    if expected == "number":
        return actual in ("number", "integer")
    return actual == expected


def is_int_or_string(schema: Mapping[str, Any]) -> bool:
    return bool(schema.get("x-kubernetes-int-or-string"))


def preserves_unknown(schema: Mapping[str, Any]) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


@functools.lru_cache(maxsize=1024)
def _compile_pattern(pattern: str) -> re.Pattern[str]:
    # ECMA/RE2 patterns in CRDs are mostly Python-compatible; \d etc. behave alike
    # on ASCII input. re.ASCII keeps \w and \d from matching non-ASCII digits.
    return re.compile(pattern, re.ASCII)


def _body_path(path: str) -> str:
    return path if path else "<root>"


def validate(
    schema: Mapping[str, Any],
    obj: Any,
    *,
    root: str = "",
    skip: frozenset[str] = frozenset(),
) -> list[Cause]:
    """OpenAPI v3 (structural subset) validation of ``obj``; returns causes.

    ``root`` prefixes every field path (pass ``"spec"`` when validating only the
    spec with its sub-schema). CEL rules are not evaluated here. Top-level fields
    named in ``skip`` are not visited (an update's unchanged fields, whose causes
    ratcheting drops: see ``schema.validate_custom_resource``); their presence
    still counts for ``required``.
    """
    errs: ErrorList = []
    _validate_node(schema, obj, root, errs, is_root=not root, skip=skip)
    return [e.cause() for e in errs]


def _validate_node(
    schema: Mapping[str, Any],
    value: Any,
    path: str,
    causes: ErrorList,
    *,
    is_root: bool = False,
    skip: frozenset[str] = frozenset(),
) -> None:
    if not isinstance(schema, dict):
        return
    if value is None:
        if schema.get("nullable"):
            return
        if not schema.get("type") and not is_int_or_string(schema):
            return
    # ---- type
    stype = schema.get("type")
    if is_int_or_string(schema):
        if not (_matches_type("integer", value) or isinstance(value, str)):
            name = json_type_name(value)
            causes.append(
                field.type_invalid(
                    path,
                    name,
                    f"{_body_path(path)} in body must be of type integer,string: {go_quote(name)}",
                )
            )
            return
    elif isinstance(stype, str) and stype and not _matches_type(stype, value):
        name = json_type_name(value)
        fmt = schema.get("format")
        if stype == "integer" and name == "number" and fmt in ("int32", "int64"):
            # kube-openapi checks the format first: the value decoded as a float64.
            causes.append(
                field.type_invalid(
                    path,
                    "float64",
                    f"{_body_path(path)} in body must be of type {fmt}: {go_quote('float64')}",
                )
            )
            return
        causes.append(
            field.type_invalid(
                path,
                name,
                f"{_body_path(path)} in body must be of type {stype}: {go_quote(name)}",
            )
        )
        return
    if value is None:
        return
    # ---- enum
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and not any(json_equal(value, e) for e in enum):
        causes.append(field.not_supported(path, Unstructured(value), enum))
    # ---- per-type keywords
    if isinstance(value, str):
        _validate_string(schema, value, path, causes)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _validate_number(schema, value, path, causes)
    elif isinstance(value, list):
        _validate_array(schema, value, path, causes)
    elif isinstance(value, dict):
        _validate_object(schema, value, path, causes, is_root=is_root, skip=skip)
    # ---- junctors (value validations only, as structural schemas allow)
    if _JUNCTORS.intersection(schema):
        _validate_junctors(schema, value, path, causes)


def _validate_string(schema: Mapping[str, Any], value: str, path: str, causes: ErrorList) -> None:
    length = len(value)
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and length > max_length:
        causes.append(field.too_long(path, max_length))
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and length < min_length:
        causes.append(
            field.invalid(
                path,
                Unstructured(value),
                f"{_body_path(path)} in body should be at least {min_length} chars long",
            )
        )
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            ok = _compile_pattern(pattern).search(value) is not None
        except re.error:
            ok = True
        if not ok:
            causes.append(
                field.invalid(
                    path,
                    Unstructured(value),
                    f"{_body_path(path)} in body should match '{pattern}'",
                )
            )
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt and not check_format(fmt, value):
        causes.append(
            field.type_invalid(
                path, value, f"{_body_path(path)} in body must be of type {fmt}: {go_quote(value)}"
            )
        )


def _validate_number(schema: Mapping[str, Any], value: float, path: str, causes: ErrorList) -> None:
    where = f"{_body_path(path)} in body"
    maximum = schema.get("maximum")
    if isinstance(maximum, int | float) and not isinstance(maximum, bool):
        if schema.get("exclusiveMaximum") is True:
            if value >= maximum:
                causes.append(
                    field.invalid(
                        path,
                        Unstructured(value),
                        f"{where} should be less than {_format_number(maximum)}",
                    )
                )
        elif value > maximum:
            causes.append(
                field.invalid(
                    path,
                    Unstructured(value),
                    f"{where} should be less than or equal to {_format_number(maximum)}",
                )
            )
    minimum = schema.get("minimum")
    if isinstance(minimum, int | float) and not isinstance(minimum, bool):
        if schema.get("exclusiveMinimum") is True:
            if value <= minimum:
                causes.append(
                    field.invalid(
                        path,
                        Unstructured(value),
                        f"{where} should be greater than {_format_number(minimum)}",
                    )
                )
        elif value < minimum:
            causes.append(
                field.invalid(
                    path,
                    Unstructured(value),
                    f"{where} should be greater than or equal to {_format_number(minimum)}",
                )
            )
    multiple = schema.get("multipleOf")
    if isinstance(multiple, int | float) and not isinstance(multiple, bool) and multiple > 0:
        quotient = value / multiple
        if not math.isclose(quotient, round(quotient), rel_tol=0, abs_tol=1e-9):
            causes.append(
                field.invalid(
                    path,
                    Unstructured(value),
                    f"{where} should be a multiple of {_format_number(multiple)}",
                )
            )


def json_equal(a: Any, b: Any) -> bool:
    """Deep equality with JSON semantics (1 == 1.0, True != 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _validate_array(
    schema: Mapping[str, Any], value: list[Any], path: str, causes: ErrorList
) -> None:
    where = f"{_body_path(path)} in body"
    max_items = schema.get("maxItems")
    if isinstance(max_items, int) and len(value) > max_items:
        causes.append(field.too_many(path, len(value), max_items))
    min_items = schema.get("minItems")
    if isinstance(min_items, int) and len(value) < min_items:
        causes.append(
            field.invalid(
                path, Unstructured(value), f"{where} should have at least {min_items} items"
            )
        )
    if schema.get("uniqueItems") is True:
        seen: set[str] = set()
        for item in value:
            key = _canonical(item)
            if key in seen:
                causes.append(
                    field.invalid(
                        path, Unstructured(value), f"{where} shouldn't contain duplicates"
                    )
                )
                break
            seen.add(key)
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate_node(items, item, index_path(path, i), causes)
    _validate_list_type(schema, value, path, causes)


def _validate_list_type(
    schema: Mapping[str, Any], value: list[Any], path: str, causes: ErrorList
) -> None:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        seen: set[str] = set()
        for i, item in enumerate(value):
            key = _canonical(item)
            if key in seen:
                causes.append(field.duplicate(index_path(path, i), Unstructured(item)))
            seen.add(key)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        item_schema = schema.get("items") if isinstance(schema.get("items"), Mapping) else {}
        seen_keys: set[str] = set()
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key_obj = map_list_key(item, keys, item_schema)
            if key_obj is None:
                continue
            canon = _canonical(key_obj)
            if canon in seen_keys:
                causes.append(field.duplicate(index_path(path, i), Unstructured(key_obj)))
            seen_keys.add(canon)


def map_list_key(
    item: Mapping[str, Any], keys: list[str], item_schema: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The key object of a map-list element (missing keys take their schema default)."""
    key_obj: dict[str, Any] = {}
    props = (item_schema or {}).get("properties") or {}
    for key in keys:
        if key in item:
            key_obj[key] = item[key]
        else:
            prop = props.get(key) if isinstance(props, dict) else None
            if isinstance(prop, dict) and "default" in prop:
                key_obj[key] = prop["default"]
            else:
                return None
    return key_obj


def _validate_object(
    schema: Mapping[str, Any],
    value: Mapping[str, Any],
    path: str,
    causes: ErrorList,
    *,
    is_root: bool,
    skip: frozenset[str] = frozenset(),
) -> None:
    max_props = schema.get("maxProperties")
    if isinstance(max_props, int) and len(value) > max_props:
        causes.append(field.too_many(path, len(value), max_props))
    min_props = schema.get("minProperties")
    if isinstance(min_props, int) and len(value) < min_props:
        where = f"{_body_path(path)} in body"
        causes.append(
            field.invalid(
                path, Unstructured(value), f"{where} should have at least {min_props} properties"
            )
        )
    for name in schema.get("required") or []:
        if name not in value:
            causes.append(field.required(child_path(path, name)))
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    additional = schema.get("additionalProperties")
    for key, child in value.items():
        if is_root and (key == "metadata" or key in skip):
            continue
        sub = props.get(key)
        if isinstance(sub, dict):
            _validate_node(sub, child, child_path(path, key), causes)
        elif isinstance(additional, dict):
            _validate_node(additional, child, child_path(path, key), causes)
    if schema.get("x-kubernetes-embedded-resource"):
        _validate_embedded(value, path, causes)


def _validate_embedded(value: Mapping[str, Any], path: str, causes: ErrorList) -> None:
    for name in ("apiVersion", "kind"):
        got = value.get(name)
        if got is None or got == "":
            causes.append(field.required(child_path(path, name), "must not be empty"))
    meta = value.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        causes.append(
            field.type_invalid(
                child_path(path, "metadata"),
                json_type_name(meta),
                f"{child_path(path, 'metadata')} in body must be of type object: "
                f"{go_quote(json_type_name(meta))}",
            )
        )


_JUNCTORS = frozenset(("allOf", "anyOf", "oneOf", "not"))


def _validate_junctors(schema: Mapping[str, Any], value: Any, path: str, causes: ErrorList) -> None:
    where = f"{_body_path(path)} in body"
    for sub in schema.get("allOf") or []:
        if isinstance(sub, dict):
            _validate_node(sub, value, path, causes)
    any_of = schema.get("anyOf")
    if (
        isinstance(any_of, list)
        and any_of
        and not is_int_or_string(schema)
        and not any(_passes(sub, value, path) for sub in any_of)
    ):
        causes.append(
            field.invalid(
                path, Unstructured(value), f"{where} must validate at least one schema (anyOf)"
            )
        )
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and one_of:
        matches = sum(1 for sub in one_of if _passes(sub, value, path))
        if matches != 1:
            causes.append(
                field.invalid(
                    path,
                    Unstructured(value),
                    f"{where} must validate one and only one schema (oneOf)",
                )
            )
    not_schema = schema.get("not")
    if isinstance(not_schema, dict) and _passes(not_schema, value, path):
        causes.append(
            field.invalid(path, Unstructured(value), f"{where} must not validate the schema (not)")
        )


def _passes(schema: Any, value: Any, path: str) -> bool:
    if not isinstance(schema, dict):
        return True
    trial: ErrorList = []
    _validate_node(schema, value, path, trial)
    return not trial


def validate_metadata(schema: Mapping[str, Any], obj: Mapping[str, Any]) -> list[Cause]:
    """Root ``metadata.name``/``generateName`` restrictions from the schema."""
    props = schema.get("properties")
    meta_schema = props.get("metadata") if isinstance(props, dict) else None
    meta = obj.get("metadata")
    if not isinstance(meta_schema, dict) or not isinstance(meta, dict):
        return []
    meta_props = meta_schema.get("properties")
    if not isinstance(meta_props, dict):
        return []
    errs: ErrorList = []
    for key in ("name", "generateName"):
        sub = meta_props.get(key)
        if isinstance(sub, dict) and key in meta:
            _validate_node(sub, meta[key], f"metadata.{key}", errs)
    return [e.cause() for e in errs]
