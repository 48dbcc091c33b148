"""What a NIM user does right after deploying, with kubectl v1.32 against localcluster:
``kubectl port-forward svc/<nim> :8000`` and an HTTP GET of ``/v1/models``, ``kubectl exec``
(``nvidia-smi``, files, env, and a clear refusal of anything else) and ``kubectl logs -f``.

Both transports kubectl 1.32 speaks are driven: WebSocket (its default) and the SPDY/3.1
fallback (``KUBECTL_PORT_FORWARD_WEBSOCKETS=false`` / ``KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false``);
a request hook records which one each request asked for, so a test cannot pass on the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from localcluster.cluster import LocalCluster
from localcluster.extensions import extensions_of
from localcluster.hooks import Handler, RequestInfo
from tests.conftest import Kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

NS = "nim"
MODEL = "meta/llama-3.1-8b-instruct"
GPUS = 2


def _objects() -> list[dict[str, Any]]:
    auth = json.dumps({"auths": {"nvcr.io": {"username": "$oauthtoken", "password": "nvapi-x"}}})
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ngc-secret", "namespace": NS},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": auth},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "llm-config", "namespace": NS},
            "data": {"model.yaml": "max_tokens: 512\n"},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "llm", "namespace": NS},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "llm"}},
                "template": {
                    "metadata": {"labels": {"app": "llm"}},
                    "spec": {
                        "imagePullSecrets": [{"name": "ngc-secret"}],
                        "containers": [
                            {
                                "name": "llm",
                                "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
                                "ports": [{"name": "api", "containerPort": 8000}],
                                "env": [
                                    {"name": "NIM_CACHE_PATH", "value": "/model-store"},
                                    {
                                        "name": "POD_NAMESPACE",
                                        "valueFrom": {
                                            "fieldRef": {"fieldPath": "metadata.namespace"}
                                        },
                                    },
                                ],
                                "resources": {"limits": {"nvidia.com/gpu": str(GPUS)}},
                                "volumeMounts": [{"name": "config", "mountPath": "/etc/nim"}],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "llm-config"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "llm", "namespace": NS},
            "spec": {
                "selector": {"app": "llm"},
                "ports": [{"name": "api", "port": 8000, "targetPort": "api"}],
            },
        },
    ]


class Upgrades:
    """Records the Upgrade header of every streaming request (portforward, exec, log)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    async def hook(self, request: web.Request, info: RequestInfo, handler: Handler) -> Any:
        if info.subresource in ("portforward", "exec", "log"):
            upgrade = request.headers.get("Upgrade", "").lower()
            self.seen.append((info.subresource, upgrade, request.query_string))
        return await handler(request)

    def transports(self, subresource: str) -> set[str]:
        return {u for s, u, _ in self.seen if s == subresource}


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster() as c:
        yield c


@pytest.fixture
def upgrades(cluster: LocalCluster) -> Upgrades:
    seen = Upgrades()
    cluster.request_hooks.append(seen.hook)
    return seen


@pytest.fixture
async def kc(cluster: LocalCluster, kubectl_binary: str, tmp_path: Path) -> Kubectl:
    home = tmp_path / "home"
    home.mkdir()
    kubectl = Kubectl(kubectl_binary, cluster.kubeconfig_path, home)
    items = {"apiVersion": "v1", "kind": "List", "items": _objects()}
    await kubectl.run("apply", "-f", "-", input=json.dumps(items))
    await kubectl.run("rollout", "status", "-n", NS, "deployment/llm", "--timeout=60s")
    return kubectl


@pytest.fixture(params=["websocket", "spdy"])
def transport(request: pytest.FixtureRequest, kc: Kubectl) -> str:
    if request.param == "spdy":
        kc.env["KUBECTL_PORT_FORWARD_WEBSOCKETS"] = "false"
        kc.env["KUBECTL_REMOTE_COMMAND_WEBSOCKETS"] = "false"
    return str(request.param)


def _expected_upgrade(transport: str) -> str:
    return "websocket" if transport == "websocket" else "spdy/3.1"


async def _pod(kc: Kubectl) -> str:
    out = await kc.run("get", "pods", "-n", NS, "-l", "app=llm", "-o", "json")
    return str(json.loads(out.stdout)["items"][0]["metadata"]["name"])


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _get(url: str) -> tuple[int, dict[str, Any]]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, json.loads(resp.read())


async def test_port_forward_a_service_reaches_the_nims_http_server(
    kc: Kubectl, transport: str, upgrades: Upgrades
) -> None:
    proc = await asyncio.create_subprocess_exec(
        kc.binary,
        "port-forward",
        "-n",
        NS,
        "svc/llm",
        ":8000",
        env=kc.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8000", line)
        assert match, line
        port = int(match.group(1))
        for _ in range(2):  # two connections through one port-forward session
            status, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/v1/models")
            assert status == 200
            assert [m["id"] for m in body["data"]] == [MODEL]
        status, health = await asyncio.to_thread(
            _get, f"http://127.0.0.1:{port}/v1/health/ready"
        )
        assert (status, health["message"]) == (200, "Service is ready.")
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "Hello there"}]}
        status, answer = await asyncio.to_thread(
            _post, f"http://127.0.0.1:{port}/v1/chat/completions", chat
        )
        assert (status, answer["object"], answer["model"]) == (200, "chat.completion", MODEL)
        assert answer["choices"][0]["message"]["role"] == "assistant"
        assert answer["usage"]["prompt_tokens"] == 2
        status, missing = await asyncio.to_thread(
            _post, f"http://127.0.0.1:{port}/v1/chat/completions", {**chat, "model": "other"}
        )
        assert (status, missing["message"]) == (404, "The model `other` does not exist.")
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        _, err = await proc.communicate()
    assert "an error occurred forwarding" not in err.decode(), err.decode()
    assert upgrades.transports("portforward") == {_expected_upgrade(transport)}


