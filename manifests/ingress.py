"""Ingress builder (networking.k8s.io/v1) and the router ingress spec."""

from __future__ import annotations

from typing import Any


def router_spec(
    *,
    host: str,
    service_name: str,
    service_port: int | str,
    ingress_class: str,
    tls_secret_name: str | None = None,
) -> dict[str, Any]:
    """One host, path ``/`` (Prefix) to ``service_name:service_port``, optional TLS.

    ``service_port`` is a port number or a Service port name.
    """
    port = {"name": service_port} if isinstance(service_port, str) else {"number": service_port}
    spec: dict[str, Any] = {
        "ingressClassName": ingress_class,
        "rules": [
            {
                "host": host,
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {
                                "service": {
                                    "name": service_name,
                                    "port": port,
                                }
                            },
                        }
                    ]
                },
            }
        ],
    }
    if tls_secret_name:
        spec["tls"] = [{"hosts": [host], "secretName": tls_secret_name}]
    return spec


def build(meta: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """An Ingress with the given IngressSpec."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}
