"""The generated ClusterPolicy and NVIDIADriver CRDs through localcluster's CR
validation pipeline (CRD registration checks, pruning, defaulting, OpenAPI and
CEL validation, transition rules): the docs examples are accepted unchanged,
every negative row is rejected at its field path with NVIDIA's wording, and the
CRDs have NVIDIA's names, scope, columns and required sections."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from api.crdgen import generate_crds
from api.nvidia.v1alpha1.nvidiadriver import (
    DRIVER_TYPE_IMMUTABLE_MESSAGE,
    USE_PRECOMPILED_IMMUTABLE_MESSAGE,
)
from api.serialize import to_plain
from localcluster import crd as crd_mod
from localcluster import schema as schema_mod
from tests.unit.api.negative_cases import set_path
from tests.unit.api_gpu.cases import BASES, CASES, REQUIRED_SECTIONS, Case

CRDS = {c["spec"]["names"]["kind"]: c for c in generate_crds()}
GPU = ["ClusterPolicy", "NVIDIADriver"]
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "docs" / "examples"
EXAMPLES = sorted(
    p for p in EXAMPLES_DIR.glob("*.yaml") if p.name.startswith(("clusterpolicy", "nvidiadriver"))
)


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _admit(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[dict[str, str]]:
    schema = _schema(obj["kind"])
    body = copy.deepcopy(obj)
    schema_mod.prune(schema, body)
    body = schema_mod.apply_defaults(schema, body)
    if old is not None:
        old = schema_mod.apply_defaults(schema, copy.deepcopy(old))
    return schema_mod.validate_custom_resource(schema, body, old)


def test_crd_shape_matches_nvidia() -> None:
    cp = CRDS["ClusterPolicy"]
    assert cp["metadata"]["name"] == "clusterpolicies.nvidia.com"
    assert cp["spec"]["scope"] == "Cluster"
    assert "shortNames" not in cp["spec"]["names"]
    version = cp["spec"]["versions"][0]
    assert version["name"] == "v1" and version["subresources"] == {"status": {}}
    assert [(c["name"], c["type"]) for c in version["additionalPrinterColumns"]] == [
        ("Status", "string"), ("Age", "string")]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == list(REQUIRED_SECTIONS)
    assert spec["properties"]["driver"]["properties"]["image"]["pattern"] == "[a-zA-Z0-9\\-]+"
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["required"] == ["state"]
    assert status["properties"]["state"]["enum"] == ["ignored", "ready", "notReady"]

    nd = CRDS["NVIDIADriver"]
    assert nd["metadata"]["name"] == "nvidiadrivers.nvidia.com"
    assert nd["spec"]["scope"] == "Cluster"
    assert nd["spec"]["names"]["shortNames"] == ["nvd", "nvdriver", "nvdrivers"]
    nd_version = nd["spec"]["versions"][0]
    assert [c["name"] for c in nd_version["additionalPrinterColumns"]] == [
        "Status", "Default", "Age"]
    nd_spec = nd_version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert nd_spec["properties"]["driverType"]["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": DRIVER_TYPE_IMMUTABLE_MESSAGE}]
    node_affinity = nd_spec["properties"]["nodeAffinity"]["properties"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" in node_affinity


@pytest.mark.parametrize("kind", GPU)
def test_crd_is_accepted_by_the_api_server(kind: str) -> None:
    assert crd_mod.validate_crd(CRDS[kind], None) == []


def _docs(path: Path) -> list[dict[str, Any]]:
    yaml = YAML(typ="safe", pure=True)
    return [to_plain(d) for d in yaml.load_all(path.read_text()) if d is not None]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_is_accepted_unchanged(path: Path) -> None:
    for obj in _docs(path):
        body = copy.deepcopy(obj)
        assert schema_mod.prune(_schema(obj["kind"]), body) == []
        assert body == obj
        assert _admit(obj) == []


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_manifest_is_rejected_with_nvidia_wording(case: Case) -> None:
    causes = _admit(case.manifest())
    at_path = [c for c in causes if c["field"] == case.path]
    assert at_path, f"no error at {case.path}: {causes}"
    assert any(case.message in c["message"] for c in at_path), at_path


@pytest.mark.parametrize(
    ("path", "old_value", "new_value", "message"),
    [
        ("spec.driverType", "gpu", "vgpu-host-manager", DRIVER_TYPE_IMMUTABLE_MESSAGE),
        ("spec.usePrecompiled", False, True, USE_PRECOMPILED_IMMUTABLE_MESSAGE),
    ],
)
def test_nvidiadriver_immutable_fields_refuse_updates(
    path: str, old_value: Any, new_value: Any, message: str
) -> None:
    old = copy.deepcopy(BASES["NVIDIADriver"])
    set_path(old, path, old_value)
    new = copy.deepcopy(old)
    set_path(new, path, new_value)
    causes = _admit(new, old)
    assert [c["field"] for c in causes] == [path]
    assert message in causes[0]["message"]
    assert _admit(old, old) == []


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_model_defaults_are_the_api_servers(path: Path) -> None:
    """What a controller reads from the model is what the API server stores."""
    from api.serialize import dump, load

    for obj in _docs(path):
        stored = schema_mod.apply_defaults(_schema(obj["kind"]), copy.deepcopy(obj))
        assert dump(load(obj), defaults=True) == stored


def test_no_stray_nvidia_com_crd_files() -> None:
    from api.crdgen import crd_file_name

    crd_dir = Path(__file__).resolve().parents[3] / "charts" / "nimctl" / "crds"
    expected = {crd_file_name(c) for c in CRDS.values()}
    assert {p.name for p in crd_dir.glob("nvidia.com_*.yaml")} <= expected
