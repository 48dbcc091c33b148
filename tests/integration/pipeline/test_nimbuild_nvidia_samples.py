"""NVIDIA's three NIMBuild inputs (GPUs in resources, none, quoted) and the statuses NVIDIA reports.

The inputs are the ones NVIDIA's operator was run on (``<shared>/nvidia-samples/
nemo-kserve-build-inputs/nimbuild-*``). The NIMCache caches one TensorRT-LLM
buildable profile with its ``tp`` tag, so:

- with ``nvidia.com/gpu`` in ``resources`` (integer or quoted) NVIDIA's operator
  refuses to size the build pod: ``Pending`` with
  ``NIM_BUILD_SINGLE_BUILDABLE_PROFILE_FOUND`` (its ``inputProfile``) and
  ``NIM_BUILD_RECONCILE_FAILED`` carrying its message;
- without it the pod gets the profile's ``tp`` GPUs and the build reaches ``Ready``.

In neither case is ``NIM_BUILD_WAIT_FOR_NIM_CACHE_READY`` left behind once the
NIMCache is Ready, and no condition carries another's reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from localcluster.extensions import extensions_of
from nimctl.demo import apply_objects
from tests.integration.controllers.harness import API, wait_for
from tests.integration.pipeline.conftest import Env

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(autouse=True)
def buildable_manifest(env: Env) -> Iterator[None]:
    catalog = extensions_of(env.cluster).catalog
    catalog.set(IMAGE, logs=MANIFEST, command="model_manifest.yaml")
    yield
    catalog.remove(IMAGE, command="model_manifest.yaml")


IMAGE = "nvcr.io/nim/meta/llama-3.2-1b-instruct:1.12.0"
# What the simulated model puller lists for this image: one TensorRT-LLM buildable
# profile (tp 1), as the NIM NVIDIA's operator was run with, and a vLLM one.
MANIFEST = """\
0e2f1b4c8a7d9e3f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f:
  model: meta/llama-3.2-1b-instruct
  release: 1.12.0
  tags:
    feat_lora: 'false'
    gpu: H100
    llm_engine: tensorrt_llm
    pp: '1'
    precision: bf16
    tp: '1'
    trtllm_buildable: 'true'
5a1c3e7b9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a3c:
  model: meta/llama-3.2-1b-instruct
  release: 1.12.0
  tags:
    feat_lora: 'false'
    llm_engine: vllm
    precision: bf16
    tp: '1'
"""

TP_AND_GPUS = (
    "tensorParallelism is set in the profile tags, but nvidia.com/gpu is already set in resources"
)


def _inputs(case: str, namespace: str) -> list[dict[str, Any]]:
    root = Path(__file__).resolve().parents[3]
    for base in (root, *root.parents):
        found = base / "shared" / "nvidia-samples" / "nemo-kserve-build-inputs" / case
        if found.is_dir():
            docs = [
                d
                for d in YAML(typ="safe").load_all((found / "_inputs" / "input.yaml").read_text())
                if d
            ]
            for d in docs:
                d["metadata"]["namespace"] = namespace
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            return [ns, *docs]
    pytest.skip(f"NVIDIA's sample inputs ({case}) are not in a shared/ directory above {root}")


async def _status(env: Env, name: str, ns: str) -> dict[str, Any]:
    obj = await env.admin.get(API, "NIMBuild", name, ns)
    return dict(obj.get("status") or {})


def _conditions(st: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in st.get("conditions") or []}


def _no_stale_or_borrowed(st: dict[str, Any]) -> None:
    conds = _conditions(st)
    assert "NIM_BUILD_WAIT_FOR_NIM_CACHE_READY" not in conds, conds
    own = {
        "NIM_BUILD_SINGLE_BUILDABLE_PROFILE_FOUND": "BuildableProfileFound",
        "NIM_BUILD_RECONCILE_FAILED": "ReconcileFailed",
        "NIM_BUILD_ENGINE_BUILD_POD_CREATED": "EngineBuildPodCreated",
        "NIM_BUILD_ENGINE_BUILD_POD_PENDING": "PodRunning",
        "NIM_BUILD_ENGINE_BUILD_POD_COMPLETED": "PodReady",
        "NIM_BUILD_MODEL_MANIFEST_POD_COMPLETED": "PodCompleted",
    }
    for type_, cond in conds.items():
        if type_ in own and cond["status"] == "True":
            assert cond["reason"] == own[type_], cond


@pytest.mark.parametrize("case", ["nimbuild-llm", "nimbuild-llm-quoted"])
async def test_gpus_in_resources_and_a_tp_tag_is_pending_as_nvidia_reports_it(
    env: Env, case: str
) -> None:
    ns = f"{case}-{uuid.uuid4().hex[:5]}"
    docs = _inputs(case, ns)
    build = next(d for d in docs if d["kind"] == "NIMBuild")
    name = build["metadata"]["name"]
    await apply_objects(env.admin, docs)

    async def reported() -> dict[str, Any] | None:
        st = await _status(env, name, ns)
        failed = _conditions(st).get("NIM_BUILD_RECONCILE_FAILED")
        return st if failed is not None and failed["status"] == "True" else None

    st = await wait_for(reported, timeout=60)
    assert st["state"] == "Pending"
    conds = _conditions(st)
    found = conds["NIM_BUILD_SINGLE_BUILDABLE_PROFILE_FOUND"]
    assert (found["status"], found["reason"], found["message"]) == (
        "True",
        "BuildableProfileFound",
        "Single buildable profile cached in NIM Cache",
    )
    failed = conds["NIM_BUILD_RECONCILE_FAILED"]
    assert (failed["reason"], failed["message"]) == ("ReconcileFailed", TP_AND_GPUS)
    assert st["inputProfile"]["config"]["trtllm_buildable"] == "true"
    assert "outputProfile" not in st
    _no_stale_or_borrowed(st)
    # NVIDIA's integer quantity makes its immutability rule refuse any update; here a
    # label change on the unchanged spec goes through.
    await env.admin.patch(
        API, "NIMBuild", name, {"metadata": {"labels": {"seen": "1"}}}, namespace=ns
    )


async def test_without_gpus_the_build_takes_the_tp_tag_and_is_ready(env: Env) -> None:
    ns = f"nimbuild-nogpu-{uuid.uuid4().hex[:5]}"
    docs = _inputs("nimbuild-llm-nogpu", ns)
    build = next(d for d in docs if d["kind"] == "NIMBuild")
    name = build["metadata"]["name"]
    await apply_objects(env.admin, docs)

    async def ready() -> dict[str, Any] | None:
        st = await _status(env, name, ns)
        return st if st.get("state") == "Ready" else None

    st = await wait_for(ready, timeout=60)
    _no_stale_or_borrowed(st)
    assert "NIM_BUILD_RECONCILE_FAILED" not in _conditions(st)
    inp, out = st["inputProfile"], st["outputProfile"]
    assert set(inp) <= {"name", "model", "release", "config"} and inp["name"]
    assert set(out) <= {"name", "model", "release", "config"}
    assert out["config"]["model_name"] == build["spec"]["modelName"]
    assert out["config"]["input_profile"] == inp["name"]
