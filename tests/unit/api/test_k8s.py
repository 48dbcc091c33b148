"""Kubernetes core types come from the published definitions of a chosen
Kubernetes version: each API group embeds the version NVIDIA's CRDs embed, they
validate in Python like the API server and inline into CRDs as valid structural
schemas."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import TypeAdapter, ValidationError

from api import k8s
from api.apps.v1alpha1 import core_types as apps_core
from api.crdgen import generate_crds, list_map_key_problems
from api.nvidia import core_types as nvidia_core
from localcluster.schema import check_structural

VERSIONS = ("v1.32.0", "v1.34.0", "v1.36.0")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("short", sorted(k8s.CORE_TYPES))
def test_core_type_inlines_as_a_structural_schema(short: str, version: str) -> None:
    schema = k8s.structural_schema(k8s.CORE_TYPES[short], version)
    assert check_structural({"type": "object", "properties": {"x": schema}}) == []
    assert list_map_key_problems(schema) == []


def test_each_api_group_embeds_the_version_nvidia_uses() -> None:
    assert apps_core.KUBERNETES_VERSION == "v1.34.0"
    assert nvidia_core.KUBERNETES_VERSION == "v1.36.0"
    assert {"v1.34.0", "v1.36.0"} <= set(k8s.KUBERNETES_VERSIONS)


def _env_source(version: str) -> dict[str, Any]:
    env = k8s.structural_schema("io.k8s.api.core.v1.EnvVar", version)
    props: dict[str, Any] = env["properties"]["valueFrom"]["properties"]
    return props


def test_newer_versions_bring_newer_fields() -> None:
    assert "fileKeyRef" not in _env_source("v1.32.0")
    assert "fileKeyRef" in _env_source("v1.34.0")
    rules = "io.k8s.api.autoscaling.v2.HPAScalingRules"
    assert "tolerance" not in k8s.definition(rules, "v1.32.0")["properties"]
    assert "tolerance" in k8s.definition(rules, "v1.34.0")["properties"]


def test_local_object_reference_names_default_to_empty_as_controller_gen_writes() -> None:
    source = _env_source("v1.34.0")
    for ref in ("configMapKeyRef", "secretKeyRef"):
        assert source[ref]["properties"]["name"]["default"] == ""
        assert "default" not in source[ref]["properties"]["key"]
    env_from = k8s.structural_schema("io.k8s.api.core.v1.EnvFromSource", "v1.34.0")
    assert env_from["properties"]["configMapRef"]["properties"]["name"]["default"] == ""


def test_generated_crds_carry_each_groups_version() -> None:
    crds = {c["spec"]["names"]["kind"]: c for c in generate_crds()}

    def env_from(kind: str, *path: str) -> dict[str, Any]:
        node = crds[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for part in path:
            node = node["items"] if part == "[]" else node["properties"][part]
        return node

    value_from = env_from("NIMService", "spec", "env", "[]", "valueFrom")
    assert "fileKeyRef" in value_from["properties"]
    behavior = env_from("NIMService", "spec", "scale", "hpa", "behavior", "scaleUp")
    assert "tolerance" in behavior["properties"]
    # A v1.35+ toleration operator description only the GPU group (v1.36) carries.
    op = env_from("ClusterPolicy", "spec", "daemonsets", "tolerations", "[]", "operator")
    assert "Lt" in op["description"]


def test_an_unknown_version_or_type_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"no Kubernetes definitions for 'v9\.9\.9'"):
        k8s.definition("io.k8s.api.core.v1.EnvVar", "v9.9.9")
    with pytest.raises(ValueError, match="unknown core type 'Envvar'"):
        k8s.core_type("Envvar", "v1.34.0")
    with pytest.raises(ValueError, match=r"has no definition 'io\.k8s\.api\.core\.v1\.Nope'"):
        k8s.CoreType("io.k8s.api.core.v1.Nope", "v1.34.0")


def _adapter(short: str, version: str = "v1.34.0") -> TypeAdapter[dict[str, Any]]:
    return TypeAdapter(Annotated[dict[str, Any], k8s.core_type(short, version)])


def test_python_validation_uses_the_same_version_as_the_crd() -> None:
    value = {"name": "A", "valueFrom": {"fileKeyRef": {"volumeName": "v", "path": "p", "key": "k"}}}
    assert _adapter("EnvVar", "v1.34.0").validate_python(value) == value
    with pytest.raises(ValidationError, match="fileKeyRef: unknown field"):
        _adapter("EnvVar", "v1.32.0").validate_python(value)
    adapter: TypeAdapter[list[apps_core.EnvVar]] = TypeAdapter(list[apps_core.EnvVar])
    assert adapter.validate_python([value]) == [value]


@pytest.mark.parametrize(
    ("short", "value"),
    [
        (
            "Container",
            {
                "name": "c",
                "image": "busybox",
                "ports": [{"containerPort": 80}],
                "resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": 1}},
            },
        ),
        ("Volume", {"name": "v", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}),
        (
            "MetricSpec",
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "m"},
                    "target": {"type": "AverageValue", "averageValue": "10"},
                },
            },
        ),
        ("Probe", {"httpGet": {"path": "/", "port": "api"}, "periodSeconds": 5}),
    ],
)
def test_valid_core_values_pass_unchanged(short: str, value: dict[str, Any]) -> None:
    assert _adapter(short).validate_python(value) == value


@pytest.mark.parametrize(
    ("short", "value", "fragment"),
    [
        ("Container", {"image": "busybox"}, "name: Required value"),
        ("Volume", {"name": "v", "emptyDir": {"sizeLimit": "a lot"}}, "emptyDir.sizeLimit"),
        ("Toleration", {"key": "k", "tolerationSeconds": "60"}, "must be of type integer"),
        ("EnvVar", {"name": "A", "vaule": "typo"}, "vaule: unknown field"),
    ],
)
def test_invalid_core_values_are_rejected_with_the_inner_path(
    short: str, value: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ValidationError) as info:
        _adapter(short).validate_python(value)
    assert fragment in str(info.value)
