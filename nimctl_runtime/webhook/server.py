"""The admission webhook server: aiohttp over TLS, handlers registered by path.

Defaults follow controller-runtime's ``webhook.Server``: port 9443, cert dir with
``tls.crt``/``tls.key``, certificates reloaded when they change, a body limit of
7 MiB, ``needs_leader_election = False`` (every replica serves). Every failure of
ours is answered inside an AdmissionReview (``allowed: false`` with a code and a
message), never a 500 with a traceback; bodies that are not AdmissionReviews get
a 4xx; a plain-HTTP request on the TLS port gets ``400`` like Go's server, and the
server keeps serving. Bodies are read whole up to the limit (``413`` beyond it);
a connection that sends no complete request within ``header_timeout`` is closed.
Metrics are controller-runtime's ``controller_runtime_webhook_*``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from nimctl_runtime import metrics
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.webhook.admission import (
    AdmissionDecodeError,
    AdmissionResponse,
    decode_review,
    errored,
    review_body,
)
from nimctl_runtime.webhook.certwatcher import CertWatcher
from nimctl_runtime.webhook.handlers import Handler

log = get_logger("webhook.server")

DEFAULT_PORT = 9443
MAX_REQUEST_SIZE = 7 * 1024 * 1024
# A connection that has not sent a whole request (headers included) within this
# many seconds is closed, as is one idle that long between requests: half-open
# connections cannot pile up. Longer than aiohttp clients' 15 s idle pooling, so
# a pooled connection is closed by its client first.
HEADER_TIMEOUT = 60.0
_PLAIN_HTTP_ANSWER = (
    b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
)
_TLS_HANDSHAKE_RECORD = 0x16


async def read_body(request: web.Request, limit: int) -> bytes | None:
    """The whole request body, or None when it is larger than *limit* bytes.

    ``StreamReader.read(n)`` returns whatever happens to be buffered (one TCP read),
    not *n* bytes: a large AdmissionReview arrives in many reads, and a single
    ``read`` would hand the decoder a truncated document. Read to EOF instead.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await request.content.read(min(1 << 20, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)


class WebhookServer:
    """Serves registered admission handlers over HTTPS (a manager Runnable)."""

    needs_leader_election = False

    def __init__(
        self,
        *,
        cert_dir: str | Path,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
        handler_timeout: float = 10.0,
        max_request_size: int = MAX_REQUEST_SIZE,
        cert_poll_interval: float = 10.0,
        header_timeout: float = HEADER_TIMEOUT,
    ) -> None:
        self.host = host
        self.header_timeout = header_timeout
        self.port = port
        self.handler_timeout = handler_timeout
        self.max_request_size = max_request_size
        self.certs = CertWatcher(
            Path(cert_dir) / cert_name, Path(cert_dir) / key_name, interval=cert_poll_interval
        )
        self._handlers: dict[str, Handler] = {}
        self._started = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- registration -------------------------------------------------------
    def register(self, path: str, handler: Handler) -> None:
        """Serve *handler* at *path* (``/validate-apps-nvidia-com-v1alpha1-nimservice``)."""
        if not path.startswith("/"):
            raise ValueError(f"webhook path {path!r} must start with '/'")
        if path in self._handlers:
            raise ValueError(f"a webhook is already registered at {path}")
        self._handlers[path] = handler

    @property
    def paths(self) -> list[str]:
        return sorted(self._handlers)

    def is_started(self) -> bool:
        """True once the listener accepts connections (for readyz)."""
        return self._started.is_set()

    def started_checker(self) -> Callable[[], None]:
        """A readyz check (controller-runtime's ``StartedChecker``): fails until the
        server accepts connections, so no traffic is sent to a replica that cannot
        answer admission reviews yet."""

        def check() -> None:
            if not self._started.is_set():
                raise RuntimeError("webhook server is not serving yet")

        return check

    async def wait_started(self) -> None:
        await self._started.wait()

    # -- request handling ---------------------------------------------------
    async def _serve_path(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        handler = self._handlers[path]
        in_flight = metrics.controller_runtime_webhook_requests_in_flight.labels(webhook=path)
        in_flight.inc()
        started = time.perf_counter()
        status = 200
        try:
            response = await self._review(request, path, handler)
            status = response.status
            return response
        finally:
            in_flight.dec()
            metrics.controller_runtime_webhook_latency_seconds.labels(webhook=path).observe(
                time.perf_counter() - started
            )
            metrics.controller_runtime_webhook_requests_total.labels(
                webhook=path, code=str(status)
            ).inc()

    async def _review(self, request: web.Request, path: str, handler: Handler) -> web.Response:
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype != "application/json":
            return web.Response(
                status=400,
                text=f"contentType={ctype or '(none)'}, expected application/json\n",
            )
        if request.content_length is not None and request.content_length > self.max_request_size:
            return web.Response(
                status=413,
                text=f"request body is larger than the {self.max_request_size} byte limit\n",
            )
        try:
            body = await read_body(request, self.max_request_size)
        except (OSError, asyncio.IncompleteReadError, HttpProcessingError) as e:
            return web.Response(status=400, text=f"cannot read request body: {e}\n")
        if body is None:
            return web.Response(
                status=413,
                text=f"request body is larger than the {self.max_request_size} byte limit\n",
            )
        try:
            review = decode_review(body)
        except AdmissionDecodeError as e:
            return web.Response(status=400, text=f"{e}\n")
        try:
            answer = await asyncio.wait_for(handler.handle(review), timeout=self.handler_timeout)
        except TimeoutError:
            answer = errored(504, f"webhook {path} did not answer within {self.handler_timeout}s")
            log.warning("webhook handler timed out", webhook=path, uid=review.uid)
        except Exception as e:
            metrics.controller_runtime_webhook_panics_total.inc()
            log.error(
                "webhook handler failed",
                webhook=path,
                uid=review.uid,
                error=str(e),
                traceback=traceback.format_exc(),
            )
            answer = errored(500, f"webhook {path} failed: {type(e).__name__}: {e}")
        if not isinstance(answer, AdmissionResponse):
            kind = type(answer).__name__
            answer = errored(500, f"webhook {path} returned {kind}, not a response")
        payload = review_body(review.api_version, review.uid, answer)
        return web.Response(
            status=200, body=json.dumps(payload).encode(), content_type="application/json"
        )

    async def _not_found(self, request: web.Request) -> web.Response:
        return web.Response(status=404, text=f"no webhook is registered at {request.path}\n")

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_request_size + 1)
        for path in self._handlers:
            app.router.add_post(path, self._serve_path)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        return app

    # -- connection handling ------------------------------------------------
    async def _first_byte(self, conn: socket.socket) -> bytes:
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()

        def on_readable() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(conn.fileno(), on_readable)
        try:
            await asyncio.wait_for(readable, timeout=10)
        finally:
            loop.remove_reader(conn.fileno())
        return conn.recv(1, socket.MSG_PEEK)

    async def _dispatch(self, conn: socket.socket, runner: web.AppRunner) -> None:
        loop = asyncio.get_running_loop()
        try:
            head = await self._first_byte(conn)
            if not head:
                conn.close()
                return
            if head[0] != _TLS_HANDSHAKE_RECORD:
                # Read what the client sent first: closing with unread data resets
                # the connection and the client would never see the answer.
                with contextlib.suppress(BlockingIOError):
                    conn.recv(65536)
                await loop.sock_sendall(conn, _PLAIN_HTTP_ANSWER)
                conn.shutdown(socket.SHUT_WR)
                conn.close()
                return
            server = runner.server
            if server is None:
                conn.close()
                return
            await loop.connect_accepted_socket(
                server, conn, ssl=self.certs.context, ssl_handshake_timeout=10
            )
        except (OSError, TimeoutError, ConnectionError) as e:
            log.debug("connection dropped before serving", error=str(e))
            conn.close()

    async def _accept(self, listener: socket.socket, runner: web.AppRunner) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(listener)
            conn.setblocking(False)
            task = asyncio.create_task(self._dispatch(conn, runner))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until *stop* is set (the manager's Runnable contract)."""
        self.certs.load()
        runner = web.AppRunner(
            self._app(),
            access_log=None,
            handle_signals=False,
            keepalive_timeout=self.header_timeout,
        )
        await runner.setup()
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(512)
        listener.setblocking(False)
        self.port = listener.getsockname()[1]
        accept = asyncio.create_task(self._accept(listener, runner))
        watch = asyncio.create_task(self.certs.watch(stop))
        self._started.set()
        log.info("webhook server listening", host=self.host, port=self.port, paths=self.paths)
        try:
            await stop.wait()
        finally:
            self._started.clear()
            accept.cancel()
            watch.cancel()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await accept
            with contextlib.suppress(asyncio.CancelledError):
                await watch
            listener.close()
            await runner.cleanup()
            log.info("webhook server stopped")
