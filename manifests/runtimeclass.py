"""RuntimeClass builder (node.k8s.io/v1, or v1beta1 on old clusters)."""

from __future__ import annotations

from typing import Any


def build(
    meta: dict[str, Any], *, handler: str, api_version: str = "node.k8s.io/v1"
) -> dict[str, Any]:
    """A RuntimeClass naming the CRI ``handler`` (the runtime configured on the node)."""
    return {"apiVersion": api_version, "kind": "RuntimeClass", "metadata": meta, "handler": handler}
