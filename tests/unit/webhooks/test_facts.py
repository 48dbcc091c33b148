"""Cluster facts for admission rules: read once, cached, clear errors when unavailable."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nimctl_runtime.client.errors import NotFound
from webhooks.facts import ClientClusterFacts, FactUnavailable, version_tuple


class FakeClient:
    def __init__(self, version: Any = None, configmap: dict[str, Any] | None = None) -> None:
        self.version = version
        self.configmap = configmap
        self.calls: list[str] = []

    async def request(self, method: str, path: str) -> Any:
        self.calls.append(f"{method} {path}")
        if isinstance(self.version, Exception):
            raise self.version
        return {"gitVersion": self.version}

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(f"get {kind} {namespace}/{name}")
        if self.configmap is None:
            raise NotFound(404, "NotFound", f'configmaps "{name}" not found')
        return self.configmap

    async def list(self, api_version: str, kind: str, namespace: str | None = None, *, label_selector: Any = None) -> dict[str, Any]:
        self.calls.append(f"list {kind} {label_selector}")
        return {"items": [{"metadata": {"namespace": "kserve"}}]}


async def test_version_is_read_once() -> None:
    client = FakeClient(version="v1.34.1")
    facts = ClientClusterFacts(client)
    assert await facts.server_version() == "v1.34.1"
    assert await facts.server_version() == "v1.34.1"
    assert client.calls == ["GET /version"]


async def test_unreachable_server_is_a_clear_error() -> None:
    facts = ClientClusterFacts(FakeClient(version=ConnectionError("refused")))
    with pytest.raises(FactUnavailable, match="cannot read the API server version: refused"):
        await facts.server_version()


async def test_kserve_mode_from_configmap_and_default() -> None:
    cm = {"data": {"deploy": json.dumps({"defaultDeploymentMode": "Serverless"})}}
    assert await ClientClusterFacts(FakeClient(configmap=cm)).kserve_default_deployment_mode() == "Serverless"
    assert await ClientClusterFacts(FakeClient()).kserve_default_deployment_mode() == "Standard"
    with pytest.raises(FactUnavailable, match="unreadable deploy key"):
        await ClientClusterFacts(FakeClient(configmap={"data": {"deploy": "{"}})).kserve_default_deployment_mode()


def test_version_tuple() -> None:
    assert version_tuple("v1.34.2+k3s1") == (1, 34, 2)
    assert version_tuple("v1.32") == (1, 32, 0)
    with pytest.raises(FactUnavailable):
        version_tuple("unknown")