async def test_port_forward_to_a_port_nothing_listens_on_says_so(kc: Kubectl) -> None:
    pod = await _pod(kc)
    proc = await asyncio.create_subprocess_exec(
        kc.binary,
        "port-forward",
        "-n",
        NS,
        f"pod/{pod}",
        ":9999",
        env=kc.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        port = int(re.findall(r"127\.0\.0\.1:(\d+)", line)[0])
        with pytest.raises(OSError):
            await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/v1/models")
        assert proc.stderr is not None
        said = b""
        while b"nothing listens on port 9999" not in said:  # kubectl logs it as it happens
            line = await asyncio.wait_for(proc.stderr.readline(), 30)
            assert line, said.decode()
            said += line
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        await proc.communicate()
    assert "an error occurred forwarding" in said.decode(), said.decode()


async def test_exec_nvidia_smi_prints_the_gpus_of_the_container(
    kc: Kubectl, transport: str, upgrades: Upgrades
) -> None:
    pod = await _pod(kc)
    listed = await kc.run("exec", "-n", NS, pod, "--", "nvidia-smi", "-L")
    lines = listed.stdout.splitlines()
    assert len(lines) == GPUS, listed.stdout
    assert all(re.match(r"GPU \d: NVIDIA H100 80GB HBM3 \(UUID: GPU-[0-9a-f-]{36}\)", x) for x in lines)
    table = await kc.run("exec", "-n", NS, pod, "--", "nvidia-smi")
    assert "Driver Version:" in table.stdout
    assert table.stdout.count("NVIDIA H100 80GB HBM3") == GPUS
    assert "No running processes found" in table.stdout
    assert upgrades.transports("exec") == {_expected_upgrade(transport)}


async def test_exec_reads_the_containers_files_and_environment(kc: Kubectl) -> None:
    pod = await _pod(kc)
    ls = await kc.run("exec", "-n", NS, pod, "--", "ls", "/etc/nim")
    assert ls.stdout == "model.yaml\n"
    cat = await kc.run("exec", "-n", NS, pod, "--", "cat", "/etc/nim/model.yaml")
    assert cat.stdout == "max_tokens: 512\n"
    env = dict(
        line.split("=", 1)
        for line in (await kc.run("exec", "-n", NS, pod, "--", "env")).stdout.splitlines()
    )
    assert env["NIM_CACHE_PATH"] == "/model-store"
    assert env["POD_NAMESPACE"] == NS
    assert env["HOSTNAME"] == pod
    assert len(env["NVIDIA_VISIBLE_DEVICES"].split(",")) == GPUS
    missing = await kc.run("exec", "-n", NS, pod, "--", "cat", "/etc/nim/other", check=False)
    assert missing.returncode == 1
    assert "cat: /etc/nim/other: No such file or directory" in missing.stderr


async def test_exec_of_anything_else_is_refused_clearly(kc: Kubectl, transport: str) -> None:
    pod = await _pod(kc)
    result = await kc.run("exec", "-n", NS, pod, "--", "foo", "--bar", check=False)
    assert result.returncode == 127
    assert '"foo --bar" is not available in localcluster' in result.stderr, result.stderr
    assert "command terminated with exit code 127" in result.stderr


async def test_logs_follow_streams_output_until_the_container_ends(
    cluster: LocalCluster, kc: Kubectl, upgrades: Upgrades
) -> None:
    extensions_of(cluster).catalog.set(
        "example.com/report:*", logs="42 rows exported\n", exit_code=0, run_seconds=0.2
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "report", "namespace": NS},
        "spec": {
            "restartPolicy": "Never",
            "schedulingGates": [{"name": "example.com/hold"}],
            "containers": [{"name": "report", "image": "example.com/report:1"}],
        },
    }
    await kc.run("apply", "-f", "-", input=json.dumps(pod))
    proc = await asyncio.create_subprocess_exec(
        kc.binary,
        "logs",
        "-f",
        "-n",
        NS,
        "report",
        env=kc.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    # kubectl is following a pod that has printed nothing yet (it is not even scheduled)
    for _ in range(300):
        if any(s == "log" and "follow=true" in q for s, _, q in upgrades.seen):
            break
        await asyncio.sleep(0.05)
    assert proc.returncode is None
    await kc.run(
        "patch", "pod", "-n", NS, "report", "--type=json",
        "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]',
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert out.decode() == "42 rows exported\n", err.decode()
    assert await proc.wait() == 0, err.decode()
