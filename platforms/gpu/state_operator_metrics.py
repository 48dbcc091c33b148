"""State ``state-operator-metrics``: the operator's own metrics Service
``gpu-operator`` (port ``gpu-operator-metrics`` 8080) and, where the Prometheus
Operator is installed, its ServiceMonitor; on OpenShift the ``prometheus-k8s``
Role and RoleBinding that let cluster monitoring scrape it.
"""

from __future__ import annotations

from typing import Any

from manifests import role, rolebinding, service
from manifests.meta import object_meta
from platforms.gpu.common import policy_rule
from platforms.gpu.context import StateContext
from platforms.gpu.facts import SERVICE_MONITOR
from platforms.gpu.monitoring import SCRAPE, service_monitor

NAME = "gpu-operator"
PORT_NAME = "gpu-operator-metrics"
PORT = 8080
SELECTOR = {"app": NAME}
PROMETHEUS = "prometheus-k8s"
OPENSHIFT_MONITORING = "openshift-monitoring"


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """Role/RoleBinding (OpenShift), Service, ServiceMonitor (when served)."""
    out: list[dict[str, Any]] = []
    if ctx.openshift:
        out.append(
            role.build(
                object_meta(PROMETHEUS, labels=SELECTOR),
                [policy_rule([""], ["services", "endpoints", "pods"], ["get", "list", "watch"])],
            )
        )
        binding = rolebinding.build(
            object_meta(PROMETHEUS, labels=SELECTOR),
            role_name=PROMETHEUS,
            service_account=PROMETHEUS,
            namespace=OPENSHIFT_MONITORING,
        )
        out.append(binding)
    out.append(
        service.build(
            object_meta(NAME, labels=SELECTOR, annotations=SCRAPE),
            selector=SELECTOR,
            ports=[service.service_port(PORT_NAME, PORT)],
        )
    )
    metrics = ctx.spec.operator.metrics
    settings = metrics.service_monitor if metrics is not None else None
    # NVIDIA ignores serviceMonitor.enabled=false here: the operator's ServiceMonitor is
    # made whenever the cluster serves the kind (the settings still apply).
    if ctx.facts.serves(SERVICE_MONITOR):
        out.append(
            service_monitor(
                NAME,
                namespace=ctx.namespace,
                port=PORT_NAME,
                job_label="operator",
                selector=SELECTOR,
                settings=settings,
            )
        )
    return out
