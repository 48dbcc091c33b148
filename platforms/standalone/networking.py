"""The standalone NIMService's access and networking: RBAC, Service, Ingress, routes, HPA, EPP.

Functions of ``NIMServiceInputs`` (nim-operator.md §2.3, §2.4, §2.9): each
returns its object, or None when the spec turns it off or the cluster does
not serve its kind.
"""

from __future__ import annotations

from typing import Any

from manifests import grpcroute, httproute, rolebinding, serviceaccount, servicemonitor
from manifests import hpa as hpa_builder
from manifests import ingress as ingress_builder
from manifests import role as role_builder
from manifests import service as service_builder
from manifests.labels import merge_maps
from nimctl_runtime.meta import dig
from platforms.standalone.context import GRPC_ROUTE, HTTP_ROUTE, INFERENCE_POOL, SERVICE_MONITOR
from platforms.standalone.epp import EPPInputs, render_epp
from platforms.standalone.inputs import NIMServiceInputs

PORT_API = "api"
PORT_GRPC = "grpc"
PORT_METRICS = "metrics"

__all__ = [
    "PORT_API",
    "PORT_GRPC",
    "PORT_METRICS",
    "epp",
    "grpc_route",
    "hpa",
    "http_route",
    "ingress",
    "is_autoscaling_enabled",
    "role",
    "role_binding",
    "service",
    "service_account",
    "service_monitor",
]


def is_autoscaling_enabled(spec: dict[str, Any]) -> bool:
    return bool(dig(spec, "scale", "enabled", default=False))


def service_account(inp: NIMServiceInputs) -> dict[str, Any]:
    return serviceaccount.build(inp.meta(with_annotations=False))


def role(inp: NIMServiceInputs) -> dict[str, Any]:
    rules = [role_builder.scc_rule(inp.role_scc())]
    return role_builder.build(inp.meta(with_annotations=False), rules)


def role_binding(inp: NIMServiceInputs) -> dict[str, Any]:
    return rolebinding.build(
        inp.meta(with_annotations=False),
        role_name=inp.name,
        service_account=inp.name,
        namespace=inp.namespace,
    )


def service(inp: NIMServiceInputs) -> dict[str, Any]:
    svc_spec = dig(inp.spec, "expose", "service", default={})
    ports = [service_builder.service_port(PORT_API, inp.port, PORT_API)]
    if inp.grpc_port:
        ports.append(service_builder.service_port(PORT_GRPC, inp.grpc_port, PORT_GRPC))
    if inp.metrics_port:
        ports.append(service_builder.service_port(PORT_METRICS, inp.metrics_port, PORT_METRICS))
    meta = inp.meta(
        labels=inp.service_labels(),
        annotations=merge_maps(inp.annotations, svc_spec.get("annotations")),
    )
    return service_builder.build(
        meta,
        selector=inp.selector,
        ports=ports,
        service_type=svc_spec.get("type"),
    )


def ingress(inp: NIMServiceInputs) -> dict[str, Any] | None:
    router = dig(inp.spec, "expose", "router", default={})
    ingress_class = dig(router, "ingress", "ingressClass", default="")
    if ingress_class:
        spec = ingress_builder.router_spec(
            host=inp.host(),
            service_name=inp.name,
            service_port=PORT_API,
            ingress_class=ingress_class,
            tls_secret_name=dig(router, "ingress", "tlsSecretName"),
        )
        annotations = merge_maps(inp.annotations, router.get("annotations"))
        return ingress_builder.build(
            inp.meta(labels=inp.service_labels(), annotations=annotations), spec
        )
    legacy = dig(inp.spec, "expose", "ingress", default={})
    if legacy.get("enabled"):
        annotations = merge_maps(inp.annotations, legacy.get("annotations"))
        return ingress_builder.build(
            inp.meta(labels=inp.service_labels(), annotations=annotations),
            legacy.get("spec") or {},
        )
    return None


def _gateway(inp: NIMServiceInputs) -> dict[str, Any] | None:
    gw = dig(inp.spec, "expose", "router", "gateway")
    return gw if isinstance(gw, dict) else None


