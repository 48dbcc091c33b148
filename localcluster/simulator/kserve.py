"""A simulated KServe: its CRD and configuration, and the InferenceService controller as pure logic.

``kserve_objects(default_mode)`` is what installing KServe leaves in a cluster
that NIM operators look at: namespace ``kserve``, the
``inferenceservices.serving.kserve.io`` CRD (``v1beta1``, short name ``isvc``,
status subresource, KServe's printer columns), the ``inferenceservice-config``
ConfigMap whose ``deploy`` key names ``defaultDeploymentMode``, and the
controller Deployment labelled ``control-plane=kserve-controller-manager`` (how
NVIDIA's operator finds KServe's namespace).

``reconcile_inferenceservice`` plays KServe's controller for the predictor:

- the deployment mode: ``status.deploymentMode`` once set, else the
  ``serving.kserve.io/deploymentMode`` annotation, else the configured
  default. ``Standard``/``RawDeployment`` run Deployment ``<name>-predictor``
  and Service ``<name>-predictor``; ``Knative``/``Serverless`` run the first
  revision's Deployment ``<name>-predictor-00001-deployment`` (Knative's
  naming) and Service ``<name>-predictor``;
- the pod: the predictor's PodSpec with KServe's own fields removed, labelled
  as KServe labels a component: the InferenceService's labels, the
  predictor's, then ``serving.kserve.io/inferenceservice``, ``component:
  predictor`` and ``app: isvc.<name>-predictor`` (the Deployment likewise);
  ``minReplicas`` replicas (default 1);
- status: ``PredictorReady``, ``IngressReady`` and ``Ready`` conditions, the
  ``url`` (external, or the cluster-local address with
  ``networking.kserve.io/visibility: cluster-local``), ``address.url`` and
  ``deploymentMode``.

Only the predictor is simulated (no transformer, explainer or model mesh).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

from localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    Update,
    UpdateStatus,
    annotations_of,
    labels_of,
    name_of,
    namespace_of,
    owner_reference,
    set_condition,
    status_changed,
    with_status,
)
from nimctl_runtime.meta import Obj

GROUP = "serving.kserve.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "InferenceService"
NAMESPACE = "kserve"
CONFIG_NAME = "inferenceservice-config"
DEPLOYMENT_MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
VISIBILITY_LABEL = "networking.kserve.io/visibility"
ISVC_LABEL = "serving.kserve.io/inferenceservice"
INGRESS_DOMAIN = "example.com"
RAW_MODES = ("Standard", "RawDeployment")
KNATIVE_MODES = ("Knative", "Serverless")
MODES = (*RAW_MODES, *KNATIVE_MODES, "ModelMesh")

# Predictor fields that are KServe's, not the pod's.
COMPONENT_FIELDS = (
    "minReplicas",
    "maxReplicas",
    "scaleTarget",
    "scaleMetric",
    "scaleMetricType",
    "autoScaling",
    "containerConcurrency",
    "timeout",
    "canaryTrafficPercent",
    "logger",
    "batcher",
    "labels",
    "annotations",
    "deploymentStrategy",
    "workerSpec",
    "model",
)

Lookup = Callable[[str, str, str], Obj | None]

__all__ = [
    "API_VERSION",
    "CONFIG_NAME",
    "KIND",
    "NAMESPACE",
    "deployment_mode",
    "kserve_objects",
    "predictor_deployment_name",
    "reconcile_inferenceservice",
]


def kserve_objects(default_mode: str = "Standard") -> list[Obj]:
    """Namespace, CRD, ``inferenceservice-config`` and controller Deployment of KServe."""
    if default_mode not in MODES:
        raise ValueError(f"KServe default deployment mode {default_mode!r}: one of {MODES}")
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        _crd(),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": CONFIG_NAME,
                "namespace": NAMESPACE,
                "labels": {"app.kubernetes.io/name": "kserve"},
            },
            "data": {
                "deploy": json.dumps({"defaultDeploymentMode": default_mode}, indent=1),
                "ingress": json.dumps(
                    {
                        "ingressDomain": INGRESS_DOMAIN,
                        "domainTemplate": "{{ .Name }}-{{ .Namespace }}.{{ .IngressDomain }}",
                        "urlScheme": "http",
                    },
                    indent=1,
                ),
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "kserve-controller-manager",
                "namespace": NAMESPACE,
                "labels": {"control-plane": "kserve-controller-manager"},
            },
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"control-plane": "kserve-controller-manager"}},
                "template": {
                    "metadata": {"labels": {"control-plane": "kserve-controller-manager"}},
                    "spec": {
                        "containers": [
                            {"name": "manager", "image": "kserve/kserve-controller:v0.15.2"}
                        ]
                    },
                },
            },
        },
    ]


def _crd() -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"inferenceservices.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": "inferenceservices",
                "singular": "inferenceservice",
                "kind": KIND,
                "listKind": "InferenceServiceList",
                "shortNames": ["isvc"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "URL", "type": "string", "jsonPath": ".status.url"},
                        {
                            "name": "Ready",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                        },
                        {
                            "name": "Age",
                            "type": "date",
                            "jsonPath": ".metadata.creationTimestamp",
                        },
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                },
                                "status": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


def configured_default(lookup: Lookup | None) -> str:
    """``deploy.defaultDeploymentMode`` of ``inferenceservice-config`` (KServe's own default)."""
    config = lookup("ConfigMap", NAMESPACE, CONFIG_NAME) if lookup else None
    raw = ((config or {}).get("data") or {}).get("deploy")
    try:
        mode = json.loads(raw).get("defaultDeploymentMode") if raw else None
    except (ValueError, AttributeError):
        mode = None
    return str(mode) if mode in MODES else "Serverless"


def deployment_mode(isvc: Mapping[str, Any], lookup: Lookup | None = None) -> str:
    """Status, then annotation, then the configured default, as KServe decides."""
    status_mode = (isvc.get("status") or {}).get("deploymentMode")
    if status_mode:
        return str(status_mode)
    annotated = annotations_of(isvc).get(DEPLOYMENT_MODE_ANNOTATION)
    if annotated in MODES:
        return str(annotated)
    return configured_default(lookup)


def predictor_deployment_name(name: str, mode: str) -> str:
    return f"{name}-predictor-00001-deployment" if mode in KNATIVE_MODES else f"{name}-predictor"


def _pod_template(isvc: Obj, predictor: Mapping[str, Any]) -> Obj:
    name = name_of(isvc)
    spec = {k: copy.deepcopy(v) for k, v in predictor.items() if k not in COMPONENT_FIELDS}
    # KServe's component metadata: the InferenceService's labels, then the predictor's,
    # then its own (so the pods carry what the InferenceService's owner labelled it with)
    labels = {
        **labels_of(isvc),
        **dict(predictor.get("labels") or {}),
        ISVC_LABEL: name,
        "component": "predictor",
        "app": f"isvc.{name}-predictor",
    }
    meta: Obj = {"labels": labels}
    if predictor.get("annotations"):
        meta["annotations"] = dict(predictor["annotations"])
    return {"metadata": meta, "spec": spec}


def _container_port(predictor: Mapping[str, Any]) -> int:
    for container in predictor.get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("containerPort"):
                return int(port["containerPort"])
    return 8080


def _deployment(isvc: Obj, mode: str, predictor: Mapping[str, Any]) -> Obj:
    name, namespace = name_of(isvc), namespace_of(isvc)
    template = _pod_template(isvc, predictor)
    selector = {"app": f"isvc.{name}-predictor"}
    spec: Obj = {
        "replicas": int(predictor.get("minReplicas") or 1),
        "selector": {"matchLabels": selector},
        "template": template,
    }
    strategy = predictor.get("deploymentStrategy")
    if strategy and mode in RAW_MODES:
        spec["strategy"] = copy.deepcopy(strategy)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": predictor_deployment_name(name, mode),
            "namespace": namespace,
            "labels": {
                **labels_of(isvc),
                **dict(predictor.get("labels") or {}),
                ISVC_LABEL: name,
                "component": "predictor",
            },
            "ownerReferences": [owner_reference(isvc)],
        },
        "spec": spec,
    }


