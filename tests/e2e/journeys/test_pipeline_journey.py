"""NVIDIA's RAG pipeline sample and the NIMBuild example in ``nimctl local``, driven with kubectl."""

from __future__ import annotations

import pytest

from tests.e2e.journeys.harness import Kubectl, example

pytestmark = pytest.mark.kubectl

TIMEOUT = 120


def test_rag_pipeline_sample_reaches_ready_and_kubectl_wait_returns(kubectl: Kubectl) -> None:
    ns = "journey-rag"
    kubectl.ngc_namespace(ns)
    out = kubectl.run("apply", "-f", "-", input=example("nimpipeline-rag.yaml", ns)).stdout
    assert "nimpipeline.apps.nvidia.com/rag-pipeline created" in out
    assert out.count("nimcache.apps.nvidia.com/") == 3
    waited = kubectl.run(
        "wait",
        "nimpipeline/rag-pipeline",
        "-n",
        ns,
        "--for=condition=Ready",
        f"--timeout={TIMEOUT}s",
        timeout=TIMEOUT + 15,
    )
    assert "condition met" in waited.stdout
    states = kubectl.jsonpath("nimpipeline", "rag-pipeline", "-n", ns, path="{.status.states}")
    for svc in ("meta-llama3-8b-instruct", "nv-embedqa-1b-v2", "nv-rerankqa-1b-v2"):
        assert f'"{svc}":"Ready"' in states, states
    table = kubectl.run("get", "nimservice", "-n", ns).stdout
    assert table.count("Ready") == 3, table


def test_omitted_enabled_warns_on_apply(kubectl: Kubectl) -> None:
    ns = "journey-rag-warn"
    kubectl.ngc_namespace(ns)
    manifest = f"""
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMPipeline
metadata: {{name: p, namespace: {ns}}}
spec:
  services:
    - name: llm
      spec:
        image: {{repository: nvcr.io/nim/meta/llama-3.1-8b-instruct, tag: "1.15.5"}}
"""
    res = kubectl.run("apply", "-f", "-", input=manifest)
    assert "Warning: nimpipeline.spec.services[0].enabled (llm): not set" in res.stderr
    assert kubectl.gone("nimservice", "llm", "-n", ns)


def test_nimbuild_example_reaches_ready_and_extends_its_nimcache(kubectl: Kubectl) -> None:
    ns = "journey-build"
    kubectl.ngc_namespace(ns)
    kubectl.run("apply", "-f", "-", input=example("nimbuild-engine.yaml", ns))
    kubectl.run(
        "wait",
        "nimbuild/meta-llama-3-2-3b-instruct-h100",
        "-n",
        ns,
        "--for=jsonpath={.status.state}=Ready",
        f"--timeout={TIMEOUT}s",
        timeout=TIMEOUT + 15,
    )
    output = kubectl.jsonpath(
        "nimbuild", "meta-llama-3-2-3b-instruct-h100", "-n", ns, path="{.status.outputProfile.name}"
    )
    profiles = kubectl.jsonpath(
        "nimcache", "meta-llama-3-2-3b-instruct", "-n", ns, path="{.status.profiles[*].name}"
    ).split()
    assert output and profiles[-1] == output and len(profiles) == 2, (output, profiles)
