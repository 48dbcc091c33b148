"""``kubectl create``/``expose``/``rollout`` on localcluster, and what a real API server refuses.

kubectl sends protobuf for built-in kinds; these steps failed before localcluster
decoded every built-in kind. Each step's output is what kubectl prints against a
real kube-apiserver, refusals included.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster
from tests.conftest import Kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


@pytest.fixture
async def sim_cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(bookmark_interval=0.5) as c:
        yield c


@pytest.fixture
def kc(sim_cluster: LocalCluster, kubectl_binary: str, tmp_path: Path) -> Kubectl:
    home = tmp_path / "home"
    home.mkdir()
    return Kubectl(kubectl_binary, sim_cluster.kubeconfig_path, home)


async def test_create_deployment_expose_and_rollout(kc: Kubectl) -> None:
    out = await kc.run("create", "deployment", "web", "--image=nginx:1.27", "--replicas=2")
    assert out.stdout.strip() == "deployment.apps/web created"
    rollout = await kc.run("rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in rollout.stdout
    exposed = await kc.run("expose", "deployment", "web", "--port=80", "--target-port=8080")
    assert exposed.stdout.strip() == "service/web exposed"
    svc = json.loads((await kc.run("get", "service", "web", "-o", "json")).stdout)
    assert svc["spec"]["selector"] == {"app": "web"}
    assert svc["spec"]["ports"][0]["targetPort"] == 8080
    assert svc["spec"]["clusterIP"]
    deploy = json.loads((await kc.run("get", "deployment", "web", "-o", "json")).stdout)
    pod_spec = deploy["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["image"] == "nginx:1.27"
    assert pod_spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"  # defaulted
    await kc.run("set", "image", "deployment/web", "nginx=nginx:1.28")
    await kc.run("rollout", "status", "deployment/web", "--timeout=60s")
    undo = await kc.run("rollout", "undo", "deployment/web")
    assert "deployment.apps/web rolled back" in undo.stdout
    await kc.run("rollout", "status", "deployment/web", "--timeout=60s")
    deploy = json.loads((await kc.run("get", "deployment", "web", "-o", "json")).stdout)
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"


async def test_create_job_cronjob_service_ingress(kc: Kubectl) -> None:
    job = await kc.run("create", "job", "hello", "--image=busybox", "--", "echo", "hi")
    assert job.stdout.strip() == "job.batch/hello created"
    cron = await kc.run("create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *")
    assert cron.stdout.strip() == "cronjob.batch/nightly created"
    svc = await kc.run("create", "service", "clusterip", "api", "--tcp=80:8080")
    assert svc.stdout.strip() == "service/api created"
    ing = await kc.run("create", "ingress", "api", "--rule=nim.example.com/v1*=api:80")
    assert ing.stdout.strip() == "ingress.networking.k8s.io/api created"
    got = json.loads((await kc.run("get", "ingress", "api", "-o", "json")).stdout)
    path = got["spec"]["rules"][0]["http"]["paths"][0]
    assert (path["path"], path["pathType"]) == ("/v1", "Prefix")
    assert path["backend"]["service"] == {"name": "api", "port": {"number": 80}}
    cj = json.loads((await kc.run("get", "cronjob", "nightly", "-o", "json")).stdout)
    assert cj["spec"]["schedule"] == "0 3 * * *"
    assert cj["spec"]["concurrencyPolicy"] == "Allow"  # defaulted as kube-apiserver does
    pods = json.loads((await kc.run("get", "pods", "-l", "job-name=hello", "-o", "json")).stdout)
    assert len(pods["items"]) == 1  # the Job controller made its pod


async def test_create_refusals_read_like_kube_apiserver(kc: Kubectl) -> None:
    bad_schedule = await kc.run(
        "create", "cronjob", "c", "--image=busybox", "--schedule=* * *", check=False
    )
    assert bad_schedule.returncode != 0
    assert (
        'CronJob.batch "c" is invalid: spec.schedule: Invalid value: "* * *": '
        "expected exactly 5 fields, found 3: * * *"
    ) in bad_schedule.stderr
    bad_port = await kc.run(
        "create", "service", "nodeport", "s", "--tcp=80", "--node-port=80", check=False
    )
    assert bad_port.returncode != 0
    assert (
        'Service "s" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is '
        "not in the valid range. The range of valid ports is 30000-32767"
    ) in bad_port.stderr


DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "llm"},
    "spec": {
        "selector": {"matchLabels": {"app": "llm"}},
        "template": {
            "metadata": {"labels": {"app": "llm"}},
            "spec": {
                "containers": [{"name": "nim", "image": "nginx", "imagePullPolicy": "Always"}]
            },
        },
    },
}


async def test_apply_refusals_read_like_kube_apiserver(kc: Kubectl) -> None:
    typo = json.loads(json.dumps(DEPLOYMENT))
    typo["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresnt"
    out = await kc.run("apply", "-f", "-", input=json.dumps(typo), check=False)
    assert out.returncode != 0
    assert (
        'The Deployment "llm" is invalid: spec.template.spec.containers[0].imagePullPolicy: '
        'Unsupported value: "IfNotPresnt": supported values: "Always", "IfNotPresent", "Never"'
    ) in out.stderr
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "llm"},
        "spec": {"type": "ClusterIp", "ports": [{"port": 8000}]},
    }
    out = await kc.run("apply", "-f", "-", input=json.dumps(service), check=False)
    assert 'spec.type: Unsupported value: "ClusterIp"' in out.stderr
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg"},
        "data": {"replicas": 3},
    }
    out = await kc.run("apply", "-f", "-", input=json.dumps(config), check=False)
    assert out.returncode != 0
    assert "json: cannot unmarshal number into Go struct field ConfigMap.data of type string" in (
        out.stderr
    )
    await kc.run("apply", "-f", "-", input=json.dumps(DEPLOYMENT))
    moved = json.loads(json.dumps(DEPLOYMENT))
    moved["spec"]["selector"]["matchLabels"]["tier"] = "gpu"
    moved["spec"]["template"]["metadata"]["labels"]["tier"] = "gpu"
    out = await kc.run("apply", "-f", "-", input=json.dumps(moved), check=False)
    assert out.returncode != 0
    assert "spec.selector: Invalid value: " in out.stderr and "field is immutable" in out.stderr


async def test_finalizer_names_without_a_path_get_a_warning(kc: Kubectl) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["hold", "example.com/hold"]},
    }
    out = await kc.run("apply", "-f", "-", input=json.dumps(config))
    assert (
        'Warning: metadata.finalizers: "hold": prefer a domain-qualified finalizer name '
        "including a path (/) to avoid accidental conflicts with other finalizer writers"
    ) in out.stderr
    assert "example.com/hold" not in out.stderr
    config["data"] = {"a": "1"}
    again = await kc.run("apply", "-f", "-", input=json.dumps(config))
    assert "Warning" not in again.stderr  # only finalizers a write adds are reported
    await kc.run(
        "patch", "configmap", "held", "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )


async def test_get_pvc_ingress_and_cronjob_columns_match_kubectl_on_a_real_cluster(
    kc: Kubectl,
) -> None:
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "model-store"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Gi"}}},
    }
    await kc.run("apply", "-f", "-", input=json.dumps(claim))
    await kc.run("wait", "--for=jsonpath={.status.phase}=Bound", "pvc/model-store", "--timeout=30s")
    table = (await kc.run("get", "pvc")).stdout.splitlines()
    assert table[0].split() == [
        "NAME",
        "STATUS",
        "VOLUME",
        "CAPACITY",
        "ACCESS",
        "MODES",
        "STORAGECLASS",
        "VOLUMEATTRIBUTESCLASS",
        "AGE",
    ]
    row = table[1].split()
    assert row[0:2] == ["model-store", "Bound"] and row[3:5] == ["50Gi", "RWO"]
    assert row[6] == "<unset>"
    await kc.run("create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *")
    cron = (await kc.run("get", "cronjobs")).stdout.splitlines()
    assert cron[0].split() == [
        "NAME",
        "SCHEDULE",
        "TIMEZONE",
        "SUSPEND",
        "ACTIVE",
        "LAST",
        "SCHEDULE",
        "AGE",
    ]
    assert cron[1].split()[:10] == [
        "nightly",
        "0",
        "3",
        "*",
        "*",
        "*",
        "<none>",
        "False",
        "0",
        "<none>",
    ]


async def test_apply_twice_explain_and_drain_dry_run(kc: Kubectl) -> None:
    first = await kc.run("apply", "-f", "-", input=json.dumps(DEPLOYMENT))
    assert first.stdout.strip() == "deployment.apps/llm created"
    again = await kc.run("apply", "-f", "-", input=json.dumps(DEPLOYMENT))
    assert again.stdout.strip() == "deployment.apps/llm unchanged"
    explain = await kc.run("explain", "deployment.spec")
    assert "FIELD: spec <DeploymentSpec>" in explain.stdout
    assert "selector\t<LabelSelector> -required-" in explain.stdout
    await kc.run("rollout", "status", "deployment/llm", "--timeout=60s")
    node = json.loads((await kc.run("get", "pods", "-o", "json")).stdout)["items"][0]["spec"][
        "nodeName"
    ]
    drain = await kc.run("drain", node, "--dry-run=server", "--ignore-daemonsets")
    assert f"node/{node} cordoned (server dry run)" in drain.stdout
    assert f"node/{node} drained (server dry run)" in drain.stdout
    still = json.loads((await kc.run("get", "node", node, "-o", "json")).stdout)
    assert not still["spec"].get("unschedulable")  # a dry run changes nothing
