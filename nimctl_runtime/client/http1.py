"""A lean HTTP/1.1 keep-alive transport for the client's unary requests.

aiohttp spent about 0.3 ms of CPU on each request the operator sends (a
``ClientRequest``, its header multidicts, timers, a response parser and a stream
object, dozens of small functions): a fifth of the operator's busy samples while
it creates NIMServices (docs/benchmarks.md, issue 30). A unary request to the
API server needs much less: one request head built from prebuilt bytes, one
write, and one parser for the answer (``Content-Length``, ``chunked`` or
read-until-close bodies; ``gzip`` and ``deflate`` decoded). Watches stay on
aiohttp (a long-lived stream read line by line).

:class:`Pool` keeps idle connections to one server (plain TCP or TLS with the
client's ``SSLContext``) for reuse, most recently used first, and drops one idle
for longer than ``keepalive`` seconds or closed by the server. A request's
``before_write`` callback (the client's write fence) runs once the connection is
held, immediately before the bytes are handed to the transport, with no await
in between; when it raises, nothing is written and the connection goes back to
the pool unused.

Errors: :class:`ConnectFailed` when no connection could be made (nothing was
sent: any verb may be retried), :class:`ConnectionLost` when the connection
broke or the answer was malformed after the request was written (the server may
have acted on it), :class:`TimeoutError` when the whole exchange outlasted its
timeout.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import zlib
from collections import deque
from collections.abc import Callable

__all__ = ["ConnectFailed", "ConnectionLost", "Pool", "Response"]

#: Idle connections older than this are not reused (aiohttp's connector default).
KEEPALIVE_SECONDS = 15.0
#: The longest response head accepted (status line and headers).
MAX_HEAD_BYTES = 1 << 20

_NO_BODY_STATUS = frozenset((204, 304))


def _expire(waiter: asyncio.Future[Response]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class ConnectFailed(OSError):
    """No connection to the server could be made (refused, DNS, TLS): nothing was sent."""

    def __init__(self, server: str, os_error: BaseException) -> None:
        super().__init__(f"cannot connect to {server}: {os_error}")
        self.os_error = os_error


class ConnectionLost(OSError):
    """The connection broke, or the answer was malformed, after the request was written."""


class Response:
    """One answer: the status, the headers (names lower-cased, in order) and the body."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str) -> str | None:
        """The first value of header *name* (lower case), or None."""
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def header_all(self, name: str) -> list[str]:
        """Every value of header *name* (lower case), in the order received."""
        return [value for key, value in self.headers if key == name]


def _decode_body(encoding: str | None, body: bytes) -> bytes:
    if not encoding or not body or encoding == "identity":
        return body
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:  # raw deflate, as some servers send it
            return zlib.decompress(body, -zlib.MAX_WBITS)
    raise ConnectionLost(f"unsupported Content-Encoding {encoding!r}")


