"""Structural-schema handling for custom resources in localcluster.

Pure functions the request handlers call on the decoded body of a custom
resource, in the order kube-apiserver's apiextensions handler uses them:

1. :func:`prune` drops fields the schema does not declare (honouring
   ``x-kubernetes-preserve-unknown-fields`` and ``x-kubernetes-embedded-resource``;
   ``apiVersion``/``kind``/``metadata`` survive at the root and at embedded roots).
2. :func:`apply_defaults` fills ``default`` values (also inside array items and
   ``additionalProperties``); a ``null`` in a non-nullable field is replaced by
   its default or dropped.
3. :func:`validate_custom_resource` = :func:`validate` (OpenAPI v3 value
   validation) + the ``x-kubernetes-validations`` CEL rules from
   :mod:`nimctl_runtime.localcluster.cel`.

Errors come back as *causes*, the dicts Kubernetes puts into
``Status.details.causes`` (``reason``/``message``/``field``), worded like
apimachinery's ``field.Error.ErrorBody()`` around kube-openapi's messages, e.g.
``Invalid value: "string": spec.replicas in body must be of type integer: "string"``.
:func:`cause_error_text` renders one cause as ``field: message`` for the
``Status.message`` summary.

:func:`check_structural` is used when a CRD is registered: a non-structural
schema yields readable messages the server turns into a 422.
"""

from __future__ import annotations

import base64
import copy
import functools
import ipaddress
import json
import math
import re
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

Cause = dict[str, str]

REASON_INVALID = "FieldValueInvalid"
REASON_TYPE_INVALID = "FieldValueTypeInvalid"
REASON_REQUIRED = "FieldValueRequired"
REASON_NOT_SUPPORTED = "FieldValueNotSupported"
REASON_TOO_LONG = "FieldValueTooLong"
REASON_TOO_MANY = "FieldValueTooMany"
REASON_DUPLICATE = "FieldValueDuplicate"
REASON_FORBIDDEN = "FieldValueForbidden"

_ROOT_META_FIELDS = ("apiVersion", "kind", "metadata")


# --------------------------------------------------------------------------- paths


def child_path(path: str, name: str) -> str:
    """``spec`` + ``replicas`` -> ``spec.replicas`` (field.Path.Child)."""
    return f"{path}.{name}" if path else name


def index_path(path: str, index: int) -> str:
    """``spec.items`` + 0 -> ``spec.items[0]`` (field.Path.Index)."""
    return f"{path}[{index}]"


# --------------------------------------------------------------------------- value printing


def _go_float(value: float) -> str:
    if math.isfinite(value) and value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exp = text.split("e")
        sign = "-" if exp.startswith("-") else "+"
        digits = exp.lstrip("+-").rjust(2, "0")
        text = f"{mantissa}e{sign}{digits}"
    return text


def go_quote(text: str) -> str:
    """Approximate Go's ``%q`` for a string."""
    return json.dumps(text, ensure_ascii=False)


def _go_inner(value: Any) -> str:
    """Go ``%#v`` of a value stored in an ``interface{}``."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{go_quote(str(k))}:{_go_inner(value[k])}" for k in sorted(value))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[]interface {}{" + ", ".join(_go_inner(v) for v in value) + "}"
    return go_quote(str(value))


def format_bad_value(value: Any) -> str:
    """How ``field.Error.ErrorBody`` prints a bad value."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    return _go_inner(value)


def _format_number(value: Any) -> str:
    if isinstance(value, float):
        return _go_float(value)
    return str(value)


# --------------------------------------------------------------------------- cause constructors


def invalid(path: str, value: Any, detail: str) -> Cause:
    """field.Invalid."""
    msg = f"Invalid value: {format_bad_value(value)}"
    if detail:
        msg += f": {detail}"
    return {"reason": REASON_INVALID, "message": msg, "field": path}


def type_invalid(path: str, value: Any, detail: str) -> Cause:
    """field.TypeInvalid (same wording as Invalid, its own reason)."""
    cause = invalid(path, value, detail)
    cause["reason"] = REASON_TYPE_INVALID
    return cause


