"""KServe NIMServices on localcluster's simulated KServe, in every deployment mode.

Each mode (by the NIMService's ``serving.kserve.io/deploymentMode``
annotation, or KServe's configured default) gets an InferenceService with
NVIDIA's annotations and labels, becomes Ready from ``PredictorReady``, and
reports the InferenceService's addresses in ``status.model``; an idle
reconcile writes nothing. NVIDIA's two KServe samples reach Ready unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest

from nimctl.demo import DEMO_NAME, apply_objects
from tests.integration.controllers.test_nim_controllers import EXAMPLES_DIR, example_objects
from tests.integration.platforms.conftest import (
    KSERVE_DEFAULT_MODE,
    Env,
    annotate,
    exists,
    objects_in,
    ready,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

ISVC = "serving.kserve.io/v1beta1"
MODE_ANNOTATION = "serving.kserve.io/deploymentMode"


@pytest.mark.parametrize("mode", ["Standard", "RawDeployment", "Knative", "Serverless", None])
async def test_each_deployment_mode_reaches_ready_with_endpoints(
    env: Env, mode: str | None
) -> None:
    ns = f"k-{(mode or 'default').lower()}"
    spec: dict[str, Any] = {"inferencePlatform": "kserve"}
    if mode:
        spec["annotations"] = {MODE_ANNOTATION: mode}
    await apply_objects(env.admin, objects_in(ns, **spec))
    st = await ready(env.admin, ns)

    isvc = await env.admin.get(ISVC, "InferenceService", DEMO_NAME, ns)
    expected_mode = mode or KSERVE_DEFAULT_MODE
    annotations = isvc["metadata"]["annotations"]
    assert annotations[MODE_ANNOTATION] == expected_mode
    assert annotations["serving.kserve.io/enable-metric-aggregation"] == "true"
    assert annotations["serving.kserve.io/enable-prometheus-scraping"] == "true"
    assert isvc["metadata"]["labels"]["networking.kserve.io/visibility"] == "cluster-local"
    assert isvc["status"]["deploymentMode"] == expected_mode
    # status.model: KServe's addresses (cluster-local: url and address agree).
    assert st["model"]["clusterEndpoint"] == isvc["status"]["address"]["url"]
    assert st["model"]["externalEndpoint"] == isvc["status"]["url"]
    assert st["model"]["clusterEndpoint"].endswith(".svc.cluster.local")
    knative = expected_mode in ("Knative", "Serverless")
    predictor = f"{DEMO_NAME}-predictor" + ("-00001-deployment" if knative else "")
    assert await exists(env.admin, "apps/v1", "Deployment", predictor, ns)
    # No standalone objects: KServe runs the NIM.
    assert not await exists(env.admin, "apps/v1", "Deployment", DEMO_NAME, ns)
    assert not await exists(env.admin, "v1", "Service", DEMO_NAME, ns)

    poke = annotate(env.admin, ISVC, "InferenceService", DEMO_NAME, ns)
    assert await env.idle_reconcile_writes(ns, poke) == [], "a second reconcile writes nothing"


@pytest.mark.parametrize(
    "example", ["nimservice-kserve-standard.yaml", "nimservice-kserve-knative.yaml"]
)
async def test_nvidia_kserve_samples_reach_ready_unchanged(env: Env, example: str) -> None:
    ns = f"kx-{example.rsplit('-', maxsplit=1)[-1].removesuffix('.yaml')}"
    objs = example_objects(EXAMPLES_DIR / example, ns)
    await apply_objects(env.admin, objs)
    name = next(o["metadata"]["name"] for o in objs if o["kind"] == "NIMService")
    st = await ready(env.admin, ns, name)
    assert st["model"]["clusterEndpoint"]
    isvc = await env.admin.get(ISVC, "InferenceService", name, ns)
    if example.endswith("standard.yaml"):
        annotations = isvc["metadata"]["annotations"]
        assert annotations["serving.kserve.io/autoscalerClass"] == "hpa"
        predictor = isvc["spec"]["predictor"]
        assert (predictor["minReplicas"], predictor["maxReplicas"]) == (1, 3)
        assert (predictor["scaleMetric"], predictor["scaleTarget"]) == ("cpu", 80)


# -- NVIDIA's KServe input (Standard mode, HPA), as NVIDIA's operator was run on it --------

LLAMA_1B = "nvcr.io/nim/meta/llama-3.2-1b-instruct:1.12.0"
# What the simulated model puller lists for that image: a TensorRT-LLM tp1 H100 profile
# (the NIMCache asks for engine tensorrt, tp 1) and a vLLM one.
LLAMA_1B_MANIFEST = """\
7d1c3e5b9a2f4c6e8a0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c:
  model: meta/llama-3.2-1b-instruct
  release: 1.12.0
  tags:
    feat_lora: 'false'
    gpu: H100
    llm_engine: tensorrt_llm
    pp: '1'
    precision: bf16
    profile: throughput
    tp: '1'
