"""The simulated KServe InferenceService controller as pure logic: mode, predictor, status."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from localcluster.simulator.kserve import (
    CONFIG_NAME,
    NAMESPACE,
    deployment_mode,
    kserve_objects,
    reconcile_inferenceservice,
)
from localcluster.simulator.objects import (
    Context,
    Create,
    ObjectLookup,
    UpdateStatus,
)
from nimctl_runtime.meta import Obj


def isvc(mode: str | None = "Standard", *, cluster_local: bool = True) -> Obj:
    meta: Obj = {"name": "llm", "namespace": "ns", "uid": "u1", "generation": 1}
    if mode:
        meta["annotations"] = {"serving.kserve.io/deploymentMode": mode}
    if cluster_local:
        meta["labels"] = {"networking.kserve.io/visibility": "cluster-local"}
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": meta,
        "spec": {
            "predictor": {
                "minReplicas": 2,
                "deploymentStrategy": {"type": "RollingUpdate"},
                "labels": {"app": "llm"},
                "serviceAccountName": "llm",
                "containers": [
                    {
                        "name": "llm-ctr",
                        "image": "nvcr.io/nim/meta/llama:1",
                        "ports": [{"name": "api", "containerPort": 8000}],
                    }
                ],
            }
        },
    }


def config(default_mode: str) -> Obj:
    return next(o for o in kserve_objects(default_mode) if o["kind"] == "ConfigMap")


def ctx(view: ObjectLookup, configmap: Obj | None = None) -> Context:
    def lookup(kind: str, namespace: str, name: str) -> Obj | None:
        if configmap and (kind, namespace, name) == ("ConfigMap", NAMESPACE, CONFIG_NAME):
            return configmap
        return None

    return Context(
        view=view,
        now=0.0,
        stamp=lambda: "2026-01-01T00:00:00Z",
        sim_of=lambda _s: 0.0,
        options={"lookup": lookup},
    )


def created(actions: list[Any], kind: str) -> Obj:
    return next(a.obj for a in actions if isinstance(a, Create) and a.obj["kind"] == kind)


def status_of(actions: list[Any]) -> Obj:
    updates = [a for a in actions if isinstance(a, UpdateStatus)]
    assert len(updates) == 1
    status: Obj = updates[0].obj["status"]
    return status


def rolled_out(deployment: Obj) -> Obj:
    out = copy.deepcopy(deployment)
    n = out["spec"]["replicas"]
    out["status"] = {"updatedReplicas": n, "availableReplicas": n, "readyReplicas": n}
    return out


@pytest.mark.parametrize(
    ("mode", "deployment", "url", "address"),
    [
        (
            "Standard",
            "llm-predictor",
            "http://llm-ns.example.com",
            "http://llm-predictor.ns.svc.cluster.local",
        ),
        (
            "RawDeployment",
            "llm-predictor",
            "http://llm-ns.example.com",
            "http://llm-predictor.ns.svc.cluster.local",
        ),
        (
            "Serverless",
            "llm-predictor-00001-deployment",
            "http://llm.ns.example.com",
            "http://llm.ns.svc.cluster.local",
        ),
        (
            "Knative",
            "llm-predictor-00001-deployment",
            "http://llm.ns.example.com",
            "http://llm.ns.svc.cluster.local",
        ),
    ],
)
def test_predictor_then_ready_with_urls(mode: str, deployment: str, url: str, address: str) -> None:
    obj = isvc(mode, cluster_local=False)
    view = ObjectLookup()
    actions = reconcile_inferenceservice(obj, ctx(view))
    dep = created(actions, "Deployment")
    assert dep["metadata"]["name"] == deployment
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == "llm"
    assert "minReplicas" not in pod["spec"] and "labels" not in pod["spec"]
    assert pod["metadata"]["labels"]["serving.kserve.io/inferenceservice"] == "llm"
    assert created(actions, "Service")["spec"]["ports"][0]["targetPort"] == 8000
    st = status_of(actions)
    ready = {c["type"]: c["status"] for c in st["conditions"]}
    assert ready["PredictorReady"] == "False" and ready["Ready"] == "False"
    assert "url" not in st and st["deploymentMode"] == mode

    obj["status"] = st
    view.put(rolled_out(dep))
    view.put(created(actions, "Service"))
    actions = reconcile_inferenceservice(obj, ctx(view))
    st = status_of(actions)
    ready = {c["type"]: c["status"] for c in st["conditions"]}
    assert ready == {"PredictorReady": "True", "IngressReady": "True", "Ready": "True"}
    assert st["url"] == url and st["address"] == {"url": address}

    obj["status"] = st
    assert reconcile_inferenceservice(obj, ctx(view)) == [], "steady state writes nothing"


def test_cluster_local_url_is_the_address() -> None:
    obj = isvc("Standard")
    view = ObjectLookup()
    dep = created(reconcile_inferenceservice(obj, ctx(view)), "Deployment")
    view.put(rolled_out(dep))
    st = status_of(reconcile_inferenceservice(obj, ctx(view)))
    assert st["url"] == st["address"]["url"] == "http://llm-predictor.ns.svc.cluster.local"


def test_mode_status_then_annotation_then_configured_default() -> None:
    assert deployment_mode(isvc(None), ctx(ObjectLookup()).options["lookup"]) == "Serverless"
    lookup = ctx(ObjectLookup(), config("RawDeployment")).options["lookup"]
    assert deployment_mode(isvc(None), lookup) == "RawDeployment"
    assert deployment_mode(isvc("Knative"), lookup) == "Knative"
    settled = isvc("Knative")
    settled["status"] = {"deploymentMode": "Standard"}
    assert deployment_mode(settled, lookup) == "Standard"


def test_installed_objects() -> None:
    objs = kserve_objects("Standard")
    crd = next(o for o in objs if o["kind"] == "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "inferenceservices.serving.kserve.io"
    assert crd["spec"]["names"]["shortNames"] == ["isvc"]
    deploy = json.loads(config("Standard")["data"]["deploy"])
    assert deploy == {"defaultDeploymentMode": "Standard"}
    controller = next(o for o in objs if o["kind"] == "Deployment")
    assert controller["metadata"]["labels"] == {"control-plane": "kserve-controller-manager"}
    with pytest.raises(ValueError, match="default deployment mode"):
        kserve_objects("Fast")