def required(path: str, detail: str = "") -> Cause:
    """field.Required."""
    msg = "Required value" + (f": {detail}" if detail else "")
    return {"reason": REASON_REQUIRED, "message": msg, "field": path}


def forbidden(path: str, detail: str = "") -> Cause:
    """field.Forbidden."""
    msg = "Forbidden" + (f": {detail}" if detail else "")
    return {"reason": REASON_FORBIDDEN, "message": msg, "field": path}


def not_supported(path: str, value: Any, supported: Iterable[Any]) -> Cause:
    """field.NotSupported."""
    quoted = []
    for item in supported:
        text = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"))
        quoted.append(go_quote(text))
    msg = f"Unsupported value: {format_bad_value(value)}"
    if quoted:
        msg += ": supported values: " + ", ".join(quoted)
    return {"reason": REASON_NOT_SUPPORTED, "message": msg, "field": path}


def too_long(path: str, max_length: int) -> Cause:
    """field.TooLong (the value is not printed)."""
    unit = "byte" if max_length == 1 else "bytes"
    msg = f"Too long: must have at most {max_length} {unit}"
    return {"reason": REASON_TOO_LONG, "message": msg, "field": path}


def too_many(path: str, actual: int, maximum: int) -> Cause:
    """field.TooMany."""
    unit = "item" if maximum == 1 else "items"
    msg = f"Too many: {actual}: must have at most {maximum} {unit}"
    return {"reason": REASON_TOO_MANY, "message": msg, "field": path}


def duplicate(path: str, value: Any) -> Cause:
    """field.Duplicate."""
    msg = f"Duplicate value: {format_bad_value(value)}"
    return {"reason": REASON_DUPLICATE, "message": msg, "field": path}


def cause_error_text(cause: Cause) -> str:
    """``field: message`` as in an aggregated Invalid error's message."""
    return f"{cause['field']}: {cause['message']}" if cause.get("field") else cause["message"]


def invalid_message(kind: str, name: str, causes: list[Cause]) -> str:
    """Status.message of a 422, e.g. ``NIMService.apps.nvidia.com "x" is invalid: [a, b]``."""
    texts = [cause_error_text(c) for c in causes]
    if not texts:
        return f'{kind} "{name}" is invalid'
    body = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return f'{kind} "{name}" is invalid: {body}'


# --------------------------------------------------------------------------- type helpers


