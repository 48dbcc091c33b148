"""Prometheus metrics with controller-runtime's and client-go's names and labels.

Existing Grafana dashboards and alerts for Go operators query these exact
names, so every metric object of the runtime is defined here, once, in one
registry (``REGISTRY``, served at ``/metrics`` by the manager). Other modules
(client, workqueue, controller, leader election, webhook server) import the
objects from here instead of defining their own.

Names, types, labels and buckets follow runtime.md §1.9:
controller-runtime ``pkg/internal/controller/metrics``, ``pkg/metrics``,
``pkg/webhook/internal/metrics`` and client-go's ``workqueue`` and
``rest_client`` metrics.
"""

from __future__ import annotations

import socket
import ssl
import tempfile
from pathlib import Path

from aiohttp import web
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from nimctl_runtime import certs
from nimctl_runtime.authfilter import AuthenticationAndAuthorization
from nimctl_runtime.health import HTTPRunnable

__all__ = [
    "ACTIVE_WORKERS",
    "CONTENT_TYPE_LATEST",
    "LEADER_ELECTION_MASTER_STATUS",
    "LEADER_ELECTION_SLOWPATH_TOTAL",
    "RECONCILE_ERRORS",
    "RECONCILE_PANICS",
    "RECONCILE_RESULTS",
    "RECONCILE_TIME",
    "RECONCILE_TIMEOUTS",
    "RECONCILE_TOTAL",
    "REGISTRY",
    "TERMINAL_RECONCILE_ERRORS",
    "WORKER_COUNT",
    "WORKQUEUE_ADDS",
    "WORKQUEUE_DEPTH",
    "WORKQUEUE_LONGEST_RUNNING_PROCESSOR",
    "WORKQUEUE_QUEUE_DURATION",
    "WORKQUEUE_RETRIES",
    "WORKQUEUE_UNFINISHED_WORK",
    "WORKQUEUE_WORK_DURATION",
    "MetricsServer",
    "controller_runtime_active_workers",
    "controller_runtime_max_concurrent_reconciles",
    "controller_runtime_reconcile_errors_total",
    "controller_runtime_reconcile_panics_total",
    "controller_runtime_reconcile_time_seconds",
    "controller_runtime_reconcile_timeouts_total",
    "controller_runtime_reconcile_total",
    "controller_runtime_terminal_reconcile_errors_total",
    "controller_runtime_webhook_latency_seconds",
    "controller_runtime_webhook_panics_total",
    "controller_runtime_webhook_requests_in_flight",
    "controller_runtime_webhook_requests_total",
    "exposition",
    "leader_election_master_status",
    "leader_election_slowpath_total",
    "rest_client_request_duration_seconds",
    "rest_client_requests_total",
    "workqueue_adds_total",
    "workqueue_depth",
    "workqueue_longest_running_processor_seconds",
    "workqueue_queue_duration_seconds",
    "workqueue_retries_total",
    "workqueue_unfinished_work_seconds",
    "workqueue_work_duration_seconds",
]

#: The one registry of the process (controller-runtime's ``metrics.Registry``).
#: It also carries the process, platform and GC collectors, the Python
#: counterparts of the Go process/runtime collectors controller-runtime adds.
REGISTRY = CollectorRegistry(auto_describe=True)
for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
    REGISTRY.register(_collector)
del _collector

# -- controller (pkg/internal/controller/metrics/metrics.go) ------------------

#: Reconcile results; all four values are pre-initialised to 0 per controller.
RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")

controller_runtime_reconcile_total = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],
    registry=REGISTRY,
)
controller_runtime_reconcile_errors_total = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
controller_runtime_terminal_reconcile_errors_total = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
controller_runtime_reconcile_panics_total = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics per controller",
    ["controller"],
    registry=REGISTRY,
)
controller_runtime_reconcile_timeouts_total = Counter(
    "controller_runtime_reconcile_timeouts_total",
    "Total number of reconciliation timeouts per controller",
    ["controller"],
    registry=REGISTRY,
)
_RECONCILE_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
    0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
    6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
)  # fmt: skip
controller_runtime_reconcile_time_seconds = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=_RECONCILE_TIME_BUCKETS,
    registry=REGISTRY,
)
controller_runtime_max_concurrent_reconciles = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
    registry=REGISTRY,
)
controller_runtime_active_workers = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
    registry=REGISTRY,
)

