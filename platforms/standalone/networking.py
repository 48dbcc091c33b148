"""The standalone NIMService's access and networking: RBAC, Service, Ingress, routes, HPA, EPP.

Functions of ``NIMServiceInputs`` (nim-operator.md §2.3, §2.4, §2.9): each
returns its object, or None when the spec turns it off or the cluster does
not serve its kind.
"""

from __future__ import annotations

from typing import Any

from api.apps.v1alpha1.common import Gateway
from api.apps.v1alpha1.nimservice import NIMServiceSpec
from manifests import grpcroute, httproute, rolebinding, serviceaccount, servicemonitor
from manifests import hpa as hpa_builder
from manifests import ingress as ingress_builder
from manifests import role as role_builder
from manifests import service as service_builder
from manifests.labels import merge_maps
from platforms.parsing import spec_json
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


def is_autoscaling_enabled(spec: NIMServiceSpec) -> bool:
    return bool(spec.scale.enabled)


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
    svc_spec = inp.spec.expose.service
    ports = [service_builder.service_port(PORT_API, inp.port, PORT_API)]
    if inp.grpc_port:
        ports.append(service_builder.service_port(PORT_GRPC, inp.grpc_port, PORT_GRPC))
    if inp.metrics_port:
        ports.append(service_builder.service_port(PORT_METRICS, inp.metrics_port, PORT_METRICS))
    meta = inp.meta(
        labels=inp.service_labels(),
        annotations=merge_maps(inp.annotations, svc_spec.annotations),
    )
    return service_builder.build(
        meta,
        selector=inp.selector,
        ports=ports,
        service_type=svc_spec.type,
    )


def ingress(inp: NIMServiceInputs) -> dict[str, Any] | None:
    router = inp.spec.expose.router
    router_ingress = router.ingress if router is not None else None
    if router is not None and router_ingress is not None and router_ingress.ingress_class:
        spec = ingress_builder.router_spec(
            host=inp.host(),
            service_name=inp.name,
            service_port=PORT_API,
            ingress_class=router_ingress.ingress_class,
            tls_secret_name=router_ingress.tls_secret_name,
        )
        annotations = merge_maps(inp.annotations, router.annotations)
        return ingress_builder.build(
            inp.meta(labels=inp.service_labels(), annotations=annotations), spec
        )
    legacy = inp.spec.expose.ingress
    if legacy is not None and legacy.enabled:
        annotations = merge_maps(inp.annotations, legacy.annotations)
        return ingress_builder.build(
            inp.meta(labels=inp.service_labels(), annotations=annotations),
            legacy.spec or {},
        )
    return None


def _gateway(inp: NIMServiceInputs) -> Gateway | None:
    router = inp.spec.expose.router
    return router.gateway if router is not None else None


def http_route(inp: NIMServiceInputs) -> dict[str, Any] | None:
    gw = _gateway(inp)
    if gw is None or not gw.http_routes_enabled:
        return None
    if not inp.ctx.capabilities.has(HTTP_ROUTE):
        return None
    backend = (
        spec_json(gw.backend_ref)
        if gw.backend_ref is not None
        else httproute.service_backend_ref(inp.name, inp.port)
    )
    return httproute.build(
        _route_meta(inp),
        parent_refs=[httproute.parent_ref(gw.name, gw.namespace)],
        hostnames=[inp.host()],
        backend_refs=[backend],
    )


def grpc_route(inp: NIMServiceInputs) -> dict[str, Any] | None:
    gw = _gateway(inp)
    if gw is None or not gw.grpc_routes_enabled or not inp.grpc_port:
        return None
    if not inp.ctx.capabilities.has(GRPC_ROUTE):
        return None
    return grpcroute.build(
        _route_meta(inp),
        parent_refs=[httproute.parent_ref(gw.name, gw.namespace)],
        hostnames=[inp.host()],
        backend_refs=[httproute.service_backend_ref(inp.name, inp.grpc_port)],
    )


def _route_meta(inp: NIMServiceInputs) -> dict[str, Any]:
    router = inp.spec.expose.router
    return inp.meta(
        labels=inp.service_labels(),
        annotations=merge_maps(inp.annotations, router.annotations if router else None),
    )


def hpa(inp: NIMServiceInputs) -> dict[str, Any] | None:
    if not is_autoscaling_enabled(inp.spec):
        return None
    scale = inp.spec.scale
    spec = scale.hpa
    return hpa_builder.build(
        inp.meta(
            labels=inp.service_labels(),
            annotations=merge_maps(inp.annotations, scale.annotations),
        ),
        scale_target_ref={"apiVersion": "apps/v1", "kind": "Deployment", "name": inp.name},
        min_replicas=spec.min_replicas if spec is not None else 1,
        max_replicas=spec.max_replicas if spec is not None else 1,
        metrics=spec.metrics if spec is not None else None,
        behavior=spec.behavior if spec is not None else None,
    )


def service_monitor(inp: NIMServiceInputs) -> dict[str, Any] | None:
    metrics = inp.spec.metrics
    if not metrics.enabled or not inp.ctx.capabilities.has(SERVICE_MONITOR):
        return None
    sm = metrics.service_monitor
    # additionalLabels win over the standard labels here (unlike everywhere else).
    labels = {**inp.service_labels(), **(sm.additional_labels or {})}
    annotations = merge_maps(inp.annotations, sm.annotations)
    timing = {"interval": sm.interval, "scrape_timeout": sm.scrape_timeout}
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
    router = inp.spec.expose.router
    config = router.epp_config if router is not None else None
    if config is None or not inp.ctx.capabilities.has(INFERENCE_POOL):
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
            image_pull_secrets=inp.spec.image.pull_secrets,
            image_pull_policy=inp.spec.image.pull_policy,
        )
    )