def json_type_name(value: Any) -> str:
    """The OpenAPI type name of a decoded JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
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


def _is_int_or_string(schema: Mapping[str, Any]) -> bool:
    return bool(schema.get("x-kubernetes-int-or-string"))


def _preserves_unknown(schema: Mapping[str, Any]) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


@functools.lru_cache(maxsize=1024)
def _compile_pattern(pattern: str) -> re.Pattern[str]:
    # ECMA/RE2 patterns in CRDs are mostly Python-compatible; \d etc. behave alike
    # on ASCII input. re.ASCII keeps \w and \d from matching non-ASCII digits.
    return re.compile(pattern, re.ASCII)


# --------------------------------------------------------------------------- formats

_HOSTNAME_RE = re.compile(
    r"^(?=.{1,255}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"
)
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+$")
_MAC_RE = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_DURATION_RE = re.compile(r"^(-?(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w))+$")
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$")


def _check_format(fmt: str, value: str) -> bool:
    """True when ``value`` satisfies ``format``; unknown formats always pass."""
    try:
        if fmt == "date-time":
            if not _DATETIME_RE.match(value):
                return False
            datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
            return True
        if fmt == "date":
            if not _DATE_RE.match(value):
                return False
            datetime.strptime(value, "%Y-%m-%d")
            return True
        if fmt == "byte":
            base64.b64decode(value, validate=True)
            return True
        if fmt in ("uuid", "uuid3", "uuid4", "uuid5"):
            parsed = uuid.UUID(value)
            want = {"uuid3": 3, "uuid4": 4, "uuid5": 5}.get(fmt)
            return len(value) == 36 and (want is None or parsed.version == want)
        if fmt == "ipv4":
            ipaddress.IPv4Address(value)
            return True
        if fmt == "ipv6":
            ipaddress.IPv6Address(value)
            return True
        if fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
            return "/" in value
        if fmt == "hostname":
            return bool(_HOSTNAME_RE.match(value))
        if fmt == "email":
            return bool(_EMAIL_RE.match(value))
        if fmt == "mac":
            return bool(_MAC_RE.match(value))
        if fmt == "duration":
            return bool(_DURATION_RE.match(value))
        if fmt == "uri":
            return bool(_URI_RE.match(value))
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------- validation


def _body_path(path: str) -> str:
    return path if path else "<root>"


def validate(schema: Mapping[str, Any], obj: Any, *, root: str = "") -> list[Cause]:
    """OpenAPI v3 (structural subset) validation of ``obj``; returns causes.

    ``root`` prefixes every field path (pass ``"spec"`` when validating only the
    spec with its sub-schema). CEL rules are not evaluated here.
    """
    causes: list[Cause] = []
    _validate_node(schema, obj, root, causes, is_root=not root)
    return causes


def _validate_node(
    schema: Mapping[str, Any], value: Any, path: str, causes: list[Cause], *, is_root: bool = False
) -> None:
    if not isinstance(schema, dict):
        return
    if value is None:
        if schema.get("nullable"):
            return
        if not schema.get("type") and not _is_int_or_string(schema):
            return
    # ---- type
    stype = schema.get("type")
    if _is_int_or_string(schema):
        if not (_matches_type("integer", value) or isinstance(value, str)):
            name = json_type_name(value)
            causes.append(
                type_invalid(
                    path,
                    name,
                    f"{_body_path(path)} in body must be of type integer,string: {go_quote(name)}",
                )
            )
            return
    elif isinstance(stype, str) and stype and not _matches_type(stype, value):
        name = json_type_name(value)
        causes.append(
            type_invalid(
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
    if isinstance(enum, list) and enum and not any(_json_equal(value, e) for e in enum):
        causes.append(not_supported(path, value, enum))
    # ---- per-type keywords
    if isinstance(value, str):
        _validate_string(schema, value, path, causes)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _validate_number(schema, value, path, causes)
    elif isinstance(value, list):
        _validate_array(schema, value, path, causes)
    elif isinstance(value, dict):
        _validate_object(schema, value, path, causes, is_root=is_root)
    # ---- junctors (value validations only, as structural schemas allow)
    _validate_junctors(schema, value, path, causes)


def _validate_string(schema: Mapping[str, Any], value: str, path: str, causes: list[Cause]) -> None:
    length = len(value)
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and length > max_length:
        causes.append(too_long(path, max_length))
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and length < min_length:
        causes.append(
            invalid(
                path,
                value,
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
                invalid(path, value, f"{_body_path(path)} in body should match '{pattern}'")
            )
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt and not _check_format(fmt, value):
        causes.append(
            type_invalid(
                path, value, f"{_body_path(path)} in body must be of type {fmt}: {go_quote(value)}"
            )
        )


def _validate_number(
    schema: Mapping[str, Any], value: float, path: str, causes: list[Cause]
) -> None:
    where = f"{_body_path(path)} in body"
    maximum = schema.get("maximum")
    if isinstance(maximum, int | float) and not isinstance(maximum, bool):
        if schema.get("exclusiveMaximum") is True:
            if value >= maximum:
                causes.append(
                    invalid(path, value, f"{where} should be less than {_format_number(maximum)}")
                )
        elif value > maximum:
            causes.append(
                invalid(
                    path,
                    value,
                    f"{where} should be less than or equal to {_format_number(maximum)}",
                )
            )
    minimum = schema.get("minimum")
    if isinstance(minimum, int | float) and not isinstance(minimum, bool):
        if schema.get("exclusiveMinimum") is True:
            if value <= minimum:
                causes.append(
                    invalid(
                        path, value, f"{where} should be greater than {_format_number(minimum)}"
                    )
                )
        elif value < minimum:
            causes.append(
                invalid(
                    path,
                    value,
                    f"{where} should be greater than or equal to {_format_number(minimum)}",
                )
            )
    multiple = schema.get("multipleOf")
    if isinstance(multiple, int | float) and not isinstance(multiple, bool) and multiple > 0:
        quotient = value / multiple
        if not math.isclose(quotient, round(quotient), rel_tol=0, abs_tol=1e-9):
            causes.append(
                invalid(path, value, f"{where} should be a multiple of {_format_number(multiple)}")
            )


def _json_equal(a: Any, b: Any) -> bool:
    """Deep equality with JSON semantics (1 == 1.0, True != 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _validate_array(
    schema: Mapping[str, Any], value: list[Any], path: str, causes: list[Cause]
) -> None:
    where = f"{_body_path(path)} in body"
    max_items = schema.get("maxItems")
    if isinstance(max_items, int) and len(value) > max_items:
        causes.append(too_many(path, len(value), max_items))
    min_items = schema.get("minItems")
    if isinstance(min_items, int) and len(value) < min_items:
        causes.append(invalid(path, value, f"{where} should have at least {min_items} items"))
    if schema.get("uniqueItems") is True:
        seen: set[str] = set()
        for item in value:
            key = _canonical(item)
            if key in seen:
                causes.append(invalid(path, value, f"{where} shouldn't contain duplicates"))
                break
            seen.add(key)
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate_node(items, item, index_path(path, i), causes)
    _validate_list_type(schema, value, path, causes)


def _validate_list_type(
    schema: Mapping[str, Any], value: list[Any], path: str, causes: list[Cause]
) -> None:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        seen: set[str] = set()
        for i, item in enumerate(value):
            key = _canonical(item)
            if key in seen:
                causes.append(duplicate(index_path(path, i), item))
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
                causes.append(duplicate(index_path(path, i), key_obj))
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
    causes: list[Cause],
    *,
    is_root: bool,
) -> None:
    where = f"{_body_path(path)} in body"
    max_props = schema.get("maxProperties")
    if isinstance(max_props, int) and len(value) > max_props:
        causes.append(too_many(path, len(value), max_props))
    min_props = schema.get("minProperties")
    if isinstance(min_props, int) and len(value) < min_props:
        causes.append(invalid(path, value, f"{where} should have at least {min_props} properties"))
    for name in schema.get("required") or []:
        if name not in value:
            causes.append(required(child_path(path, name)))
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    additional = schema.get("additionalProperties")
    for key, child in value.items():
        if is_root and key == "metadata":
            continue
        sub = props.get(key)
        if isinstance(sub, dict):
            _validate_node(sub, child, child_path(path, key), causes)
        elif isinstance(additional, dict):
            _validate_node(additional, child, child_path(path, key), causes)
    if schema.get("x-kubernetes-embedded-resource"):
        _validate_embedded(value, path, causes)


