"""Webhook rule matching as kube-apiserver does it (operations, groups, versions, subresources, scope)."""

from __future__ import annotations

from typing import Any

from localcluster.admission import webhook_matches_rules
from localcluster.hooks import AdmissionAttributes


def attrs(
    resource: str = "pods",
    subresource: str = "",
    operation: str = "CREATE",
    group: str = "",
    version: str = "v1",
    namespace: str = "default",
) -> AdmissionAttributes:
    return AdmissionAttributes(
        operation=operation,  # type: ignore[arg-type]
        group=group,
        version=version,
        resource=resource,
        subresource=subresource,
        kind="Pod",
        namespace=namespace,
        name="x",
        user="u",
    )


def hook(*rules: dict[str, Any], match_policy: str | None = None) -> dict[str, Any]:
    h: dict[str, Any] = {"name": "h", "rules": list(rules)}
    if match_policy:
        h["matchPolicy"] = match_policy
    return h


def rule(
    resources: list[str],
    operations: list[str] | None = None,
    groups: list[str] | None = None,
    versions: list[str] | None = None,
    scope: str | None = None,
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "operations": operations or ["*"],
        "apiGroups": groups or [""],
        "apiVersions": versions or ["v1"],
        "resources": resources,
    }
    if scope:
        r["scope"] = scope
    return r


def test_resources_and_subresources() -> None:
    assert webhook_matches_rules(hook(rule(["pods"])), attrs())
    assert not webhook_matches_rules(hook(rule(["pods"])), attrs(subresource="status"))
    assert webhook_matches_rules(hook(rule(["pods/status"])), attrs(subresource="status"))
    assert webhook_matches_rules(hook(rule(["pods/*"])), attrs(subresource="status"))
    assert not webhook_matches_rules(hook(rule(["*"])), attrs(subresource="status"))
    assert webhook_matches_rules(hook(rule(["*/*"])), attrs(subresource="status"))
    assert webhook_matches_rules(
        hook(rule(["*/status"])), attrs(resource="deployments", subresource="status")
    )


def test_operations_groups_and_scope() -> None:
    assert not webhook_matches_rules(hook(rule(["pods"], operations=["UPDATE"])), attrs())
    assert webhook_matches_rules(
        hook(rule(["deployments"], groups=["apps"])), attrs(resource="deployments", group="apps")
    )
    assert not webhook_matches_rules(
        hook(rule(["deployments"], groups=["apps"])),
        attrs(resource="deployments", group="extensions"),
    )
    assert not webhook_matches_rules(hook(rule(["*"], scope="Cluster")), attrs())
    assert webhook_matches_rules(
        hook(rule(["*"], scope="Cluster")), attrs(resource="nodes", namespace="")
    )
    assert webhook_matches_rules(hook(rule(["*"], scope="Namespaced")), attrs())


def test_match_policy_equivalent_and_exact() -> None:
    hpa_v1 = rule(["horizontalpodautoscalers"], groups=["autoscaling"], versions=["v1"])
    request = attrs(resource="horizontalpodautoscalers", group="autoscaling", version="v2")
    assert webhook_matches_rules(hook(hpa_v1), request)
    assert not webhook_matches_rules(hook(hpa_v1, match_policy="Exact"), request)
