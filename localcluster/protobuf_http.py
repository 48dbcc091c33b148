"""Protobuf responses for clients that ask for them first, as kube-apiserver answers them.

kubectl's typed clients and Go programs configured for protobuf send
``Accept: application/vnd.kubernetes.protobuf,application/json``. Handlers
answer in JSON; this aiohttp middleware re-encodes a JSON answer whose kind has
a protobuf layout (built-in objects, their lists, ``Status`` errors) when
protobuf is the client's first choice. Everything else (custom resources,
Tables, watch streams, discovery) stays JSON, as on a real server, which every
such client accepts as its second choice.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from aiohttp import web

from . import protobuf

PROTOBUF = "application/vnd.kubernetes.protobuf"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def prefers_protobuf(accept: str) -> bool:
    """Protobuf is the first media type in *accept*, for plain objects (no ``as=``)."""
    first = accept.split(",", 1)[0].strip().lower()
    media, _, params = first.partition(";")
    return media.strip() == PROTOBUF and "as=" not in params


@web.middleware
async def protobuf_responses(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    if (
        not isinstance(response, web.Response)
        or response.content_type != "application/json"
        or not prefers_protobuf(request.headers.get("Accept", ""))
        or not isinstance(response.body, bytes)
    ):
        return response
    try:
        obj = json.loads(response.body)
        body = protobuf.encode(obj) if isinstance(obj, dict) else None
    except (ValueError, TypeError, KeyError, protobuf.ProtobufError):
        return response  # no layout (or not an object): JSON is the client's second choice
    if body is None:
        return response
    converted = web.Response(body=body, status=response.status, content_type=PROTOBUF)
    for name in ("Warning", "Retry-After", "Audit-Id"):
        for value in response.headers.getall(name, []):
            converted.headers.add(name, value)
    return converted
