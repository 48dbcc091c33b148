"""PersistentVolumeClaim builder (core/v1)."""

from __future__ import annotations

from typing import Any


def build(
    meta: dict[str, Any],
    *,
    access_modes: list[str],
    size: str,
    storage_class: str | None = None,
) -> dict[str, Any]:
    """A filesystem PVC requesting ``size`` (a Kubernetes quantity string)."""
    spec: dict[str, Any] = {
        "accessModes": access_modes,
        "resources": {"requests": {"storage": size}},
        "volumeMode": "Filesystem",
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
