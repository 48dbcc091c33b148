"""Is a CRD's schema structural? The check kube-apiserver makes when a CRD is registered.

:func:`check_structural` returns readable reasons (``<path>: <error body>`` in
apimachinery's wording) a schema is not structural: missing types, junctors
with types or defaults, ``additionalProperties`` next to ``properties``, bad
list types and map keys, metadata beyond name/generateName, and defaults that
would not survive pruning or do not validate against their own node.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from nimctl_runtime.field import child_path, go_quote, index_path

from .schema_defaults import apply_defaults
from .schema_prune import prune_node
from .schema_validate import is_int_or_string, preserves_unknown, validate

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
                errors.append(f'{path}.default: Forbidden: unknown field "{unknown}"')
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
    prune_node(schema, value, field, pruned)
    return pruned


def _check_node(
    schema: Mapping[str, Any],
    path: str,
    errors: list[str],
    *,
    is_root: bool = False,
    in_junctor: bool,
) -> None:
    int_or_string = is_int_or_string(schema)
    preserve = preserves_unknown(schema)
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