class _Connection(asyncio.Protocol):
    """One keep-alive connection and the parser of the answer it is waiting for."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._buf = bytearray()
        self._waiter: asyncio.Future[Response] | None = None
        self._no_body = False
        self._reset()

    def _reset(self) -> None:
        self._status = 0
        self._headers: list[tuple[str, str]] = []
        self._mode = 0  # 0 head, 1 Content-Length, 2 chunked, 3 until close
        self._body_start = 0
        self._length = 0
        self._pos = 0  # chunked: where the next chunk's size line starts
        self._parts: list[bytes] = []
        self._keep_alive = True

    # -- asyncio.Protocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for: the connection is unusable
            self.close()
            return
        self._buf += data
        try:
            self._parse()
        except (ValueError, zlib.error, ConnectionLost) as err:
            self._fail(ConnectionLost(f"malformed response from {self._pool.server}: {err}"))
            self.close()

    def eof_received(self) -> bool | None:
        if self._waiter is not None and self._mode == 3:
            self._finish(bytes(self._buf[self._body_start :]), keep=False)
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool._discard(self)
        if self._waiter is not None and not self._waiter.done():
            if self._mode == 3:
                try:
                    self._finish(bytes(self._buf[self._body_start :]), keep=False)
                    return
                except (ValueError, zlib.error, ConnectionLost) as err:
                    exc = err
            reason = f": {exc}" if exc else ""
            self._fail(
                ConnectionLost(f"the connection to {self._pool.server} closed mid-answer{reason}")
            )

    # -- request/answer --------------------------------------------------------------

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        self._pool._discard(self)

    def expect(self, waiter: asyncio.Future[Response], no_body: bool) -> None:
        """The request is about to be written: parse the next answer into *waiter*."""
        self._reset()
        self._buf.clear()
        self._no_body = no_body
        self._waiter = waiter

    def _fail(self, err: BaseException) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(err)

    def _finish(self, body: bytes, *, keep: bool) -> None:
        status, headers = self._status, self._headers
        encoding = None
        for key, value in headers:
            if key == "content-encoding":
                encoding = value.strip().lower()
        body = _decode_body(encoding, body)
        self._keep_alive = self._keep_alive and keep
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(Response(status, headers, body))

    @property
    def reusable(self) -> bool:
        return self._keep_alive and not self.closed

    def _parse(self) -> None:
        buf = self._buf
        while self._mode == 0:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise ConnectionLost("response head too large")
                return
            self._parse_head(bytes(buf[:end]))
            if 100 <= self._status < 200:  # 100 Continue and friends: the answer follows
                del buf[: end + 4]
                self._reset()
                continue
            self._body_start = end + 4
        if self._mode == 1:
            stop = self._body_start + self._length
            if len(buf) < stop:
                return
            self._finish(bytes(buf[self._body_start : stop]), keep=len(buf) == stop)
        elif self._mode == 2:
            self._parse_chunks()

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1."):
            raise ConnectionLost(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        self._status = int(rest[:3])
        headers: list[tuple[str, str]] = []
        length: int | None = None
        chunked = False
        keep_alive = version != "HTTP/1.0"
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                continue
            key = name.strip().lower()
            value = value.strip()
            headers.append((key, value))
            if key == "content-length":
                length = int(value)
            elif key == "transfer-encoding":
                chunked = "chunked" in value.lower()
            elif key == "connection":
                token = value.lower()
                if "close" in token:
                    keep_alive = False
                elif "keep-alive" in token:
                    keep_alive = True
        self._headers = headers
        self._keep_alive = keep_alive
        if self._no_body or self._status in _NO_BODY_STATUS:
            self._mode, self._length = 1, 0
        elif chunked:
            self._mode = 2
        elif length is not None:
            if length < 0:
                raise ConnectionLost(f"negative Content-Length {length}")
            self._mode, self._length = 1, length
        else:
            self._mode = 3
            self._keep_alive = False

    def _parse_chunks(self) -> None:
        buf = self._buf
        pos = self._pos or self._body_start
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
            size = int(size_text, 16)
            if size == 0:
                # trailers: none ("\r\n") or header lines ending with an empty line
                if buf[eol + 2 : eol + 4] == b"\r\n":
                    stop = eol + 4
                else:
                    trailer_end = buf.find(b"\r\n\r\n", eol + 2)
                    if trailer_end < 0:
                        break
                    stop = trailer_end + 4
                if len(buf) < stop:
                    break
                self._finish(b"".join(self._parts), keep=len(buf) == stop)
                return
            data_end = eol + 2 + size
            if len(buf) < data_end + 2:
                break
            self._parts.append(bytes(buf[eol + 2 : data_end]))
            pos = data_end + 2
        self._pos = pos


class Pool:
    """Keep-alive HTTP/1.1 connections to one server (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        limit: int = 1024,
        keepalive: float = KEEPALIVE_SECONDS,
    ) -> None:
        self.host = host
        self.port = port
        self.server = f"{host}:{port}"
        self._ssl = ssl_context
        self._server_hostname = server_hostname if ssl_context is not None else None
        self._keepalive = keepalive
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._limit = limit
        self._in_use = 0
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self.connections_made = 0

    async def request(
        self,
        head: bytes,
        body: bytes | None,
        *,
        time_limit: float | None,
        before_write: Callable[[], None] | None = None,
        no_body: bool = False,
    ) -> Response:
        """Send one request (*head*: the request line and headers, blank line included)
        and return its answer; see the module docstring for the errors raised.

        *time_limit* bounds the whole exchange, connecting included. The answer's wait
        is bounded by one timer on its future rather than ``asyncio.timeout`` (a
        visible share of a request's cost, and the common case never fires).
        """
        loop = asyncio.get_running_loop()
        deadline = None if time_limit is None else loop.time() + time_limit
        if self._in_use >= self._limit:
            await self._wait_for_slot()
        self._in_use += 1
        try:
            conn = self._idle_connection()
            if conn is None:
                if time_limit is None:
                    conn = await self._connect()
                else:
                    conn = await asyncio.wait_for(self._connect(), time_limit)
            payload = head + body if body else head
            waiter: asyncio.Future[Response] = loop.create_future()
            transport = conn.transport
            assert transport is not None
            if before_write is not None:
                try:
                    before_write()
                except BaseException:
                    self._release(conn)
                    raise
            # No await between the check above and this write.
            conn.expect(waiter, no_body)
            transport.write(payload)
            timer = None if deadline is None else loop.call_at(deadline, _expire, waiter)
            try:
                response = await waiter
            except BaseException:
                conn.close()
                raise
            finally:
                if timer is not None:
                    timer.cancel()
            if conn.reusable:
                self._release(conn)
            else:
                conn.close()
            return response
        finally:
            self._in_use -= 1
            if self._slot_waiters:
                self._wake_one()

    async def _wait_for_slot(self) -> None:
        while self._in_use >= self._limit:
            slot: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._slot_waiters.append(slot)
            try:
                await slot
            except BaseException:
                if slot.done() and not slot.cancelled():
                    self._wake_one()  # woken and cancelled at once: pass the slot on
                raise

    def _wake_one(self) -> None:
        while self._slot_waiters:
            slot = self._slot_waiters.popleft()
            if not slot.done():
                slot.set_result(None)
                return

    def _idle_connection(self) -> _Connection | None:
        idle = self._idle
        if not idle:
            return None
        oldest_usable = time.monotonic() - self._keepalive
        while idle:
            conn = idle.pop()
            if not conn.closed and conn.idle_since >= oldest_usable:
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await loop.create_connection(
                lambda: _Connection(self),
                self.host,
                self.port,
                ssl=self._ssl,
                server_hostname=self._server_hostname,
            )
        except OSError as err:  # ssl.SSLError and CertificateError are OSErrors too
            raise ConnectFailed(self.server, err) from err
        self.connections_made += 1
        self._open.add(protocol)
        return protocol

    def _release(self, conn: _Connection) -> None:
        if conn.closed:
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    def _discard(self, conn: _Connection) -> None:
        self._open.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    @property
    def idle(self) -> int:
        return len(self._idle)

    def close(self) -> None:
        """Close every connection (a request in flight fails with ConnectionLost)."""
        for conn in list(self._open):
            conn.close()
        self._idle.clear()
