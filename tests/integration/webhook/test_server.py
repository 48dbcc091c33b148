"""The webhook server over real TLS on loopback: what the API server and operators see."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from nimctl_runtime import field, metrics
from nimctl_runtime.certs import CertPair, client_ssl_context, generate_ca, generate_serving_cert
from nimctl_runtime.webhook import (
    AdmissionRequest,
    AdmissionResponse,
    DefaultingHandler,
    ValidatingHandler,
    ValidationFailed,
    WebhookServer,
)


class NoFooValidator:
    async def validate_create(self, obj: dict[str, Any]) -> list[str]:
        spec = obj.get("spec", {})
        if "foo" in spec:
            raise ValidationFailed(
                [field.forbidden("spec.foo", "must not be set")], warnings=["foo seen"]
            )
        return ["spec.bar is empty"] if "bar" not in spec else []

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        if old.get("spec") != new.get("spec"):
            raise ValidationFailed([field.forbidden("spec", "is immutable once the object is created")])
        return []

    async def validate_delete(self, obj: dict[str, Any]) -> list[str]:
        return []


class LabelDefaulter:
    async def default(self, obj: dict[str, Any]) -> None:
        obj.setdefault("metadata", {}).setdefault("labels", {})["team"] = "nim"


class Exploding:
    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        raise RuntimeError("boom")


class Slow:
    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        await asyncio.Event().wait()  # hangs until the server's handler timeout
        raise AssertionError("unreachable")


@dataclass
class Running:
    server: WebhookServer
    ca: CertPair
    cert_dir: Path
    session: aiohttp.ClientSession

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.server.port}"

    def ssl(self) -> ssl.SSLContext:
        return client_ssl_context(self.ca.cert_pem)

    async def review(self, path: str, request: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        async with self.session.post(self.base + path, json=body, ssl=self.ssl()) as r:
            assert r.status == 200
            result: dict[str, Any] = (await r.json())["response"]
            return result


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    ca = generate_ca()
    generate_serving_cert(ca, ["127.0.0.1"]).write(tmp_path)
    server = WebhookServer(
        cert_dir=tmp_path, host="127.0.0.1", port=0, handler_timeout=0.3, cert_poll_interval=0.1
    )
    server.register("/validate-x", ValidatingHandler(NoFooValidator()))
    server.register("/mutate-x", DefaultingHandler(LabelDefaulter()))
    server.register("/explode", Exploding())
    server.register("/slow", Slow())
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    await asyncio.wait_for(server.wait_started(), 5)
    async with aiohttp.ClientSession() as session:
        yield Running(server, ca, tmp_path, session)
    stop.set()
    await asyncio.wait_for(task, 5)


def _req(op: str = "CREATE", obj: dict[str, Any] | None = None, old: Any = None) -> dict[str, Any]:
    return {
        "uid": "abc",
        "operation": op,
        "kind": {"group": "g", "version": "v1", "kind": "X"},
        "object": obj if obj is not None else {"spec": {"bar": 1}},
        "oldObject": old,
    }


async def test_denial_carries_kubernetes_message_and_warnings(running: Running) -> None:
    resp = await running.review("/validate-x", _req(obj={"spec": {"foo": 1}}))
    assert resp["allowed"] is False
    assert resp["uid"] == "abc"
    assert resp["status"]["code"] == 403
    assert resp["status"]["message"] == "spec.foo: Forbidden: must not be set"
    assert resp["warnings"] == ["foo seen"]


async def test_allowed_with_warning(running: Running) -> None:
    resp = await running.review("/validate-x", _req(obj={"spec": {}}))
    assert resp["allowed"] is True
    assert resp["warnings"] == ["spec.bar is empty"]


async def test_update_immutability(running: Running) -> None:
    resp = await running.review("/validate-x", _req("UPDATE", {"spec": {"a": 2}}, {"spec": {"a": 1}}))
    assert resp["allowed"] is False
    assert "is immutable" in resp["status"]["message"]


async def test_mutating_handler_answers_with_jsonpatch(running: Running) -> None:
    import base64

    resp = await running.review("/mutate-x", _req(obj={"metadata": {"name": "a"}}))
    assert resp["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(resp["patch"]))
    assert ops == [{"op": "add", "path": "/metadata/labels", "value": {"team": "nim"}}]


async def test_handler_crash_becomes_denial_not_500(running: Running) -> None:
    resp = await running.review("/explode", _req())
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 500
    assert "RuntimeError: boom" in resp["status"]["message"]
    assert "Traceback" not in resp["status"]["message"]


async def test_handler_timeout_becomes_denial(running: Running) -> None:
    resp = await running.review("/slow", _req())
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 504


@pytest.mark.parametrize(
    ("data", "headers", "status"),
    [
        (b"{broken", {"Content-Type": "application/json"}, 400),
        (b'{"apiVersion":"v1","kind":"Pod"}', {"Content-Type": "application/json"}, 400),
        (b"{}", {"Content-Type": "text/plain"}, 400),
    ],
)
async def test_bad_bodies_get_4xx_and_server_keeps_serving(
    running: Running, data: bytes, headers: dict[str, str], status: int
) -> None:
    url = running.base + "/validate-x"
    async with running.session.post(url, data=data, headers=headers, ssl=running.ssl()) as r:
        assert r.status == status
    assert (await running.review("/validate-x", _req()))["allowed"] is True


async def test_oversized_body_is_413(running: Running) -> None:
    running.server.max_request_size = 1024
    data = json.dumps({"x": "y" * 4096}).encode()
    url = running.base + "/validate-x"
    headers = {"Content-Type": "application/json"}
    async with running.session.post(url, data=data, headers=headers, ssl=running.ssl()) as r:
        assert r.status == 413
    assert (await running.review("/validate-x", _req()))["allowed"] is True


async def test_plain_http_gets_400_and_server_keeps_serving(running: Running) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", running.server.port)
    writer.write(b"POST /validate-x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    assert answer.startswith(b"HTTP/1.0 400 Bad Request")
    assert b"HTTP request to an HTTPS server" in answer
    assert (await running.review("/validate-x", _req()))["allowed"] is True


async def test_unknown_path_is_404(running: Running) -> None:
    async with running.session.post(running.base + "/nope", json={}, ssl=running.ssl()) as r:
        assert r.status == 404


async def _peer_serial(running: Running) -> int:
    _, writer = await asyncio.open_connection(
        "127.0.0.1", running.server.port, ssl=running.ssl(), server_hostname="127.0.0.1"
    )
    ssl_obj = writer.get_extra_info("ssl_object")
    der = ssl_obj.getpeercert(binary_form=True)
    writer.close()
    from cryptography import x509

    return x509.load_der_x509_certificate(der).serial_number


async def test_certificate_rotation_is_picked_up_without_restart(running: Running) -> None:
    before = await _peer_serial(running)
    new_pair = generate_serving_cert(running.ca, ["127.0.0.1"])
    new_pair.write(running.cert_dir)
    from cryptography import x509

    expected = x509.load_pem_x509_certificate(new_pair.cert_pem).serial_number
    for _ in range(100):
        if await _peer_serial(running) == expected:
            break
        await asyncio.sleep(0.05)
    assert await _peer_serial(running) == expected != before
    assert (await running.review("/validate-x", _req()))["allowed"] is True


async def test_broken_new_certificate_keeps_the_old_one(running: Running) -> None:
    before = await _peer_serial(running)
    (running.cert_dir / "tls.crt").write_text("garbage")
    async with asyncio.timeout(10):
        while running.server.certs.rejected == 0:
            await asyncio.sleep(0.02)
    assert await _peer_serial(running) == before


async def test_metrics_count_requests_by_path_and_code(running: Running) -> None:
    def served() -> float:
        labels = {"webhook": "/validate-x", "code": "200"}
        value = metrics.REGISTRY.get_sample_value(
            "controller_runtime_webhook_requests_total", labels
        )
        return value or 0.0

    before = served()
    await running.review("/validate-x", _req())
    assert served() == before + 1
    assert b"controller_runtime_webhook_latency_seconds_bucket" in metrics.exposition()


async def test_readyz_check_fails_until_the_server_listens(tmp_path: Path) -> None:
    ca = generate_ca()
    generate_serving_cert(ca, ["127.0.0.1"]).write(tmp_path)
    server = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0)
    check = server.started_checker()
    with pytest.raises(RuntimeError, match="not serving yet"):
        check()
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    await asyncio.wait_for(server.wait_started(), 5)
    check()
    stop.set()
    await asyncio.wait_for(task, 5)
    with pytest.raises(RuntimeError):
        check()
