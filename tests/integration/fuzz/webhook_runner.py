"""Send mutants straight to the admission webhook server, as the API server would.

A real :class:`WebhookServer` over TLS with nimctl's validators registered at
NVIDIA's paths; every mutant of NIMService or NIMCache goes in a CREATE
AdmissionReview. The answer must be a clear allow, a denial with a 4xx code
naming the field, or a whole-request 4xx; never a 5xx or a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from nimctl_runtime.certs import client_ssl_context, generate_ca, generate_serving_cert
from nimctl_runtime.webhook import WebhookServer, validate_path
from tests.integration.fuzz.mutations import Mutant
from tests.integration.fuzz.outcomes import Tally, crash_text, has_field_path
from webhooks.facts import StaticClusterFacts
from webhooks.setup import register

WEBHOOK_KINDS = ("NIMService", "NIMCache")


@dataclass
class RunningWebhook:
    server: WebhookServer
    ca_pem: bytes

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.server.port}"


@contextlib.asynccontextmanager
async def running_webhook() -> AsyncIterator[RunningWebhook]:
    with tempfile.TemporaryDirectory() as tmp:
        ca = generate_ca()
        generate_serving_cert(ca, ["127.0.0.1"]).write(tmp)
        server = WebhookServer(cert_dir=Path(tmp), host="127.0.0.1", port=0)
        register(server, StaticClusterFacts())
        stop = asyncio.Event()
        task = asyncio.create_task(server.run(stop))
        await asyncio.wait_for(server.wait_started(), 10)
        try:
            yield RunningWebhook(server, ca.cert_pem)
        finally:
            stop.set()
            await task


def review_body(mutant: Mutant, uid: str) -> bytes:
    group, _, version = mutant.api_version.rpartition("/")
    review: dict[str, Any] = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": "CREATE",
            "kind": {"group": group, "version": version, "kind": mutant.kind},
            "namespace": "fuzz-ns",
            "object": mutant.obj,
        },
    }
    return json.dumps(review).encode()


async def send(
    session: aiohttp.ClientSession, webhook: RunningWebhook, mutant: Mutant, uid: str, tally: Tally
) -> None:
    group, _, version = mutant.api_version.rpartition("/")
    url = webhook.base + validate_path(group, version, mutant.kind)
    try:
        async with session.post(
            url,
            data=await asyncio.to_thread(review_body, mutant, uid),
            headers={"Content-Type": "application/json"},
            ssl=client_ssl_context(webhook.ca_pem),
            timeout=aiohttp.ClientTimeout(total=30),
        ) as r:
            text = await r.text()
            status = r.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        tally.add("other", f"{mutant.describe()}: no answer ({type(exc).__name__})")
        return
    if status != 200:
        if status in (400, 413) and not crash_text(text):
            tally.add("rejected as a whole request (413/400)")
        else:
            tally.add("other", f"{mutant.describe()}: HTTP {status} {text[:200]}")
        return
    response = json.loads(text).get("response") or {}
    if response.get("uid") != uid:
        tally.add("other", f"{mutant.describe()}: answer for uid {response.get('uid')!r}")
        return
    if response.get("allowed"):
        tally.add("accepted (webhook only: no object is created)")
        return
    result = response.get("status") or {}
    code = int(result.get("code") or 0)
    message = str(result.get("message") or "")
    if 400 <= code < 500 and has_field_path(message) and not crash_text(message):
        tally.add("rejected with a field path")
    else:
        tally.add("other", f"{mutant.describe()}: denied {code} {message[:300]}")


async def fuzz_webhook(mutants: list[Mutant], *, concurrency: int = 8) -> Tally:
    """Every webhook-kind mutant through a fresh webhook server; the tally of outcomes."""
    tally = Tally()
    chosen = [m for m in mutants if m.kind in WEBHOOK_KINDS]
    limit = asyncio.Semaphore(concurrency)
    async with running_webhook() as webhook, aiohttp.ClientSession() as session:

        async def one(i: int, mutant: Mutant) -> None:
            async with limit:
                await send(session, webhook, mutant, f"fuzz-{i}", tally)

        await asyncio.gather(*(one(i, m) for i, m in enumerate(chosen)))
    return tally
