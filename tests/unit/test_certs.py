"""Certificates from nimctl_runtime.certs are accepted by a real TLS handshake."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from nimctl_runtime.certs import (
    client_ssl_context,
    generate_ca,
    generate_serving_cert,
    server_ssl_context,
)


async def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, host: str) -> bytes:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname=host
        )
        data = await reader.read()
        writer.close()
        return data
    finally:
        server.close()
        await server.wait_closed()


async def test_serving_cert_verifies_against_its_ca_for_ip_and_dns() -> None:
    ca = generate_ca()
    pair = generate_serving_cert(ca, ["127.0.0.1", "webhook.nimctl.svc"])
    client = client_ssl_context(ca.cert_pem)
    assert await _handshake(server_ssl_context(pair), client, "127.0.0.1") == b"ok"
    assert await _handshake(server_ssl_context(pair), client, "webhook.nimctl.svc") == b"ok"


async def test_cert_from_another_ca_is_rejected() -> None:
    pair = generate_serving_cert(generate_ca(), ["127.0.0.1"])
    client = client_ssl_context(generate_ca().cert_pem)
    with pytest.raises(ssl.SSLCertVerificationError):
        await _handshake(server_ssl_context(pair), client, "127.0.0.1")


def test_serving_cert_needs_a_host() -> None:
    with pytest.raises(ValueError, match="at least one host"):
        generate_serving_cert(generate_ca(), [])
