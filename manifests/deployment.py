"""Deployment builder (apps/v1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def rolling_update(max_unavailable: int | str = "25%", max_surge: int | str = 0) -> dict[str, Any]:
    """A RollingUpdate strategy (NIM defaults: 25% unavailable, no surge: GPUs are scarce)."""
    return {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": max_unavailable, "maxSurge": max_surge},
    }


def build(
    meta: dict[str, Any],
    *,
    selector: Mapping[str, str],
    template: dict[str, Any],
    replicas: int | None = None,
    strategy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Deployment; ``replicas`` None leaves the field to the server (or the HPA)."""
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(selector)}, "template": template}
    if replicas is not None:
        spec["replicas"] = replicas
    if strategy is not None:
        spec["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}
