"""ServiceMonitor builder (monitoring.coreos.com/v1, Prometheus Operator)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

API_VERSION = "monitoring.coreos.com/v1"


def endpoint(
    port: str, path: str, *, interval: str | None = None, scrape_timeout: str | None = None
) -> dict[str, Any]:
    """One scrape endpoint on a named Service port."""
    ep: dict[str, Any] = {"port": port, "path": path}
    if interval:
        ep["interval"] = interval
    if scrape_timeout:
        ep["scrapeTimeout"] = scrape_timeout
    return ep


def build(
    meta: dict[str, Any],
    *,
    selector: Mapping[str, str],
    namespace: str,
    endpoints: list[dict[str, Any]],
) -> dict[str, Any]:
    """A ServiceMonitor scraping the Services labelled ``selector`` in ``namespace``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ServiceMonitor",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": endpoints,
        },
    }
