"""The generated CRDs through localcluster's CR validation pipeline (the pure
functions its request handlers call: CRD registration checks, pruning, defaulting,
OpenAPI and CEL validation): NVIDIA-shaped manifests are accepted unchanged and
every negative row is rejected at its field path with NVIDIA's message."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from api.crdgen import generate_crds
from api.serialize import to_plain
from localcluster import crd as crd_mod
from localcluster import schema as schema_mod
from tests.unit.api.negative_cases import BASES, CASES, Case, set_path

CRDS = {c["spec"]["names"]["kind"]: c for c in generate_crds()}
MANIFESTS = sorted((Path(__file__).resolve().parents[2] / "unit/api/manifests").glob("*.yaml"))


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _admit(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """What the server does with a CR body: prune, default, validate."""
    schema = _schema(obj["kind"])
    body = copy.deepcopy(obj)
    schema_mod.prune(schema, body)
    body = schema_mod.apply_defaults(schema, body)
    return schema_mod.validate_custom_resource(schema, body, old)


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_crd_is_accepted_by_the_api_server(kind: str) -> None:
    assert crd_mod.validate_crd(CRDS[kind], None) == []


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.stem for p in MANIFESTS])
def test_nvidia_shaped_manifest_is_accepted_unchanged(path: Path) -> None:
    obj = to_plain(YAML(typ="safe", pure=True).load(path.read_text()))
    schema = _schema(obj["kind"])
    body = copy.deepcopy(obj)
    assert schema_mod.prune(schema, body) == []
    assert _admit(obj) == []


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_manifest_is_rejected_with_nvidia_message(case: Case) -> None:
    causes = _admit(case.manifest())
    at_path = [c for c in causes if c["field"] == case.path]
    assert at_path, f"no error at {case.path}: {causes}"
    assert any(case.message in c["message"] for c in at_path), at_path


def _with(kind: str, path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(BASES[kind])
    set_path(obj, path, value)
    return obj


@pytest.mark.parametrize(
    ("kind", "path", "old_value", "new_value", "message"),
    [
        ("NIMService", "spec.draResources", [{"resourceClaimName": "a"}],
         [{"resourceClaimName": "b"}], "spec.draResources is immutable"),
        ("NIMCache", "spec.source.ngc.modelPuller", "nvcr.io/nim/x:1", "nvcr.io/nim/x:2",
         "modelPuller is an immutable field. Please create a new NIMCache resource instead "
         "when you want to change this container."),
        ("NIMBuild", "spec.modelName", "a", "b", "spec is immutable"),
    ],
)
def test_transition_rules_reject_updates(
    kind: str, path: str, old_value: Any, new_value: Any, message: str
) -> None:
    old = _with(kind, path, old_value)
    schema = _schema(kind)
    old = schema_mod.apply_defaults(schema, old)
    assert _admit(old, old) == []
    causes = _admit(_with(kind, path, new_value), old)
    assert any(message in c["message"] for c in causes), causes
