"""A NIMService on KServe becomes an InferenceService (nim-operator.md §2.12)."""

from __future__ import annotations

from typing import Any

import pytest

from platforms import kserve
from platforms.standalone import Capabilities, RenderContext, RenderError, UnsupportedSpec
from tests.unit.platforms.helpers import NAME, by_kind, env_of, kinds, nimservice

METRICS = {"metrics": {"enabled": True, "serviceMonitor": {"interval": "30s"}}}
HPA = {
    "scale": {
        "enabled": True,
        "hpa": {
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80},
                    },
                }
            ],
        },
    }
}


def _svc(spec: dict[str, Any] | None = None, mode: str | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = {"inferencePlatform": "kserve", **(spec or {})}
    if mode:
        extra["annotations"] = {"serving.kserve.io/deploymentMode": mode}
    svc = nimservice(extra)
    if "scale" in extra:
        del svc["spec"]["replicas"]
    return svc


@pytest.mark.parametrize(
    ("status", "annotation", "default", "expected"),
    [
        ("RawDeployment", "Knative", "Serverless", "RawDeployment"),
        (None, "Knative", "Standard", "Knative"),
        (None, None, "Serverless", "Serverless"),
        (None, None, None, "Standard"),
    ],
)
def test_deployment_mode_lookup_order(
    status: str | None, annotation: str | None, default: str | None, expected: str
) -> None:
    annotations = {"serving.kserve.io/deploymentMode": annotation} if annotation else {}
    assert (
        kserve.resolve_deployment_mode(
            status_mode=status, annotations=annotations, configured_default=default
        )
        == expected
    )


def test_invalid_mode_annotation() -> None:
    with pytest.raises(
        RenderError, match="deployment mode annotation found but value is invalid: Fast"
    ):
        kserve.render(_svc(mode="Fast"))


def test_standard_mode_objects_and_annotations() -> None:
    objs = kserve.render(_svc({**METRICS, **HPA}))
    assert kinds(objs) == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ServiceMonitor",
        "InferenceService",
    ]
    isvc = by_kind(objs, "InferenceService")
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1" and isvc["metadata"]["name"] == NAME
    ann = isvc["metadata"]["annotations"]
    assert ann["serving.kserve.io/deploymentMode"] == "Standard"
    assert ann["serving.kserve.io/enable-prometheus-scraping"] == "true"
    assert ann["serving.kserve.io/enable-metric-aggregation"] == "true"
    assert ann["serving.kserve.io/autoscalerClass"] == "hpa"
    assert isvc["metadata"]["labels"]["networking.kserve.io/visibility"] == "cluster-local"
    predictor = isvc["spec"]["predictor"]
    assert predictor["minReplicas"] == 1 and predictor["maxReplicas"] == 4
    assert predictor["scaleMetric"] == "cpu"
    assert predictor["scaleMetricType"] == "Utilization" and predictor["scaleTarget"] == 80
    assert predictor["deploymentStrategy"]["rollingUpdate"] == {
        "maxUnavailable": "25%",
        "maxSurge": 0,
    }
    ctr = predictor["containers"][0]
    assert ctr["name"] == f"{NAME}-ctr"
    assert env_of(ctr)["NIM_SERVER_PORT"] == "8000"
    assert ctr["ports"][0]["name"] == "api"
    assert predictor["serviceAccountName"] == NAME
    assert predictor["securityContext"]["runAsUser"] == 1000


def _predictor(spec: dict[str, Any] | None, mode: str | None) -> dict[str, Any]:
    svc = _svc(spec, mode=mode)
    if spec is not None and "replicas" not in spec and "scale" not in spec:
        svc["spec"].pop("replicas", None)
    predictor: dict[str, Any] = by_kind(kserve.render(svc), "InferenceService")["spec"]["predictor"]
    return predictor


