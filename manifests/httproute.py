"""HTTPRoute builder (gateway.networking.k8s.io/v1)."""

from __future__ import annotations

from typing import Any

API_VERSION = "gateway.networking.k8s.io/v1"


def parent_ref(name: str, namespace: str) -> dict[str, Any]:
    """A ParentReference to a Gateway (group and kind left to their Gateway defaults)."""
    return {"name": name, "namespace": namespace}


def service_backend_ref(name: str, port: int) -> dict[str, Any]:
    """A BackendRef to a Service port (group and kind default to core Service)."""
    return {"name": name, "port": port}


def build(
    meta: dict[str, Any],
    *,
    parent_refs: list[dict[str, Any]],
    hostnames: list[str],
    backend_refs: list[dict[str, Any]],
    path_prefix: str = "/",
) -> dict[str, Any]:
    """An HTTPRoute sending everything under ``path_prefix`` to ``backend_refs``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "HTTPRoute",
        "metadata": meta,
        "spec": {
            "parentRefs": parent_refs,
            "hostnames": hostnames,
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": path_prefix}}],
                    "backendRefs": backend_refs,
                }
            ],
        },
    }