def _validate_embedded(value: Mapping[str, Any], path: str, causes: list[Cause]) -> None:
    for name in ("apiVersion", "kind"):
        got = value.get(name)
        if got is None or got == "":
            causes.append(required(child_path(path, name), "must not be empty"))
    meta = value.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        causes.append(
            type_invalid(
                child_path(path, "metadata"),
                json_type_name(meta),
                f"{child_path(path, 'metadata')} in body must be of type object: "
                f"{go_quote(json_type_name(meta))}",
            )
        )


def _validate_junctors(
    schema: Mapping[str, Any], value: Any, path: str, causes: list[Cause]
) -> None:
    where = f"{_body_path(path)} in body"
    for sub in schema.get("allOf") or []:
        if isinstance(sub, dict):
            _validate_node(sub, value, path, causes)
    any_of = schema.get("anyOf")
    if (
        isinstance(any_of, list)
        and any_of
        and not _is_int_or_string(schema)
        and not any(_passes(sub, value, path) for sub in any_of)
    ):
        causes.append(invalid(path, value, f"{where} must validate at least one schema (anyOf)"))
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and one_of:
        matches = sum(1 for sub in one_of if _passes(sub, value, path))
        if matches != 1:
            causes.append(
                invalid(path, value, f"{where} must validate one and only one schema (oneOf)")
            )
    not_schema = schema.get("not")
    if isinstance(not_schema, dict) and _passes(not_schema, value, path):
        causes.append(invalid(path, value, f"{where} must not validate the schema (not)"))


def _passes(schema: Any, value: Any, path: str) -> bool:
    if not isinstance(schema, dict):
        return True
    trial: list[Cause] = []
    _validate_node(schema, value, path, trial)
    return not trial


