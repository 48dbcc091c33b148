"""Admission does not depend on the leader: with it SIGSTOPped, the other replicas
answer the webhook and ``kubectl apply`` keeps working (issue 26).

Three operator processes serve a ConfigMap validating webhook
(``failurePolicy: Fail``) behind one Service, and compete for the Lease. The
test plays kubelet and the EndpointSlice controller: it probes each replica's
``/readyz`` and keeps one EndpointSlice per replica, the leader's listed first,
so the API server calls the leader while it is ready. Then the leader is
stopped: its probe times out, its endpoint goes not-ready, and every apply,
before and after another replica takes the Lease, is answered by a standby (the
webhook's warning names which) or refused by it (a forbidden key), never
failed for want of a webhook.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shutil
import signal
from collections.abc import Callable

import aiohttp
import pytest

from nimctl_runtime.certs import generate_ca, generate_serving_cert
from tests.conftest import Kubectl
from tests.ports import free_ports

from .conftest import Env
from .test_leader_election import holder, spawn

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

REPLICAS = ("r0", "r1", "r2")
SERVICE = "echo-webhook"
LABEL = "admission=checked"  # only these ConfigMaps go to the webhook


def webhook_configuration(ca_pem: bytes) -> dict[str, object]:
    key, value = LABEL.split("=")
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "echo-configmaps"},
        "webhooks": [
            {
                "name": "configmaps.echo.example.com",
                "clientConfig": {
                    "service": {"namespace": "default", "name": SERVICE, "path": "/validate-configmap", "port": 443},
                    "caBundle": base64.b64encode(ca_pem).decode(),
                },
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
                "objectSelector": {"matchLabels": {key: value}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }  # fmt: skip


def config_map(name: str, **data: str) -> str:
    key, value = LABEL.split("=")
    lines = [
        "apiVersion: v1",
        "kind: ConfigMap",
        f"metadata: {{name: {name}, namespace: default, labels: {{{key}: {value}}}}}",
        "data: {" + ", ".join(f"{k}: '{v}'" for k, v in data.items()) + "}",
    ]
    return "\n".join(lines) + "\n"


async def wait_for(predicate: Callable[[], bool], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


class Endpoints:
    """kubelet's readiness probes and the EndpointSlice controller, for the three replicas."""

    def __init__(self, env: Env, webhook: dict[str, int], health: dict[str, int]) -> None:
        self.env = env
        self.webhook = webhook
        self.health = health
        self.ready: dict[str, bool] = dict.fromkeys(webhook, False)
        self.order: list[str] = list(webhook)  # the first ready one is called

    async def probe(self, http: aiohttp.ClientSession, name: str) -> bool:
        try:
            url = f"http://127.0.0.1:{self.health[name]}/readyz"
            async with http.get(url, timeout=aiohttp.ClientTimeout(total=1)) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def run(self) -> None:
        async with self.env.client() as admin, aiohttp.ClientSession() as http:
            written: dict[str, object] = {}
            while True:
                results = await asyncio.gather(*(self.probe(http, n) for n in self.webhook))
                self.ready = dict(zip(self.webhook, results, strict=True))
                for rank, name in enumerate(self.order):
                    desired = {
                        "apiVersion": "discovery.k8s.io/v1",
                        "kind": "EndpointSlice",
                        "metadata": {"name": f"{SERVICE}-{rank}", "namespace": "default",
                                     "labels": {"kubernetes.io/service-name": SERVICE}},
                        "addressType": "IPv4",
                        "endpoints": [{"addresses": ["127.0.0.1"], "targetRef": {"kind": "Pod", "name": name},
                                       "conditions": {"ready": self.ready[name]}}],
                        "ports": [{"name": "webhook", "port": self.webhook[name], "protocol": "TCP"}],
                    }  # fmt: skip
                    if written.get(desired["metadata"]["name"]) != desired:  # type: ignore[index]
                        await admin.apply(desired, field_manager="endpointslice-controller", force=True)
                        written[desired["metadata"]["name"]] = desired  # type: ignore[index]
                await asyncio.sleep(0.2)


