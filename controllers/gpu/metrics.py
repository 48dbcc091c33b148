"""The GPU Operator's own metrics (namespace ``gpu_operator``), with NVIDIA's names (§7).

``reconciliation_status``: 1 ready, 0 notReady, -1 no usable ClusterPolicy,
-2 operator error. Registered on the process registry, so ``/metrics`` serves
them next to controller-runtime's.
"""

from __future__ import annotations

import time
from typing import Final

from prometheus_client import Counter, Gauge

from nimctl_runtime.metrics import REGISTRY

STATUS_READY: Final = 1
STATUS_NOT_READY: Final = 0
STATUS_NO_POLICY: Final = -1
STATUS_ERROR: Final = -2

gpu_nodes_total = Gauge(
    "gpu_operator_gpu_nodes_total", "Number of nodes with GPUs", registry=REGISTRY
)
reconciliation_status = Gauge(
    "gpu_operator_reconciliation_status",
    "1 if the ClusterPolicy is ready, 0 if not ready, -1 if unavailable, -2 on an operator error",
    registry=REGISTRY,
)
reconciliation_total = Counter(
    "gpu_operator_reconciliation_total",
    "Total number of ClusterPolicy reconciliations",
    registry=REGISTRY,
)
reconciliation_failed_total = Counter(
    "gpu_operator_reconciliation_failed_total",
    "Number of failed ClusterPolicy reconciliations",
    registry=REGISTRY,
)
reconciliation_last_success_ts_seconds = Gauge(
    "gpu_operator_reconciliation_last_success_ts_seconds",
    "Timestamp (seconds since the epoch) of the last successful ClusterPolicy reconciliation",
    registry=REGISTRY,
)
reconciliation_has_nfd_labels = Gauge(
    "gpu_operator_reconciliation_has_nfd_labels",
    "1 if any node carries NFD labels, 0 otherwise",
    registry=REGISTRY,
)

__all__ = [
    "STATUS_ERROR",
    "STATUS_NOT_READY",
    "STATUS_NO_POLICY",
    "STATUS_READY",
    "gpu_nodes_total",
    "observe_result",
    "reconciliation_failed_total",
    "reconciliation_has_nfd_labels",
    "reconciliation_status",
    "reconciliation_total",
]


def observe_result(status: int) -> None:
    """Record one reconciliation's outcome."""
    reconciliation_total.inc()
    reconciliation_status.set(status)
    if status == STATUS_ERROR:
        reconciliation_failed_total.inc()
    elif status == STATUS_READY:
        reconciliation_last_success_ts_seconds.set(time.time())
