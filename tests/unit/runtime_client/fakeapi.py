"""A tiny scripted API server (plain HTTP, aiohttp) for client unit tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from nimctl_runtime.client import Client, RestConfig

Handler = Callable[[web.Request], Any]


def status(code: int, reason: str, message: str, **details: Any) -> web.Response:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if details:
        body["details"] = details
    return web.json_response(body, status=code)


CORE_RESOURCES = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {"name": "configmaps", "kind": "ConfigMap", "namespaced": True, "verbs": ["get"]},
        {"name": "nodes", "kind": "Node", "namespaced": False, "verbs": ["get"]},
        {"name": "pods/status", "kind": "Pod", "namespaced": True, "verbs": ["get"]},
    ],
}


class FakeAPI:
    def __init__(self) -> None:
        self.requests: list[web.Request] = []
        self.bodies: list[bytes] = []
        self.routes: dict[tuple[str, str], Handler] = {}
        self.group_resources: dict[str, list[dict[str, Any]]] = {}
        self.discovery_calls = 0

    def route(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request)
        self.bodies.append(await request.read())
        if request.method == "GET" and request.path == "/api/v1":
            self.discovery_calls += 1
            return web.json_response(CORE_RESOURCES)
        if (
            request.method == "GET"
            and request.path.startswith("/apis/")
            and (request.path.count("/") == 3)
        ):
            self.discovery_calls += 1
            gv = request.path[len("/apis/") :]
            if gv not in self.group_resources:
                return status(404, "NotFound", "the server could not find the requested resource")
            return web.json_response(
                {
                    "kind": "APIResourceList",
                    "groupVersion": gv,
                    "resources": self.group_resources[gv],
                }
            )
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            return status(404, "NotFound", f"no route {request.method} {request.path}")
        result = handler(request)
        if asyncio.iscoroutine(result):
            result = await result
        if isinstance(result, web.StreamResponse):
            return result
        return web.json_response(result)


@asynccontextmanager
async def serve(api: FakeAPI, **config: Any) -> AsyncIterator[Client]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.dispatch)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rest = RestConfig(host=f"http://127.0.0.1:{port}", token="secret", **config)
    try:
        async with Client(rest) as client:
            yield client
    finally:
        await runner.cleanup()


async def stream_lines(
    request: web.Request, lines: list[Any], release: asyncio.Event | None = None
) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    await resp.prepare(request)
    for line in lines:
        await resp.write((json.dumps(line) + "\n").encode())
    if release is not None:
        await release.wait()
    await resp.write_eof()
    return resp
