"""Journeys where something is wrong on the user's side: a missing NIMCache, a crashing NIM, and cleaning up."""

from __future__ import annotations

import pytest

from tests.e2e.journeys.harness import Kubectl, example, wait_for

pytestmark = pytest.mark.kubectl

NAME = "meta-llama-3-2-1b-instruct"

SERVICE_ON_CACHE = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: NAME, namespace: NS}
spec:
  image: {repository: nvcr.io/nim/meta/llama-3.2-1b-instruct, tag: "1.12.0", pullSecrets: [ngc-secret]}
  authSecret: ngc-api-secret
  replicas: 1
  storage: {nimCache: {name: CACHE}}
  expose: {service: {port: 8000}}
"""

CRASHING = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: crashing, namespace: NS}
spec:
  image: {repository: nvcr.io/nim/meta/llama-3.2-1b-instruct, tag: "1.12.0", pullSecrets: [ngc-secret]}
  authSecret: ngc-api-secret
  replicas: 1
  annotations: {localcluster.nimctl.io/simulate: crash-loop}
  storage: {emptyDir: {}}
  expose: {service: {port: 8000}}
"""


def _state(kubectl: Kubectl, kind: str, name: str, ns: str) -> str:
    return kubectl.jsonpath(kind, name, "-n", ns, path="{.status.state}")


def test_missing_nimcache_fails_and_recovers_when_the_cache_appears(kubectl: Kubectl) -> None:
    ns = "failure-missing-cache"
    kubectl.ngc_namespace(ns)
    service = SERVICE_ON_CACHE.replace("NS", ns).replace("NAME", "on-cache")
    kubectl.run("apply", "-f", "-", input=service.replace("CACHE", NAME))
    wait_for(
        lambda: _state(kubectl, "nimservice", "on-cache", ns) == "Failed",
        60,
        "the NIMService to fail for its missing NIMCache",
    )
    reason = kubectl.jsonpath(
        "nimservice", "on-cache", "-n", ns, path='{.status.conditions[?(@.type=="Failed")].reason}'
    )
    assert reason == "NIMCacheNotFound"
    assert "Failed" in kubectl.run("get", "nimservice", "on-cache", "-n", ns).stdout

    cache_only = example("nim-minimal.yaml", ns).split("\n---\n")[0]
    assert "kind: NIMCache" in cache_only
    kubectl.run("apply", "-f", "-", input=cache_only)
    wait_for(
        lambda: _state(kubectl, "nimservice", "on-cache", ns) == "Ready",
        90,
        "the NIMService to recover once its NIMCache is Ready",
    )


def test_a_crash_looping_nim_stays_not_ready_and_says_why(kubectl: Kubectl) -> None:
    ns = "failure-crash"
    kubectl.ngc_namespace(ns)
    kubectl.run("apply", "-f", "-", input=CRASHING.replace("NS", ns))
    wait_for(
        lambda: (
            "CrashLoopBackOff" in kubectl.run("get", "pods", "-n", ns, "-l", "app=crashing").stdout
        ),
        60,
        "the NIM pod to crash-loop",
    )
    wait_for(
        lambda: _state(kubectl, "nimservice", "crashing", ns) == "NotReady",
        60,
        "the NIMService to be NotReady",
    )
    reason = kubectl.jsonpath(
        "nimservice", "crashing", "-n", ns, path='{.status.conditions[?(@.type=="Ready")].reason}'
    )
    message = kubectl.jsonpath(
        "nimservice", "crashing", "-n", ns, path='{.status.conditions[?(@.type=="Ready")].message}'
    )
    assert reason == "CrashLoopBackOff", reason
    assert message.startswith("container crashing-ctr of pod crashing-"), message
    assert message.endswith("keeps crashing: last exit code 1 (Error)"), message


def test_deleting_the_namespace_takes_the_nim_objects_with_it(kubectl: Kubectl) -> None:
    ns = "failure-namespace"
    kubectl.ngc_namespace(ns)
    kubectl.run("apply", "-f", "-", input=example("nim-minimal.yaml", ns))
    wait_for(
        lambda: _state(kubectl, "nimservice", NAME, ns) == "Ready", 90, "the NIMService to be Ready"
    )
    kubectl.run("delete", "namespace", ns, "--wait", "--timeout=60s", timeout=75)
    assert kubectl.gone("namespace", ns)
    assert kubectl.run("get", "nimservices,nimcaches", "-A", "-o", "name").stdout.count(ns) == 0


def test_applying_the_same_manifest_again_changes_nothing(kubectl: Kubectl) -> None:
    ns = "failure-reapply"
    kubectl.ngc_namespace(ns)
    manifest = example("nim-minimal.yaml", ns)
    kubectl.run("apply", "-f", "-", input=manifest)
    wait_for(
        lambda: _state(kubectl, "nimservice", NAME, ns) == "Ready", 90, "the NIMService to be Ready"
    )
    generation = kubectl.jsonpath("nimservice", NAME, "-n", ns, path="{.metadata.generation}")
    again = kubectl.run("apply", "-f", "-", input=manifest).stdout
    assert f"nimcache.apps.nvidia.com/{NAME} unchanged" in again
    assert f"nimservice.apps.nvidia.com/{NAME} unchanged" in again
    server_side = kubectl.run("apply", "--server-side", "-f", "-", input=manifest).stdout
    assert "serverside-applied" in server_side
    assert (
        kubectl.jsonpath("nimservice", NAME, "-n", ns, path="{.metadata.generation}") == generation
    )
    assert _state(kubectl, "nimservice", NAME, ns) == "Ready"
