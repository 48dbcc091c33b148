"""kubectl against localcluster, as a user drives it: CRDs, custom resources, patches,
apply (client- and server-side), scale, watch, describe, wait and deletion."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster
from localcluster.extensions import extensions_of
from tests.conftest import Kubectl

pytestmark = pytest.mark.kubectl

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Status, type: string, jsonPath: .status.state}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10}
              replicas: {type: integer, default: 1}
              color: {type: string, enum: [red, blue]}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""

WIDGET = """
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: 3, color: red}
"""

DEPLOYMENT = json.dumps(
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            },
        },
    }
)


async def _install_crd(kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", "-", input=CRD)
    await kubectl.run(
        "wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=10s"
    )


async def test_crd_custom_resources_and_printer_columns(kubectl: Kubectl) -> None:
    await _install_crd(kubectl)
    out = await kubectl.run("apply", "-f", "-", input=WIDGET)
    assert "widget.example.com/w1 created" in out.stdout
    again = await kubectl.run("apply", "-f", "-", input=WIDGET)
    assert "unchanged" in again.stdout
    table = await kubectl.run("get", "widgets")
    header = table.stdout.splitlines()[0].split()
    assert header == ["NAME", "SIZE", "STATUS", "AGE"]
    assert table.stdout.splitlines()[1].split()[:2] == ["w1", "3"]
    as_json = json.loads((await kubectl.run("get", "wd", "w1", "-o", "json")).stdout)
    assert as_json["spec"] == {"size": 3, "color": "red", "replicas": 1}  # defaulted
    as_yaml = await kubectl.run("get", "widget", "w1", "-o", "yaml")
    assert "uid:" in as_yaml.stdout and "resourceVersion:" in as_yaml.stdout
    wide = await kubectl.run("get", "widgets", "-o", "wide")
    assert "w1" in wide.stdout
    resources = await kubectl.run("api-resources", "--api-group=example.com")
    assert "widgets" in resources.stdout and "Widget" in resources.stdout
    explain = await kubectl.run("explain", "widgets")
    assert "KIND:" in explain.stdout and "Widget" in explain.stdout


async def test_schema_validation_error_is_shown(kubectl: Kubectl) -> None:
    await _install_crd(kubectl)
    bad = WIDGET.replace("size: 3", "size: 30").replace("red", "green")
    out = await kubectl.run("apply", "-f", "-", input=bad, check=False)
    assert out.returncode != 0
    assert 'The Widget "w1" is invalid' in out.stderr
    assert "spec.size" in out.stderr and "less than or equal to 10" in out.stderr
    assert 'Unsupported value: "green"' in out.stderr
    unknown = WIDGET.replace("color: red", "color: red, shape: round")
    strict = await kubectl.run("apply", "-f", "-", input=unknown, check=False)
    assert strict.returncode != 0 and 'unknown field "spec.shape"' in strict.stderr
    typo = DEPLOYMENT.replace('"replicas": 1', '"replica": 1')
    builtin = await kubectl.run("apply", "-f", "-", input=typo, check=False)
    assert builtin.returncode != 0 and 'unknown field "spec.replica"' in builtin.stderr


async def test_label_annotate_patch_scale_and_server_side_apply(kubectl: Kubectl) -> None:
    await _install_crd(kubectl)
    await kubectl.run("apply", "-f", "-", input=WIDGET)
    await kubectl.run("label", "widget", "w1", "tier=gold")
    await kubectl.run("annotate", "widget", "w1", "note=hello")
    selected = await kubectl.run("get", "widgets", "-l", "tier=gold", "-o", "name")
    assert selected.stdout.strip() == "widget.example.com/w1"
    await kubectl.run("patch", "widget", "w1", "--type", "merge", "-p", '{"spec":{"size":4}}')
    await kubectl.run(
        "patch", "widget", "w1", "--type", "json",
        "-p", '[{"op":"replace","path":"/spec/size","value":5}]',
    )  # fmt: skip
    smp = await kubectl.run(
        "patch", "widget", "w1", "--type", "strategic", "-p", '{"spec":{"size":6}}', check=False
    )
    assert smp.returncode != 0 and "not supported" in smp.stderr
    await kubectl.run("scale", "widget", "w1", "--replicas=3")
    obj = json.loads((await kubectl.run("get", "widget", "w1", "-o", "json")).stdout)
    assert obj["spec"]["size"] == 5 and obj["spec"]["replicas"] == 3
    assert obj["metadata"]["labels"] == {"tier": "gold"}
    assert obj["metadata"]["annotations"]["note"] == "hello"
    assert obj["metadata"]["generation"] == 4  # three spec changes after creation
    conflict = await kubectl.run("apply", "--server-side", "-f", "-", input=WIDGET, check=False)
    assert conflict.returncode != 0 and "conflict" in conflict.stderr.lower()
    forced = await kubectl.run(
        "apply", "--server-side", "--force-conflicts", "-f", "-", input=WIDGET
    )
    assert "serverside-applied" in forced.stdout
    obj = json.loads((await kubectl.run("get", "widget", "w1", "-o", "json")).stdout)
    assert obj["spec"]["size"] == 3


async def test_builtin_deployment_apply_patch_scale(kubectl: Kubectl) -> None:
    assert "created" in (await kubectl.run("apply", "-f", "-", input=DEPLOYMENT)).stdout
    assert "unchanged" in (await kubectl.run("apply", "-f", "-", input=DEPLOYMENT)).stdout
    await kubectl.run(
        "patch", "deployment", "web", "--type", "strategic",
        "-p", '{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx:2"}]}}}}',
    )  # fmt: skip
    await kubectl.run("scale", "deployment", "web", "--replicas=3")
    wide = await kubectl.run("get", "deployment", "web", "-o", "wide")
    lines = wide.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAME", "READY", "UP-TO-DATE"]
    assert "nginx:2" in lines[1] and "0/3" in lines[1]


async def test_get_watch_prints_updates(cluster: LocalCluster, kubectl: Kubectl) -> None:
    cluster.storage.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"},
        }
    )
    proc = await asyncio.create_subprocess_exec(
        kubectl.binary, "get", "configmaps", "-w", "--output-watch-events",
        env=kubectl.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(20):
            while not any("MODIFIED" in line for line in seen):
                line = (await proc.stdout.readline()).decode()
                seen.append(line)
                if "ADDED" in line and "cm" in line:
                    cm = cluster.storage.get("v1", "ConfigMap", "cm", "default")
                    cm["data"] = {"k": "v"}
                    cluster.storage.update(cm)
    finally:
        proc.kill()
        await proc.wait()
    assert any(line.split()[:2] == ["MODIFIED", "cm"] for line in seen)


async def test_describe_shows_events(cluster: LocalCluster, kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", "-", input=DEPLOYMENT)
    dep = cluster.storage.get("apps/v1", "Deployment", "web", "default")
    cluster.storage.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default"},
            "involvedObject": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "web",
                "namespace": "default",
                "uid": dep["metadata"]["uid"],
            },
            "reason": "ScalingReplicaSet",
            "message": "Scaled up replica set web-1 to 1",
            "type": "Normal",
            "source": {"component": "deployment-controller"},
            "count": 1,
            "firstTimestamp": dep["metadata"]["creationTimestamp"],
            "lastTimestamp": dep["metadata"]["creationTimestamp"],
        }
    )
    out = await kubectl.run("describe", "deployment", "web")
    assert "Events:" in out.stdout
    assert "ScalingReplicaSet" in out.stdout and "Scaled up replica set web-1" in out.stdout


def _widget_watches(cluster: LocalCluster) -> list[object]:
    return list(extensions_of(cluster).audit.records(resource="widgets", verb="watch"))


async def _until_watching(cluster: LocalCluster, before: int) -> None:
    """Wait until a new watch on widgets reached the API server (kubectl wait is waiting)."""
    async with asyncio.timeout(20):
        while len(_widget_watches(cluster)) <= before:
            await asyncio.sleep(0.02)


async def test_delete_wait_with_and_without_finalizers(
    cluster: LocalCluster, kubectl: Kubectl
) -> None:
    await _install_crd(kubectl)
    await kubectl.run("apply", "-f", "-", input=WIDGET)
    out = await kubectl.run("delete", "widget", "w1", "--wait", "--timeout=10s")
    assert 'widget.example.com "w1" deleted' in out.stdout
    held = WIDGET.replace("metadata: {name: w1}", "metadata: {name: w2, finalizers: [x/y]}")
    await kubectl.run("apply", "-f", "-", input=held)
    await kubectl.run("delete", "widget", "w2", "--wait=false")
    obj = json.loads((await kubectl.run("get", "widget", "w2", "-o", "json")).stdout)
    assert obj["metadata"]["deletionTimestamp"]
    watches = len(_widget_watches(cluster))
    waiter = asyncio.create_task(kubectl.run("wait", "--for=delete", "widget/w2", "--timeout=20s"))
    await _until_watching(cluster, watches)
    assert not waiter.done()
    await kubectl.run(
        "patch", "widget", "w2", "--type", "json",
        "-p", '[{"op":"remove","path":"/metadata/finalizers"}]',
    )  # fmt: skip
    result = await waiter
    assert result.returncode == 0
    gone = await kubectl.run("get", "widget", "w2", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


async def test_wait_for_condition_ready(cluster: LocalCluster, kubectl: Kubectl) -> None:
    await _install_crd(kubectl)
    await kubectl.run("apply", "-f", "-", input=WIDGET)
    watches = len(_widget_watches(cluster))
    waiter = asyncio.create_task(
        kubectl.run("wait", "--for=condition=Ready", "widget/w1", "--timeout=20s")
    )
    await _until_watching(cluster, watches)
    obj = cluster.storage.get("example.com/v1", "Widget", "w1", "default")
    obj["status"] = {"state": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}
    cluster.storage.update_status(obj)
    result = await waiter
    assert "condition met" in result.stdout
    table = await kubectl.run("get", "widgets")
    assert table.stdout.splitlines()[1].split()[:3] == ["w1", "3", "Ready"]


async def test_namespace_deletion_removes_contents(kubectl: Kubectl) -> None:
    await kubectl.run("create", "namespace", "team")  # a protobuf body
    await kubectl.run(
        "create", "secret", "generic", "ngc-api-secret", "-n", "team",
        "--from-literal=NGC_API_KEY=abc",
    )  # fmt: skip
    key = await kubectl.run(
        "get", "secret", "ngc-api-secret", "-n", "team", "-o", "jsonpath={.data.NGC_API_KEY}"
    )
    assert key.stdout == "YWJj"
    await kubectl.run("apply", "-n", "team", "-f", "-", input=DEPLOYMENT)
    await kubectl.run("delete", "namespace", "team", "--wait", "--timeout=20s")
    out = await kubectl.run("get", "deployments", "-n", "team", "-o", "name")
    assert out.stdout.strip() == ""
    missing = await kubectl.run("get", "namespace", "team", check=False)
    assert missing.returncode != 0


async def test_nimctl_localcluster_process(kubectl_binary: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nimctl", "localcluster",
        "--kubeconfig", str(kubeconfig), "--no-simulator",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(30):
            banner = ""
            while "kubectl" not in banner:
                line = (await proc.stdout.readline()).decode()
                if not line:
                    break
                banner += line
        assert str(kubeconfig) in banner
        home = tmp_path / "home"
        home.mkdir()
        kubectl = Kubectl(kubectl_binary, kubeconfig, home)
        out = await kubectl.run("get", "namespaces", "-o", "name")
        assert "namespace/default" in out.stdout.split()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            code = await proc.wait()
    assert code == 0
    assert os.path.exists(kubeconfig)
