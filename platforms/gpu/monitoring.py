"""ServiceMonitors of the GPU Operator's metrics endpoints, with the ClusterPolicy's
scrape settings (interval, scrapeTimeout, honorLabels, relabelings, extra labels)
applied to the first endpoint and the labels."""

from __future__ import annotations

from typing import Any

from api.nvidia.v1.clusterpolicy import DCGMExporterServiceMonitorConfig, OperatorServiceMonitor
from manifests import servicemonitor
from manifests.meta import object_meta
from platforms.gpu.transforms import dump

SCRAPE: dict[str, str] = {"prometheus.io/scrape": "true"}
"""The annotation on NVIDIA's metrics Services (operator, DCGM exporter, node status);
copied by ``object_meta``, never shared."""


def service_monitor(
    name: str,
    *,
    namespace: str,
    port: str,
    job_label: str,
    selector: dict[str, str],
    settings: OperatorServiceMonitor | DCGMExporterServiceMonitorConfig | None,
) -> dict[str, Any]:
    """A ServiceMonitor scraping ``<port>/metrics`` on the Services labelled ``selector``."""
    obj = servicemonitor.build(
        object_meta(name, labels=selector),
        selector=selector,
        namespace=namespace,
        endpoints=[servicemonitor.endpoint(port, "/metrics")],
    )
    obj["spec"]["jobLabel"] = job_label
    if settings is None:
        return obj
    ep = obj["spec"]["endpoints"][0]
    if settings.interval:
        ep["interval"] = settings.interval
    scrape_timeout = getattr(settings, "scrape_timeout", None)
    if scrape_timeout:
        ep["scrapeTimeout"] = scrape_timeout
    if settings.honor_labels is not None:
        ep["honorLabels"] = settings.honor_labels
    if settings.relabelings:
        ep["relabelings"] = [dump(r) for r in settings.relabelings]
    if settings.additional_labels:
        obj["metadata"]["labels"] = {**obj["metadata"]["labels"], **settings.additional_labels}
    return obj