# NVIDIA's InferenceService predictor (api/apps/v1alpha1/nimservice_types.go
# GetInferenceServiceParams, manifests/inferenceservice.yaml).
PREDICTOR_VALUES: list[tuple[str, dict[str, Any], str, Any, Any]] = [
    # (case, spec, mode, extractor, NVIDIA's value)
    ("labels Standard", {}, "Standard", lambda p: p["labels"], {"app": NAME}),
    ("labels Knative", {}, "Knative", lambda p: p["labels"], {"app": NAME}),
    (
        "replicas pin Standard",
        {"replicas": 2},
        "Standard",
        lambda p: (p.get("minReplicas"), p.get("maxReplicas")),
        (2, 2),
    ),
    (
        "no replicas Standard",
        {},
        "Standard",
        lambda p: (p.get("minReplicas"), p.get("maxReplicas")),
        (None, None),
    ),
    (
        "replicas Serverless",
        {"replicas": 1},
        "Serverless",
        lambda p: (p.get("minReplicas"), p.get("maxReplicas")),
        (None, None),
    ),
    ("securityContext Serverless", {}, "Serverless", lambda p: "securityContext" in p, False),
    ("deploymentStrategy Knative", {}, "Knative", lambda p: "deploymentStrategy" in p, False),
    (
        "securityContext Standard",
        {},
        "Standard",
        lambda p: p["securityContext"],
        {"runAsUser": 1000, "runAsGroup": 2000, "fsGroup": 2000},
    ),
    (
        "autoscaling Standard",
        HPA,
        "Standard",
        lambda p: (p["minReplicas"], p["maxReplicas"], p["scaleMetric"], p["scaleTarget"]),
        (1, 4, "cpu", 80),
    ),
]


@pytest.mark.parametrize(
    ("case", "spec", "mode", "extract", "expected"),
    PREDICTOR_VALUES,
    ids=[c[0].replace(" ", "_") for c in PREDICTOR_VALUES],
)
def test_predictor_as_nvidia_writes_it(
    case: str, spec: dict[str, Any], mode: str, extract: Any, expected: Any
) -> None:
    assert extract(_predictor(spec, mode)) == expected


def test_raw_deployment_spelling_is_standard() -> None:
    isvc = by_kind(kserve.render(_svc(HPA, mode="RawDeployment")), "InferenceService")
    assert isvc["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "hpa"
    assert isvc["spec"]["predictor"]["maxReplicas"] == 4


def test_memory_average_value_target() -> None:
    hpa = {
        "scale": {
            "enabled": True,
            "hpa": {
                "maxReplicas": 2,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "memory",
                            "target": {"type": "AverageValue", "averageValue": "1Gi"},
                        },
                    }
                ],
            },
        }
    }
    predictor = by_kind(kserve.render(_svc(hpa)), "InferenceService")["spec"]["predictor"]
    assert predictor["scaleMetric"] == "memory"
    assert predictor["scaleMetricType"] == "AverageValue"
    assert predictor["scaleTarget"] == 2**30


def test_knative_mode() -> None:
    objs = kserve.render(_svc({**METRICS, "expose": {"service": {"port": 9000}}}, mode="Knative"))
    assert "ServiceMonitor" not in kinds(objs)
    predictor = by_kind(objs, "InferenceService")["spec"]["predictor"]
    assert "deploymentStrategy" not in predictor
    ctr = predictor["containers"][0]
    assert ctr["ports"] == [{"containerPort": 9000, "protocol": "TCP"}]
    assert ctr["readinessProbe"]["httpGet"]["port"] == 9000
    assert ctr["startupProbe"]["failureThreshold"] == 30


def test_knative_grpc_probes() -> None:
    objs = kserve.render(_svc({"expose": {"service": {"grpcPort": 50051}}}, mode="Serverless"))
    ctr = by_kind(objs, "InferenceService")["spec"]["predictor"]["containers"][0]
    assert ctr["livenessProbe"]["grpc"] == {"port": 50051} and "httpGet" not in ctr["livenessProbe"]
    assert ctr["ports"] == [
        {"containerPort": 8000, "protocol": "TCP"},
        {"containerPort": 50051, "protocol": "TCP"},
    ]


def test_visibility_label_not_added_with_ingress_or_user_label() -> None:
    spec = {"expose": {"router": {"hostDomainName": "a.b", "ingress": {"ingressClass": "nginx"}}}}
    isvc = by_kind(kserve.render(_svc(spec)), "InferenceService")
    assert "networking.kserve.io/visibility" not in isvc["metadata"]["labels"]
    isvc = by_kind(
        kserve.render(_svc({"labels": {"networking.kserve.io/visibility": "exposed"}})),
        "InferenceService",
    )
    assert isvc["metadata"]["labels"]["networking.kserve.io/visibility"] == "exposed"


def test_kserve_refusals() -> None:
    with pytest.raises(UnsupportedSpec, match="multiNode"):
        kserve.render(_svc({"multiNode": {"parallelism": {"pipeline": 2, "tensor": 1}}}))
    with pytest.raises(UnsupportedSpec, match="not installed"):
        kserve.render(_svc(), RenderContext(capabilities=Capabilities.nothing()))
