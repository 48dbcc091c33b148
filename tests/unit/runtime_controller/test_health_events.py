"""Probe server answers, metrics endpoint, and the event recorder's aggregation and limits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from nimctl_runtime.events import EventBroadcaster
from nimctl_runtime.health import HealthProbeServer, parse_bind_address
from nimctl_runtime.metrics import MetricsServer
from tests.conditions import until

from .fakes import FakeObjectClient


def test_bind_addresses_follow_go_spelling() -> None:
    assert parse_bind_address(":8081") == (None, 8081)
    assert parse_bind_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_bind_address("[::1]:9") == ("::1", 9)
    assert parse_bind_address("0") is None
    assert parse_bind_address("") is None
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_bind_address("8081")


class State:
    ready = False


@pytest.fixture
async def probes() -> AsyncIterator[tuple[str, State]]:
    state = State()

    def ready() -> None:
        if not state.ready:
            raise RuntimeError("caches not synced")

    async def slow_ok() -> None:
        await asyncio.sleep(0)

    server = HealthProbeServer(
        "127.0.0.1:0",
        healthz={"ping": lambda: None, "async": slow_ok},
        readyz={"cacheSync": ready, "ping": lambda: None},
    )
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    async with asyncio.timeout(5):
        await server.started.wait()
    yield f"http://127.0.0.1:{server.port}", state
    stop.set()
    await task


async def fetch(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, await r.text()


async def test_healthz_ok_and_verbose(probes: tuple[str, State]) -> None:
    base, _ = probes
    assert await fetch(base + "/healthz") == (200, "ok")
    status, body = await fetch(base + "/healthz?verbose")
    assert status == 200
    assert body == "[+]async ok\n[+]ping ok\nhealthz check passed\n"


async def test_readyz_fails_until_ready_then_passes(probes: tuple[str, State]) -> None:
    base, state = probes
    status, body = await fetch(base + "/readyz")
    assert status == 500
    assert "[-]cacheSync failed: reason withheld\n" in body
    assert "[+]ping ok\n" in body
    assert body.endswith("healthz check failed\n")
    status, body = await fetch(base + "/readyz/cacheSync")
    assert status == 500 and "caches not synced" in body
    status, body = await fetch(base + "/readyz?exclude=cacheSync")
    assert status == 200
    status, body = await fetch(base + "/readyz?exclude=cacheSync&exclude=nope&verbose")
    assert "[+]cacheSync excluded: ok\n" in body
    assert 'no matches for "nope"' in body
    state.ready = True
    assert await fetch(base + "/readyz") == (200, "ok")
    assert await fetch(base + "/readyz/cacheSync") == (200, "ok")
    assert (await fetch(base + "/readyz/unknown"))[0] == 404


async def test_metrics_endpoint_serves_controller_runtime_names() -> None:
    from nimctl_runtime import metrics

    metrics.controller_runtime_reconcile_total.labels("probe-test", "success").inc()
    server = MetricsServer("127.0.0.1:0")
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    async with asyncio.timeout(5):
        await server.started.wait()
    try:
        async with aiohttp.ClientSession() as s, s.get(
            f"http://127.0.0.1:{server.port}/metrics"
        ) as r:
            body = await r.text()
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain")
    finally:
        stop.set()
        await task
    assert 'controller_runtime_reconcile_total{controller="probe-test",result="success"} 1.0' in body
    assert "# TYPE workqueue_adds_total counter" in body
    assert "# TYPE controller_runtime_reconcile_time_seconds histogram" in body
    assert "process_resident_memory_bytes" in body


def pod(name: str = "p", uid: str = "u1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": uid}}  # fmt: skip


def events(client: FakeObjectClient) -> list[dict[str, Any]]:
    return [o for (k, _, _), o in client.objects.items() if k == "Event"]


async def test_repeated_events_are_aggregated_into_one_with_a_count() -> None:
    client = FakeObjectClient()
    b = EventBroadcaster(client, host="node-1")
    rec = b.new_recorder("nimservice-controller")
    for _ in range(3):
        rec.event(pod(), "Normal", "Created", "created deployment p")
    rec.event(pod(), "Warning", "Failed", "image pull failed")
    await b.flush()
    evs = sorted(events(client), key=lambda e: e["reason"])
    assert [(e["reason"], e["count"]) for e in evs] == [("Created", 3), ("Failed", 1)]
    created = evs[0]
    assert created["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "p",
                                         "namespace": "ns", "uid": "u1"}  # fmt: skip
    assert created["metadata"]["namespace"] == "ns"
    assert created["source"] == {"component": "nimservice-controller", "host": "node-1"}
    assert created["type"] == "Normal"
    assert created["firstTimestamp"] and created["lastTimestamp"]


async def test_recording_never_blocks_or_raises_even_when_the_api_fails() -> None:
    from nimctl_runtime.client.errors import InternalError

    client = FakeObjectClient()
    client.fail = InternalError(500, "InternalError", "down")
    b = EventBroadcaster(client, queue_size=5)
    rec = b.new_recorder("c")
    for i in range(20):
        rec.event(pod(f"p{i}"), "Normal", "R", "m")  # returns at once
    rec.event(pod(), "Bogus", "R", "m")  # invalid type: logged and dropped
    rec.event({"not": "an object"}, "Normal", "R", "m")
    assert b.pending() <= 5
    assert b.dropped >= 15
    stop = asyncio.Event()
    task = asyncio.create_task(b.run(stop))
    await until(lambda: client.calls, what="the broadcaster tried to write")
    stop.set()
    async with asyncio.timeout(5):
        await task
    assert events(client) == []


async def test_spam_filter_limits_events_per_object() -> None:
    client = FakeObjectClient()
    b = EventBroadcaster(client, burst=5)
    rec = b.new_recorder("c")
    for i in range(20):
        rec.event(pod(), "Normal", "Reason", f"distinct message {i}")
    await b.flush()
    assert len(events(client)) == 5
    assert b.dropped == 15


async def test_many_different_messages_are_combined_after_ten() -> None:
    client = FakeObjectClient()
    b = EventBroadcaster(client, burst=100)
    rec = b.new_recorder("c")
    for i in range(15):
        rec.event(pod(), "Warning", "BackOff", f"restarting container, attempt {i}")
    await b.flush()
    evs = events(client)
    combined = [e for e in evs if e["message"].startswith("(combined from similar events): ")]
    assert len(evs) == 11, "ten distinct events, then one combined Event"
    assert len(combined) == 1
    assert combined[0]["count"] == 5
    assert combined[0]["message"].endswith("attempt 14"), "the combined Event shows the latest"


async def test_an_event_that_fails_once_is_retried_and_lands() -> None:
    from nimctl_runtime.client.errors import InternalError, TooManyRequests

    client = FakeObjectClient()
    failures = [InternalError(500, "InternalError", "down"), TooManyRequests(429, "x", "slow")]

    original = client.create

    async def flaky_create(obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if failures:
            raise failures.pop(0)
        return await original(obj, **kw)

    client.create = flaky_create  # type: ignore[method-assign]
    b = EventBroadcaster(client, retry_interval=0.01)
    rec = b.new_recorder("nimservice-controller")
    rec.event(pod(), "Normal", "Ready", "NIMService p ready")
    stop = asyncio.Event()
    task = asyncio.create_task(b.run(stop))
    async with asyncio.timeout(5):
        while not events(client):
            await asyncio.sleep(0.01)
    stop.set()
    await task
    assert [(e["reason"], e["count"]) for e in events(client)] == [("Ready", 1)]
    assert b.dropped == 0


async def test_an_event_is_given_up_after_twelve_tries_or_when_its_namespace_is_gone() -> None:
    from nimctl_runtime.client.errors import Forbidden, InternalError

    client = FakeObjectClient()
    client.fail = InternalError(500, "InternalError", "down")
    tries = 0
    original = client.create

    async def counting_create(obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        nonlocal tries
        tries += 1
        return await original(obj, **kw)

    client.create = counting_create  # type: ignore[method-assign]
    b = EventBroadcaster(client, retry_interval=0.001)
    b.new_recorder("c").event(pod(), "Normal", "R", "m")
    stop = asyncio.Event()
    task = asyncio.create_task(b.run(stop))
    async with asyncio.timeout(5):
        while b.dropped == 0:
            await asyncio.sleep(0.005)
    assert tries == 12
    tries = 0
    client.fail = Forbidden(
        403, "Forbidden", 'events "p.1" is forbidden: unable to create new content in '
        "namespace ns because it is being terminated"
    )
    b.new_recorder("c").event(pod("q", "u2"), "Normal", "R", "m")
    async with asyncio.timeout(5):
        while b.dropped < 2:
            await asyncio.sleep(0.005)
    stop.set()
    await task
    assert tries == 1, "a terminating namespace is not retried"
    assert events(client) == []
