"""ClusterRole builder (rbac.authorization.k8s.io/v1); rules come from ``manifests.role``."""

from __future__ import annotations

from typing import Any


def build(meta: dict[str, Any], rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A cluster-scoped role."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": meta,
        "rules": rules,
    }
