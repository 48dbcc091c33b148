"""The README journey driven with kubectl: minimal NIMCache + NIMService to Ready, edit, delete."""

from __future__ import annotations

from functools import partial

import pytest

from tests.e2e.journeys.harness import Kubectl, example, wait_for

pytestmark = pytest.mark.kubectl

NAME = "meta-llama-3-2-1b-instruct"
READY_TIMEOUT = 90


def _apply_minimal(kubectl: Kubectl, ns: str) -> None:
    kubectl.ngc_namespace(ns)
    out = kubectl.run("apply", "-f", "-", input=example("nim-minimal.yaml", ns)).stdout
    assert f"nimcache.apps.nvidia.com/{NAME} created" in out
    assert f"nimservice.apps.nvidia.com/{NAME} created" in out


def _wait_ready(kubectl: Kubectl, ns: str) -> None:
    for kind in ("nimcache", "nimservice"):
        kubectl.run(
            "wait",
            f"{kind}/{NAME}",
            "-n",
            ns,
            "--for=jsonpath={.status.state}=Ready",
            f"--timeout={READY_TIMEOUT}s",
            timeout=READY_TIMEOUT + 15,
        )


def test_minimal_example_reaches_ready_and_shows_what_it_made(kubectl: Kubectl) -> None:
    ns = "journey-ready"
    _apply_minimal(kubectl, ns)
    _wait_ready(kubectl, ns)
    kubectl.run("wait", f"nimservice/{NAME}", "-n", ns, "--for=condition=Ready", "--timeout=30s")

    table = kubectl.run("get", "nimcache,nimservice", "-n", ns).stdout
    assert "Ready" in table and f"{NAME}-pvc" in table, table
    wide = kubectl.run("get", "nimservice", NAME, "-n", ns, "-o", "wide").stdout
    assert "STATUS" in wide and "Ready" in wide

    status = kubectl.jsonpath("nimservice", NAME, "-n", ns, path="{.status.model.clusterEndpoint}")
    assert status.endswith(":8000"), status
    assert kubectl.jsonpath("nimcache", NAME, "-n", ns, path="{.status.pvc}") == f"{NAME}-pvc"
    assert kubectl.jsonpath("nimcache", NAME, "-n", ns, path="{.status.profiles[0].name}")

    objects = kubectl.run("get", "pods,deploy,svc", "-n", ns).stdout
    assert f"deployment.apps/{NAME}" in objects and f"service/{NAME}" in objects, objects
    assert "Running" in objects and "Completed" in objects, objects

    described = kubectl.run("describe", "nimservice", NAME, "-n", ns).stdout
    assert "Events:" in described and "successfully rolled out" in described, described

    job_pod = kubectl.jsonpath(
        "pods", "-n", ns, "-l", f"job-name={NAME}-job", path="{.items[0].metadata.name}"
    )
    assert job_pod, kubectl.run("get", "pods", "-n", ns).stdout
    assert kubectl.run("logs", job_pod, "-n", ns).stdout.strip()

    kubectl.run("label", "nimservice", NAME, "-n", ns, "team=qa")
    kubectl.run("annotate", "nimservice", NAME, "-n", ns, "note=hello")
    labelled = kubectl.run("get", "nimservice", "-n", ns, "-l", "team=qa", "-o", "name").stdout
    assert labelled.strip() == f"nimservice.apps.nvidia.com/{NAME}"
    as_yaml = kubectl.run("get", "nimservice", NAME, "-n", ns, "-o", "yaml").stdout
    assert "note: hello" in as_yaml


def test_editing_replicas_rolls_the_deployment(kubectl: Kubectl) -> None:
    ns = "journey-edit"
    _apply_minimal(kubectl, ns)
    _wait_ready(kubectl, ns)
    kubectl.run(
        "patch", "nimservice", NAME, "-n", ns, "--type", "merge", "-p", '{"spec":{"replicas":2}}'
    )
    wait_for(
        lambda: kubectl.jsonpath("deploy", NAME, "-n", ns, path="{.status.readyReplicas}") == "2",
        60,
        "the Deployment to have 2 ready replicas",
    )
    kubectl.run("rollout", "status", f"deploy/{NAME}", "-n", ns, "--timeout=60s", timeout=75)
    _wait_ready(kubectl, ns)


def test_deleting_the_nimservice_removes_what_it_owned(kubectl: Kubectl) -> None:
    ns = "journey-delete"
    _apply_minimal(kubectl, ns)
    _wait_ready(kubectl, ns)
    kubectl.run("delete", "nimservice", NAME, "-n", ns, "--wait", "--timeout=60s", timeout=75)
    for kind in ("deployment", "service", "serviceaccount", "role", "rolebinding"):
        wait_for(partial(kubectl.gone, kind, NAME, "-n", ns), 30, f"{kind} {NAME} to go")
    wait_for(lambda: kubectl.gone("pods", "-n", ns, "-l", f"app={NAME}"), 30, "the NIM pods to go")
    kubectl.run("delete", "nimcache", NAME, "-n", ns, "--wait", "--timeout=60s", timeout=75)
    for kind, name in (("pvc", f"{NAME}-pvc"), ("job", f"{NAME}-job"), ("cm", f"{NAME}-manifest")):
        wait_for(partial(kubectl.gone, kind, name, "-n", ns), 30, f"{kind} {name} to go")