# -- workqueue (controller-runtime pkg/metrics/workqueue.go) ------------------

#: ExponentialBuckets(10e-9, 10, 12): 1e-8 s ... 1e3 s.
_WORKQUEUE_BUCKETS = tuple(10e-9 * 10**i for i in range(12))

workqueue_depth = Gauge(
    "workqueue_depth",
    "Current depth of workqueue",
    ["name", "controller", "priority"],
    registry=REGISTRY,
)
workqueue_adds_total = Counter(
    "workqueue_adds_total",
    "Total number of adds handled by workqueue",
    ["name", "controller"],
    registry=REGISTRY,
)
workqueue_queue_duration_seconds = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"],
    buckets=_WORKQUEUE_BUCKETS,
    registry=REGISTRY,
)
workqueue_work_duration_seconds = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes.",
    ["name", "controller"],
    buckets=_WORKQUEUE_BUCKETS,
    registry=REGISTRY,
)
workqueue_unfinished_work_seconds = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been "
    "observed by work_duration. Large values indicate stuck threads. One can deduce "
    "the number of stuck threads by observing the rate at which this increases.",
    ["name", "controller"],
    registry=REGISTRY,
)
workqueue_longest_running_processor_seconds = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name", "controller"],
    registry=REGISTRY,
)
workqueue_retries_total = Counter(
    "workqueue_retries_total",
    "Total number of items added to the workqueue with a non-zero delay "
    "(rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
    ["name", "controller"],
    registry=REGISTRY,
)

# -- leader election (pkg/metrics/leaderelection.go) --------------------------

leader_election_master_status = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, "
    "0 indicates backup, 1 indicates master. 'name' is the string used to "
    "identify the lease. Please make sure to group by name.",
    ["name"],
    registry=REGISTRY,
)
leader_election_slowpath_total = Counter(
    "leader_election_slowpath_total",
    "Total number of slow path exercised in renewing leader leases. "
    "'name' is the string used to identify the lease. Please make sure to group by name.",
    ["name"],
    registry=REGISTRY,
)

# -- event-loop lag (ours: nimctl_runtime.looplag) -----------------------------

nimctl_event_loop_lag_seconds = Histogram(
    "nimctl_event_loop_lag_seconds",
    "How late the operator's event loop woke a periodic timer: time every task "
    "(Lease renewals included) waited for the loop.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
    registry=REGISTRY,
)
nimctl_event_loop_lag_max_seconds = Gauge(
    "nimctl_event_loop_lag_max_seconds",
    "The largest event-loop lag seen since the process started.",
    registry=REGISTRY,
)

# -- REST client (client-go tools/metrics, as registered by controller-runtime)

rest_client_requests_total = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
    registry=REGISTRY,
)
rest_client_request_duration_seconds = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
    registry=REGISTRY,
)

# -- webhook server (pkg/webhook/internal/metrics/metrics.go) -----------------

controller_runtime_webhook_requests_total = Counter(
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code.",
    ["webhook", "code"],
    registry=REGISTRY,
)
controller_runtime_webhook_latency_seconds = Histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
    registry=REGISTRY,
)
controller_runtime_webhook_requests_in_flight = Gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ["webhook"],
    registry=REGISTRY,
)
controller_runtime_webhook_panics_total = Counter(
    "controller_runtime_webhook_panics_total",
    "Total number of webhook panics",
    registry=REGISTRY,
)

