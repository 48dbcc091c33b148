"""The API reference, generated from the models: every field path of every kind
with its type, default, whether it is required and its description. It feeds
``docs/reference/api.md`` (regenerate with ``python -m api.reference``) and the
field-path inventory tests.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from api.base import (
    ApiModel,
    CustomResource,
    Rule,
    ShapedDict,
    _Format,
    _IntOrString,
    _PreserveUnknown,
)
from api.k8s import CoreType
from api.serialize import kind_registry

__all__ = ["DOC_PATH", "FieldDoc", "field_docs", "main", "render_markdown", "rule_docs"]

DOC_PATH: Final = Path("docs/reference/api.md")


@dataclass(frozen=True)
class FieldDoc:
    """One field of a kind."""

    path: str
    type: str
    default: str
    required: bool
    description: str


def _type_name(annotation: Any, metadata: list[Any]) -> tuple[str, type[BaseModel] | None, bool]:
    """(display name, nested model to descend into, is-list) of an annotation."""
    for meta in metadata:
        if isinstance(meta, CoreType):
            return (
                f"core {meta.name.rsplit('.', 2)[-2]}/{meta.name.rsplit('.', 1)[-1]}",
                None,
                False,
            )
        if isinstance(meta, _IntOrString):
            return ("quantity" if meta.pattern else "int-or-string"), None, False
        if isinstance(meta, ShapedDict):
            return meta.model.__name__, meta.model, False
        if isinstance(meta, _PreserveUnknown):
            return "object (free-form)", None, False
        if isinstance(meta, _Format):
            return meta.fmt, None, False
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = get_args(annotation)
        return _type_name(inner, [*extra, *metadata])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _type_name(args[0], metadata)
        return " | ".join(_type_name(a, [])[0] for a in args), None, False
    if origin is Literal:
        return " \\| ".join(f'"{v}"' for v in get_args(annotation)), None, False
    if origin is list:
        name, model, _ = _type_name(get_args(annotation)[0], [])
        return f"[]{name}", model, True
    if origin is dict:
        key, value = get_args(annotation)
        return f"map[{_type_name(key, [])[0]}]{_type_name(value, [])[0]}", None, False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.__name__, annotation, False
    simple = {str: "string", int: "integer", bool: "boolean", float: "number"}
    if isinstance(annotation, type) and annotation in simple:
        return simple[annotation], None, False
    return str(annotation), None, False


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None or info.default is None:
        return ""
    default = info.default
    if default is ... or repr(default) == "PydanticUndefined":
        return ""
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, str):
        return f'"{default}"'
    return str(default)


def field_docs(model: type[BaseModel], prefix: str = "") -> Iterator[FieldDoc]:
    """Every field path below ``model`` (core types are leaves)."""
    for name, info in model.model_fields.items():
        if issubclass(model, CustomResource) and name in ("api_version", "kind", "metadata"):
            continue
        alias = info.alias or name
        path = f"{prefix}.{alias}" if prefix else alias
        type_name, nested, is_list = _type_name(info.annotation, list(info.metadata))
        description = " ".join((info.description or "").split())
        yield FieldDoc(path, type_name, _default(info), info.is_required(), description)
        if nested is not None:
            yield from field_docs(nested, f"{path}[]" if is_list else path)


def rule_docs(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Rule]]:
    """(field path, rule) of every CEL rule below ``model``, as the CRD carries them."""
    if issubclass(model, ApiModel):
        for rule in model.validations:
            yield prefix or ".", rule
    for name, info in model.model_fields.items():
        if issubclass(model, CustomResource) and name in ("api_version", "kind", "metadata"):
            continue
        alias = info.alias or name
        path = f"{prefix}.{alias}" if prefix else alias
        _type, nested, is_list = _type_name(info.annotation, list(info.metadata))
        if nested is not None:
            yield from rule_docs(nested, f"{path}[]" if is_list else path)
        extra = info.json_schema_extra
        raws = extra.get("x-kubernetes-validations") if isinstance(extra, dict) else None
        for raw in raws if isinstance(raws, list) else []:
            if isinstance(raw, dict):
                yield path, Rule(str(raw["rule"]), str(raw["message"]))


def render_markdown() -> str:
    """The whole ``docs/reference/api.md``."""
    lines = [
        "# API reference",
        "",
        "Generated from the models in `api/` by `python -m api.reference`; do not edit.",
        "Types named `<group>/<version> <Kind>` are Kubernetes types, validated against the",
        "Kubernetes OpenAPI definitions of the version each API group embeds (NIM/NeMo "
        "kinds: v1.34, GPU kinds: v1.36; see `api/apps/v1alpha1/core_types.py` and "
        "`api/nvidia/core_types.py`).",
        "",
    ]
    for (api_version, kind), model in kind_registry.items():
        info = model.kind_info
        lines += [
            f"## {kind} ({api_version})",
            "",
            " ".join((model.__doc__ or "").split()),
            "",
            f"Scope: {info.scope}. Plural: `{info.plural}`.",
            "",
            "| Field | Type | Default | Required | Description |",
            "|---|---|---|---|---|",
        ]
        for doc in field_docs(model):
            desc = doc.description.replace("|", "\\|")
            required = "yes" if doc.required else ""
            lines.append(f"| `{doc.path}` | {doc.type} | {doc.default} | {required} | {desc} |")
        lines += [
            "",
            f"Validation rules of {kind} (`x-kubernetes-validations`; rules reading "
            "`oldSelf` apply on update):",
            "",
            "| Field | Message | Rule |",
            "|---|---|---|",
        ]
        for path, rule in rule_docs(model):
            cel = rule.rule.replace("|", "\\|")
            lines.append(f"| `{path}` | {rule.message} | `{cel}` |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Write ``docs/reference/api.md`` (or the path given) from the models."""
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else DOC_PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_markdown(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
