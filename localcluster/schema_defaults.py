"""Defaulting of custom resources from their structural schema (``default``).

:func:`apply_defaults` fills defaults in place with kube-apiserver's semantics:
a missing property, or a ``null`` in a property that is not ``nullable``,
takes a deep copy of its default; a ``null`` without a default in a
non-nullable property is removed; defaults recurse into the values they add,
into array items and into ``additionalProperties`` values.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


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
