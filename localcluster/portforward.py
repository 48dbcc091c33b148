"""``pods/portforward``: ``kubectl port-forward`` to the HTTP server of a simulated NIM.

kubectl opens, per local connection, a pair of SPDY streams carrying the
headers ``streamType`` (``error`` or ``data``), ``port`` and ``requestID``
(protocol ``portforward.k8s.io``). Bytes on the data stream are what the local
client sent to the port; on a real node the kubelet copies them to
``localhost:<port>`` inside the pod. No process runs here, so localcluster
answers as the NIM's HTTP server would: it reads HTTP/1.1 requests off the data
stream and writes the same answers the service proxy gives (``proxy.nim_answer``:
``/v1/models``, ``/v1/health/ready``, ``/v1/health/live``, a simulated
``/v1/chat/completions`` and ``/v1/completions``; 404 otherwise).

A port nothing listens on (not the NIM's port, or a pod with no running NIM)
gets kubelet's kind of answer: a message on the error stream, which kubectl
prints as ``an error occurred forwarding <local> -> <port>: ...``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from email.utils import formatdate
from http import HTTPStatus
from typing import Any

from aiohttp import web

from nimctl_runtime.meta import Obj

from . import errors, proxy, upgrade
from .host import APIServerHost
from .simulator.kubelet import is_pod_ready, served_model_of
from .spdy import Stream

PROTOCOL = "portforward.k8s.io"
NIM_DEFAULT_PORT = 8000
MAX_REQUEST = 1 << 20



def nim_ports(pod: Mapping[str, Any]) -> dict[int, str]:
    """The ports the simulated NIM containers of *pod* listen on -> the model each serves.

    A NIM listens on ``NIM_SERVER_PORT`` (8000 unless set) and on the ports its
    container declares.
    """
    ports: dict[int, str] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        model = served_model_of(container)
        if not model:
            continue
        server_port = NIM_DEFAULT_PORT
        for env in container.get("env") or []:
            if env.get("name") == "NIM_SERVER_PORT" and str(env.get("value") or "").isdigit():
                server_port = int(env["value"])
        ports[server_port] = model
        for port in container.get("ports") or []:
            if str(port.get("protocol") or "TCP") == "TCP" and port.get("containerPort"):
                ports[int(port["containerPort"])] = model
    return ports


def _pod_running(pod: Mapping[str, Any]) -> bool:
    return str((pod.get("status") or {}).get("phase") or "") == "Running"


class _Pairs:
    """The streams of one port-forward session, paired by ``requestID``."""

    def __init__(self, cluster: APIServerHost, namespace: str, name: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.name = name
        self.error_streams: dict[str, Stream] = {}
        self.arrived: dict[str, asyncio.Event] = {}

    def _event(self, request_id: str) -> asyncio.Event:
        return self.arrived.setdefault(request_id, asyncio.Event())

    async def on_stream(self, stream: Stream) -> None:
        kind = stream.headers.get("streamtype", "")
        request_id = stream.headers.get("requestid", "")
        if kind == "error":
            self.error_streams[request_id] = stream
            self._event(request_id).set()
            return
        if kind != "data":
            await stream.session.reset(stream.stream_id)
            return
        # kubectl opens the error stream first; wait for it briefly.
        event = self._event(request_id)
        try:
            await asyncio.wait_for(event.wait(), timeout=30)
        except TimeoutError:
            await stream.session.reset(stream.stream_id)
            return
        error = self.error_streams.pop(request_id)
        self.arrived.pop(request_id, None)
        try:
            await self._forward(stream, error)
        finally:
            await stream.close()
            await error.close()

    async def _forward(self, data: Stream, error: Stream) -> None:
        port_text = data.headers.get("port", "")
        current = self._pod()
        uid = str(((current or {}).get("metadata") or {}).get("uid") or "")
        where = f"error forwarding port {port_text} to pod {self.namespace}/{self.name}, uid {uid}"
        if not port_text.isdigit():
            await error.write(f"{where}: invalid port {port_text!r}".encode())
            return
        port = int(port_text)
        ports = nim_ports(current) if current is not None and _pod_running(current) else {}
        if port not in ports:
            serving = ", ".join(str(p) for p in sorted(ports)) or "none"
            await error.write(
                f"{where}: connection refused: nothing listens on port {port} in this simulated "
                f"pod (localcluster runs no processes; simulated NIM ports: {serving})".encode()
            )
            return
        await serve_http(data, ports[port], self._ready)

    def _pod(self) -> Obj | None:
        try:
            return self.cluster.storage.get("v1", "Pod", self.name, self.namespace)
        except errors.StatusError:
            return None

    def _ready(self) -> bool:
        pod = self._pod()
        return pod is not None and is_pod_ready(pod)


def _response(status: int, body: Obj, keep_alive: bool) -> bytes:
    payload = json.dumps(body).encode()
    head = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        f"date: {formatdate(usegmt=True)}",
        "server: uvicorn",
        f"content-length: {len(payload)}",
        "content-type: application/json",
    ]
    if not keep_alive:
        head.append("connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


async def serve_http(stream: Stream, model: str, ready: Callable[[], bool]) -> None:
    """Answer HTTP/1.1 requests read off *stream* as the NIM serving *model* would."""
    buffer = b""
    while True:
        while b"\r\n\r\n" not in buffer:
            chunk = await stream.read()
            if not chunk:
                return
            buffer += chunk
            if len(buffer) > MAX_REQUEST:
                await stream.write(_response(431, {"detail": "request too large"}, False))
                return
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            await stream.write(_response(400, {"detail": "Invalid HTTP request"}, False))
            return
        method, target, version = parts
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (line.partition(":") for line in lines[1:])
            if k
        }
        length = int(headers.get("content-length", "0") or 0)
        while len(buffer) < length:
            chunk = await stream.read()
            if not chunk:
                return
            buffer += chunk
        payload, buffer = buffer[:length], buffer[length:]
        keep_alive = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
        path = target.split("?", 1)[0]
        if ready():
            status, body = proxy.nim_answer(model, method.upper(), path, payload)
        elif path == "/v1/health/live":
            status, body = 200, {"object": "health.response", "message": "Service is live."}
        else:
            status, body = 503, {"object": "health.response", "message": "Service is not ready."}
        await stream.write(_response(status, body, keep_alive))
        if not keep_alive:
            return


async def serve(
    cluster: APIServerHost, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    """Answer ``pods/{name}/portforward`` (WebSocket-tunnelled SPDY or plain SPDY)."""
    pod = cluster.storage.get("v1", "Pod", name, namespace)
    if not _pod_running(pod):
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        raise errors.bad_request(
            f"unable to upgrade connection: pod {name} is not running (phase {phase})"
        )
    pairs = _Pairs(cluster, namespace, name)
    return await upgrade.serve_spdy(request, (PROTOCOL,), pairs.on_stream)
