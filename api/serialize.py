"""Load any API kind from YAML or a dict into its typed model, and dump it back.

* YAML is read as kubectl reads it (YAML 1.1: an unquoted ``yes``, ``on`` or ``y``
  is a boolean), so a manifest is judged here as the API server will judge it.
* :func:`load` / :func:`load_all` pick the model from ``apiVersion`` and ``kind``
  (:data:`kind_registry`) and raise :class:`LoadError`, whose lines name the field
  path of each problem (``spec.storage.pvc.size: ...``).
* :func:`dump` returns the dict the user wrote: fields the user did not set are
  not added (``defaults=True`` adds the CRD defaults, as the API server would).
* :func:`dump_yaml` writes YAML with ruamel.yaml.
"""

from __future__ import annotations

import datetime
import importlib
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Any, Final

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML

from api.base import CustomResource, to_kubernetes

__all__ = [
    "FieldError",
    "LoadError",
    "dump",
    "dump_yaml",
    "kind_registry",
    "load",
    "load_all",
    "model_for",
    "to_plain",
    "yaml_dump_all",
]

_KIND_PACKAGES: Final = ("api.apps.v1alpha1", "api.nvidia.v1", "api.nvidia.v1alpha1")


def _collect_kinds() -> Mapping[tuple[str, str], type[CustomResource]]:
    found: dict[tuple[str, str], type[CustomResource]] = {}
    for name in _KIND_PACKAGES:
        try:
            module: ModuleType = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name is not None and name.startswith(err.name):
                continue  # that API group is not written yet
            raise
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, CustomResource)
                and "kind_info" in value.__dict__
            ):
                info = value.kind_info
                found[(info.api_version, info.kind)] = value
    return MappingProxyType(dict(sorted(found.items())))


kind_registry: Final = _collect_kinds()
"""Read-only map (apiVersion, kind) -> model class of every kind we serve."""


@dataclass(frozen=True)
class FieldError:
    """One problem in a manifest: the JSON path of the field and what is wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class LoadError(ValueError):
    """A manifest that does not parse into its model; one line per field."""

    def __init__(self, what: str, errors: list[FieldError]) -> None:
        self.what = what
        self.errors = errors
        lines = "\n".join(f"  {e}" for e in errors)
        super().__init__(f"{what} is invalid:\n{lines}")


def to_plain(value: Any) -> Any:
    """Plain JSON-shaped Python (dict, list, str, int, float, bool, None) from YAML
    output; timestamps become RFC 3339 strings as in Kubernetes' YAML decoding."""
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


def _format_loc(loc: Iterable[int | str]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.startswith(("function-", "json-or-python", "lax-or-strict")) or part in {
            "int",
            "str",
            "literal",
        }:
            continue  # pydantic's internal union/validator branch names
        else:
            text += f".{part}" if text else part
    return text


def _field_errors(err: ValidationError) -> list[FieldError]:
    out: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for item in err.errors(include_url=False):
        message = str(item["msg"])
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        path = _format_loc(item["loc"])
        ctx = item.get("ctx") or {}
        if item["type"] == "kubernetes_schema":
            inner = str(ctx.get("where", ""))
            if inner:
                path = f"{path}{inner}" if inner.startswith("[") else f"{path}.{inner}"
            message = str(ctx.get("detail", message))
        elif item["type"] == "missing":
            message = "Required value"
        elif item["type"] == "extra_forbidden":
            message = "unknown field"
        key = (path, message)
        if key not in seen:
            seen.add(key)
            out.append(FieldError(path, message))
    return out


def model_for(api_version: str, kind: str) -> type[CustomResource]:
    """The model class of ``apiVersion``/``kind``; KeyError names what is served."""
    try:
        return kind_registry[(api_version, kind)]
    except KeyError:
        known = ", ".join(f"{v}/{k}" for v, k in kind_registry)
        raise KeyError(f"no kind {kind!r} in {api_version!r}; known: {known}") from None


def _parse_yaml(text: str | bytes) -> list[Any]:
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)  # kubectl's YAML: unquoted yes/no/on/off/y/n are booleans
    return [to_plain(doc) for doc in yaml.load_all(text) if doc is not None]


def load(source: str | bytes | Mapping[str, Any]) -> CustomResource:
    """Parse one object (a YAML document or a dict) into its model."""
    docs: list[Any] = [to_plain(source)] if isinstance(source, Mapping) else _parse_yaml(source)
    if len(docs) != 1:
        raise LoadError("manifest", [FieldError("", f"expected one document, got {len(docs)}")])
    return _load_one(docs[0])


def load_all(source: str | bytes) -> list[CustomResource]:
    """Parse every document of a YAML stream into its model."""
    return [_load_one(doc) for doc in _parse_yaml(source)]


def _load_one(obj: Any) -> CustomResource:
    if not isinstance(obj, dict):
        raise LoadError("manifest", [FieldError("", "a manifest must be a mapping")])
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    missing = [FieldError(k, "Required value") for k in ("apiVersion", "kind") if not obj.get(k)]
    if missing:
        raise LoadError("manifest", missing)
    try:
        model = model_for(str(api_version), str(kind))
    except KeyError as err:
        raise LoadError("manifest", [FieldError("kind", str(err.args[0]))]) from None
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    where = f"{meta['namespace']}/{name}" if meta.get("namespace") else str(name)
    try:
        return model.model_validate(obj)
    except ValidationError as err:
        raise LoadError(f"{kind} {where}", _field_errors(err)) from None


def dump(model: BaseModel, *, defaults: bool = False) -> dict[str, Any]:
    """The object as a JSON-shaped dict with JSON field names.

    Without ``defaults`` only what the user set is written (a round trip keeps the
    manifest as written); with ``defaults`` the CRD defaults are filled in as the
    API server would.
    """
    if defaults:
        out = to_kubernetes(model)
    else:
        out = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    if isinstance(model, CustomResource):
        info = type(model).kind_info
        out = {"apiVersion": info.api_version, "kind": info.kind, **out}
    return out


def dump_yaml(models: BaseModel | Iterable[BaseModel], *, defaults: bool = False) -> str:
    """YAML for one model, or a ``---`` separated stream for several."""
    items = [models] if isinstance(models, BaseModel) else list(models)
    return yaml_dump_all([dump(m, defaults=defaults) for m in items])


def yaml_dump_all(docs: Iterable[Any], *, width: int = 80, explicit_start: bool = False) -> str:
    """YAML that kubectl reads back unchanged: strings a YAML 1.1 reader would take
    for booleans or numbers (``y``, ``on``, ``0755``) are quoted."""
    yaml = YAML()
    yaml.version = (1, 1)
    yaml.default_flow_style = False
    yaml.width = width
    buf = io.StringIO()
    yaml.dump_all(list(docs), buf)
    lines = [line for line in buf.getvalue().splitlines(keepends=True) if line != "%YAML 1.1\n"]
    if not explicit_start and lines and lines[0] == "---\n":
        lines = lines[1:]
    return "".join(lines)
