"""``pods/exec`` (and ``pods/attach``): ``kubectl exec`` into a simulated container.

kubectl 1.32 runs exec over a WebSocket with the ``v5.channel.k8s.io``
subprotocol (``v4.channel.k8s.io`` is accepted too): every binary message starts
with its channel (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize, 255 close) and
the error channel carries the final ``Status``: ``Success``, or ``Failure`` with
reason ``NonZeroExitCode`` and the exit code as an ``ExitCode`` cause, from
which kubectl takes its own exit code. When the WebSocket upgrade is refused
kubectl falls back to SPDY/3.1 with one stream per channel; localcluster
answers that too (``v4.channel.k8s.io`` and later over SPDY).

The command runs in :mod:`localcluster.containershell`; ``attach`` has no
process to attach to and is refused with a message saying so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from nimctl_runtime.meta import Obj

from . import containershell, errors, upgrade
from .hooks import RequestInfo
from .host import APIServerHost
from .spdy import Stream

WS_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
SPDY_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDOUT, STDERR, ERROR = 1, 2, 3
STREAM_WAIT = 30.0



def exit_status(result: containershell.Result, argv: list[str]) -> Obj:
    """The ``Status`` the error channel carries when the command ended."""
    if result.code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": (
            f"command terminated with non-zero exit code: error executing command {argv}, "
            f"exit code {result.code}"
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(result.code)}]},
    }


def _container(pod: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    meta = pod.get("metadata") or {}
    pod_name = str(meta.get("name") or "")
    containers = list((pod.get("spec") or {}).get("containers") or [])
    if not name:
        if len(containers) != 1:
            names = " ".join(str(c.get("name")) for c in containers)
            raise errors.bad_request(
                f"a container name must be specified for pod {pod_name}, choose one of: [{names}]"
            )
        name = str(containers[0].get("name") or "")
    spec = next((c for c in containers if c.get("name") == name), None)
    if spec is None:
        raise errors.bad_request(f"container {name} is not valid for pod {pod_name}")
    phase = str((pod.get("status") or {}).get("phase") or "Pending")
    if phase in ("Succeeded", "Failed"):
        raise errors.bad_request(
            f"cannot exec into a container in a completed pod; current phase is {phase}"
        )
    running = any(
        s.get("name") == name and "running" in (s.get("state") or {})
        for s in (pod.get("status") or {}).get("containerStatuses") or []
    )
    if not running:
        raise errors.bad_request(f'unable to upgrade connection: container not found ("{name}")')
    return dict(spec)


async def serve(
    cluster: APIServerHost, request: web.Request, info: RequestInfo
) -> web.StreamResponse:
    """Answer ``pods/{name}/exec`` (WebSocket channels or SPDY streams)."""
    pod = cluster.storage.get("v1", "Pod", info.name, info.namespace)
    if info.subresource == "attach":
        raise errors.bad_request(
            f"unable to upgrade connection: attach is not available in localcluster: pod "
            f"{info.namespace}/{info.name} runs no processes (kubectl logs and kubectl exec "
            "with ls, cat, env or nvidia-smi are)"
        )
    spec = _container(pod, request.query.get("container", ""))
    argv = request.query.getall("command", [])
    result = containershell.run(containershell.Container(cluster.storage, pod, spec), argv)
    if request.query.get("tty", "").lower() in ("1", "true"):
        # a terminal has one output stream: stderr goes to it too
        result = containershell.Result(result.stdout + result.stderr, "", result.code)
    status = json.dumps(exit_status(result, argv)).encode()
    if upgrade.wants_websocket(request):
        ws = web.WebSocketResponse(protocols=WS_PROTOCOLS)
        await ws.prepare(request)
        if result.stdout:
            await ws.send_bytes(bytes([STDOUT]) + result.stdout.encode())
        if result.stderr:
            await ws.send_bytes(bytes([STDERR]) + result.stderr.encode())
        await ws.send_bytes(bytes([ERROR]) + status)
        await ws.close()
        return ws
    return await _serve_spdy(request, result, status)


async def _serve_spdy(
    request: web.Request, result: containershell.Result, status: bytes
) -> web.StreamResponse:
    """The SPDY fallback: wait for the streams kubectl opens, write, end the session."""
    q = request.query
    expected = {"error"}
    if q.get("stdout", "").lower() in ("1", "true"):
        expected.add("stdout")
    if q.get("stderr", "").lower() in ("1", "true") and q.get("tty", "").lower() not in (
        "1",
        "true",
    ):
        expected.add("stderr")
    if q.get("stdin", "").lower() in ("1", "true"):
        expected.add("stdin")
    if q.get("tty", "").lower() in ("1", "true"):
        expected.add("resize")
    streams: dict[str, Stream] = {}
    all_there = asyncio.Event()

    async def on_stream(stream: Stream) -> None:
        streams[stream.headers.get("streamtype", "")] = stream
        if expected <= set(streams) and not all_there.is_set():
            all_there.set()
            try:
                if "stdout" in streams and result.stdout:
                    await streams["stdout"].write(result.stdout.encode())
                if "stderr" in streams and result.stderr:
                    await streams["stderr"].write(result.stderr.encode())
                await streams["error"].write(status)
                for each in streams.values():
                    await each.close()
            finally:
                stream.session.close()

    return await upgrade.serve_spdy(request, SPDY_PROTOCOLS, on_stream)
