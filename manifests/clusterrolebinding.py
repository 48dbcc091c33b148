"""ClusterRoleBinding builder (rbac.authorization.k8s.io/v1): a ClusterRole bound to one
ServiceAccount."""

from __future__ import annotations

from typing import Any


def build(
    meta: dict[str, Any], *, role_name: str, service_account: str, namespace: str
) -> dict[str, Any]:
    """Bind ClusterRole ``role_name`` to ServiceAccount ``namespace/service_account``."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta,
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role_name,
        },
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    }
