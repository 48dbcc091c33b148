"""The edge where a stored custom resource stops being a dict: parse it into its typed model.

The controllers' ``Kind.parse`` and ``nimctl render`` call :func:`parse` once per
object; renders and readiness then read the model's attributes. Kubernetes core
types inside a spec (env, resources, affinity, probes, ...) stay plain dicts in
the model (``api.k8s``), in the shape the builders in ``manifests`` take.

An object that does not fit its model raises :class:`InvalidResource`, whose
``problems`` name each field path (``spec.storage.pvc.size: ...``), so a
controller reports ``Failed`` with what to fix instead of crashing.

:func:`spec_json` is a spec as the JSON it was parsed from (for a stored object:
the user's fields plus CRD defaults, no nulls): the value the
``nvidia.com/parent-spec-hash`` is taken of.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from api.base import STORED, CustomResource
from nimctl_runtime.meta import name_of
from platforms.contract import ReconcileError

__all__ = [
    "MAX_PROBLEMS",
    "InvalidResource",
    "apply_defaults",
    "drop_none",
    "parse",
    "parse_or_fail",
    "spec_json",
]

M = TypeVar("M", bound=CustomResource)
B = TypeVar("B", bound=BaseModel)
MAX_PROBLEMS = 5
"""At most this many field problems are named in one message."""


class InvalidResource(ValueError):
    """A stored object that does not fit its model; ``problems`` are ``path: message``."""

    def __init__(self, kind: str, problems: list[str]) -> None:
        self.kind = kind
        self.problems = problems
        super().__init__(f"{kind} spec is invalid: {'; '.join(problems[:MAX_PROBLEMS])}")


def parse(model: type[M], obj: M | Mapping[str, Any], *, stored: bool = False) -> M:
    """``obj`` as ``model`` (returned as is when it is one already).

    ``stored``: ``obj`` was read from the API server, which enforced the CRD's
    CEL rules when it was written; they are not evaluated again (``api.base.STORED``).
    """
    if isinstance(obj, model):
        return obj
    try:
        return model.model_validate(obj, context=STORED if stored else None)
    except ValidationError as err:
        raise InvalidResource(model.kind_info.kind, _problems(err)) from None


def parse_or_fail(
    model: type[M], obj: Mapping[str, Any], reason: str, *, stored: bool = False
) -> M:
    """``obj`` as ``model``, or a ``ReconcileError`` with ``reason`` naming the first
    field problem (``invalid ClusterPolicy cp: spec.driver.version: ...``)."""
    try:
        return parse(model, obj, stored=stored)
    except InvalidResource as err:
        first = err.problems[0] if err.problems else "does not fit its schema"
        raise ReconcileError(f"invalid {err.kind} {name_of(obj)}: {first}", reason=reason) from None


def spec_json(value: BaseModel) -> dict[str, Any]:
    """A spec (or part of one) as the JSON it was parsed from: the fields that were
    given, without nulls. Parsed from the API server, that is the stored object,
    CRD defaults included; parsed from a file, what the user wrote."""
    out: dict[str, Any] = drop_none(
        value.model_dump(by_alias=True, exclude_unset=True, exclude_none=True, mode="json")
    )
    return out


def apply_defaults(model: B) -> B:
    """``model`` as the API server would store it: its CRD defaults count as given.

    For a model parsed from a file (``nimctl render``): the API server fills in
    the CRD defaults before the operator reads an object, so the render (and
    the spec hash) see the same fields offline as in the cluster. Marks, in
    place and all the way down, each unset field with a plain default as set
    (as ``api.base.iter_set_fields`` lists them); returns ``model``.
    """
    fields_set = set(model.model_fields_set)
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if name not in fields_set and info.default_factory is None and value is not None:
            fields_set.add(name)
        if name in fields_set:
            _defaults_in(value)
    object.__setattr__(model, "__pydantic_fields_set__", fields_set)
    return model


def _defaults_in(value: Any) -> None:
    if isinstance(value, BaseModel):
        apply_defaults(value)
    elif isinstance(value, list | tuple):
        for item in value:
            _defaults_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            _defaults_in(item)


def _problems(err: ValidationError) -> list[str]:
    out: list[str] = []
    for item in err.errors(include_url=False):
        message = str(item["msg"]).removeprefix("Value error, ")
        path = _path(item["loc"])
        if item["type"] == "kubernetes_schema":
            where = str((item.get("ctx") or {}).get("where", ""))
            if where:
                path = f"{path}{where}" if where.startswith("[") else f"{path}.{where}"
            message = str((item.get("ctx") or {}).get("detail", message))
        elif item["type"] == "missing":
            message = "Required value"
        elif item["type"] == "extra_forbidden":
            message = "unknown field"
        line = f"{path}: {message}" if path else message
        if line not in out:
            out.append(line)
    return out


_BRANCHES = ("function-", "json-or-python", "lax-or-strict")


def _path(loc: Iterable[int | str]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.startswith(_BRANCHES) or part in {"int", "str", "literal"}:
            continue  # pydantic's names for union and validator branches
        else:
            text += f".{part}" if text else part
    return text


def drop_none(value: Any) -> Any:
    """``value`` without null fields, all the way down."""
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value
