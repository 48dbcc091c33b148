"""Profile selection: a NIMCache caches the profiles a NVIDIA-operator user expects."""

from __future__ import annotations

import pytest

from platforms.standalone.nimcache_profiles import (
    GPUSpec,
    ManifestError,
    ModelSpec,
    discovered_gpu_products,
    gpu_count_for_profile,
    match_profiles,
    parse_manifest,
    select_profiles,
    status_profiles,
)

V1 = """
trt-h100-fp8-tp2-throughput:
  model: meta/llama3-8b-instruct
  release: 1.0.0
  tags:
    llm_engine: tensorrt_llm
    precision: fp8
    tp: '2'
    profile: throughput
    gpu: H100
    gpu_device: 2330:10de
  container_url: nvcr.io/nim/meta/llama3-8b-instruct:1.0.0
  workspace:
    files: {rank0.engine: {}}
trt-a100-fp16-tp1-latency:
  model: meta/llama3-8b-instruct
  release: 1.0.0
  tags:
    llm_engine: tensorrt_llm
    precision: fp16
    tp: '1'
    profile: latency
    gpu: A100
    gpu_device: 20b2:10de
vllm-fp16-tp1:
  model: meta/llama3-8b-instruct
  release: 1.0.0
  tags:
    llm_engine: vllm
    precision: fp16
    tp: '1'
vllm-fp16-tp1-lora:
  model: meta/llama3-8b-instruct
  release: 1.0.0
  tags:
    llm_engine: vllm
    precision: fp16
    tp: '1'
    feat_lora: 'true'
"""

V2 = """
schema_version: '2.0'
profile_selection_criteria: {}
profiles:
  - id: p-trt-h100
    tags: {llm_engine: tensorrt_llm, precision: FP8, tp: '2', gpu: H100, profile: Throughput}
    workspace: {files: [a, b]}
  - id: p-triton-l40s
    tags: {backend: triton, precision: fp16, tp: '1', gpu: L40S}
  - id: p-buildable
    tags: {llm_engine: tensorrt_llm, precision: bf16, tp: '1', trtllm_buildable: 'true'}
  - id: p-vllm
    tags: {llm_engine: vllm, precision: bf16, tp: '1'}
  - id: p-vllm-lora
    tags: {llm_engine: vllm, precision: bf16, tp: '1', feat_lora: 'true'}
"""


@pytest.mark.parametrize(
    ("spec", "gpus", "expected"),
    [
        (
            ModelSpec(),
            [],
            ["trt-h100-fp8-tp2-throughput", "trt-a100-fp16-tp1-latency", "vllm-fp16-tp1"],
        ),
        (ModelSpec(precision="fp16"), [], ["trt-a100-fp16-tp1-latency", "vllm-fp16-tp1"]),
        (ModelSpec(tensor_parallelism="2"), [], ["trt-h100-fp8-tp2-throughput"]),
        (ModelSpec(qos_profile="latency"), [], ["trt-a100-fp16-tp1-latency"]),
        (ModelSpec(engine="vllm"), [], ["vllm-fp16-tp1"]),
        (ModelSpec(engine="vllm", lora=True), [], ["vllm-fp16-tp1-lora"]),
        (
            ModelSpec(engine="tensorrt_llm"),
            [],
            ["trt-h100-fp8-tp2-throughput", "trt-a100-fp16-tp1-latency"],
        ),
        (
            ModelSpec(engine="tensorrt_llm"),
            ["NVIDIA-A100-SXM4-80GB"],
            ["trt-a100-fp16-tp1-latency"],
        ),
        (ModelSpec(gpus=(GPUSpec(product="h100"),)), [], ["trt-h100-fp8-tp2-throughput"]),
        (ModelSpec(gpus=(GPUSpec(ids=("20b2",)),)), [], ["trt-a100-fp16-tp1-latency"]),
        (ModelSpec(gpus=(GPUSpec(product="h100", ids=("20b2",)),)), [], []),
    ],
)
def test_v1_matching(spec: ModelSpec, gpus: list[str], expected: list[str]) -> None:
    manifest = parse_manifest(V1)
    assert not manifest.is_v2
    assert match_profiles(manifest, spec, gpus) == expected


