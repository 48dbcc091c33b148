"""What a user sees when kubectl sends nimctl something wrong: clear refusals, nothing created."""

from __future__ import annotations

import pytest

from tests.e2e.journeys.harness import Kubectl, example

pytestmark = pytest.mark.kubectl

NAME = "meta-llama-3-2-1b-instruct"

NO_TAG = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: notag, namespace: NS}
spec:
  image: {repository: nvcr.io/nim/meta/llama-3.2-1b-instruct}
  authSecret: ngc-api-secret
  storage: {emptyDir: {}}
  expose: {service: {port: 8000}}
"""

UNKNOWN_FIELD = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMCache
metadata: {name: unknown-field, namespace: NS}
spec:
  bogusField: 1
  source:
    ngc:
      modelPuller: nvcr.io/nim/meta/llama-3.2-1b-instruct:1.12.0
      pullSecret: ngc-secret
      authSecret: ngc-api-secret
  storage: {pvc: {create: true, size: 1Gi, volumeAccessMode: ReadWriteOnce}}
"""

NO_AUTH_SECRET = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: noauth, namespace: NS}
spec:
  image: {repository: nvcr.io/nim/meta/llama-3.2-1b-instruct, tag: "1.12.0"}
  storage: {emptyDir: {}}
  expose: {service: {port: 8000}}
"""

MALFORMED = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: x
 data: [
"""


def test_nimservice_without_image_tag_is_refused_with_the_field(kubectl: Kubectl) -> None:
    ns = "invalid-tag"
    kubectl.ngc_namespace(ns)
    res = kubectl.run("apply", "-f", "-", input=NO_TAG.replace("NS", ns), check=False)
    assert res.returncode != 0
    assert 'The NIMService "notag" is invalid' in res.stderr
    assert "spec.image.tag: Required value" in res.stderr
    assert kubectl.gone("nimservice", "notag", "-n", ns)


def test_unknown_field_is_refused_by_strict_validation_and_pruned_without_it(
    kubectl: Kubectl,
) -> None:
    ns = "invalid-unknown"
    kubectl.ngc_namespace(ns)
    manifest = UNKNOWN_FIELD.replace("NS", ns)
    res = kubectl.run("apply", "-f", "-", input=manifest, check=False)
    assert res.returncode != 0
    assert 'strict decoding error: unknown field "spec.bogusField"' in res.stderr
    kubectl.run("apply", "--validate=false", "-f", "-", input=manifest)
    spec = kubectl.jsonpath("nimcache", "unknown-field", "-n", ns, path="{.spec}")
    assert "modelPuller" in spec and "bogusField" not in spec


def test_malformed_yaml_is_reported_with_the_line(kubectl: Kubectl) -> None:
    res = kubectl.run("apply", "-f", "-", input=MALFORMED, check=False)
    assert res.returncode != 0
    assert "error converting YAML to JSON" in res.stderr and "line" in res.stderr


def test_immutable_nimcache_changes_are_refused(kubectl: Kubectl) -> None:
    ns = "invalid-immutable"
    kubectl.ngc_namespace(ns)
    kubectl.run("apply", "-f", "-", input=example("nim-minimal.yaml", ns))
    puller = kubectl.run(
        "patch",
        "nimcache",
        NAME,
        "-n",
        ns,
        "--type",
        "merge",
        "-p",
        '{"spec":{"source":{"ngc":{"modelPuller":"nvcr.io/nim/meta/llama-3.2-1b-instruct:9"}}}}',
        check=False,
    )
    assert puller.returncode != 0
    assert "modelPuller is an immutable field" in puller.stderr
    size = kubectl.run(
        "patch",
        "nimcache",
        NAME,
        "-n",
        ns,
        "--type",
        "merge",
        "-p",
        '{"spec":{"storage":{"pvc":{"size":"60Gi"}}}}',
        check=False,
    )
    assert size.returncode != 0
    assert 'admission webhook "vnimcache-v1alpha1.kb.io" denied the request' in size.stderr
    assert "nimcache.spec: Forbidden: is immutable once the object is created" in size.stderr
    stored = kubectl.jsonpath("nimcache", NAME, "-n", ns, path="{.spec.storage.pvc.size}")
    assert stored == "50Gi"


def test_nimservice_without_auth_secret_warns_and_is_created(kubectl: Kubectl) -> None:
    ns = "invalid-noauth"
    kubectl.ngc_namespace(ns)
    res = kubectl.run("apply", "-f", "-", input=NO_AUTH_SECRET.replace("NS", ns))
    assert "nimservice.apps.nvidia.com/noauth created" in res.stdout
    assert "Warning:" in res.stderr and "authSecret" in res.stderr, res.stderr
