"""Gateway API routes on localcluster are refused where the published HTTPRoute CRD refuses
them (hostnames, path matches, backend references), in the CRD's words."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.addons import ecosystem_crds
from localcluster.cluster import LocalCluster
from tests.conftest import Kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(simulator=False) as c:
        yield c


@pytest.fixture
async def kc(cluster: LocalCluster, kubectl_binary: str, tmp_path: Path) -> Kubectl:
    home = tmp_path / "home"
    home.mkdir()
    kubectl = Kubectl(kubectl_binary, cluster.kubeconfig_path, home)
    crds = [c for c in ecosystem_crds() if c["spec"]["group"] == "gateway.networking.k8s.io"]
    # kubectl validates a List against /openapi/v2 (an empty document here, as it skips
    # kinds it has no definition for); without one it refuses the whole file.
    await kubectl.run(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds})
    )
    await kubectl.run("wait", "--for=condition=established", "crd", "--all", "--timeout=30s")
    return kubectl


def _route(**spec: Any) -> str:
    body: dict[str, Any] = {
        "parentRefs": [{"name": "nim-gateway", "namespace": "nim-system"}],
        "hostnames": ["llm.nim.example.com"],
        "rules": [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
                "backendRefs": [{"name": "llm", "port": 8000}],
            }
        ],
    }
    body.update(spec)
    return json.dumps(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "llm"},
            "spec": body,
        }
    )


async def test_a_valid_route_is_stored_with_the_crd_defaults(kc: Kubectl) -> None:
    await kc.run("apply", "-f", "-", input=_route())
    route = json.loads((await kc.run("get", "httproute", "llm", "-o", "json")).stdout)
    backend = route["spec"]["rules"][0]["backendRefs"][0]
    assert (backend["group"], backend["kind"], backend["weight"]) == ("", "Service", 1)


async def test_routes_the_crd_refuses(kc: Kubectl) -> None:
    cases = [
        (
            _route(hostnames=["LLM.example.com"]),
            'spec.hostnames[0]: Invalid value: "LLM.example.com": spec.hostnames[0] in body '
            "should match '^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
        ),
        (
            _route(rules=[{"matches": [{"path": {"type": "PathPrefix", "value": "v1"}}]}]),
            'spec.rules[0].matches[0].path: Invalid value: "object": value must be an absolute '
            "path and start with '/' when type one of ['Exact', 'PathPrefix']",
        ),
        (
            _route(rules=[{"matches": [{"path": {"type": "Prefix", "value": "/v1"}}]}]),
            'spec.rules[0].matches[0].path.type: Unsupported value: "Prefix": supported values: '
            '"Exact", "PathPrefix", "RegularExpression"',
        ),
        (
            _route(rules=[{"backendRefs": [{"name": "llm"}]}]),
            'spec.rules[0].backendRefs[0]: Invalid value: "object": Must have port for Service '
            "reference",
        ),
    ]
    for manifest, message in cases:
        out = await kc.run("apply", "-f", "-", input=manifest, check=False)
        assert out.returncode == 1
        assert message in out.stderr, out.stderr
