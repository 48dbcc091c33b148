"""Render a NIMService with ``inferencePlatform: kserve`` as a KServe InferenceService.

Objects, in apply order: ServiceAccount, Role, RoleBinding, [ServiceMonitor,
Standard/RawDeployment modes only], InferenceService ``<name>``
(``serving.kserve.io/v1beta1``). KServe then creates the Deployment (or the
Knative Service), its Service and autoscaler itself. The NIM container, env,
volumes and pod settings are the standalone platform's.

The deployment mode is resolved as NVIDIA does, status first, so an operator
upgrade never flips a running InferenceService's mode (KServe rejects the
change: upstream issues #735 and #762): the InferenceService's
``status.deploymentMode`` > the NIMService's ``serving.kserve.io/deploymentMode``
annotation > KServe's configured default > ``Standard``.

As NVIDIA's: the predictor's (pod) labels are ``{app: <name>}``; in Standard
mode the pod ``securityContext`` and ``deploymentStrategy`` are written and
``spec.replicas`` (without autoscaling) pins ``minReplicas`` and
``maxReplicas``; in Knative mode none of them are (Knative scales by its
annotations).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from api.apps.v1alpha1.nimservice import NIMService
from manifests.hashing import stamped_copy
from manifests.labels import merge_maps, selector_labels
from platforms.standalone import networking, podspec, storage
from platforms.standalone.context import INFERENCE_SERVICE, RenderContext
from platforms.standalone.errors import RenderError, UnsupportedSpec
from platforms.standalone.inputs import NIMServiceInputs, as_nimservice
from platforms.standalone.networking import PORT_API, is_autoscaling_enabled

DEPLOYMENT_MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
DEPLOYMENT_MODES = ("Standard", "Knative", "ModelMesh", "RawDeployment", "Serverless")
KNATIVE_MODES = ("Knative", "Serverless")
DEFAULT_MODE = "Standard"
# KServe 0.15 renamed RawDeployment to Standard and Serverless to Knative; both
# spellings are accepted and treated alike (NVIDIA compares with RawDeployment
# only, so a Standard-mode service loses its HPA settings there).
RAW_MODES = ("Standard", "RawDeployment")
VISIBILITY_LABEL = "networking.kserve.io/visibility"
ISVC_API_VERSION, ISVC_KIND = INFERENCE_SERVICE


def resolve_deployment_mode(
    *,
    status_mode: str | None = None,
    annotations: Mapping[str, str] | None = None,
    configured_default: str | None = None,
) -> str:
    """The KServe deployment mode of a NIMService, in NVIDIA's lookup order."""
    if status_mode:
        return status_mode
    value = (annotations or {}).get(DEPLOYMENT_MODE_ANNOTATION)
    if value is not None:
        if value not in DEPLOYMENT_MODES:
            raise RenderError(f"deployment mode annotation found but value is invalid: {value}")
        return value
    return configured_default or DEFAULT_MODE


def render(
    nimservice: NIMService | Mapping[str, Any],
    ctx: RenderContext | None = None,
    *,
    status_mode: str | None = None,
    configured_default: str | None = None,
) -> list[dict[str, Any]]:
    """The objects a KServe NIMService should own.

    ``status_mode`` is the existing InferenceService's ``status.deploymentMode``
    and ``configured_default`` KServe's ``deploy.defaultDeploymentMode``, both
    looked up by the caller (None when unknown).
    """
    ctx = ctx or RenderContext()
    r = NIMServiceInputs.of(as_nimservice(nimservice), ctx)
    if r.spec.multi_node is not None:
        raise UnsupportedSpec("spec.multiNode: cannot be set when the inferencePlatform is KServe")
    if not ctx.capabilities.has(INFERENCE_SERVICE):
        raise UnsupportedSpec(
            "spec.inferencePlatform: KServe (serving.kserve.io/v1beta1 InferenceService) is not "
            "installed in this cluster"
        )
    mode = resolve_deployment_mode(
        status_mode=status_mode,
        annotations=r.spec.annotations,
        configured_default=configured_default,
    )
    knative = mode in KNATIVE_MODES
    objs: list[dict[str, Any]] = [
        networking.service_account(r),
        networking.role(r),
        networking.role_binding(r),
    ]
    if not knative:
        monitor = networking.service_monitor(r)
        if monitor is not None:
            objs.append(monitor)
    objs.append(_inference_service(r, mode))
    return [stamped_copy(o) for o in objs]


