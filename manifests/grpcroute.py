"""GRPCRoute builder (gateway.networking.k8s.io/v1)."""

from __future__ import annotations

from typing import Any

API_VERSION = "gateway.networking.k8s.io/v1"


def build(
    meta: dict[str, Any],
    *,
    parent_refs: list[dict[str, Any]],
    hostnames: list[str],
    backend_refs: list[dict[str, Any]],
) -> dict[str, Any]:
    """A GRPCRoute sending every gRPC method to ``backend_refs``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "GRPCRoute",
        "metadata": meta,
        "spec": {
            "parentRefs": parent_refs,
            "hostnames": hostnames,
            "rules": [{"backendRefs": backend_refs}],
        },
    }
