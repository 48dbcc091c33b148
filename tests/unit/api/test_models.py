"""NVIDIA-shaped manifests parse into their models and survive a round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from api.apps.v1alpha1 import NIMCache, NIMPipeline, NIMService
from api.serialize import LoadError, dump, dump_yaml, kind_registry, load, load_all, to_plain

MANIFESTS = sorted((Path(__file__).parent / "manifests").glob("*.yaml"))


def _read(path: Path) -> dict[str, Any]:
    data = to_plain(YAML(typ="safe", pure=True).load(path.read_text()))
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.stem for p in MANIFESTS])
def test_manifest_parses_and_round_trips_unchanged(path: Path) -> None:
    model = load(path.read_text())
    original = _read(path)
    assert type(model) is kind_registry[(original["apiVersion"], original["kind"])]
    assert dump(model) == original
    again = load(dump_yaml(model))
    assert dump(again) == original


def test_nimservice_fields_are_reachable_with_defaults_applied() -> None:
    ns = load((Path(__file__).parent / "manifests" / "nimservice-gateway-epp.yaml").read_text())
    assert isinstance(ns, NIMService)
    assert ns.metadata.name == "llama-epp"
    assert ns.spec.expose.service.port == 8000
    router = ns.spec.expose.router
    assert router is not None and router.gateway is not None
    assert router.gateway.backend_ref is not None
    assert router.gateway.backend_ref.weight == 1
    assert ns.spec.inference_platform == "standalone"
    # A struct the user left out still reads as its zero value with defaults.
    assert ns.spec.scale.enabled is None
    assert ns.spec.storage.pvc.name == "model-pvc"
    assert router.epp_config is not None and router.epp_config.config is not None
    assert router.epp_config.config["kind"] == "EndpointPickerConfig"


def test_dump_with_defaults_fills_what_the_api_server_would() -> None:
    ns = NIMService.model_validate(
        {
            "metadata": {"name": "x"},
            "spec": {
                "image": {"repository": "r", "tag": "t"},
                "expose": {"service": {"type": "ClusterIP"}},
                "multiNode": {"parallelism": {"pipeline": 2}, "mpi": {}},
            },
        }
    )
    plain = dump(ns)
    assert "port" not in plain["spec"]["expose"]["service"]
    assert "inferencePlatform" not in plain["spec"]
    full = dump(ns, defaults=True)
    assert full["spec"]["expose"]["service"]["port"] == 8000
    assert full["spec"]["inferencePlatform"] == "standalone"
    assert full["spec"]["multiNode"]["backendType"] == "lws"
    assert full["spec"]["multiNode"]["mpi"]["mpiStartTimeout"] == 300
    # Structs the user did not write are not invented.
    assert "scale" not in full["spec"] and "storage" not in full["spec"]
    assert full["apiVersion"] == "apps.nvidia.com/v1alpha1" and full["kind"] == "NIMService"


def test_load_error_names_the_field_path() -> None:
    text = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMCache
metadata: {name: c, namespace: ns}
spec:
  source:
    ngc: {authSecret: a, modelPuller: p}
  storage:
    pvc: {create: "yes"}
  resources: {cpu: "lots"}
  tolerations:
    - {key: k, operatr: Exists}
"""
    with pytest.raises(LoadError) as info:
        load(text)
    message = str(info.value)
    assert message.startswith("NIMCache ns/c is invalid:")
    paths = {e.path for e in info.value.errors}
    assert "spec.storage.pvc.create" in paths
    assert "spec.resources.cpu" in paths
    assert "spec.tolerations[0].operatr: unknown field" in message


def test_errors_inside_kubernetes_core_types_name_the_inner_field() -> None:
    spec = {
        "image": {"repository": "r", "tag": "t"},
        "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s"}}}],
        "resources": {"limits": {"cpu": "lots"}},
        "readinessProbe": {"probe": {"httpGet": {"path": "/x"}}},
    }
    with pytest.raises(LoadError) as info:
        load({"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService",
              "metadata": {"name": "x"}, "spec": spec})
    errors = {str(e) for e in info.value.errors}
    assert "spec.env[0].valueFrom.secretKeyRef.key: Required value" in errors
    assert "spec.readinessProbe.probe.httpGet.port: Required value" in errors
    assert any(e.startswith("spec.resources.limits.cpu: Invalid value") for e in errors)


def test_missing_required_field_and_unknown_field_are_reported() -> None:
    with pytest.raises(LoadError) as info:
        load({"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService",
              "metadata": {"name": "x"}, "spec": {"image": {"repository": "r"}, "replica": 1}})
    errors = {str(e) for e in info.value.errors}
    assert "spec.image.tag: Required value" in errors
    assert "spec.replica: unknown field" in errors


def test_unknown_kind_is_reported_with_the_known_ones() -> None:
    with pytest.raises(LoadError) as info:
        load({"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMThing"})
    assert "NIMService" in str(info.value)


def test_strict_types_as_the_api_server() -> None:
    with pytest.raises(LoadError) as info:
        load({"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService",
              "metadata": {"name": "x"},
              "spec": {"image": {"repository": "r", "tag": "t"}, "replicas": "2"}})
    assert [e.path for e in info.value.errors] == ["spec.replicas"]


def test_load_all_reads_a_stream_of_kinds() -> None:
    stream = "\n---\n".join(p.read_text() for p in MANIFESTS)
    models = load_all(stream)
    assert len(models) == len(MANIFESTS)
    kinds = {type(m) for m in models}
    assert {NIMCache, NIMService, NIMPipeline} <= kinds


def test_yaml_timestamps_stay_strings() -> None:
    ns = load("""
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: x, creationTimestamp: 2024-05-01T10:00:00Z}
spec: {image: {repository: r, tag: t}}
""")
    assert ns.metadata.creation_timestamp == "2024-05-01T10:00:00Z"


def test_yaml_is_read_as_kubectl_reads_it() -> None:
    with pytest.raises(LoadError) as info:
        load("""
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: x}
spec:
  image: {repository: r, tag: t}
  annotations: {sidecar.istio.io/inject: no}
""")
    assert [e.path for e in info.value.errors] == ["spec.annotations.sidecar.istio.io/inject"]