def http_route(inp: NIMServiceInputs) -> dict[str, Any] | None:
    gw = _gateway(inp)
    if gw is None or not gw.get("httpRoutesEnabled", True):
        return None
    if not inp.ctx.capabilities.has(HTTP_ROUTE):
        return None
    backend = gw.get("backendRef") or httproute.service_backend_ref(inp.name, inp.port)
    return httproute.build(
        _route_meta(inp),
        parent_refs=[httproute.parent_ref(gw["name"], gw["namespace"])],
        hostnames=[inp.host()],
        backend_refs=[dict(backend)],
    )


def grpc_route(inp: NIMServiceInputs) -> dict[str, Any] | None:
    gw = _gateway(inp)
    if gw is None or not gw.get("grpcRoutesEnabled", False) or not inp.grpc_port:
        return None
    if not inp.ctx.capabilities.has(GRPC_ROUTE):
        return None
    return grpcroute.build(
        _route_meta(inp),
        parent_refs=[httproute.parent_ref(gw["name"], gw["namespace"])],
        hostnames=[inp.host()],
        backend_refs=[httproute.service_backend_ref(inp.name, inp.grpc_port)],
    )


def _route_meta(inp: NIMServiceInputs) -> dict[str, Any]:
    router_annotations = dig(inp.spec, "expose", "router", "annotations")
    return inp.meta(
        labels=inp.service_labels(),
        annotations=merge_maps(inp.annotations, router_annotations),
    )


def hpa(inp: NIMServiceInputs) -> dict[str, Any] | None:
    if not is_autoscaling_enabled(inp.spec):
        return None
    scale = inp.spec.get("scale") or {}
    spec = scale.get("hpa") or {}
    return hpa_builder.build(
        inp.meta(
            labels=inp.service_labels(),
            annotations=merge_maps(inp.annotations, scale.get("annotations")),
        ),
        scale_target_ref={"apiVersion": "apps/v1", "kind": "Deployment", "name": inp.name},
        min_replicas=int(spec.get("minReplicas", 1)),
        max_replicas=int(spec.get("maxReplicas", 1)),
        metrics=spec.get("metrics"),
        behavior=spec.get("behavior"),
    )


def service_monitor(inp: NIMServiceInputs) -> dict[str, Any] | None:
    metrics = inp.spec.get("metrics") or {}
    if not metrics.get("enabled") or not inp.ctx.capabilities.has(SERVICE_MONITOR):
        return None
    sm = metrics.get("serviceMonitor") or {}
    # additionalLabels win over the standard labels here (unlike everywhere else).
    labels = {**inp.service_labels(), **(sm.get("additionalLabels") or {})}
    annotations = merge_maps(inp.annotations, sm.get("annotations"))
    timing = {"interval": sm.get("interval"), "scrape_timeout": sm.get("scrapeTimeout")}
    endpoints = [servicemonitor.endpoint(PORT_API, "/v1/metrics", **timing)]
    if inp.metrics_port:
        endpoints.append(servicemonitor.endpoint(PORT_METRICS, "/metrics", **timing))
    return servicemonitor.build(
        inp.meta(labels=labels, annotations=annotations),
        selector=inp.service_labels(),
        namespace=inp.namespace,
        endpoints=endpoints,
    )


def epp(inp: NIMServiceInputs) -> list[dict[str, Any]]:
    config = dig(inp.spec, "expose", "router", "eppConfig")
    if not config or not inp.ctx.capabilities.has(INFERENCE_POOL):
        return []
    return render_epp(
        EPPInputs(
            name=inp.name,
            namespace=inp.namespace,
            labels=inp.labels,
            annotations=inp.annotations,
            pod_annotations=inp.pod_annotations(),
            pod_labels=inp.pod_labels(),
            owner_references=inp.owner_refs,
            nim_selector=inp.selector,
            nim_port=inp.port,
            config=config,
            image_pull_secrets=dig(inp.spec, "image", "pullSecrets"),
            image_pull_policy=dig(inp.spec, "image", "pullPolicy"),
        )
    )
