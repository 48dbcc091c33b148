"""Issue 19 item 5: a kubeconfig whose CA does not match the server is loud, not a silent hang.

The failure is logged at warning level with the server and the reason, requests
are retried with backoff, and the manager's ``/readyz/apiServer`` names the reason
until the server answers again.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from structlog.testing import capture_logs

from localcluster.cluster import LocalCluster
from nimctl_runtime.certs import generate_ca
from nimctl_runtime.client import ApiConnectionError, Client, RestConfig
from nimctl_runtime.client.connectivity import ConnectionHealth
from nimctl_runtime.manager import Manager


def _wrong_ca_client(cluster: LocalCluster) -> Client:
    config = RestConfig(
        host=cluster.url,
        ca_pem=generate_ca("someone-else").cert_pem,
        token=cluster.token_for("admin"),
    )
    return Client(config, max_retries=2)


async def test_wrong_ca_is_logged_with_server_and_reason_and_retried(
    cluster: LocalCluster,
) -> None:
    async with _wrong_ca_client(cluster) as client:
        with capture_logs() as logs, pytest.raises(ApiConnectionError) as err:
            await client.request("GET", "/version")
    assert "unable to get local issuer certificate" in err.value.message
    warnings = [r for r in logs if r["event"].startswith("cannot reach the API server")]
    assert warnings, logs
    first = warnings[0]
    assert first["log_level"] == "warning"
    assert first["server"] == cluster.url
    assert "TLS certificate verification failed" in first["reason"]
    assert "certificate-authority" in first["reason"]
    # three attempts (retried), one line: the same reason is not repeated at once
    assert client.connection.failures == 3
    assert len(warnings) == 1


async def test_readyz_names_the_tls_failure(cluster: LocalCluster) -> None:
    async with _wrong_ca_client(cluster) as client:
        with pytest.raises(ApiConnectionError):
            await client.request("GET", "/version")
        manager = Manager(client, health_probe_bind_address="127.0.0.1:0")
        stop = asyncio.Event()
        task = asyncio.create_task(manager.start(stop))
        try:
            async with asyncio.timeout(10):
                while manager.health_server is None or not manager.health_server.started.is_set():
                    await asyncio.sleep(0.01)
            base = f"http://127.0.0.1:{manager.health_server.port}"
            async with aiohttp.ClientSession() as http:
                async with http.get(base + "/readyz") as r:
                    assert r.status == 500
                    assert "[-]apiServer failed: reason withheld" in await r.text()
                async with http.get(base + "/readyz/apiServer") as r:
                    assert r.status == 500
                    text = await r.text()
                    assert cluster.url in text and "TLS certificate verification failed" in text
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)


def test_recovery_clears_the_reason_and_is_logged() -> None:
    import ssl

    health = ConnectionHealth("https://api:6443", log_interval=3600)
    with capture_logs() as logs:
        health.failed(ssl.SSLError("handshake failure"))
        health.failed(ssl.SSLError("handshake failure"))
        with pytest.raises(RuntimeError, match="https://api:6443: TLS handshake failed"):
            health.check()
        health.succeeded()
        health.check()
    assert [r["event"] for r in logs] == [
        "cannot reach the API server; retrying with backoff",
        "the API server is reachable again",
    ]
    assert logs[1]["failures"] == 2
