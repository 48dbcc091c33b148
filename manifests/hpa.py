"""HorizontalPodAutoscaler builder (autoscaling/v2)."""

from __future__ import annotations

from typing import Any


def build(
    meta: dict[str, Any],
    *,
    scale_target_ref: dict[str, str],
    max_replicas: int,
    min_replicas: int | None = None,
    metrics: list[dict[str, Any]] | None = None,
    behavior: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An HPA scaling ``scale_target_ref`` ({apiVersion, kind, name})."""
    spec: dict[str, Any] = {"scaleTargetRef": dict(scale_target_ref), "maxReplicas": max_replicas}
    if min_replicas is not None:
        spec["minReplicas"] = min_replicas
    if metrics:
        spec["metrics"] = metrics
    if behavior:
        spec["behavior"] = behavior
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": meta,
        "spec": spec,
    }
