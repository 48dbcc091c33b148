"""Issue 19 item 1: large AdmissionReviews are read whole, never truncated into a 400.

An UPDATE review carries object and oldObject, so a NIMService with 1,000 env
entries doubles into hundreds of KiB; the operator's own finalizer patch of such an
object must be admitted. Each size is sent 20 times because a truncating read only
fails when the body happens to span several TCP/TLS reads.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from nimctl_runtime.certs import CertPair, client_ssl_context, generate_ca, generate_serving_cert
from nimctl_runtime.webhook import ValidatingHandler, WebhookServer


class SpecImmutable:
    async def validate_create(self, obj: dict[str, Any]) -> list[str]:
        return []

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        return [] if old["spec"] == new["spec"] else ["spec changed"]

    async def validate_delete(self, obj: dict[str, Any]) -> list[str]:
        return []


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[WebhookServer, CertPair]]:
    ca = generate_ca()
    generate_serving_cert(ca, ["127.0.0.1"]).write(tmp_path)
    srv = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0, handler_timeout=10)
    srv.register("/validate", ValidatingHandler(SpecImmutable()))
    stop = asyncio.Event()
    task = asyncio.create_task(srv.run(stop))
    await asyncio.wait_for(srv.wait_started(), 5)
    yield srv, ca
    stop.set()
    await asyncio.wait_for(task, 5)


def _nimservice(env_entries: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": "big", "namespace": "default", "finalizers": []},
        "spec": {
            "image": {"repository": "nvcr.io/nim/meta/llama3", "tag": "1.0"},
            "env": [{"name": f"VAR_{i:06d}", "value": "v" * 40} for i in range(env_entries)],
        },
    }


def _review_of_size(kib: int) -> bytes:
    """An UPDATE review (object + oldObject) of about *kib* KiB."""
    per_entry = len(json.dumps({"name": "VAR_000000", "value": "v" * 40})) + 2
    entries = max(1, kib * 1024 // (2 * per_entry))
    old = _nimservice(entries)
    new = json.loads(json.dumps(old))
    new["metadata"]["finalizers"] = ["nim.nvidia.com/finalizer"]
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{kib}",
            "operation": "UPDATE",
            "kind": {"group": "apps.nvidia.com", "version": "v1alpha1", "kind": "NIMService"},
            "object": new,
            "oldObject": old,
        },
    }
    return json.dumps(review).encode()


@pytest.mark.parametrize("kib", [1, 128, 256, 1024])
async def test_reviews_up_to_a_mebibyte_are_admitted_every_time(
    server: tuple[WebhookServer, CertPair], kib: int
) -> None:
    srv, ca = server
    body = _review_of_size(kib)
    assert abs(len(body) - kib * 1024) <= max(1024, kib * 1024 // 20)
    url = f"https://127.0.0.1:{srv.port}/validate"
    headers = {"Content-Type": "application/json"}
    statuses: list[int] = []
    allowed: list[bool] = []
    async with aiohttp.ClientSession() as session:
        for _ in range(20):
            async with session.post(
                url, data=body, headers=headers, ssl=client_ssl_context(ca.cert_pem)
            ) as r:
                statuses.append(r.status)
                if r.status == 200:
                    answer = (await r.json())["response"]
                    allowed.append(answer["allowed"] and answer["uid"] == f"uid-{kib}")
    assert statuses == [200] * 20
    assert allowed == [True] * 20


async def test_a_body_over_the_limit_streamed_without_length_is_413(
    server: tuple[WebhookServer, CertPair],
) -> None:
    srv, ca = server
    srv.max_request_size = 64 * 1024

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b" " * 16384

    url = f"https://127.0.0.1:{srv.port}/validate"
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url,
            data=chunks(),
            headers={"Content-Type": "application/json"},
            ssl=client_ssl_context(ca.cert_pem),
        ) as r,
    ):
        assert r.status == 413
        assert "65536 byte limit" in await r.text()