# --------------------------------------------------------------------------- defaulting


def apply_defaults(schema: Mapping[str, Any], obj: Any) -> Any:
    """Apply ``default`` values in place (and return ``obj``).

    Kubernetes semantics: a missing property, or a ``null`` in a property that
    is not ``nullable``, takes a deep copy of its default; a ``null`` without a
    default in a non-nullable property is removed. Defaults recurse into the
    values they add, into array items and into ``additionalProperties`` values.
    """
    _default_node(schema, obj)
    return obj


def _default_node(schema: Mapping[str, Any], value: Any) -> None:
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            for key, prop in props.items():
                if not isinstance(prop, dict):
                    continue
                present = key in value
                if present and value[key] is None and not prop.get("nullable"):
                    if "default" in prop:
                        value[key] = copy.deepcopy(prop["default"])
                    else:
                        del value[key]
                elif not present and "default" in prop:
                    value[key] = copy.deepcopy(prop["default"])
            for key, child in value.items():
                prop = props.get(key)
                if isinstance(prop, dict):
                    _default_node(prop, child)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            declared = props if isinstance(props, dict) else {}
            for key in list(value):
                if key in declared:
                    continue
                if value[key] is None and not additional.get("nullable"):
                    if "default" in additional:
                        value[key] = copy.deepcopy(additional["default"])
                    else:
                        continue
                _default_node(additional, value[key])
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                if item is None and not items.get("nullable") and "default" in items:
                    value[i] = copy.deepcopy(items["default"])
                _default_node(items, value[i])


# --------------------------------------------------------------------------- pruning


def prune(schema: Mapping[str, Any], obj: Any) -> list[str]:
    """Remove fields the schema does not declare, in place; return their paths.

    ``apiVersion``, ``kind`` and ``metadata`` are kept at the root and at every
    ``x-kubernetes-embedded-resource`` root; ``metadata`` there is reduced to
    ObjectMeta's fields. ``x-kubernetes-preserve-unknown-fields`` keeps unknown
    fields but known properties below it are still pruned.
    """
    pruned: list[str] = []
    _prune_node(schema, obj, "", pruned, is_root=True)
    return pruned


_OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


def _prune_node(
    schema: Any, value: Any, path: str, pruned: list[str], *, is_root: bool = False
) -> None:
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        embedded = is_root or bool(schema.get("x-kubernetes-embedded-resource"))
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        additional = schema.get("additionalProperties")
        preserve = _preserves_unknown(schema) or additional is True
        for key in list(value):
            child = child_path(path, key)
            if embedded and key in _ROOT_META_FIELDS:
                if key == "metadata" and isinstance(value[key], dict):
                    meta = value[key]
                    for mkey in list(meta):
                        if mkey not in _OBJECT_META_FIELDS:
                            del meta[mkey]
                            pruned.append(child_path(child, mkey))
                if key in props and key != "metadata":
                    _prune_node(props[key], value[key], child, pruned)
                continue
            sub = props.get(key)
            if isinstance(sub, dict):
                _prune_node(sub, value[key], child, pruned)
            elif isinstance(additional, dict):
                _prune_node(additional, value[key], child, pruned)
            elif not preserve:
                del value[key]
                pruned.append(child)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _prune_node(items, item, index_path(path, i), pruned)


# --------------------------------------------------------------------------- custom resources