5a1c3e7b9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a3c:
  model: meta/llama-3.2-1b-instruct
  release: 1.12.0
  tags:
    feat_lora: 'false'
    llm_engine: vllm
    precision: bf16
    tp: '1'
"""


def _nvidia_inputs(case: str, namespace: str) -> list[dict[str, Any]]:
    from pathlib import Path

    from ruamel.yaml import YAML

    root = Path(__file__).resolve().parents[3]
    for base in (root, *root.parents):
        found = base / "shared" / "nvidia-samples" / "nemo-kserve-build-inputs" / case
        if found.is_dir():
            text = (found / "_inputs" / "input.yaml").read_text()
            docs = [d for d in YAML(typ="safe").load_all(text) if d]
            for d in docs:
                d["metadata"]["namespace"] = namespace
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            return [ns, *docs]
    pytest.skip(f"NVIDIA's sample inputs ({case}) are not in a shared/ directory above {root}")


async def _nvidia_isvc(env: Env, case: str, ns: str, mode: str | None = None) -> dict[str, Any]:
    """The InferenceService made from NVIDIA's input ``case`` (``mode``: KServe's default
    deployment mode on NVIDIA's cluster, given as the NIMService's annotation here)."""
    from localcluster.extensions import extensions_of
    from tests.integration.controllers.harness import wait_for

    catalog = extensions_of(env.cluster).catalog
    catalog.set(LLAMA_1B, logs=LLAMA_1B_MANIFEST, command="model_manifest.yaml")
    try:
        objs = _nvidia_inputs(case, ns)
        svc = next(o for o in objs if o["kind"] == "NIMService")
        if mode is not None:
            svc["spec"].setdefault("annotations", {})[MODE_ANNOTATION] = mode
        await apply_objects(env.admin, objs)
        name = svc["metadata"]["name"]

        async def isvc() -> dict[str, Any]:
            found: dict[str, Any] = await env.admin.get(ISVC, "InferenceService", name, ns)
            return found

        got: dict[str, Any] = await wait_for(isvc, timeout=60)
        return got
    finally:
        catalog.remove(LLAMA_1B, command="model_manifest.yaml")


async def test_nvidias_standard_input_gives_nvidias_inference_service(env: Env) -> None:
    got = await _nvidia_isvc(env, "kserve-standard-llm", "kx-nvidia-standard")
    name = got["metadata"]["name"]
    predictor = got["spec"]["predictor"]
    assert predictor["labels"] == {"app": name}
    assert got["metadata"]["labels"]["networking.kserve.io/visibility"] == "exposed"
    assert got["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "hpa"
    assert (predictor["minReplicas"], predictor["maxReplicas"]) == (1, 3)
    assert (predictor["scaleMetric"], predictor["scaleMetricType"], predictor["scaleTarget"]) == (
        "cpu",
        "Utilization",
        80,
    )
    assert predictor["securityContext"] == {"runAsUser": 1000, "runAsGroup": 2000, "fsGroup": 2000}
    assert predictor["deploymentStrategy"]["rollingUpdate"] == {
        "maxUnavailable": "25%",
        "maxSurge": 0,
    }


async def test_nvidias_knative_input_gives_nvidias_inference_service(env: Env) -> None:
    # NVIDIA's cluster ran KServe with Serverless as its default mode.
    got = await _nvidia_isvc(env, "kserve-knative-llm", "kx-nvidia-knative", mode="Serverless")
    name = got["metadata"]["name"]
    predictor = got["spec"]["predictor"]
    assert predictor["labels"] == {"app": name}
    for absent in (
        "minReplicas",
        "maxReplicas",
        "securityContext",
        "deploymentStrategy",
        "scaleMetric",
    ):
        assert absent not in predictor, absent
    annotations = got["metadata"]["annotations"]
    assert annotations["autoscaling.knative.dev/min-scale"] == "1"
    assert annotations["autoscaling.knative.dev/max-scale"] == "10"