def _inference_service(r: NIMServiceInputs, mode: str) -> dict[str, Any]:
    spec = r.spec
    knative = mode in KNATIVE_MODES
    volume, sub_path, created = storage.model_store(r)
    if created is not None:
        raise UnsupportedSpec(
            "spec.storage.pvc.create: on KServe, create the PVC first and name it in "
            "spec.storage.pvc.name"
        )
    _, pod_claims, container_claims = podspec.dra(r)
    probes = podspec.nim_probes(r)
    if knative:
        probes = _knative_probes(r, probes)
    pod_spec = podspec.nim_pod_spec(
        r,
        container_name=f"{r.name}-ctr",
        model_volume=volume,
        sub_path=sub_path,
        pod_claims=pod_claims,
        container_claims=container_claims,
        command=spec.command,
        args=spec.args,
        probes=probes,
    )
    if knative:
        # Knative rejects named ports: the API (and gRPC) port by number only.
        ports = [{"containerPort": r.port, "protocol": "TCP"}]
        if r.grpc_port:
            ports.append({"containerPort": r.grpc_port, "protocol": "TCP"})
        pod_spec["containers"][0]["ports"] = ports

    annotations = merge_maps(
        r.annotations,
        {
            "serving.kserve.io/enable-metric-aggregation": "true",
            "serving.kserve.io/enable-prometheus-scraping": "true",
            DEPLOYMENT_MODE_ANNOTATION: mode,
        },
    )
    labels = r.service_labels()
    expose = spec.expose
    ingress_enabled = bool(
        (expose.ingress is not None and expose.ingress.enabled)
        or (expose.router is not None and expose.router.ingress is not None)
    )
    if not ingress_enabled and VISIBILITY_LABEL not in labels:
        labels[VISIBILITY_LABEL] = "cluster-local"

    predictor: dict[str, Any] = dict(pod_spec)
    # NVIDIA's predictor (pod) labels are its selector labels only: {app: <name>}.
    predictor["labels"] = selector_labels(r.name)
    predictor["annotations"] = r.pod_annotations()
    if knative:
        # NVIDIA writes the pod securityContext for Standard/RawDeployment only.
        predictor.pop("securityContext", None)
    else:
        predictor["deploymentStrategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0},
        }
    if is_autoscaling_enabled(spec) and mode in RAW_MODES:
        annotations["serving.kserve.io/autoscalerClass"] = "hpa"
        hpa = spec.scale.hpa
        predictor["minReplicas"] = hpa.min_replicas if hpa is not None else 1
        if hpa is not None and hpa.max_replicas > 0:
            predictor["maxReplicas"] = hpa.max_replicas
        predictor.update(_scale_target((hpa.metrics if hpa is not None else None) or []))
    elif mode in RAW_MODES and spec.replicas is not None:
        # Without autoscaling, spec.replicas pins both bounds so KServe does not scale it.
        predictor["minReplicas"] = spec.replicas
        predictor["maxReplicas"] = spec.replicas
    # Knative: no replica bounds; its autoscaling annotations decide.

    return {
        "apiVersion": ISVC_API_VERSION,
        "kind": ISVC_KIND,
        "metadata": r.meta(labels=labels, annotations=annotations),
        "spec": {"predictor": predictor},
    }


def _scale_target(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """KServe's scaleMetric/scaleMetricType/scaleTarget from the first cpu/memory metric."""
    for metric in metrics:
        resource = metric.get("resource") or {}
        if metric.get("type") != "Resource" or resource.get("name") not in ("cpu", "memory"):
            continue
        target = resource.get("target") or {}
        out: dict[str, Any] = {"scaleMetric": resource["name"]}
        if target.get("type"):
            out["scaleMetricType"] = target["type"]
        value = {
            "Utilization": target.get("averageUtilization"),
            "Value": target.get("value"),
            "AverageValue": target.get("averageValue"),
        }.get(str(target.get("type")))
        amount = _whole_number(value)
        if amount:
            out["scaleTarget"] = amount
        return out
    return {}


def _whole_number(value: Any) -> int:
    """The integer value of an int or a plain/suffixed quantity (``"2"``, ``"500m"`` -> 0)."""
    if value is None:
        return 0
    text = str(value)
    suffixes = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in sorted(suffixes.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(suffix):
            try:
                return int(float(text[: -len(suffix)]) * factor)
            except ValueError:
                return 0
    try:
        return int(float(text))
    except ValueError:
        return 0


def _knative_probes(
    r: NIMServiceInputs, probes: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Knative rejects named probe ports: use the number, and 30 startup failures."""
    out: dict[str, dict[str, Any]] = {}
    own = {
        "livenessProbe": r.spec.liveness_probe.probe,
        "readinessProbe": r.spec.readiness_probe.probe,
        "startupProbe": r.spec.startup_probe.probe,
    }
    for key, given in probes.items():
        probe = json.loads(json.dumps(given))
        if own.get(key):
            out[key] = probe  # the user's own probe, verbatim
            continue
        if r.grpc_port:
            probe.pop("httpGet", None)
            probe["grpc"] = {"port": r.grpc_port}
        elif probe.get("httpGet", {}).get("port") == PORT_API:
            probe["httpGet"]["port"] = r.port
        if key == "startupProbe":
            probe["failureThreshold"] = 30
        out[key] = probe
    return out
