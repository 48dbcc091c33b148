"""Liveness and readiness probes: ``/healthz`` and ``/readyz`` like controller-runtime.

The kubelet probes the operator over HTTP; the answers follow
controller-runtime's ``pkg/healthz`` (which copies the Kubernetes API server's
text format, runtime.md §1.10):

* every check passes → ``200`` and the body ``ok``;
* any check fails → ``500`` and one line per check, always verbose:
  ``[+]name ok`` / ``[-]name failed: reason withheld``, then
  ``healthz check failed``;
* ``?verbose`` forces the per-check lines on success (ending
  ``healthz check passed``); ``?exclude=name`` skips a check
  (``[+]name excluded: ok``);
* ``/healthz/<name>`` runs one check: ``200 ok``, ``500`` with the reason, or
  ``404`` for an unknown name.

A check is a callable taking nothing that raises (or returns an exception,
``False`` or an error string) when unhealthy; it may be a coroutine function.
Each check is bounded by ``check_timeout`` so a stuck check fails the probe
instead of hanging it. ``HealthProbeServer`` is a manager Runnable that runs on
every replica.
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from nimctl_runtime.logsetup import get_logger

__all__ = [
    "Checker",
    "HTTPRunnable",
    "HealthProbeServer",
    "parse_bind_address",
    "ping",
    "run_check",
]

Checker = Callable[[], Any]

# Seconds a probe/metrics connection may take to send a whole request, or idle.
HEADER_TIMEOUT = 60.0


def ping() -> None:
    """A check that always passes (controller-runtime's ``healthz.Ping``)."""
    return None


def parse_bind_address(address: str | None) -> tuple[str | None, int] | None:
    """Split a Go-style bind address; ``None`` when serving is disabled.

    ``":8081"`` binds every interface, ``"127.0.0.1:0"`` a free port on
    loopback, and ``""`` or ``"0"`` disables the server (controller-runtime).
    """
    if address is None:
        return None
    address = address.strip()
    if address in ("", "0"):
        return None
    host, sep, port_text = address.rpartition(":")
    if not sep:
        raise ValueError(f"bind address {address!r} must look like HOST:PORT or :PORT")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"bind address {address!r} has a non-numeric port") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"bind address {address!r}: port out of range")
    host = host.strip("[]")
    return (host or None, port)


async def run_check(check: Checker, check_timeout: float) -> str | None:
    """Run one check; ``None`` when healthy, else the reason it failed."""
    try:
        async with asyncio.timeout(check_timeout):
            out = check()
            if inspect.isawaitable(out):
                out = await out
    except TimeoutError:
        return f"check did not answer within {check_timeout:g}s"
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return str(exc) or type(exc).__name__
    if out is False:
        return "check returned false"
    if isinstance(out, BaseException):
        return str(out) or type(out).__name__
    if isinstance(out, str) and out:
        return out
    return None


class HTTPRunnable:
    """An aiohttp site as a manager Runnable (no leader election needed).

    ``port`` holds the bound port once ``started`` is set (useful with port 0).
    """

    needs_leader_election = False

    def __init__(self, bind_address: str, *, component: str) -> None:
        parsed = parse_bind_address(bind_address)
        if parsed is None:
            raise ValueError(f"{component}: bind address {bind_address!r} disables serving")
        self.host, self.port = parsed
        self.component = component
        self.started = asyncio.Event()
        self.log = get_logger(component)
        # HTTPS when set (``--metrics-secure``); plain HTTP otherwise.
        self.ssl_context: ssl.SSLContext | None = None
        # Close connections that send no whole request (or idle) this long.
        self.header_timeout = HEADER_TIMEOUT

    def build_app(self) -> web.Application:
        raise TypeError(f"{type(self).__name__} must define build_app")

    async def run(self, stop: asyncio.Event) -> None:
        app = self.build_app()
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, keepalive_timeout=self.header_timeout
        )
        await runner.setup()
        try:
            site = web.TCPSite(
                runner, self.host, self.port, reuse_address=True, ssl_context=self.ssl_context
            )
            await site.start()
            if runner.addresses:
                self.port = int(runner.addresses[0][1])
            self.log.info(
                "serving",
                host=self.host or "0.0.0.0",
                port=self.port,
                scheme="https" if self.ssl_context is not None else "http",
            )
            self.started.set()
            await stop.wait()
        finally:
            await runner.cleanup()