# Upper-case aliases, for callers that prefer constant-style names.
RECONCILE_TOTAL = controller_runtime_reconcile_total
RECONCILE_ERRORS = controller_runtime_reconcile_errors_total
TERMINAL_RECONCILE_ERRORS = controller_runtime_terminal_reconcile_errors_total
RECONCILE_PANICS = controller_runtime_reconcile_panics_total
RECONCILE_TIMEOUTS = controller_runtime_reconcile_timeouts_total
RECONCILE_TIME = controller_runtime_reconcile_time_seconds
WORKER_COUNT = controller_runtime_max_concurrent_reconciles
ACTIVE_WORKERS = controller_runtime_active_workers
WORKQUEUE_DEPTH = workqueue_depth
WORKQUEUE_ADDS = workqueue_adds_total
WORKQUEUE_QUEUE_DURATION = workqueue_queue_duration_seconds
WORKQUEUE_WORK_DURATION = workqueue_work_duration_seconds
WORKQUEUE_UNFINISHED_WORK = workqueue_unfinished_work_seconds
WORKQUEUE_LONGEST_RUNNING_PROCESSOR = workqueue_longest_running_processor_seconds
WORKQUEUE_RETRIES = workqueue_retries_total
LEADER_ELECTION_MASTER_STATUS = leader_election_master_status
LEADER_ELECTION_SLOWPATH_TOTAL = leader_election_slowpath_total


def exposition() -> bytes:
    """Render ``REGISTRY`` in the Prometheus text format (``CONTENT_TYPE_LATEST``)."""
    return generate_latest(REGISTRY)


class MetricsServer(HTTPRunnable):
    """Serves ``REGISTRY`` at ``/metrics`` on every replica (controller-runtime's metrics server).

    ``bind_address`` follows ``--metrics-bind-address``: ``":8080"``, or
    ``"0"`` to disable (the manager then does not create the server).
    ``secure`` serves HTTPS (``--metrics-secure``) with ``tls.crt``/``tls.key``
    from ``cert_dir``, or a self-signed certificate made at start when no
    directory is given (as controller-runtime does). ``auth`` puts the
    TokenReview + SubjectAccessReview filter (:mod:`nimctl_runtime.authfilter`)
    in front of the endpoint.
    """

    def __init__(
        self,
        bind_address: str,
        *,
        path: str = "/metrics",
        secure: bool = False,
        cert_dir: str | Path | None = None,
        auth: AuthenticationAndAuthorization | None = None,
    ) -> None:
        super().__init__(bind_address, component="metrics")
        self.path = path
        self.secure = secure
        self.cert_dir = Path(cert_dir) if cert_dir else None
        self.auth = auth

    def build_app(self) -> web.Application:
        if self.secure and self.ssl_context is None:
            self.ssl_context = self._server_ssl_context()
        app = web.Application()
        handler = self._serve if self.auth is None else self.auth.wrap(self._serve)
        app.router.add_get(self.path, handler)
        return app

    def _server_ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])  # no HTTP/2, as --enable-http2=false
        if self.cert_dir is not None:
            cert, key = self.cert_dir / "tls.crt", self.cert_dir / "tls.key"
            try:
                ctx.load_cert_chain(cert, key)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(
                    f"--metrics-cert-dir {self.cert_dir}: cannot load tls.crt/tls.key: {exc}"
                ) from exc
            return ctx
        ca = certs.generate_ca("nimctl-metrics-ca")
        hosts = ["localhost", "127.0.0.1", socket.gethostname()]
        pair = certs.generate_serving_cert(ca, [h for h in hosts if h], "nimctl-metrics")
        self.log.info("serving metrics with a self-signed certificate; set --metrics-cert-dir")
        return _load(ctx, pair)

    async def _serve(self, request: web.Request) -> web.Response:
        body = exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _load(ctx: ssl.SSLContext, pair: certs.CertPair) -> ssl.SSLContext:
    """Load *pair* into *ctx* (through a private temporary directory)."""
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = pair.write(tmp)
        ctx.load_cert_chain(cert_path, key_path)
    return ctx
