"""Role builder (rbac.authorization.k8s.io/v1) and the rules nimctl grants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def policy_rule(
    api_groups: Sequence[str],
    resources: Sequence[str],
    verbs: Sequence[str],
    resource_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One PolicyRule."""
    rule: dict[str, Any] = {
        "apiGroups": list(api_groups),
        "resources": list(resources),
        "verbs": list(verbs),
    }
    if resource_names:
        rule["resourceNames"] = list(resource_names)
    return rule


def scc_rule(scc: str) -> dict[str, Any]:
    """Permission to ``use`` an OpenShift SecurityContextConstraints (harmless elsewhere)."""
    return policy_rule(["security.openshift.io"], ["securitycontextconstraints"], ["use"], [scc])


def build(meta: dict[str, Any], rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A namespaced Role."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta,
        "rules": rules,
    }