class HealthProbeServer(HTTPRunnable):
    """Serves ``/healthz`` and ``/readyz`` (and ``/<endpoint>/<check>``)."""

    def __init__(
        self,
        bind_address: str,
        *,
        healthz: Mapping[str, Checker] | None = None,
        readyz: Mapping[str, Checker] | None = None,
        liveness_endpoint: str = "/healthz",
        readiness_endpoint: str = "/readyz",
        check_timeout: float = 10.0,
    ) -> None:
        super().__init__(bind_address, component="health")
        # the dicts are shared with the manager, which may add checks before start
        self.healthz: Mapping[str, Checker] = healthz if healthz is not None else {}
        self.readyz: Mapping[str, Checker] = readyz if readyz is not None else {}
        self.liveness_endpoint = "/" + liveness_endpoint.strip("/")
        self.readiness_endpoint = "/" + readiness_endpoint.strip("/")
        self.check_timeout = check_timeout

    def build_app(self) -> web.Application:
        app = web.Application()
        for endpoint, checks in (
            (self.liveness_endpoint, lambda: self.healthz),
            (self.readiness_endpoint, lambda: self.readyz),
        ):
            app.router.add_get(endpoint, self._aggregated(checks))
            app.router.add_get(endpoint + "/", self._aggregated(checks))
            app.router.add_get(endpoint + "/{check}", self._single(checks))
        return app

    def _aggregated(
        self, checks: Callable[[], Mapping[str, Checker]]
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            return await serve_aggregated(
                checks(),
                excluded=request.query.getall("exclude", []),
                verbose="verbose" in request.query,
                check_timeout=self.check_timeout,
                log=self.log,
            )

        return handle

    def _single(
        self, checks: Callable[[], Mapping[str, Checker]]
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            name = request.match_info["check"]
            check = checks().get(name)
            if check is None:
                return _text(404, "404 page not found\n")
            reason = await run_check(check, self.check_timeout)
            if reason is not None:
                self.log.info("health check failed", checker=name, error=reason)
                return _text(500, f"internal server error: {reason}\n")
            return _text(200, "ok")

        return handle


def _text(status: int, body: str) -> web.Response:
    return web.Response(
        status=status,
        text=body,
        content_type="text/plain",
        charset="utf-8",
        headers={"X-Content-Type-Options": "nosniff"},
    )


async def serve_aggregated(
    checks: Mapping[str, Checker],
    *,
    excluded: list[str],
    verbose: bool,
    check_timeout: float,
    log: Any = None,
) -> web.Response:
    """The aggregated probe answer (also usable without the server, e.g. in tests)."""
    unknown = set(excluded)
    names = sorted(checks)
    to_run = [n for n in names if n not in unknown]
    reasons = await asyncio.gather(*(run_check(checks[n], check_timeout) for n in to_run))
    result = dict(zip(to_run, reasons, strict=True))
    lines: list[str] = []
    failed = False
    for name in names:
        if name in unknown:
            lines.append(f"[+]{name} excluded: ok\n")
            continue
        reason = result[name]
        if reason is None:
            lines.append(f"[+]{name} ok\n")
        else:
            failed = True
            lines.append(f"[-]{name} failed: reason withheld\n")
            if log is not None:
                log.info("health check failed", checker=name, error=reason)
    unmatched = sorted(unknown - set(names))
    if not names:
        lines.append("[+]ping ok\n")
    if not failed and not verbose:
        return _text(200, "ok")
    if unmatched:
        quoted = ", ".join(f'"{n}"' for n in unmatched)
        lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}\n")
    lines.append("healthz check failed\n" if failed else "healthz check passed\n")
    return _text(500 if failed else 200, "".join(lines))
