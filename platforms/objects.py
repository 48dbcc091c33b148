"""A typed CR (pydantic model) or a plain dict as the JSON-shaped dict the API server stores.

No render needs this: every kind's render reads its typed model
(``platforms.parsing`` parses a stored object once, ``nimctl render`` loads each
document once). ``as_dict`` is for tests that build the stored objects a
reconciler reads (a model from ``api`` as the API server would hold it, CRD
defaults included).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from api.base import CustomResource
from api.serialize import dump
from nimctl_runtime.meta import dig
from platforms.parsing import drop_none as _drop_none

__all__ = ["CRInput", "as_dict", "dig"]

CRInput = BaseModel | Mapping[str, Any]
"""A typed CR from ``api`` (or any pydantic model) or a JSON-shaped dict."""


def as_dict(obj: CRInput) -> dict[str, Any]:
    """A deep, JSON-shaped copy of ``obj`` with camelCase keys and no null fields."""
    if isinstance(obj, CustomResource):
        # What the API server would hold: the user's fields plus CRD defaults.
        served: dict[str, Any] = _drop_none(dump(obj, defaults=True))
        return served
    if isinstance(obj, BaseModel):
        out: dict[str, Any] = _drop_none(
            obj.model_dump(by_alias=True, exclude_none=True, mode="json")
        )
        return out
    # A JSON round trip copies faster than deepcopy and leaves only JSON types.
    copied: dict[str, Any] = _drop_none(json.loads(json.dumps(obj, default=str)))
    return copied
