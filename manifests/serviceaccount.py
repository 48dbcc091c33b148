"""ServiceAccount builder (core/v1)."""

from __future__ import annotations

from typing import Any


def build(meta: dict[str, Any], *, image_pull_secrets: list[str] | None = None) -> dict[str, Any]:
    """A ServiceAccount; ``image_pull_secrets`` are secret names."""
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
    if image_pull_secrets:
        obj["imagePullSecrets"] = [{"name": s} for s in image_pull_secrets]
    return obj
