"""ConfigMap builder (core/v1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def build(meta: dict[str, Any], data: Mapping[str, str]) -> dict[str, Any]:
    """A ConfigMap holding string ``data``."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}
