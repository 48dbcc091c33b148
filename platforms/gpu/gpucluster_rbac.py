"""RBAC objects of the GPUCluster states: ServiceAccounts, (Cluster)Roles and their
bindings to one ServiceAccount, built as plain dicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["binding", "role", "rule", "service_account"]

RBAC = "rbac.authorization.k8s.io/v1"


def rule(groups: Sequence[str], resources: Sequence[str], verbs: Sequence[str]) -> dict[str, Any]:
    """One PolicyRule."""
    return {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}


def service_account(
    name: str, namespace: str, labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A ServiceAccount."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}


def role(
    name: str,
    rules: Sequence[Mapping[str, Any]],
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Role (``namespace`` given) or a ClusterRole."""
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": RBAC,
        "kind": "Role" if namespace else "ClusterRole",
        "metadata": meta,
        "rules": [dict(r) for r in rules],
    }


def binding(
    name: str,
    account: str,
    account_namespace: str,
    namespace: str | None = None,
    *,
    role_name: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A RoleBinding (``namespace`` given) or ClusterRoleBinding of ``role_name``
    (default ``name``) to the ServiceAccount ``account``."""
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": RBAC,
        "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
        "metadata": meta,
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role" if namespace else "ClusterRole",
            "name": role_name or name,
        },
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": account_namespace}],
    }
