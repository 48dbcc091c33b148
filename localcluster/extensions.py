"""The wiring point between the localcluster API server and its part-2 extensions.

``LocalCluster.start()`` calls :func:`start_extensions` once storage exists and
before the HTTP server serves; ``LocalCluster.stop()`` awaits
``Extensions.stop()`` first. Everything attaches through the cluster's hooks:

* request hooks, outermost first: the audit log, the ``/debug/`` API (only with
  ``debug_api=True``), fault injection, webhook warnings on refused requests;
* admission plugins: the API server's built-in allocation/defaulting, then the
  dynamic admission webhooks;
* ``pod_log_provider``: the simulator's container output;
* the simulator itself (only with ``simulator=True``), on ``cluster.storage``.

Tests reach the pieces through ``extensions_of(cluster)`` (``.simulator``,
``.audit``, ``.faults``, ``.webhooks``, ``.catalog``). Simulator settings can be
given before start as ``cluster.simulator_options`` (keyword arguments of
``Simulator``, e.g. ``{"speed": 10}``, ``{"clock": ManualClock()}`` or
``{"profile": "mig"}``).

The debug API (authenticated like any request; JSON bodies):

=========================================  ==============================================
``GET /debug/audit?user=&resource=&verb=``  audit records (``all=true`` adds non-resource)
``DELETE /debug/audit``                     forget them
``GET /debug/faults``, ``DELETE``           fault state; clear every fault
``POST /debug/faults/watches/close``        close watches now, or ``{"every": seconds}``
``POST /debug/faults/errors``               ``{code, fraction, verbs, resources, users,
                                            retryAfter, times}``
``POST /debug/faults/latency``              ``{seconds, verbs, resources, users}``
``DELETE /debug/faults/rules/<id>``         drop one error or latency rule
``POST /debug/faults/compact``              next watch from an old resourceVersion: 410
``POST /debug/faults/unreachable``          ``{seconds}``: drop every connection
``POST /debug/simulator/stall|resume``      freeze / unfreeze the simulator
``POST /debug/simulator/failure-mode``      ``{pod: "ns/name-glob", mode}`` (null clears)
``PUT /debug/catalog``                      ``{image, command, logs, exitCode, runSeconds,
                                            ready, pullError}``
=========================================  ==============================================
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from aiohttp import web

from localcluster.admission import (
    BuiltinAdmission,
    WebhookAdmission,
    kubernetes_service,
    warnings_hook,
)
from localcluster.audit import AuditLog
from localcluster.catalog import ImageCatalog
from localcluster.codec import bytes_response
from localcluster.errors import StatusError
from localcluster.faults import FaultInjector
from localcluster.hooks import Handler, RequestInfo
from localcluster.quota import ResourceQuotaAdmission
from localcluster.simulator.engine import Simulator

DEBUG_PREFIX = "/debug/"


class Extensions:
    """The running extensions of one LocalCluster; ``stop()`` shuts them down."""

    def __init__(
        self,
        cluster: Any,
        *,
        simulator: Simulator | None,
        audit: AuditLog,
        faults: FaultInjector,
        webhooks: WebhookAdmission,
        builtin: BuiltinAdmission,
        catalog: ImageCatalog,
    ) -> None:
        self.cluster = cluster
        self.simulator = simulator
        self.audit = audit
        self.faults = faults
        self.webhooks = webhooks
        self.builtin = builtin
        self.catalog = catalog
        self._stopped = False

    async def stop(self) -> None:
        """Stop every extension (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        await self.faults.close()
        if self.simulator is not None:
            await self.simulator.stop()
        await self.webhooks.close()

    # ------------------------------------------------------------------ debug API

    async def debug_hook(
        self, request: web.Request, info: RequestInfo, handler: Handler
    ) -> web.StreamResponse:
        """Serve ``/debug/...`` when the cluster's debug API is on."""
        if not request.path.startswith(DEBUG_PREFIX) or not getattr(
            self.cluster, "debug_api", False
        ):
            return await handler(request)
        del info
        body: dict[str, Any] = {}
        if request.can_read_body:
            try:
                loaded = json.loads(await request.read() or b"{}")
            except ValueError as exc:
                raise StatusError(400, "BadRequest", f"invalid JSON body: {exc}") from exc
            if not isinstance(loaded, dict):
                raise StatusError(400, "BadRequest", "the body must be a JSON object")
            body = loaded
        try:
            result = self._debug(
                request.method,
                request.path[len(DEBUG_PREFIX) :].strip("/"),
                dict(request.query),
                body,
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise StatusError(400, "BadRequest", str(exc)) from exc
        if result is None:
            raise StatusError(404, "NotFound", f"no debug endpoint {request.method} {request.path}")
        if isinstance(result, bytes):
            return bytes_response(result)
        return web.json_response(result)

    def _debug(
        self, method: str, path: str, query: dict[str, str], body: dict[str, Any]
    ) -> dict[str, Any] | bytes | None:
        faults = self.faults
        if path == "audit" and method == "GET":
            records = self.audit.records(
                user=query.get("user"),
                resource=query.get("resource"),
                verb=query.get("verb"),
                resource_requests_only=query.get("all", "") not in ("true", "1"),
            )
            return b'{"items":[' + b",".join(r.encoded() for r in records) + b"]}"
        if path == "audit" and method == "DELETE":
            self.audit.clear()
            return {"cleared": True}
        if path == "faults" and method == "GET":
            return faults.state()
        if path == "faults" and method == "DELETE":
            faults.reset()
            return faults.state()
        if path == "faults/watches/close" and method == "POST":
            if "every" in body:
                every = body["every"]
                faults.close_watches_every(float(every) if every else None)
            else:
                faults.close_watches()
            return faults.state()
        if path == "faults/errors" and method == "POST":
            return faults.inject_errors(
                int(body.get("code", 500)),
                fraction=float(body.get("fraction", 1.0)),
                verbs=body.get("verbs"),
                resources=body.get("resources"),
                users=body.get("users"),
                retry_after=int(body.get("retryAfter", 1)),
                times=int(body["times"]) if body.get("times") is not None else None,
            ).to_json()
        if path == "faults/latency" and method == "POST":
            return faults.add_latency(
                float(body["seconds"]),
                verbs=body.get("verbs"),
                resources=body.get("resources"),
                users=body.get("users"),
            ).to_json()
        if path.startswith("faults/rules/") and method == "DELETE":
            faults.remove(int(path.rsplit("/", 1)[1]))
            return faults.state()
        if path == "faults/compact" and method == "POST":
            faults.compact()
            return faults.state()
        if path == "faults/unreachable" and method == "POST":
            faults.unreachable(float(body["seconds"]))
            return faults.state()
        if path == "simulator/stall" and method == "POST":
            faults.stall_simulator()
            return faults.state()
        if path == "simulator/resume" and method == "POST":
            faults.resume_simulator()
            return faults.state()
        if path == "simulator/failure-mode" and method == "POST":
            if self.simulator is None:
                raise ValueError("this cluster runs without the simulator")
            mode = body.get("mode")
            self.simulator.set_failure_mode(str(body["pod"]), str(mode) if mode else None)
            return {"pod": body["pod"], "mode": mode}
        if path == "catalog" and method in ("PUT", "POST"):
            exit_code = body.get("exitCode")
            self.catalog.set(
                str(body["image"]),
                logs=str(body.get("logs", "")),
                exit_code=int(exit_code) if exit_code is not None else None,
                run_seconds=float(body.get("runSeconds", 0.0)),
                ready=bool(body.get("ready", True)),
                pull_error=bool(body.get("pullError", False)),
                command=str(body.get("command", "")),
            )
            return {"rules": len(self.catalog.rules)}
        return None


def extensions_of(cluster: Any) -> Extensions:
    """The extensions started for *cluster* (raises if it was not started)."""
    ext = getattr(cluster, "extensions", None)
    if not isinstance(ext, Extensions):
        raise RuntimeError("the cluster has no extensions: start it first")
    return ext


async def start_extensions(cluster: Any) -> Extensions:
    """Install the extensions on *cluster* and start their background tasks."""
    storage = cluster.storage
    options: dict[str, Any] = dict(getattr(cluster, "simulator_options", None) or {})
    catalog = options.pop("catalog", None) or ImageCatalog()
    simulator: Simulator | None = None
    if getattr(cluster, "simulator", True):
        options.setdefault("profile", getattr(cluster, "profile", None))
        options.setdefault("admission_plugins", cluster.admission_plugins)
        version = getattr(cluster, "kubernetes_version", None)
        if version:
            options.setdefault("kubelet_version", f"v{version}")
        simulator = Simulator(storage, catalog=catalog, **options)
    audit = AuditLog()
    faults = FaultInjector(storage, simulator=simulator)
    webhooks = WebhookAdmission(storage)
    # pvc-protection only where a simulated controller can release it again
    builtin = BuiltinAdmission(storage, pvc_protection=simulator is not None)
    ext = Extensions(
        cluster,
        simulator=simulator,
        audit=audit,
        faults=faults,
        webhooks=webhooks,
        builtin=builtin,
        catalog=catalog,
    )
    cluster.request_hooks[:0] = [audit.hook, ext.debug_hook, faults.hook, warnings_hook]
    # ResourceQuota runs after the webhooks, last, as in kube-apiserver
    cluster.admission_plugins[:0] = [builtin, webhooks, ResourceQuotaAdmission(storage)]
    try:
        storage.get("v1", "Service", "kubernetes", "default")
    except StatusError:
        with contextlib.suppress(StatusError):
            storage.create(kubernetes_service())
    if simulator is not None:
        cluster.pod_log_provider = simulator.pod_logs
        await simulator.start()
    cluster.extensions = ext
    return ext
