"""The generated NeMo CRDs through localcluster's CR validation pipeline (the pure
functions its request handlers call: CRD registration checks, pruning, defaulting,
OpenAPI and CEL validation): the docs examples are accepted unchanged, and every
negative row is rejected at its field path with NVIDIA's message."""

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
from tests.unit.api_nemo.cases import BASES, CASES, Case

CRDS = {c["spec"]["names"]["kind"]: c for c in generate_crds()}
NEMO = sorted(k for k in CRDS if k.startswith("Nemo"))
EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "docs" / "examples").glob("nemo-*.yaml"))


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _admit(obj: dict[str, Any]) -> list[dict[str, str]]:
    schema = _schema(obj["kind"])
    body = copy.deepcopy(obj)
    schema_mod.prune(schema, body)
    body = schema_mod.apply_defaults(schema, body)
    return schema_mod.validate_custom_resource(schema, body, None)


def test_the_five_nemo_crds_are_generated() -> None:
    assert NEMO == [
        "NemoCustomizer", "NemoDatastore", "NemoEntitystore", "NemoEvaluator", "NemoGuardrail"]
    for kind in NEMO:
        crd = CRDS[kind]
        assert crd["metadata"]["name"] == f"{kind.lower()}s.apps.nvidia.com"
        assert crd["spec"]["scope"] == "Namespaced"
        version = crd["spec"]["versions"][0]
        assert version["subresources"] == {"status": {}}
        assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Status", "Age"]
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        messages = [r["message"] for r in spec["x-kubernetes-validations"]]
        assert "spec.replicas cannot be set when spec.scale.enabled is true" in messages
        assert spec["properties"]["replicas"]["minimum"] == 1
        # No CRD default, as in NVIDIA's CRDs: the operator runs the pod as 1000 when unset.
        assert "default" not in spec["properties"]["userID"]


def test_required_spec_fields_are_nvidias() -> None:
    def required(kind: str) -> list[str]:
        spec = _schema(kind)["properties"]["spec"]
        return list(spec.get("required", []))

    assert required("NemoCustomizer") == [
        "databaseConfig", "datastore", "entitystore", "image", "mlflow", "modelConfig",
        "modelDownloadJobs", "nemoDatastoreTools", "trainingConfig", "wandb"]
    assert required("NemoDatastore") == ["databaseConfig", "image", "secrets"]
    assert required("NemoEntitystore") == ["databaseConfig", "datastore", "image"]
    assert required("NemoEvaluator") == [
        "argoWorkflows", "databaseConfig", "datastore", "entitystore", "evaluationImages",
        "image", "vectorDB"]
    assert required("NemoGuardrail") == ["image"]


@pytest.mark.parametrize("kind", NEMO)
def test_crd_is_accepted_by_the_api_server(kind: str) -> None:
    assert crd_mod.validate_crd(CRDS[kind], None) == []


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_is_accepted_unchanged(path: Path) -> None:
    obj = to_plain(YAML(typ="safe", pure=True).load(path.read_text()))
    body = copy.deepcopy(obj)
    assert schema_mod.prune(_schema(obj["kind"]), body) == []
    assert body == obj
    assert _admit(obj) == []


@pytest.mark.parametrize("kind", sorted(BASES))
def test_base_is_accepted(kind: str) -> None:
    assert _admit(BASES[kind]) == []


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_manifest_is_rejected_with_nvidia_message(case: Case) -> None:
    causes = _admit(case.manifest())
    at_path = [c for c in causes if c["field"] == case.path]
    assert at_path, f"no error at {case.path}: {causes}"
    assert any(case.message in c["message"] for c in at_path), at_path


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_model_defaults_are_the_api_servers(path: Path) -> None:
    """What a controller reads from the model is what the API server stores."""
    from api.serialize import dump, load

    obj = to_plain(YAML(typ="safe", pure=True).load(path.read_text()))
    stored = schema_mod.apply_defaults(_schema(obj["kind"]), copy.deepcopy(obj))
    assert dump(load(obj), defaults=True) == stored
