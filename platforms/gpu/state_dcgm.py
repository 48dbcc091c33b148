"""State ``state-dcgm``: the standalone DCGM host engine DaemonSet ``nvidia-dcgm``
and its node-local Service ``nvidia-dcgm`` (port 5555), which DCGM exporter
connects to instead of embedding its own engine.
"""

from __future__ import annotations

from typing import Any

from manifests import service
from manifests.meta import object_meta
from platforms.gpu import transforms as t
from platforms.gpu.common import (
    DIR,
    PRIV,
    container,
    daemonset,
    host_path,
    rbac,
    scc_privileged,
    wait_for_file,
)
from platforms.gpu.context import StateContext
from platforms.gpu.images import image_path

NAME = "nvidia-dcgm"
MAIN = "nvidia-dcgm-ctr"
PORT = 5555


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC, the host engine DaemonSet and its Service."""
    out = rbac(ctx, NAME, [scc_privileged()])
    ds = t.prepare(_asset(), ctx)
    dcgm = ctx.spec.dcgm
    image = image_path(dcgm, ctx.facts.operator_env, "dcgm")
    t.apply_component(ds, dcgm, image=image, main=MAIN)
    t.apply_nri_annotation(ds, ctx, MAIN)
    t.apply_runtime_class(ds, ctx)
    out.append(t.finish(ds, ctx))
    svc = service.build(
        object_meta(NAME, labels={"app": NAME}),
        selector={"app": NAME},
        ports=[service.service_port("dcgm", PORT)],
    )
    svc["spec"]["internalTrafficPolicy"] = "Local"
    out.append(svc)
    return out


def _asset() -> dict[str, Any]:
    probe = {"tcpSocket": {"port": PORT}, "initialDelaySeconds": 15}
    main = container(
        MAIN,
        security_context=PRIV,
        ports=[{"name": "dcgm", "containerPort": PORT, "protocol": "TCP"}],
        livenessProbe=dict(probe),
        readinessProbe=dict(probe),
    )
    return daemonset(
        NAME,
        component="dcgm",
        annotations={"openshift.io/scc": "hostmount-anyuid"},
        service_account=NAME,
        init_containers=[wait_for_file("toolkit-validation", "toolkit-ready")],
        containers=[main],
        volumes=[host_path("run-nvidia", "/run/nvidia", DIR)],
    )
