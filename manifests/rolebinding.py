"""RoleBinding builder (rbac.authorization.k8s.io/v1): a Role bound to one ServiceAccount."""

from __future__ import annotations

from typing import Any


def build(
    meta: dict[str, Any], *, role_name: str, service_account: str, namespace: str
) -> dict[str, Any]:
    """Bind Role ``role_name`` to ServiceAccount ``service_account`` in ``namespace``."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": role_name,
        },
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    }