def validate_custom_resource(
    version_schema: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[Cause]:
    """Structural validation + CEL rules for a whole custom resource.

    ``version_schema`` is the version's ``schema.openAPIV3Schema`` (a dict with
    an ``openAPIV3Schema`` key is accepted too). ``old`` is the stored object on
    update (enables ``oldSelf`` transition rules), None on create.
    """
    from nimctl_runtime.localcluster import cel

    schema = version_schema.get("openAPIV3Schema", version_schema)
    if not isinstance(schema, dict):
        return []
    causes = validate(schema, obj)
    causes.extend(_validate_metadata(schema, obj))
    if old is not None:
        causes = ratchet(schema, obj, old, causes)
    if any(c["reason"] in (REASON_TYPE_INVALID, REASON_NOT_SUPPORTED) for c in causes):
        # As kube-apiserver: CEL rules assume well-typed input, so they are
        # skipped (and the user told so) while type or enum errors remain.
        causes.append(
            invalid(
                "",
                None,
                "some validation rules were not checked because the object was invalid; "
                "correct the existing errors to complete validation",
            )
        )
        return causes
    rule_causes = cel.validate_rules(schema, obj, old)
    if old is not None:
        rule_causes = ratchet(schema, obj, old, rule_causes)
    causes.extend(rule_causes)
    return causes


# --------------------------------------------------------------------------- ratcheting

_PATH_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_ABSENT: Any = object()


def _parse_path(path: str) -> list[str | int] | None:
    tokens: list[str | int] = []
    pos = 0
    while pos < len(path):
        if path[pos] == ".":
            pos += 1
            continue
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            return None
        tokens.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        pos = match.end()
    return tokens


def _correlated(
    schema: Any, new: Any, old: Any, tokens: list[str | int]
) -> tuple[Any, Any]:
    """The values at ``tokens`` in ``new`` and its correlated counterpart in ``old``."""
    for token in tokens:
        if isinstance(token, int):
            if not isinstance(new, list) or token >= len(new):
                return _ABSENT, _ABSENT
            item = new[token]
            node = schema if isinstance(schema, dict) else {}
            keys = node.get("x-kubernetes-list-map-keys") or []
            items = node.get("items") if isinstance(node.get("items"), dict) else {}
            if (
                node.get("x-kubernetes-list-type") == "map"
                and keys
                and isinstance(item, dict)
                and isinstance(old, list)
            ):
                key = map_list_key(item, keys, items)
                old = next(
                    (
                        o
                        for o in old
                        if isinstance(o, dict) and key is not None
                        and map_list_key(o, keys, items) == key
                    ),
                    _ABSENT,
                )
            elif isinstance(old, list) and _json_equal(old, new):
                old = old[token]
            else:
                old = _ABSENT
            new, schema = item, items
        else:
            node = schema if isinstance(schema, dict) else {}
            props = node.get("properties")
            sub = props.get(token) if isinstance(props, dict) else None
            if sub is None and isinstance(node.get("additionalProperties"), dict):
                sub = node["additionalProperties"]
            new = new.get(token, _ABSENT) if isinstance(new, dict) else _ABSENT
            old = old.get(token, _ABSENT) if isinstance(old, dict) else _ABSENT
            schema = sub if isinstance(sub, dict) else {}
    return new, old


def ratchet(
    schema: Mapping[str, Any], obj: Any, old: Any, causes: list[Cause]
) -> list[Cause]:
    """Drop causes about values an update left unchanged (validation ratcheting).

    As kube-apiserver since v1.30: an update may keep a value that newer
    validation would reject, as long as it does not change it. The value is
    found by the cause's path, correlating map-list items by key (other lists
    only when unchanged as a whole); a missing required field is judged by its
    parent object. Causes whose path cannot be resolved are kept.
    """
    kept: list[Cause] = []
    for cause in causes:
        tokens = _parse_path(cause.get("field", ""))
        if not tokens:
            kept.append(cause)
            continue
        if cause.get("reason") == REASON_REQUIRED:
            tokens = tokens[:-1]
            if not tokens:
                kept.append(cause)
                continue
        new_value, old_value = _correlated(schema, obj, old, tokens)
        if new_value is _ABSENT or old_value is _ABSENT or not _json_equal(new_value, old_value):
            kept.append(cause)
    return kept


def _validate_metadata(schema: Mapping[str, Any], obj: Mapping[str, Any]) -> list[Cause]:
    """Root ``metadata.name``/``generateName`` restrictions from the schema."""
    props = schema.get("properties")
    meta_schema = props.get("metadata") if isinstance(props, dict) else None
    meta = obj.get("metadata")
    if not isinstance(meta_schema, dict) or not isinstance(meta, dict):
        return []
    meta_props = meta_schema.get("properties")
    if not isinstance(meta_props, dict):
        return []
    causes: list[Cause] = []
    for key in ("name", "generateName"):
        sub = meta_props.get(key)
        if isinstance(sub, dict) and key in meta:
            _validate_node(sub, meta[key], f"metadata.{key}", causes)
    return causes


# --------------------------------------------------------------------------- structural check

_JUNCTOR_FORBIDDEN = ("type", "default", "additionalProperties", "nullable", "description")


def check_structural(schema: Mapping[str, Any], *, root: str = "openAPIV3Schema") -> list[str]:
    """Reasons ``schema`` is not a structural schema (empty when it is).

    Each message is ``<path>: <error body>`` in apimachinery's wording. CEL
    rules are checked separately by ``cel.check_rules`` (both together, as
    causes: :func:`crd_schema_causes`).
    """
    errors: list[str] = []
    if not isinstance(schema, dict):
        return [f"{root}: Required value: must be an object"]
    _check_node(schema, root, errors, is_root=True, in_junctor=False)
    if not errors:
        _check_defaults(schema, root, "", errors)
    return errors


def _check_defaults(schema: Any, path: str, field: str, errors: list[str]) -> None:
    """Every ``default`` must survive pruning and validate against its own node."""
    if not isinstance(schema, dict):
        return
    if "default" in schema and field:
        value = copy.deepcopy(schema["default"])
        if isinstance(value, dict | list):
            pruned = _prune_default(schema, value, field)
            for unknown in pruned:
                errors.append(f"{path}.default: Forbidden: unknown field \"{unknown}\"")
            # Nested defaults apply to a default value too before it is judged.
            value = apply_defaults(schema, value)
        for cause in validate(schema, value, root=field):
            below = cause["field"][len(field) :] if cause["field"].startswith(field) else ""
            errors.append(f"{path}.default{below}: {cause['message']}")
    props = schema.get("properties")
    if isinstance(props, dict):
        for key, sub in props.items():
            if not field and key == "metadata":
                continue
            _check_defaults(sub, f"{path}.properties[{key}]", child_path(field, key), errors)
    items = schema.get("items")
    if isinstance(items, dict):
        _check_defaults(items, f"{path}.items", index_path(field, 0), errors)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        _check_defaults(additional, f"{path}.additionalProperties", f"{field}[key]", errors)


def _prune_default(schema: Mapping[str, Any], value: Any, field: str) -> list[str]:
    pruned: list[str] = []
    _prune_node(schema, value, field, pruned)
    return pruned


_REASON_BY_BODY = (
    ("Required value", REASON_REQUIRED),
    ("Forbidden", REASON_FORBIDDEN),
    ("Unsupported value", REASON_NOT_SUPPORTED),
    ("Invalid value", REASON_INVALID),
)


def crd_schema_causes(
    schema: Mapping[str, Any], *, root: str = "spec.validation.openAPIV3Schema"
) -> list[Cause]:
    """Structural and CEL problems of a CRD version's schema as 422 causes.

    ``root`` is the schema's path in the CRD, e.g.
    ``spec.versions[0].schema.openAPIV3Schema``; each cause's ``field`` is the
    offending node's path below it.
    """
    from nimctl_runtime.localcluster import cel

    problems = check_structural(schema, root=root)
    if isinstance(schema, dict):
        problems.extend(cel.check_rules(schema, root=root))
    causes: list[Cause] = []
    for problem in problems:
        field, sep, body = problem.partition(": ")
        if not sep:
            field, body = root, problem
        reason = next((r for prefix, r in _REASON_BY_BODY if body.startswith(prefix)), "")
        causes.append({"reason": reason or REASON_INVALID, "message": body, "field": field})
    return causes


def _check_node(
    schema: Mapping[str, Any],
    path: str,
    errors: list[str],
    *,
    is_root: bool = False,
    in_junctor: bool,
) -> None:
    int_or_string = _is_int_or_string(schema)
    preserve = _preserves_unknown(schema)
    stype = schema.get("type")
    if in_junctor:
        for key in _JUNCTOR_FORBIDDEN:
            if key in schema:
                errors.append(f"{path}.{key}: Forbidden: must be empty to be structural")
    elif not stype and not int_or_string and not preserve:
        what = "at the root" if is_root else "for specified object fields"
        errors.append(f"{path}.type: Required value: must not be empty {what}")
    if is_root and stype not in (None, "object"):
        errors.append(f'{path}.type: Invalid value: "{stype}": must be object at the root')
    if stype is not None and stype not in (
        "object",
        "array",
        "string",
        "integer",
        "number",
        "boolean",
    ):
        errors.append(
            f"{path}.type: Unsupported value: {go_quote(str(stype))}: supported values: "
            '"array", "boolean", "integer", "number", "object", "string"'
        )
    if schema.get("additionalProperties") is False:
        errors.append(f"{path}.additionalProperties: Forbidden: must not be used with false")
    if isinstance(schema.get("additionalProperties"), Mapping) and schema.get("properties"):
        errors.append(
            f"{path}.additionalProperties: Forbidden: additionalProperties and properties "
            "are mutual exclusive"
        )
    if schema.get("uniqueItems") is True:
        errors.append(
            f"{path}.uniqueItems: Forbidden: uniqueItems cannot be set to true since the "
            "runtime complexity becomes quadratic"
        )
    if stype == "array" and not isinstance(schema.get("items"), Mapping) and not in_junctor:
        errors.append(f"{path}.items: Required value: must be specified")
    if int_or_string and stype not in (None, ""):
        errors.append(f"{path}.type: Forbidden: must be empty for x-kubernetes-int-or-string")
    if schema.get("x-kubernetes-embedded-resource"):
        if stype != "object":
            errors.append(
                f"{path}.type: Invalid value: {go_quote(str(stype))}: must be object if "
                "x-kubernetes-embedded-resource is true"
            )
        if not preserve and not schema.get("properties"):
            errors.append(
                f"{path}.properties: Required value: must not be empty if "
                "x-kubernetes-embedded-resource is true without "
                "x-kubernetes-preserve-unknown-fields"
            )
    list_type = schema.get("x-kubernetes-list-type")
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errors.append(
            f"{path}.x-kubernetes-list-type: Unsupported value: {go_quote(str(list_type))}: "
            'supported values: "atomic", "set", "map"'
        )
    if list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys")
        if not keys:
            errors.append(
                f"{path}.x-kubernetes-list-map-keys: Required value: must not be empty if "
                "x-kubernetes-list-type is map"
            )
        items = schema.get("items")
        if isinstance(items, dict):
            item_props = items.get("properties") or {}
            item_required = items.get("required") or []
            for key in keys or []:
                if key not in item_props:
                    errors.append(
                        f"{path}.x-kubernetes-list-map-keys: Invalid value: {go_quote(key)}: "
                        "entries must all be names of item properties"
                    )
                elif key not in item_required and "default" not in item_props[key]:
                    errors.append(
                        f"{path}.items.properties[{key}].default: Required value: this property "
                        "is in x-kubernetes-list-map-keys, so it must have a default or be a "
                        "required property"
                    )
    if is_root and isinstance(schema.get("properties"), Mapping):
        meta = schema["properties"].get("metadata")
        if isinstance(meta, dict):
            extra = set(meta) - {"type", "properties", "description"}
            meta_props = meta.get("properties") or {}
            extra_props = set(meta_props) - {"name", "generateName"}
            if extra or extra_props:
                errors.append(
                    f"{path}.properties[metadata]: Forbidden: must not specify anything other "
                    "than name and generateName, but metadata is implicitly specified"
                )
    props = schema.get("properties")
    if isinstance(props, dict):
        for key, sub in props.items():
            if is_root and key == "metadata":
                continue
            if isinstance(sub, dict):
                _check_node(sub, f"{path}.properties[{key}]", errors, in_junctor=in_junctor)
    items = schema.get("items")
    if isinstance(items, dict):
        _check_node(items, f"{path}.items", errors, in_junctor=in_junctor)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        _check_node(additional, f"{path}.additionalProperties", errors, in_junctor=in_junctor)
    for junctor in ("allOf", "anyOf", "oneOf"):
        subs = schema.get(junctor)
        if isinstance(subs, list):
            for i, sub in enumerate(subs):
                if isinstance(sub, dict):
                    if int_or_string and junctor == "anyOf":
                        continue
                    _check_node(sub, f"{path}.{junctor}[{i}]", errors, in_junctor=True)
    not_schema = schema.get("not")
    if isinstance(not_schema, dict):
        _check_node(not_schema, f"{path}.not", errors, in_junctor=True)
