"""What kubectl prints (ages, printer columns) and what discovery lists."""

from __future__ import annotations

import pytest

from localcluster import discovery, tables
from localcluster.crd import infos_from_crd
from localcluster.registry import Registry


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5, "5s"), (119, "119s"), (150, "2m30s"), (600, "10m"), (3 * 3600 + 120, "3h2m"),
     (10 * 3600, "10h"), (3 * 86400 + 3600, "3d1h"), (30 * 86400, "30d"), (800 * 86400, "2y70d")],
)  # fmt: skip
def test_age_like_kubectl(seconds: int, text: str) -> None:
    assert tables.human_duration(seconds) == text


def test_jsonpath_subset() -> None:
    obj = {"status": {"conditions": [{"type": "Ready"}], "state": "Ready"}}
    assert tables.jsonpath(obj, ".status.state") == "Ready"
    assert tables.jsonpath(obj, ".status.conditions[0].type") == "Ready"
    assert tables.jsonpath(obj, "{.status.missing}") is None


def test_crd_printer_columns_and_discovery() -> None:
    crd = {
        "spec": {
            "group": "apps.nvidia.com",
            "names": {"plural": "nimservices", "kind": "NIMService", "shortNames": ["nims"]},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Status", "type": "string", "jsonPath": ".status.state"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        }
    }
    registry = Registry()
    [info] = infos_from_crd(crd)
    registry.add(info)
    cols = tables.columns_for(info.group, info.resource, info.printer_columns, info.crd)
    table = tables.build_table(
        [{"metadata": {"name": "llm", "creationTimestamp": "2020-01-01T00:00:00Z"},
          "status": {"state": "Ready"}}],
        cols,
    )  # fmt: skip
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Status", "Age"]
    assert table["rows"][0]["cells"][:2] == ["llm", "Ready"]
    doc = discovery.api_resource_list(registry, "apps.nvidia.com", "v1alpha1")
    assert doc is not None
    names = [r["name"] for r in doc["resources"]]
    assert names == ["nimservices", "nimservices/status"]
    assert doc["resources"][0]["shortNames"] == ["nims"]


def test_builtin_table_has_the_resources_the_issue_lists() -> None:
    registry = Registry()
    wanted = {
        ("", "v1", "namespaces", False), ("", "v1", "pods", True), ("", "v1", "events", True),
        ("events.k8s.io", "v1", "events", True), ("apps", "v1", "deployments", True),
        ("autoscaling", "v2", "horizontalpodautoscalers", True),
        ("coordination.k8s.io", "v1", "leases", True),
        ("rbac.authorization.k8s.io", "v1", "clusterroles", False),
        ("apiextensions.k8s.io", "v1", "customresourcedefinitions", False),
        ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", False),
        ("node.k8s.io", "v1", "runtimeclasses", False),
    }  # fmt: skip
    for group, version, resource, namespaced in wanted:
        info = registry.get(group, version, resource)
        assert info is not None, resource
        assert info.namespaced is namespaced
