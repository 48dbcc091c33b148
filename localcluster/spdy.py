"""SPDY/3.1 framing, the server half, as much of it as ``kubectl port-forward`` uses.

Kubernetes streams (port-forward, and exec on the fallback path) run over
SPDY/3.1: either straight on the connection after an ``Upgrade: SPDY/3.1``, or
(kubectl 1.31 and later) tunnelled inside WebSocket binary messages under the
``SPDY/3.1+portforward.k8s.io`` subprotocol. Either way the bytes are the same
frames, so :class:`Session` is fed bytes (``feed``) and writes bytes through a
``send`` coroutine, knowing nothing of the transport underneath.

Implemented: SYN_STREAM in (answered by SYN_REPLY), DATA both ways with FIN,
RST_STREAM, PING (echoed), GOAWAY, and the zlib header blocks with the SPDY/3
dictionary. SETTINGS, HEADERS and WINDOW_UPDATE are read and ignored: the Go
client (moby/spdystream) does not depend on flow control from its peer.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

# The SPDY/3 header compression dictionary: length-prefixed words, then a raw tail.
_WORDS = (  # noqa: SIM905 (one word list, read as the spec prints it)
    "options head post put delete trace accept accept-charset accept-encoding accept-language "
    "accept-ranges age allow authorization cache-control connection content-base "
    "content-encoding content-language content-length content-location content-md5 "
    "content-range content-type date etag expect expires from host if-match "
    "if-modified-since if-none-match if-range if-unmodified-since last-modified location "
    "max-forwards pragma proxy-authenticate proxy-authorization range referer retry-after "
    "server te trailer transfer-encoding upgrade user-agent vary via warning "
    "www-authenticate method get status"
).split()
_WORDS += ["200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin"]
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 "
    "Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 "
    "Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, "
    "Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = (
    1,
    2,
    3,
    4,
    6,
    7,
    8,
    9,
)
FLAG_FIN = 0x01
RST_CANCEL = 5
MAX_FRAME = 16 * 1024 * 1024
MAX_DATA_CHUNK = 32 * 1024


class ProtocolError(Exception):
    """The peer sent bytes that are not SPDY/3.1."""


@dataclass
class Stream:
    """One SPDY stream opened by the client: its headers and what arrived on it."""

    session: Session
    stream_id: int
    headers: dict[str, str]
    inbox: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)
    remote_closed: bool = False
    local_closed: bool = False

    async def read(self) -> bytes:
        """The next chunk the client sent; b"" once it half-closed (FIN) or reset the stream."""
        if self.remote_closed and self.inbox.empty():
            return b""
        return await self.inbox.get()

    async def write(self, data: bytes) -> None:
        for start in range(0, len(data), MAX_DATA_CHUNK):
            await self.session.send_data(self.stream_id, data[start : start + MAX_DATA_CHUNK])

    async def close(self) -> None:
        """Half-close our side (an empty DATA frame with FIN)."""
        if not self.local_closed:
            self.local_closed = True
            await self.session.send_data(self.stream_id, b"", fin=True)

    def _remote_end(self) -> None:
        if not self.remote_closed:
            self.remote_closed = True
            self.inbox.put_nowait(b"")


StreamHandler = Callable[[Stream], Awaitable[None]]


class Session:
    """The server side of one SPDY connection."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]], on_stream: StreamHandler) -> None:
        self._send = send
        self._on_stream = on_stream
        self._buffer = bytearray()
        self._deflate = zlib.compressobj(zdict=DICTIONARY)
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._write_lock = asyncio.Lock()
        self.streams: dict[int, Stream] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.last_stream_id = 0
        self.closed = False
        self.finished = asyncio.Event()

    # ------------------------------------------------------------------ bytes in

    async def feed(self, data: bytes) -> None:
        """Take bytes from the transport; act on every complete frame."""
        self._buffer.extend(data)
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if length > MAX_FRAME:
                raise ProtocolError(f"SPDY frame of {length} bytes exceeds {MAX_FRAME}")
            if len(self._buffer) < 8 + length:
                return
            head = bytes(self._buffer[:8])
            payload = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            await self._frame(head, payload)

    async def _frame(self, head: bytes, payload: bytes) -> None:
        first, flags = struct.unpack(">I", head[:4])[0], head[4]
        if not first & 0x80000000:
            stream = self.streams.get(first & 0x7FFFFFFF)
            if stream is not None and not stream.remote_closed:
                if payload:
                    stream.inbox.put_nowait(payload)
                if flags & FLAG_FIN:
                    stream._remote_end()
            return
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise ProtocolError(f"SPDY version {version} is not supported (only 3)")
        if kind == SYN_STREAM:
            if len(payload) < 10:
                raise ProtocolError("truncated SYN_STREAM")
            stream_id = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            headers = self._headers(payload[10:])
            await self._open(stream_id, headers, bool(flags & FLAG_FIN))
        elif kind == RST_STREAM:
            stream_id = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            stream = self.streams.pop(stream_id, None)
            if stream is not None:
                stream.local_closed = True
                stream._remote_end()
        elif kind == PING:
            await self._control(PING, 0, payload[:4])
        elif kind == GOAWAY:
            self.close()
        elif kind == HEADERS and len(payload) >= 4:
            self._headers(payload[4:])  # keeps the shared zlib stream in step
        # SETTINGS, WINDOW_UPDATE and anything newer: nothing to do.

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as exc:
            raise ProtocolError(f"SPDY header block does not inflate: {exc}") from exc
        headers: dict[str, str] = {}
        try:
            (count,) = struct.unpack_from(">I", raw, 0)
            at = 4
            for _ in range(count):
                (n,) = struct.unpack_from(">I", raw, at)
                name = raw[at + 4 : at + 4 + n].decode()
                at += 4 + n
                (n,) = struct.unpack_from(">I", raw, at)
                value = raw[at + 4 : at + 4 + n].decode()
                at += 4 + n
                headers[name.lower()] = value.split("\x00", 1)[0]
        except (struct.error, UnicodeDecodeError) as exc:
            raise ProtocolError(f"malformed SPDY header block: {exc}") from exc
        return headers

    async def _open(self, stream_id: int, headers: dict[str, str], fin: bool) -> None:
        stream = Stream(self, stream_id, headers)
        self.streams[stream_id] = stream
        self.last_stream_id = max(self.last_stream_id, stream_id)
        if fin:
            stream._remote_end()
        block = self._encode_headers({})
        await self._control(SYN_REPLY, 0, struct.pack(">I", stream_id) + block)
        task = asyncio.ensure_future(self._on_stream(stream))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ------------------------------------------------------------------ bytes out

    def _encode_headers(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, value in sorted(headers.items()):
            for part in (name.lower().encode(), value.encode()):
                raw += struct.pack(">I", len(part)) + part
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    async def _control(self, kind: int, flags: int, payload: bytes) -> None:
        head = struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload))
        await self._write(head + payload)

    async def send_data(self, stream_id: int, data: bytes, *, fin: bool = False) -> None:
        head = struct.pack(">II", stream_id, ((FLAG_FIN if fin else 0) << 24) | len(data))
        await self._write(head + data)

    async def reset(self, stream_id: int) -> None:
        await self._control(RST_STREAM, 0, struct.pack(">II", stream_id, RST_CANCEL))

    async def _write(self, data: bytes) -> None:
        if self.closed:
            return
        async with self._write_lock:
            await self._send(data)

    def close(self) -> None:
        """End the session (the transport is gone, or a handler is done with it): every
        stream ends, every handler is cancelled."""
        self.closed = True
        self.finished.set()
        for stream in list(self.streams.values()):
            stream.local_closed = True
            stream._remote_end()
        current = asyncio.current_task()
        for task in list(self.tasks):
            if task is not current:
                task.cancel()
