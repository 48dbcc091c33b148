"""Generate one apiextensions.k8s.io/v1 CustomResourceDefinition per kind from the
typed models, as ``nimctl crds [--output DIR]`` does.

The schema is the model's JSON schema turned structural: ``$ref`` inlined,
``Optional`` collapsed, ``title`` and ``null`` defaults dropped, one-value enums
kept as enums, required lists sorted, embedded Kubernetes core types inlined
(see :mod:`api.k8s`), CEL rules, list types and map keys carried from the model
markers. Output is byte-stable: mapping keys are sorted and written by ruamel.yaml.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from api.base import REQUIRED_MARKER, CustomResource, KindInfo
from api.serialize import kind_registry, yaml_dump_all

__all__ = [
    "crd_file_name",
    "generate_crd",
    "generate_crds",
    "list_map_key_problems",
    "main",
    "to_yaml",
]

_DROP: Final = frozenset({"title", "x-nimctl-core-type", "$defs"})
_MERGE_LISTS: Final = frozenset({"x-kubernetes-validations"})


def _resolve(node: Any, defs: Mapping[str, Any]) -> Any:
    """Inline refs and collapse Optional; return a structural schema node."""
    if isinstance(node, list):
        return [_resolve(v, defs) for v in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    base: dict[str, Any] | None = None
    ref = node.pop("$ref", None)
    if isinstance(ref, str):
        base = _resolve(defs[ref.rsplit("/", 1)[-1]], defs)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        node.pop("allOf")
        base = _resolve(all_of[0], defs)
    any_of = node.get("anyOf")
    if isinstance(any_of, list):
        non_null = [b for b in any_of if b != {"type": "null"}]
        if len(non_null) < len(any_of):
            node.pop("anyOf")
            if len(non_null) == 1:
                base = _merge(base or {}, _resolve(non_null[0], defs))
            else:
                node["anyOf"] = non_null
    out: dict[str, Any] = dict(base or {})
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "default" and value is None:
            continue
        if key == "const":
            out["enum"] = [value]
            continue
        if key == "properties":
            out["properties"] = {k: _resolve(v, defs) for k, v in value.items()}
            continue
        if key == "required":
            out["required"] = sorted(value)
            continue
        if key in ("items", "additionalProperties", "anyOf"):
            out[key] = _resolve(value, defs)
            continue
        if key in _MERGE_LISTS and key in out:
            out[key] = [*out[key], *value]
            continue
        out[key] = value
    defaulted_required = sorted(
        name for name, sub in out.get("properties", {}).items() if sub.pop(REQUIRED_MARKER, False)
    )
    if defaulted_required:
        out["required"] = sorted({*out.get("required", []), *defaulted_required})
    if out.get("additionalProperties") is False:
        out.pop("additionalProperties")
    if out.get("additionalProperties") is True and out.get("x-kubernetes-preserve-unknown-fields"):
        # extra="allow" on a typed object: the CRD keeps unknown fields instead.
        out.pop("additionalProperties")
    if "properties" in out and "type" not in out:
        out["type"] = "object"
    return out


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if key in _MERGE_LISTS and key in out:
            out[key] = [*out[key], *value]
        else:
            out[key] = value
    return out


def _openapi_schema(model: type[CustomResource]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    schema: dict[str, Any] = _resolve(raw, defs)
    props = schema["properties"]
    props["apiVersion"] = {
        "description": "APIVersion defines the versioned schema of this representation of an "
        "object. Servers should convert recognized schemas to the latest internal value, and "
        "may reject unrecognized values. More info: https://git.k8s.io/community/contributors/"
        "devel/sig-architecture/api-conventions.md#resources",
        "type": "string",
    }
    props["kind"] = {
        "description": "Kind is a string value representing the REST resource this object "
        "represents. Servers may infer this from the endpoint the client submits requests to. "
        "Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/"
        "devel/sig-architecture/api-conventions.md#types-kinds",
        "type": "string",
    }
    props["metadata"] = {"type": "object"}
    schema.pop("required", None)
    schema["type"] = "object"
    return schema


def list_map_key_problems(schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Paths of ``x-kubernetes-list-map-keys`` entries that are neither required nor
    defaulted: the API server refuses such a CRD."""
    problems: list[str] = []
    keys = schema.get("x-kubernetes-list-map-keys")
    items = schema.get("items")
    if isinstance(keys, list) and isinstance(items, Mapping):
        required = set(items.get("required", []))
        props = items.get("properties", {})
        for key in keys:
            if key not in required and "default" not in props.get(key, {}):
                problems.append(f"{path}[].{key}")
    for name, sub in schema.get("properties", {}).items():
        problems += list_map_key_problems(sub, f"{path}.{name}" if path else name)
    for child in ("items", "additionalProperties"):
        sub = schema.get(child)
        if isinstance(sub, Mapping):
            problems += list_map_key_problems(sub, f"{path}[]" if child == "items" else path)
    return problems


