"""Admission webhook throughput and latency over TLS on loopback.

Sends AdmissionReviews for a realistic NIMService through one keep-alive
aiohttp client at a fixed concurrency, first to nimctl's WebhookServer running
the real NIMService validator, then to a bare aiohttp TLS handler that returns a
fixed "allowed" answer. Prints requests/s, p50/p99 latency and the ratio.
Aim (issue 7): >= 0.7 of the bare handler's throughput, p99 < 10 ms.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from nimctl_runtime.certs import (
    client_ssl_context,
    generate_ca,
    generate_serving_cert,
    server_ssl_context,
)
from nimctl_runtime.logsetup import configure_logging
from nimctl_runtime.webhook import WebhookServer
from webhooks.facts import StaticClusterFacts
from webhooks.setup import register

REQUESTS = 4000
CONCURRENCY = 8
PATH = "/validate-apps-nvidia-com-v1alpha1-nimservice"


def review(i: int) -> bytes:
    obj: dict[str, Any] = {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": f"llm-{i}", "namespace": "nim"},
        "spec": {
            "image": {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.3.3"},
            "authSecret": "ngc-api-secret",
            "storage": {"nimCache": {"name": "cache"}},
            "expose": {"service": {"type": "ClusterIP", "port": 8000}},
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "replicas": 1,
        },
    }
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": f"uid-{i}", "operation": "CREATE", "object": obj, "oldObject": None},
        }
    ).encode()


async def drive(url: str, ssl_ctx: Any) -> tuple[float, list[float]]:
    bodies = [review(i) for i in range(REQUESTS)]
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=CONCURRENCY, ssl=ssl_ctx)
    async with aiohttp.ClientSession(connector=connector) as session:
        headers = {"Content-Type": "application/json"}
        # warm-up: open the keep-alive connections
        await asyncio.gather(*(session.post(url, data=bodies[0], headers=headers) for _ in range(CONCURRENCY)))
        queue = iter(bodies)

        async def worker() -> None:
            for body in queue:
                t0 = time.perf_counter()
                async with session.post(url, data=body, headers=headers) as r:
                    answer = await r.json()
                    assert answer["response"]["allowed"], answer
                latencies.append(time.perf_counter() - t0)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        elapsed = time.perf_counter() - start
    return REQUESTS / elapsed, latencies


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000


async def bare(ca: Any, pair: Any) -> tuple[float, list[float]]:
    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        uid = body["request"]["uid"]
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, "allowed": True}}
        )

    app = web.Application()
    app.router.add_post(PATH, handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ssl_context(pair))
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        return await drive(f"https://127.0.0.1:{port}{PATH}", client_ssl_context(ca.cert_pem))
    finally:
        await runner.cleanup()


async def ours(ca: Any, pair: Any, cert_dir: Path) -> tuple[float, list[float]]:
    pair.write(cert_dir)
    server = WebhookServer(cert_dir=cert_dir, host="127.0.0.1", port=0)
    register(server, StaticClusterFacts())
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    await server.wait_started()
    try:
        return await drive(f"https://127.0.0.1:{server.port}{PATH}", client_ssl_context(ca.cert_pem))
    finally:
        stop.set()
        await task


async def main() -> None:
    configure_logging("console", "warning")
    ca = generate_ca()
    pair = generate_serving_cert(ca, ["127.0.0.1"])
    with tempfile.TemporaryDirectory() as tmp:
        bare_rps, bare_lat = await bare(ca, pair)
        our_rps, our_lat = await ours(ca, pair, Path(tmp))
    print(f"requests={REQUESTS} concurrency={CONCURRENCY} (keep-alive TLS on loopback)")
    print(f"bare aiohttp handler : {bare_rps:8.0f} req/s  p50 {pct(bare_lat, 50):.2f} ms  p99 {pct(bare_lat, 99):.2f} ms")
    print(f"nimctl NIMService    : {our_rps:8.0f} req/s  p50 {pct(our_lat, 50):.2f} ms  p99 {pct(our_lat, 99):.2f} ms")
    print(f"ratio (ours / bare)  : {our_rps / bare_rps:.2f}   (aim >= 0.70; p99 aim < 10 ms)")


if __name__ == "__main__":
    asyncio.run(main())