async def test_webhooks_are_answered_and_applies_work_with_the_leader_stopped(
    env: Env, kubectl_binary: str
) -> None:
    ca = generate_ca()
    certs = env.tmp / "certs"
    generate_serving_cert(ca, ["127.0.0.1", f"{SERVICE}.default.svc"]).write(certs)
    ports = free_ports(2 * len(REPLICAS))
    webhook = dict(zip(REPLICAS, ports[: len(REPLICAS)], strict=True))
    health = dict(zip(REPLICAS, ports[len(REPLICAS) :], strict=True))
    procs: dict[str, asyncio.subprocess.Process] = {}
    home = env.tmp / "home"
    home.mkdir()
    kubectl = Kubectl(kubectl_binary, env.cluster.kubeconfig_path, home)
    endpoints = Endpoints(env, webhook, health)
    prober: asyncio.Task[None] | None = None
    stopped = ""
    try:
        for name in REPLICAS:
            procs[name] = await spawn(
                env, name, "--webhook-port", str(webhook[name]), "--webhook-cert-dir", str(certs),
                "--health", f"127.0.0.1:{health[name]}", timings=(4.0, 3.0, 0.4),
            )  # fmt: skip
        await wait_for(lambda: holder(env) in procs, 60)
        leader = holder(env)
        endpoints.order = [leader, *(n for n in REPLICAS if n != leader)]
        async with env.client() as admin:
            await admin.create({"apiVersion": "v1", "kind": "Service",
                                "metadata": {"name": SERVICE, "namespace": "default"},
                                "spec": {"ports": [{"name": "webhook", "port": 443, "targetPort": "webhook"}]}})  # fmt: skip
            prober = asyncio.create_task(endpoints.run())
            await wait_for(lambda: all(endpoints.ready.values()), 60)
            await admin.create(webhook_configuration(ca.cert_pem))

        async def apply(manifest: str) -> tuple[int, str]:
            out = await kubectl.run("apply", "-f", "-", input=manifest, check=False)
            return out.returncode, out.stderr

        # all up: the leader's endpoint is first, so the leader answers
        code, stderr = await apply(config_map("before", n="0"))
        assert (code, stderr.strip()) == (0, f"Warning: validated by {leader}")

        stopped = leader
        procs[leader].send_signal(signal.SIGSTOP)
        await wait_for(lambda: not endpoints.ready[leader], 30)
        standbys = {f"Warning: validated by {n}" for n in REPLICAS if n != leader}
        answered: list[str] = []
        for i in range(3):  # while the stopped leader still holds the Lease
            code, stderr = await apply(config_map(f"paused-{i}", n=str(i)))
            assert code == 0, stderr
            answered.append(stderr.strip())
        await wait_for(lambda: holder(env) not in ("", leader), 30)
        for i in range(3):  # and after a standby took it over
            code, stderr = await apply(config_map(f"taken-{i}", n=str(i)))
            assert code == 0, stderr
            answered.append(stderr.strip())
        assert set(answered) <= standbys, answered
        code, stderr = await apply(config_map("refused", forbidden="x"))
        assert code == 1
        assert "admission webhook \"configmaps.echo.example.com\" denied the request" in stderr
        assert "refused by " + leader not in stderr
    finally:
        if prober is not None:
            prober.cancel()
            await asyncio.gather(prober, return_exceptions=True)
        for p in procs.values():
            if p.returncode is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                await p.wait()
    async with env.client() as admin:
        names = {c["metadata"]["name"] for c in (await admin.list("v1", "ConfigMap", "default", label_selector=LABEL))["items"]}
    assert names == {"before", *(f"paused-{i}" for i in range(3)), *(f"taken-{i}" for i in range(3))}  # fmt: skip
    assert stopped, "the leader was stopped"
    with contextlib.suppress(FileNotFoundError):
        log = (env.tmp / f"{stopped}.log").read_text()
        assert "Traceback" not in log
