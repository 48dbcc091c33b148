"""A leader keeps its Lease while ~1 MB bodies flow through it (issue 26).

Three replicas (lease 4 s, 1 s safety margin) serve the ConfigMap webhook and
run the echo controller. The test sends the leader ~1 MB AdmissionReviews
straight to its webhook and writes ~1 MB source ConfigMaps, which the leader
receives as watch events and copies (1 MB writes of its own), a fixed number
of each. Had decoding or handling them held the leader's event loop for longer
than its margin, its renewals would have come late: it would have fenced itself
("not the leader now") or a standby would have taken the Lease. Counted, not
timed: every reviewed body is answered, every source is echoed, the Lease never
changes hands, and the leader never fences or loses leadership.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import aiohttp
import pytest

from nimctl_runtime.certs import client_ssl_context, generate_ca, generate_serving_cert
from tests.ports import free_ports

from .conftest import WRITE_VERBS, Env
from .echo import source_cm
from .test_leader_election import holder, spawn
from .test_webhook_availability import wait_for

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

REPLICAS = ("r0", "r1", "r2")
MB = 1024 * 1024
REVIEWS = 40
SOURCES = 12


def big_review(i: int) -> bytes:
    obj = source_cm(f"review-{i}", data={f"k{j}": "x" * 1000 for j in range(MB // 1010)})
    request = {
        "uid": f"uid-{i}",
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "operation": "CREATE",
        "object": obj,
        "oldObject": None,
    }
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body).encode()


async def test_the_leader_keeps_its_lease_while_1mb_bodies_flow(env: Env) -> None:
    ca = generate_ca()
    certs = env.tmp / "certs"
    generate_serving_cert(ca, ["127.0.0.1"]).write(certs)
    webhook = dict(zip(REPLICAS, free_ports(len(REPLICAS)), strict=True))
    procs: dict[str, asyncio.subprocess.Process] = {}
    try:
        for name in REPLICAS:
            procs[name] = await spawn(
                env, name, "--webhook-port", str(webhook[name]), "--webhook-cert-dir", str(certs),
                timings=(4.0, 3.0, 0.4),
            )  # fmt: skip
        await wait_for(lambda: holder(env) in procs, 60)
        leader = holder(env)
        start = env.audit.records()[-1].seq
        ssl = client_ssl_context(ca.cert_pem)
        answers: list[bool] = []

        async def review(http: aiohttp.ClientSession, i: int) -> None:
            url = f"https://127.0.0.1:{webhook[leader]}/validate-configmap"
            for _ in range(600):  # until its webhook server listens
                try:
                    async with http.post(url, data=big_review(i), ssl=ssl,
                                         headers={"Content-Type": "application/json"}) as resp:  # fmt: skip
                        answers.append(bool((await resp.json())["response"]["allowed"]))
                        return
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.1)

        async def reviews(offset: int) -> None:
            async with aiohttp.ClientSession() as http:
                for i in range(offset, REVIEWS, 2):
                    await review(http, i)

        async def sources() -> None:
            async with env.client() as c:
                for i in range(SOURCES):
                    data = {f"k{j}": str(i % 10) * 1000 for j in range(900)}
                    await c.create(source_cm(f"big-{i}", data=data))

        await asyncio.gather(reviews(0), reviews(1), sources())

        async def echoed() -> int:
            async with env.client() as c:
                got = await c.list("v1", "ConfigMap", "default", label_selector="echo=copy")
            return len(got["items"])

        async with asyncio.timeout(60):
            while await echoed() < SOURCES:
                await asyncio.sleep(0.2)
        # a few more renewals after the load, so a late one would have shown
        renewed = len(env.audit.records(user=leader, resource="leases", verb="update"))
        await wait_for(
            lambda: len(env.audit.records(user=leader, resource="leases", verb="update"))
            >= renewed + 3,
            30,
        )
    finally:
        for p in procs.values():
            if p.returncode is None:
                p.kill()
                await p.wait()

    assert answers == [True] * REVIEWS
    lease_writers = {
        r.user
        for r in env.audit.records(resource="leases")
        if r.seq > start and r.verb in WRITE_VERBS and r.code is not None and r.code < 300
    }
    assert lease_writers == {leader}, "the Lease changed hands under the load"
    log = (env.tmp / f"{leader}.log").read_text()
    assert log.count("not the leader now") == 0
    assert log.count("leadership lost") == 0