def _service(isvc: Obj, predictor: Mapping[str, Any]) -> Obj:
    name = name_of(isvc)
    port = _container_port(predictor)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{name}-predictor",
            "namespace": namespace_of(isvc),
            "labels": {ISVC_LABEL: name, "component": "predictor"},
            "ownerReferences": [owner_reference(isvc)],
        },
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": f"isvc.{name}-predictor"},
            "ports": [{"name": "http", "port": 80, "targetPort": port, "protocol": "TCP"}],
        },
    }


def _urls(isvc: Obj, mode: str) -> tuple[str, str]:
    """(``status.url``, ``status.address.url``)."""
    name, namespace = name_of(isvc), namespace_of(isvc)
    cluster_local = labels_of(isvc).get(VISIBILITY_LABEL) == "cluster-local"
    if mode in KNATIVE_MODES:
        address = f"http://{name}.{namespace}.svc.cluster.local"
        url = address if cluster_local else f"http://{name}.{namespace}.{INGRESS_DOMAIN}"
    else:
        address = f"http://{name}-predictor.{namespace}.svc.cluster.local"
        url = address if cluster_local else f"http://{name}-{namespace}.{INGRESS_DOMAIN}"
    return url, address


def _differs(live: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    return bool(
        (live.get("spec") or {}).get("template") != desired["spec"]["template"]
        or (live.get("spec") or {}).get("replicas") != desired["spec"]["replicas"]
    )


def reconcile_inferenceservice(isvc: Obj, ctx: Context) -> list[Action]:
    """Run the predictor and report its readiness and addresses."""
    lookup: Lookup | None = ctx.options.get("lookup")
    mode = deployment_mode(isvc, lookup)
    predictor = (isvc.get("spec") or {}).get("predictor") or {}
    namespace = namespace_of(isvc)
    actions: list[Action] = []
    desired = _deployment(isvc, mode, predictor)
    live = ctx.view.get("Deployment", namespace, name_of(desired))
    if live is None:
        actions.append(Create(desired))
    elif _differs(live, desired):
        updated = copy.deepcopy(live)
        updated["spec"]["template"] = desired["spec"]["template"]
        updated["spec"]["replicas"] = desired["spec"]["replicas"]
        actions.append(Update(updated))
    service = _service(isvc, predictor)
    if ctx.view.get("Service", namespace, name_of(service)) is None:
        actions.append(Create(service))

    st = (live or {}).get("status") or {}
    replicas = desired["spec"]["replicas"]
    rolled_out = (
        live is not None
        and not _differs(live, desired)
        and int(st.get("updatedReplicas") or 0) >= replicas
        and int(st.get("availableReplicas") or 0) >= replicas
    )
    stamp = ctx.stamp()
    status = copy.deepcopy(isvc.get("status") or {})
    conditions = list(status.get("conditions") or [])
    if rolled_out:
        conditions = set_condition(
            conditions, "PredictorReady", "True", reason="", message="", stamp=stamp
        )
    else:
        conditions = set_condition(
            conditions,
            "PredictorReady",
            "False",
            reason="PredictorNotReady",
            message=f"Deployment {name_of(desired)}: {int(st.get('availableReplicas') or 0)} "
            f"of {replicas} replicas available",
            stamp=stamp,
        )
    conditions = set_condition(
        conditions, "IngressReady", "True", reason="", message="", stamp=stamp
    )
    ready = "True" if rolled_out else "False"
    conditions = set_condition(
        conditions,
        "Ready",
        ready,
        reason="" if rolled_out else "PredictorNotReady",
        message="",
        stamp=stamp,
    )
    status["conditions"] = sorted(conditions, key=lambda c: str(c.get("type")))
    status["deploymentMode"] = mode
    status["observedGeneration"] = int((isvc.get("metadata") or {}).get("generation") or 0)
    url, address = _urls(isvc, mode)
    if rolled_out:
        status["url"] = url
        status["address"] = {"url": address}
        status["components"] = {
            "predictor": {"url": url, "address": {"url": address}}
        }
    if status_changed(isvc, status):
        actions.append(UpdateStatus(with_status(isvc, status)))
    return actions
