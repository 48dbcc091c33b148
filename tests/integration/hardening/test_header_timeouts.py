"""Issue 19 item 7: half-open connections are closed, on the API server and the webhook server.

A client that connects and never finishes its request headers used to hold the
connection (and its buffers) forever; 300 of them stayed open indefinitely. Each
server now closes a connection that has not sent a whole request in
``header_timeout`` seconds, and keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import aiohttp

from localcluster.cluster import LocalCluster
from nimctl_runtime.certs import client_ssl_context, generate_ca, generate_serving_cert
from nimctl_runtime.webhook import WebhookServer

PARTIAL = b"POST /apis HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"


async def _half_open(port: int, ctx: ssl.SSLContext, count: int) -> list[bytes]:
    """Open *count* TLS connections that stop mid-headers; what each finally reads."""

    async def one() -> bytes:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1"
        )
        writer.write(PARTIAL)
        await writer.drain()
        try:
            return await asyncio.wait_for(reader.read(), 30)
        finally:
            writer.close()

    return await asyncio.gather(*(one() for _ in range(count)))


async def test_webhook_server_closes_connections_that_never_finish_headers(
    tmp_path: Path,
) -> None:
    ca = generate_ca()
    generate_serving_cert(ca, ["127.0.0.1"]).write(tmp_path)
    server = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0, header_timeout=0.5)
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    await server.wait_started()
    try:
        # Each read ends (EOF) instead of waiting for the 30 s guard to time out.
        answers = await _half_open(server.port, client_ssl_context(ca.cert_pem), 50)
        assert len(answers) == 50
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"https://127.0.0.1:{server.port}/none",
                json={},
                ssl=client_ssl_context(ca.cert_pem),
            ) as r,
        ):
            assert r.status == 404
    finally:
        stop.set()
        await task


async def test_api_server_closes_connections_that_never_finish_headers() -> None:
    cluster = LocalCluster(simulator=False)
    cluster.header_timeout = 0.5
    async with cluster:
        answers = await _half_open(cluster.port, cluster.client_ssl_context(), 50)
        assert len(answers) == 50
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"{cluster.url}/version",
                ssl=cluster.client_ssl_context(),
                headers={"Authorization": f"Bearer {cluster.token_for('admin')}"},
            ) as r,
        ):
            assert r.status == 200
