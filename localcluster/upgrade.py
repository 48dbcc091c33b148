"""Connection upgrades for the streaming subresources (``pods/portforward``, ``pods/exec``).

kubectl 1.32 first asks for a WebSocket (``Upgrade: websocket``) and, when the
server refuses that upgrade, falls back to ``Upgrade: SPDY/3.1`` on a POST.
``kubectl port-forward`` speaks SPDY in both cases: inside WebSocket binary
messages under the ``SPDY/3.1+portforward.k8s.io`` subprotocol, or straight on
the connection. :func:`serve_spdy` accepts either and runs one
:class:`~localcluster.spdy.Session` over it until the client goes away or the
handler ends the session.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from aiohttp import WSMsgType, web

from . import errors
from .spdy import ProtocolError, Session, StreamHandler

WEBSOCKET_SPDY_PREFIX = "SPDY/3.1+"


def wants_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").strip().lower() == "websocket"


def wants_spdy(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").strip().lower().startswith("spdy/3.1")


def negotiate(request: web.Request, supported: Sequence[str]) -> str:
    """The first of the client's ``X-Stream-Protocol-Version`` values the server speaks."""
    offered = [
        p.strip()
        for value in request.headers.getall("X-Stream-Protocol-Version", [])
        for p in value.split(",")
        if p.strip()
    ]
    for proto in offered:
        if proto in supported:
            return proto
    raise errors.StatusError(
        403,
        "Forbidden",
        f"unable to upgrade: unable to negotiate protocol: client supports {offered}, "
        f"server supports {list(supported)}",
    )


class _RawReader:
    """Stands in for aiohttp's payload parser once the connection speaks SPDY."""

    def __init__(self, queue: asyncio.Queue[bytes | None]) -> None:
        self.queue = queue

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.queue.put_nowait(bytes(data))
        return False, b""

    def feed_eof(self) -> None:
        self.queue.put_nowait(None)


async def _pump(session: Session, receive: asyncio.Queue[bytes | None]) -> None:
    while not session.closed:
        data = await receive.get()
        if data is None:
            return
        await session.feed(data)


async def _run(session: Session, receive: asyncio.Queue[bytes | None]) -> None:
    pump = asyncio.ensure_future(_pump(session, receive))
    done = asyncio.ensure_future(session.finished.wait())
    try:
        await asyncio.wait({pump, done}, return_when=asyncio.FIRST_COMPLETED)
        if pump.done() and not pump.cancelled():
            with contextlib.suppress(ProtocolError, ConnectionError):
                pump.result()
    finally:
        for task in (pump, done):
            task.cancel()
        session.close()


async def serve_spdy(
    request: web.Request, protocols: Sequence[str], on_stream: StreamHandler
) -> web.StreamResponse:
    """Upgrade *request* (WebSocket-tunnelled or plain SPDY/3.1) and serve its streams."""
    receive: asyncio.Queue[bytes | None] = asyncio.Queue()
    if wants_websocket(request):
        ws = web.WebSocketResponse(protocols=[WEBSOCKET_SPDY_PREFIX + p for p in protocols])
        await ws.prepare(request)
        if ws.ws_protocol is None:
            await ws.close(message=b"no supported subprotocol")
            return ws
        session = Session(ws.send_bytes, on_stream)

        async def read_ws() -> None:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    receive.put_nowait(msg.data)
            receive.put_nowait(None)

        reader = asyncio.ensure_future(read_ws())
        try:
            await _run(session, receive)
        finally:
            reader.cancel()
            await ws.close()
        return ws
    if not wants_spdy(request):
        raise errors.bad_request(
            "Upgrade request required: this subresource streams over WebSocket or SPDY/3.1"
        )
    chosen = negotiate(request, protocols)
    response = web.StreamResponse(
        status=101,
        headers={
            "Connection": "Upgrade",
            "Upgrade": "SPDY/3.1",
            "X-Stream-Protocol-Version": chosen,
        },
    )
    await response.prepare(request)
    transport = request.transport
    if transport is None:
        return response
    request.protocol.set_parser(_RawReader(receive))  # type: ignore[arg-type]

    async def send(data: bytes) -> None:
        if transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        transport.write(data)

    session = Session(send, on_stream)
    try:
        await _run(session, receive)
    finally:
        transport.close()
    return response
