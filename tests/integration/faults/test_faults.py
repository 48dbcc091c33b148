"""Each fault kind, shown by what a client sees."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from localcluster.cluster import LocalCluster
from localcluster.extensions import Extensions

from .conftest import Http

CM_PATH = "/api/v1/namespaces/default/configmaps"


def cm(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"k": name},
    }


async def create(http: Http, name: str) -> dict[str, Any]:
    code, _, body = await http.request("POST", CM_PATH, cm(name))
    assert code == 201, body
    return body


async def test_watch_resumed_after_drop_receives_every_later_event(
    http: Http, ext: Extensions
) -> None:
    code, _, listing = await http.request("GET", CM_PATH)
    assert code == 200
    rv = listing["metadata"]["resourceVersion"]
    seen: list[str] = []

    async def consume(from_rv: str) -> str:
        last = from_rv
        async for event in http.watch(f"{CM_PATH}?watch=true&resourceVersion={from_rv}"):
            if event["type"] == "BOOKMARK":
                last = event["object"]["metadata"]["resourceVersion"]
                continue
            seen.append(f"{event['type']} {event['object']['metadata']['name']}")
            last = event["object"]["metadata"]["resourceVersion"]
            if len(seen) == 1:
                # Drop every watch after the first event, then write while nobody watches.
                ext.faults.close_watches()
        return last

    async with asyncio.timeout(10):
        consumer = asyncio.create_task(consume(rv))
        await create(http, "one")
        last = await consumer  # the stream ends because the server dropped it
        await create(http, "two")
        await create(http, "three")
        second = asyncio.create_task(consume(last))
        while len(seen) < 3:
            await asyncio.sleep(0.02)
        ext.faults.close_watches()
        await second
    assert seen == ["ADDED one", "ADDED two", "ADDED three"]
    assert ext.faults.state()["watchesClosed"] >= 2


async def test_watches_closed_periodically(http: Http, ext: Extensions) -> None:
    ext.faults.close_watches_every(0.2)
    async with asyncio.timeout(10):
        for _ in range(2):
            async for _event in http.watch(f"{CM_PATH}?watch=true"):
                pass  # ends only because the fault closes it
    assert ext.faults.state()["closeWatchesEverySeconds"] == 0.2
    ext.faults.close_watches_every(None)


async def test_429_carries_retry_after_and_only_hits_matching_requests(
    http: Http, ext: Extensions
) -> None:
    rule = ext.faults.inject_errors(
        429, verbs=["list"], resources=["configmaps"], users=["admin"], retry_after=7, times=1
    )
    code, headers, body = await http.request("GET", "/api/v1/namespaces/default/secrets")
    assert code == 200  # another resource is untouched
    code, headers, body = await http.request("GET", CM_PATH)
    assert code == 429
    assert headers["Retry-After"] == "7"
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["retryAfterSeconds"] == 7
    code, _, _ = await http.request("GET", CM_PATH)
    assert code == 200  # times=1: the next one goes through
    assert rule.injected == 1


async def test_500_and_503_for_a_fraction_of_requests_for_one_user(
    cluster: LocalCluster, http: Http, ext: Extensions
) -> None:
    ext.faults.inject_errors(500, fraction=0.5, verbs="get", users="flaky-operator")
    await create(http, "target")
    operator = Http(cluster, http.session, user="flaky-operator")
    codes = [(await operator.request("GET", f"{CM_PATH}/target"))[0] for _ in range(40)]
    assert set(codes) == {200, 500}
    assert codes.count(500) == ext.faults.error_rules[0].injected
    admin_codes = [(await http.request("GET", f"{CM_PATH}/target"))[0] for _ in range(10)]
    assert set(admin_codes) == {200}
    ext.faults.reset()
    ext.faults.inject_errors(503, verbs=["create"], retry_after=2)
    code, headers, body = await http.request("POST", CM_PATH, cm("nope"))
    assert (code, body["reason"], headers["Retry-After"]) == (503, "ServiceUnavailable", "2")


async def test_latency_makes_an_impatient_client_time_out(http: Http, ext: Extensions) -> None:
    ext.faults.add_latency(5.0, verbs=["get"], resources=["configmaps"])
    await create(http, "slow")
    with pytest.raises(TimeoutError):
        await http.request("GET", f"{CM_PATH}/slow", timeout=aiohttp.ClientTimeout(total=0.3))
    code, _, _ = await http.request("GET", CM_PATH, timeout=aiohttp.ClientTimeout(total=5))
    assert code == 200  # list is not delayed


async def test_compaction_makes_old_resource_versions_gone(http: Http, ext: Extensions) -> None:
    _, _, listing = await http.request("GET", CM_PATH)
    old_rv = listing["metadata"]["resourceVersion"]
    await create(http, "a")
    await create(http, "b")
    ext.faults.compact()
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(10):
        async with http.session.get(
            f"{http.cluster.url}{CM_PATH}?watch=true&resourceVersion={old_rv}",
            headers={"Authorization": f"Bearer {http.cluster.token_for('admin')}"},
            ssl=http.cluster.client_ssl_context(),
        ) as resp:
            if resp.status == 410:
                events.append({"type": "ERROR", "object": await resp.json()})
            else:
                async for line in resp.content:
                    if line.strip():
                        import json

                        events.append(json.loads(line))
                        break
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410
    assert events[0]["object"]["reason"] in ("Expired", "Gone")


async def test_unreachable_drops_connections_then_recovers(http: Http, ext: Extensions) -> None:
    ext.faults.unreachable(0.5)
    with pytest.raises(aiohttp.ClientError):
        await http.request("GET", CM_PATH)
    async with asyncio.timeout(10):
        while True:
            try:
                code, _, _ = await http.request("GET", CM_PATH)
                break
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
    assert code == 200


async def test_stalled_simulator_does_nothing_until_resumed(http: Http, ext: Extensions) -> None:
    assert ext.simulator is not None
    ext.faults.stall_simulator()
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "frozen"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "frozen"}},
            "template": {
                "metadata": {"labels": {"app": "frozen"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    code, _, _ = await http.request(
        "POST", "/apis/apps/v1/namespaces/default/deployments", deployment
    )
    assert code == 201
    await asyncio.sleep(0.3)
    _, _, rs = await http.request("GET", "/apis/apps/v1/namespaces/default/replicasets")
    assert rs["items"] == []
    assert ext.faults.state()["simulatorStalled"] is True
    ext.faults.resume_simulator()
    async with asyncio.timeout(10):
        while True:
            _, _, d = await http.request(
                "GET", "/apis/apps/v1/namespaces/default/deployments/frozen"
            )
            if (d.get("status") or {}).get("availableReplicas") == 1:
                break
            await asyncio.sleep(0.05)


async def test_debug_http_api_drives_faults(http: Http) -> None:
    code, _, rule = await http.request(
        "POST",
        "/debug/faults/errors",
        {"code": 429, "verbs": ["get"], "resources": ["configmaps"], "retryAfter": 4, "times": 1},
    )
    assert code == 200 and rule["code"] == 429
    await create(http, "via-debug")
    code, headers, _ = await http.request("GET", f"{CM_PATH}/via-debug")
    assert (code, headers["Retry-After"]) == (429, "4")
    code, _, state = await http.request("GET", "/debug/faults")
    assert state["errors"][0]["injected"] == 1
    code, _, state = await http.request("DELETE", "/debug/faults")
    assert state["errors"] == []
    code, _, _ = await http.request("POST", "/debug/faults/compact")
    assert code == 200


async def test_debug_api_is_off_by_default() -> None:
    async with LocalCluster(simulator=False) as plain, aiohttp.ClientSession() as session:
        code, _, _ = await Http(plain, session).request("GET", "/debug/faults")
        assert code == 404
