"""Issue 19 item 4: /metrics is off by default and, when served, authenticated and authorized.

As NVIDIA's operator: ``--metrics-bind-address`` defaults to ``"0"``, the endpoint
sits behind controller-runtime's ``WithAuthenticationAndAuthorization`` filter
(TokenReview, then SubjectAccessReview for ``get /metrics``), and
``--metrics-secure`` serves it over HTTPS.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from localcluster.cluster import LocalCluster
from nimctl.cli import build_parser
from nimctl_runtime.authfilter import AuthenticationAndAuthorization
from nimctl_runtime.client import Client, load_config
from nimctl_runtime.manager import Manager, ManagerOptions
from nimctl_runtime.metrics import MetricsServer

PROMETHEUS = "system:serviceaccount:monitoring:prometheus"


class FakeApiServer:
    """Answers TokenReviews and SubjectAccessReviews like kube-apiserver would."""

    def __init__(self) -> None:
        self.users = {"prom-token": PROMETHEUS, "intruder-token": "system:anonymous-ish"}
        self.allowed = {(PROMETHEUS, "get", "/metrics")}
        self.calls: list[str] = []
        self.broken = False

    async def request(self, method: str, path: str, *, body: Any = None) -> Any:
        self.calls.append(body["kind"])
        if self.broken:
            raise ConnectionError("connection refused")
        if body["kind"] == "TokenReview":
            user = self.users.get(body["spec"]["token"])
            status: dict[str, Any] = {"authenticated": user is not None}
            if user:
                status["user"] = {"username": user, "groups": ["system:authenticated"]}
            return {**body, "status": status}
        spec = body["spec"]
        attrs = spec["nonResourceAttributes"]
        allowed = (spec["user"], attrs["verb"], attrs["path"]) in self.allowed
        return {**body, "status": {"allowed": allowed}}


@pytest.fixture
async def secured() -> AsyncIterator[tuple[MetricsServer, FakeApiServer]]:
    api = FakeApiServer()
    server = MetricsServer("127.0.0.1:0", secure=True, auth=AuthenticationAndAuthorization(api))
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    await asyncio.wait_for(server.started.wait(), 10)
    yield server, api
    stop.set()
    await task


async def _scrape(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers, ssl=False) as r:
        return r.status, await r.text()


async def test_metrics_answer_only_an_authorized_caller(
    secured: tuple[MetricsServer, FakeApiServer],
) -> None:
    server, api = secured
    url = f"https://127.0.0.1:{server.port}/metrics"
    assert await _scrape(url) == (401, "Unauthorized\n")
    assert await _scrape(url, "forged-token") == (401, "Unauthorized\n")
    assert await _scrape(url, "intruder-token") == (
        403,
        "Authorization denied for user system:anonymous-ish\n",
    )
    status, body = await _scrape(url, "prom-token")
    assert status == 200
    assert "controller_runtime_webhook_requests_total" in body or "process_" in body
    # Decisions are cached: the next scrape asks the API server nothing.
    calls = len(api.calls)
    assert (await _scrape(url, "prom-token"))[0] == 200
    assert len(api.calls) == calls


async def test_unreachable_api_server_means_401_not_open_metrics(
    secured: tuple[MetricsServer, FakeApiServer],
) -> None:
    server, api = secured
    api.broken = True
    url = f"https://127.0.0.1:{server.port}/metrics"
    assert await _scrape(url, "prom-token") == (401, "Authentication failed\n")


async def test_secure_metrics_refuse_plain_http(
    secured: tuple[MetricsServer, FakeApiServer],
) -> None:
    server, _ = secured
    with pytest.raises(aiohttp.ClientError):
        await _scrape(f"http://127.0.0.1:{server.port}/metrics", "prom-token")


def test_metrics_are_off_unless_asked_for() -> None:
    args = build_parser().parse_args(["run"])
    options = ManagerOptions.from_args(args)
    assert options.metrics_bind_address == "0"
    assert options.metrics_secure is False
    args = build_parser().parse_args(
        ["run", "--metrics-bind-address", ":8443", "--metrics-secure", "--metrics-cert-dir", "/c"]
    )
    options = ManagerOptions.from_args(args)
    assert (options.metrics_bind_address, options.metrics_secure) == (":8443", True)
    assert options.metrics_cert_dir == "/c"


async def test_manager_filters_metrics_on_every_interface_but_not_on_loopback(
    cluster: LocalCluster,
) -> None:
    async with Client(load_config(str(cluster.kubeconfig_path))) as client:
        for address, filtered in (("0.0.0.0:0", True), ("127.0.0.1:0", False)):
            manager = Manager(client, metrics_bind_address=address, health_probe_bind_address="0")
            stop = asyncio.Event()
            task = asyncio.create_task(manager.start(stop))
            try:
                async with asyncio.timeout(10):
                    while (
                        manager.metrics_server is None
                        or not manager.metrics_server.started.is_set()
                    ):
                        await asyncio.sleep(0.01)
                url = f"http://127.0.0.1:{manager.metrics_server.port}/metrics"
                status, _ = await _scrape(url)
                assert status == (401 if filtered else 200), address
            finally:
                stop.set()
                await task
