"""A LocalCluster with the debug API on, and a raw HTTPS helper that speaks to it as a user."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from localcluster.cluster import LocalCluster
from localcluster.extensions import Extensions, extensions_of


@dataclass
class Http:
    """Minimal API access: one session, one user's bearer token."""

    cluster: LocalCluster
    session: aiohttp.ClientSession
    user: str = "admin"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.cluster.token_for(self.user)}"}

    async def request(
        self, method: str, path: str, body: Any = None, **kwargs: Any
    ) -> tuple[int, dict[str, str], Any]:
        data = json.dumps(body) if body is not None else None
        headers = {**self._headers(), "Content-Type": "application/json"}
        async with self.session.request(
            method,
            self.cluster.url + path,
            data=data,
            headers=headers,
            ssl=self.cluster.client_ssl_context(),
            **kwargs,
        ) as resp:
            text = await resp.text()
            payload = json.loads(text) if text else None
            return resp.status, dict(resp.headers), payload

    async def watch(self, path: str, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        """Yield watch events until the server ends the stream."""
        async with self.session.get(
            self.cluster.url + path,
            headers=self._headers(),
            ssl=self.cluster.client_ssl_context(),
            **kwargs,
        ) as resp:
            assert resp.status == 200, await resp.text()
            async for line in resp.content:
                if line.strip():
                    yield json.loads(line)


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(debug_api=True) as c:
        yield c


@pytest.fixture
def ext(cluster: LocalCluster) -> Extensions:
    return extensions_of(cluster)


@pytest.fixture
async def http(cluster: LocalCluster) -> AsyncIterator[Http]:
    async with aiohttp.ClientSession() as session:
        yield Http(cluster, session)
