"""controllers.nemo's pure helpers: the Secret cache transform and the requirements index."""

from __future__ import annotations

from api.serialize import dump
from controllers.nemo import requirement_keys, secret_without_values
from platforms.nemo.contract import CONTRACTS
from platforms.nemo.demo import sample_crs


def test_cached_secrets_keep_key_names_and_lose_values() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "pg", "managedFields": [{"manager": "kubectl"}]},
        "data": {"password": "c2VjcmV0"},
        "stringData": {"extra": "plain"},
    }
    out = secret_without_values(obj)
    assert out["data"] == {"password": "", "extra": ""}
    assert "stringData" not in out and "managedFields" not in out["metadata"]
    assert "c2VjcmV0" not in str(out) and "plain" not in str(out)


def test_requirement_keys_index_every_referenced_object() -> None:
    cu = dump(next(c for c in sample_crs() if c.kind == "NemoCustomizer"))
    keys = requirement_keys(CONTRACTS["NemoCustomizer"], cu)
    assert sorted(keys) == [
        "ConfigMap/nemo-model-config",
        "ConfigMap/nemo-training-config",
        "Secret/customizer-pg-existing-secret",
    ]
    cu["spec"]["trainingConfig"]["modelPVC"]["create"] = False
    assert "PersistentVolumeClaim/finetuning-ms-models-pvc" in requirement_keys(
        CONTRACTS["NemoCustomizer"], cu
    )
    assert requirement_keys(CONTRACTS["NemoCustomizer"], {"spec": {}}) == []
