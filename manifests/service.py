"""Service builder (core/v1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def service_port(
    name: str, port: int, target_port: int | str | None = None, protocol: str = "TCP"
) -> dict[str, Any]:
    """A ServicePort; ``target_port`` may be a container port name."""
    return {
        "name": name,
        "port": port,
        "targetPort": port if target_port is None else target_port,
        "protocol": protocol,
    }


def build(
    meta: dict[str, Any],
    *,
    selector: Mapping[str, str],
    ports: list[dict[str, Any]],
    service_type: str | None = None,
) -> dict[str, Any]:
    """A Service selecting ``selector``; type ClusterIP unless given."""
    spec: dict[str, Any] = {
        "type": service_type or "ClusterIP",
        "selector": dict(selector),
        "ports": ports,
    }
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}
