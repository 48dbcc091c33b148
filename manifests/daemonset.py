"""DaemonSet builder (apps/v1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def build(
    meta: dict[str, Any],
    *,
    selector: Mapping[str, str],
    template: dict[str, Any],
    update_strategy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A DaemonSet running ``template`` on every node its nodeSelector matches."""
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(selector)}, "template": template}
    if update_strategy is not None:
        spec["updateStrategy"] = update_strategy
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": spec}
