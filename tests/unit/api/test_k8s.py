"""Kubernetes core types come from the pinned published definitions: they validate
in Python like the API server and inline into CRDs as valid structural schemas."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from api import k8s
from api.crdgen import list_map_key_problems
from nimctl_runtime.localcluster.schema import check_structural


@pytest.mark.parametrize("alias", sorted(k8s.CORE_TYPES))
def test_core_type_inlines_as_a_structural_schema(alias: str) -> None:
    schema = k8s.structural_schema(k8s.CORE_TYPES[alias])
    assert check_structural({"type": "object", "properties": {"x": schema}}) == []
    assert list_map_key_problems(schema) == []


def test_definitions_are_the_pinned_version() -> None:
    assert k8s.KUBERNETES_VERSION == "v1.32.0"
    # A v1.32 field: the probe's grpc handler and the container's resizePolicy.
    assert "grpc" in k8s.definition("io.k8s.api.core.v1.Probe")["properties"]
    assert "resizePolicy" in k8s.definition("io.k8s.api.core.v1.Container")["properties"]


@pytest.mark.parametrize(
    ("alias", "value"),
    [
        ("Container", {"name": "c", "image": "busybox", "ports": [{"containerPort": 80}],
                       "resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": 1}}}),
        ("Volume", {"name": "v", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}),
        ("MetricSpec", {"type": "Pods", "pods": {"metric": {"name": "m"},
                                                 "target": {"type": "AverageValue",
                                                            "averageValue": "10"}}}),
        ("Probe", {"httpGet": {"path": "/", "port": "api"}, "periodSeconds": 5}),
    ],
)
def test_valid_core_values_pass_unchanged(alias: str, value: dict[str, Any]) -> None:
    adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(getattr(k8s, alias))
    assert adapter.validate_python(value) == value


@pytest.mark.parametrize(
    ("alias", "value", "fragment"),
    [
        ("Container", {"image": "busybox"}, "name: Required value"),
        ("Volume", {"name": "v", "emptyDir": {"sizeLimit": "a lot"}}, "emptyDir.sizeLimit"),
        ("Toleration", {"key": "k", "tolerationSeconds": "60"}, "must be of type integer"),
        ("EnvVar", {"name": "A", "vaule": "typo"}, "vaule: unknown field"),
    ],
)
def test_invalid_core_values_are_rejected_with_the_inner_path(
    alias: str, value: dict[str, Any], fragment: str
) -> None:
    adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(getattr(k8s, alias))
    with pytest.raises(ValidationError) as info:
        adapter.validate_python(value)
    assert fragment in str(info.value)