def generate_crd(model: type[CustomResource]) -> dict[str, Any]:
    """The CRD of one kind (ValueError when the API server would refuse it)."""
    info: KindInfo = model.kind_info
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.singular_name,
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    if info.categories:
        names["categories"] = list(info.categories)
    schema = _openapi_schema(model)
    problems = list_map_key_problems(schema)
    if problems:
        raise ValueError(
            f"{info.kind}: list-map keys must be required or defaulted: {', '.join(problems)}"
        )
    version: dict[str, Any] = {
        "name": info.version,
        "schema": {"openAPIV3Schema": schema},
        "served": info.served,
        "storage": info.storage,
    }
    if info.printer_columns:
        version["additionalPrinterColumns"] = [c.to_schema() for c in info.printer_columns]
    subresources: dict[str, Any] = {}
    if info.status_subresource:
        subresources["status"] = {}
    if info.scale is not None:
        subresources["scale"] = dict(info.scale)
    if subresources:
        version["subresources"] = subresources
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": info.crd_name},
        "spec": {
            "group": info.group,
            "names": names,
            "scope": info.scope,
            "versions": [version],
        },
    }


def generate_crds() -> list[dict[str, Any]]:
    """One CRD per kind in :data:`api.serialize.kind_registry`, ordered by CRD name."""
    crds = [generate_crd(model) for model in kind_registry.values()]
    return sorted(crds, key=lambda c: str(c["metadata"]["name"]))


_generated: dict[tuple[int, ...], str] = {}


def installable_crds() -> list[dict[str, Any]]:
    """:func:`generate_crds`, computed once per set of registered kinds; a fresh copy each call.

    Generating the JSON schemas takes about a second of CPU; a process that installs the
    CRDs on many clusters (the test suite) pays it once.
    """
    key = tuple(id(model) for model in kind_registry.values())
    text = _generated.get(key)
    if text is None:
        text = _generated[key] = json.dumps(generate_crds())
    crds: list[dict[str, Any]] = json.loads(text)
    return crds


def crd_file_name(crd: Mapping[str, Any]) -> str:
    """``<group>_<plural>.yaml``, as controller-gen names them."""
    spec = crd["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.yaml"


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def to_yaml(docs: Iterable[Mapping[str, Any]]) -> str:
    """Byte-stable YAML (sorted keys, ``---`` between documents)."""
    return yaml_dump_all([_sorted(d) for d in docs], width=4096, explicit_start=True)


def main(output_dir: str | None) -> int:
    """Write the CRDs: one file per kind into ``output_dir``, or a stream to stdout."""
    crds = generate_crds()
    if output_dir is None:
        sys.stdout.write(to_yaml(crds))
        return 0
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    for crd in crds:
        (out / crd_file_name(crd)).write_text(to_yaml([crd]), encoding="utf-8")
    return 0
