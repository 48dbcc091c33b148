"""The NeMo kinds (NemoCustomizer, NemoDatastore, NemoEntitystore, NemoEvaluator,
NemoGuardrail): the docs examples parse and survive a round trip, the CRD
defaults are what NVIDIA's CRDs fill in, and every CEL rule, bound, enum and
pattern rejects a manifest that breaks it, with NVIDIA's message for CEL rules."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from api.apps.v1alpha1 import (
    NemoCustomizer,
    NemoDatastore,
    NemoEntitystore,
    NemoEvaluator,
    NemoGuardrail,
    nemo_customizer,
    nemo_datastore,
    nemo_entitystore,
    nemo_evaluator,
    nemo_guardrail,
)
from api.apps.v1alpha1.nemo_common import NEMO_SPEC_RULES
from api.serialize import LoadError, dump, dump_yaml, kind_registry, load, load_all, to_plain
from tests.unit.api_nemo.cases import BASES, CASES, Case

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "docs" / "examples").glob("nemo-*.yaml"))
NEMO_KINDS = {
    "NemoCustomizer": NemoCustomizer,
    "NemoDatastore": NemoDatastore,
    "NemoEntitystore": NemoEntitystore,
    "NemoEvaluator": NemoEvaluator,
    "NemoGuardrail": NemoGuardrail,
}


def _docs(path: Path) -> list[dict[str, Any]]:
    yaml = YAML(typ="safe", pure=True)
    return [to_plain(d) for d in yaml.load_all(path.read_text()) if d is not None]


def test_there_is_one_example_of_each_nemo_kind() -> None:
    kinds = sorted(d["kind"] for p in EXAMPLES for d in _docs(p))
    assert kinds == sorted(NEMO_KINDS)


def test_every_nemo_kind_is_served() -> None:
    for kind, model in NEMO_KINDS.items():
        assert kind_registry[("apps.nvidia.com/v1alpha1", kind)] is model
        assert model.kind_info.scope == "Namespaced"
        assert model.kind_info.short_names == ()


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_parses_and_round_trips_unchanged(path: Path) -> None:
    originals = _docs(path)
    models = load_all(path.read_text())
    assert [type(m) for m in models] == [NEMO_KINDS[d["kind"]] for d in originals]
    assert [dump(m) for m in models] == originals
    again = load_all(dump_yaml(models))
    assert [dump(m) for m in again] == originals


def test_defaults_are_nvidias() -> None:
    es = load(BASES["NemoEntitystore"])
    full = dump(es, defaults=True)["spec"]
    # NVIDIA's Go types give userID/groupID no default (the pod runs as 1000/2000 when unset).
    assert "userID" not in full and "groupID" not in full
    assert full["databaseConfig"]["port"] == 5432
    assert full["databaseConfig"]["credentials"]["passwordKey"] == "password"
    assert full["expose"]["service"]["port"] == 8000
    assert "replicas" not in full  # no default: it would clash with scale.enabled
    # What the user wrote is all a plain dump has.
    assert dump(es)["spec"] == BASES["NemoEntitystore"]["spec"]

    ev = dump(load(BASES["NemoEvaluator"]), defaults=True)["spec"]
    assert (ev["evalLogLevel"], ev["logHandlers"], ev["consoleLogLevel"]) == (
        "INFO", "console", "INFO")
    assert "otel" not in ev  # a struct the user did not write is not invented

    cu_obj = copy.deepcopy(BASES["NemoCustomizer"])
    cu_obj["spec"]["otel"] = {"enabled": True}
    cu_obj["spec"]["scheduler"] = {}
    cu = dump(load(cu_obj), defaults=True)["spec"]
    assert cu["otel"]["excludedUrls"] == ["health"] and cu["otel"]["logLevel"] == "INFO"
    assert cu["scheduler"] == {"type": "volcano"}
    assert cu["wandb"] == {"secretName": "wandb", "apiKeyKey": "apiKey",
                           "encryptionKey": "encryptionKey", "entity": "null",
                           "projectName": "nvidia-nemo-customizer"}
    assert cu["modelDownloadJobs"]["imagePullPolicy"] == "IfNotPresent"
    assert cu["modelDownloadJobs"]["ngcAPISecret"]["key"] == "NGC_API_KEY"
    assert cu["trainingConfig"]["workspacePVC"]["mountPath"] == "/pvc/workspace"
    assert cu["trainingConfig"]["runaiQueue"] == "default"

    gr_obj = copy.deepcopy(BASES["NemoGuardrail"])
    gr_obj["spec"]["nimEndpoint"] = {"baseURL": "http://nim:8000/v1"}
    gr = dump(load(gr_obj), defaults=True)["spec"]
    assert gr["nimEndpoint"]["apiKeyKey"] == "NIM_ENDPOINT_API_KEY"

    ds_obj = copy.deepcopy(BASES["NemoDatastore"])
    ds_obj["spec"]["objectStoreConfig"] = {
        "credentials": {"user": "u", "secretName": "s", "passwordKey": "p"},
        "endpoint": "minio:9000", "bucketName": "b", "region": "r", "ssl": False}
    ds = dump(load(ds_obj), defaults=True)["spec"]
    assert ds["objectStoreConfig"]["serveDirect"] is True


def test_typed_access_reads_like_nvidias_go_types() -> None:
    cu = load(next(p for p in EXAMPLES if p.name == "nemo-customizer.yaml").read_text())
    assert isinstance(cu, NemoCustomizer)
    assert cu.spec.model_config_ref.name == "nemo-model-config"
    assert cu.spec.training_config.model_pvc.size == "50Gi"
    assert cu.spec.model_download_jobs.ngc_api_secret.name == "ngc-api-secret"
    assert cu.spec.scheduler.type == nemo_customizer.SCHEDULER_VOLCANO
    assert cu.spec.wandb.api_key_key == "apiKey"
    gr = load(next(p for p in EXAMPLES if p.name == "nemo-guardrail.yaml").read_text())
    assert isinstance(gr, NemoGuardrail)
    assert gr.spec.nim_endpoint is not None
    assert gr.spec.nim_endpoint.base_url == "https://integrate.api.nvidia.com/v1"
    assert gr.spec.config_store.config_map is not None
    assert gr.spec.config_store.pvc is None


def test_constants_match_nvidia() -> None:
    assert (nemo_customizer.API_PORT, nemo_customizer.INTERNAL_PORT) == (8000, 9009)
    assert nemo_datastore.API_PORT == 3000
    assert nemo_entitystore.API_PORT == 8000
    assert nemo_evaluator.API_PORT == 7331
    assert nemo_guardrail.API_PORT == 8000
    assert nemo_entitystore.FINALIZER == "finalizer.NemoEntitystore.apps.nvidia.com"
    assert nemo_guardrail.FINALIZER == "finalizer.NemoGuardrail.apps.nvidia.com"
    assert nemo_datastore.FINALIZER == "finalizer.nemodatastore.apps.nvidia.com"
    assert nemo_evaluator.PART_OF == "nemo-evaluator-service"


@pytest.mark.parametrize("kind", sorted(BASES))
def test_base_manifests_are_valid(kind: str) -> None:
    load(BASES[kind])


def test_a_nemo_spec_without_expose_is_rejected_as_the_api_server_does() -> None:
    # NVIDIA's spec-level rule reads self.expose.ingress: without `expose` the CEL
    # evaluation fails, and the API server refuses the object.
    obj = copy.deepcopy(BASES["NemoGuardrail"])
    del obj["spec"]["expose"]
    with pytest.raises(LoadError) as info:
        load(obj)
    assert [str(e) for e in info.value.errors] == [
        f"spec: no such key: expose evaluating rule: {NEMO_SPEC_RULES[0].rule}"
    ]


def _matches(case: Case, errors: list[Any]) -> bool:
    at_path = [e for e in errors if e.path == case.path]
    if at_path:
        return not case.cel or any(e.message == case.message for e in at_path)
    # A rule declared on a field is reported by its parent model as "<field>: <message>".
    parent, _, leaf = case.path.rpartition(".")
    return case.cel and any(
        e.path == parent and e.message == f"{leaf}: {case.message}" for e in errors
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_manifest_is_rejected(case: Case) -> None:
    with pytest.raises(LoadError) as info:
        load(case.manifest())
    assert _matches(case, info.value.errors), info.value.errors
