"""State ``state-node-status-exporter``: per-node metrics of the validations
(``gpu_operator_node_*_ready``) on port 8000, with its Service and, when served,
a ServiceMonitor. Off unless ``nodeStatusExporter.enabled``.
"""

from __future__ import annotations

from typing import Any

from manifests import service
from manifests.meta import object_meta
from platforms.gpu import transforms as t
from platforms.gpu.common import (
    DIR,
    HTOC,
    PRIV,
    container,
    daemonset,
    env,
    field_env,
    host_path,
    mount,
    policy_rule,
    rbac,
)
from platforms.gpu.context import StateContext
from platforms.gpu.facts import SERVICE_MONITOR
from platforms.gpu.images import image_path
from platforms.gpu.monitoring import SCRAPE, service_monitor

NAME = "nvidia-node-status-exporter"
PORT = 8000


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC, Service, ServiceMonitor (when served) and the exporter DaemonSet."""
    out = rbac(
        ctx,
        NAME,
        [
            # NVIDIA's Role names no SCC here: use of every SCC.
            policy_rule(["security.openshift.io"], ["securitycontextconstraints"], ["use"]),
            policy_rule([""], ["pods"], ["get", "list"]),
            policy_rule(["apps"], ["daemonsets"], ["get", "list", "watch"]),
        ],
        [policy_rule([""], ["nodes"], ["get", "list", "watch"])],
        labels={"app": NAME},
    )
    out.append(
        service.build(
            object_meta(NAME, labels={"app": NAME}, annotations=SCRAPE),
            selector={"app": NAME},
            ports=[service.service_port("node-status", PORT)],
        )
    )
    if ctx.facts.serves(SERVICE_MONITOR):
        out.append(
            service_monitor(
                NAME,
                namespace=ctx.namespace,
                port="node-status",
                job_label="node-status",
                selector={"app": NAME},
                settings=None,
            )
        )
    ds = t.prepare(_asset(), ctx)
    exporter = ctx.spec.node_status_exporter
    image = image_path(exporter, ctx.facts.operator_env, "nodeStatusExporter")
    t.apply_component(ds, exporter, image=image, main=NAME)
    out.append(t.finish(ds, ctx))
    return out


def _asset() -> dict[str, Any]:
    main = container(
        NAME,
        command=["nvidia-validator"],
        env_vars=[
            env("NVIDIA_VISIBLE_DEVICES", "void"),
            env("COMPONENT", "metrics"),
            env("METRICS_PORT", str(PORT)),
            field_env("NODE_NAME", "spec.nodeName"),
            field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
        ],
        security_context={**PRIV, "runAsUser": 0},
        ports=[{"name": "node-status", "containerPort": PORT, "protocol": "TCP"}],
        mounts=[
            mount("run-nvidia", "/run/nvidia", propagation=HTOC),
            mount("host-root", "/host", read_only=True, propagation=HTOC),
        ],
    )
    return daemonset(
        NAME,
        component="node-status-exporter",
        annotations={"openshift.io/scc": NAME},
        service_account=NAME,
        containers=[main],
        volumes=[host_path("run-nvidia", "/run/nvidia", DIR), host_path("host-root", "/")],
    )
