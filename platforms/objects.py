"""Turn a typed CR (pydantic model) or a plain dict into a JSON-shaped dict.

Render functions read CRs by their Kubernetes JSON names (camelCase), which
NVIDIA's API fixes, rather than by Python attribute names. That keeps the
rendering rules readable next to the reference and lets tests and the CLI pass
either a model from ``api`` or a dict read from YAML.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class SupportsModelDump(Protocol):
    """A pydantic v2 model (what ``api.apps.v1alpha1`` provides)."""

    def model_dump(self, **kwargs: Any) -> dict[str, Any]: ...


CRInput = SupportsModelDump | Mapping[str, Any]


def as_dict(obj: CRInput) -> dict[str, Any]:
    """A deep, JSON-shaped copy of ``obj`` with camelCase keys and no null fields."""
    if isinstance(obj, SupportsModelDump):
        out: dict[str, Any] = _drop_none(
            obj.model_dump(by_alias=True, exclude_none=True, mode="json")
        )
        return out
    copied: dict[str, Any] = _drop_none(copy.deepcopy(dict(obj)))
    return copied


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def dig(obj: Mapping[str, Any] | None, *path: str, default: Any = None) -> Any:
    """``obj[path[0]][path[1]]...`` or ``default`` when any step is missing or null."""
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return default
        cur = cur.get(key)
        if cur is None:
            return default
    return cur