@pytest.mark.parametrize(
    ("spec", "gpus", "expected"),
    [
        (ModelSpec(precision="fp8"), [], ["p-trt-h100"]),
        (ModelSpec(qos_profile="throughput"), [], ["p-trt-h100"]),
        (ModelSpec(engine="tensorrt"), [], ["p-trt-h100", "p-triton-l40s", "p-buildable"]),
        (ModelSpec(lora=True), [], ["p-vllm-lora"]),
        (ModelSpec(buildable=True), [], ["p-buildable"]),
        (ModelSpec(engine="tensorrt_llm"), ["NVIDIA-L40S"], ["p-triton-l40s", "p-buildable"]),
        (ModelSpec(gpus=(GPUSpec(product="H100"),)), [], ["p-trt-h100", "p-buildable"]),
    ],
)
def test_v2_matching(spec: ModelSpec, gpus: list[str], expected: list[str]) -> None:
    manifest = parse_manifest(V2)
    assert manifest.is_v2
    assert match_profiles(manifest, spec, gpus) == expected


def test_explicit_profiles_win_over_matching() -> None:
    manifest = parse_manifest(V1)
    assert select_profiles(manifest, ModelSpec(profiles=("abc",))) == ["abc"]
    assert select_profiles(None, ModelSpec(precision="fp8")) == []


def test_status_profiles_carry_model_release_and_tags() -> None:
    manifest = parse_manifest(V1)
    entries = status_profiles(manifest, ["vllm-fp16-tp1", "unknown"])
    assert entries == [
        {
            "name": "vllm-fp16-tp1",
            "model": "meta/llama3-8b-instruct",
            "release": "1.0.0",
            "config": {"llm_engine": "vllm", "precision": "fp16", "tp": "1"},
        }
    ]
    assert status_profiles(manifest, ["all"]) == []


def test_minimal_manifest_drops_workspace_files() -> None:
    for text in (V1, V2):
        manifest = parse_manifest(text)
        minimal = manifest.minimal_yaml()
        assert "rank0.engine" not in minimal and "workspace" not in minimal
        again = parse_manifest(minimal)
        assert [p.id for p in again.profiles] == [p.id for p in manifest.profiles]
        assert again.profiles[0].tags == manifest.profiles[0].tags


def test_log_noise_before_manifest_is_ignored() -> None:
    manifest = parse_manifest("\n\n" + V1)
    assert len(manifest.profiles) == 4


@pytest.mark.parametrize(
    "text",
    [
        "model_manifest.yaml not found\n",
        "- a\n- b\n",
        "a: [unclosed\n",
        "schema_version: '2.0'\nprofiles: {}\n",
    ],
)
def test_unreadable_manifests_say_why(text: str) -> None:
    with pytest.raises(ManifestError):
        parse_manifest(text)


def test_model_spec_from_camel_case() -> None:
    spec = ModelSpec.from_dict(
        {
            "engine": "tensorrt_llm",
            "tensorParallelism": "2",
            "qosProfile": "throughput",
            "gpus": [{"product": "h100", "ids": ["2330"]}],
            "lora": False,
        }
    )
    assert spec.tensor_parallelism == "2" and spec.qos_profile == "throughput"
    assert spec.gpus == (GPUSpec("h100", ("2330",)),)
    assert spec.lora is False and spec.buildable is None


def test_discovered_gpus_from_node_labels() -> None:
    nodes = [
        {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}},
        {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}},
        {"metadata": {"labels": {}}},
        {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}},
    ]
    assert discovered_gpu_products(nodes) == ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"]


@pytest.mark.parametrize(
    ("config", "gpus"),
    [({}, 1), ({"tp": "4"}, 4), ({"tensorParallelism": "2", "tp": "8"}, 2)],
)
def test_gpu_count_for_profile(config: dict[str, str], gpus: int) -> None:
    assert gpu_count_for_profile(config) == gpus


def test_gpu_count_rejects_non_numbers() -> None:
    with pytest.raises(ValueError, match="not a whole number"):
        gpu_count_for_profile({"tp": "two"})


def test_real_nim_manifest_with_workspace_tags() -> None:
    text = """
abc:
  model: meta/llama
  release: 1.0.0
  tags: {llm_engine: vllm, precision: bf16, tp: '1'}
  workspace: !workspace
    components:
      - dst: ''
        src: {repo_id: 'ngc://nim/meta/llama:1'}
"""
    manifest = parse_manifest(text)
    assert [p.id for p in manifest.profiles] == ["abc"]
    assert manifest.profiles[0].tags["llm_engine"] == "vllm"
