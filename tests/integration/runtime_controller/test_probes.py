"""/healthz, /readyz and /metrics of a running manager, as a kubelet and Prometheus see them."""

from __future__ import annotations

import asyncio

import aiohttp

from nimctl_runtime.manager import Manager

from .conftest import Env
from .echo import add_echo_controller, source_cm


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, await r.text()


async def test_probes_and_metrics_of_a_running_manager(env: Env) -> None:
    async with env.client() as admin:
        await admin.create(source_cm("m1"))
    client = env.client("operator")
    manager = Manager(
        client,
        health_probe_bind_address="127.0.0.1:0",
        metrics_bind_address="127.0.0.1:0",
        leader_election=True,
        leader_election_id="probe-test",
        leader_election_namespace="default",
        lease_duration=2.0,
        renew_deadline=1.5,
        retry_period=0.2,
    )
    add_echo_controller(manager, name="probe-echo")
    manager.add_readyz_check("webhook", lambda: None)
    # the operator cannot list ConfigMaps yet: its caches cannot sync
    rule = env.faults.inject_errors(500, resources="configmaps", users="operator")
    stop = asyncio.Event()
    task = asyncio.create_task(manager.start(stop))
    try:
        async with asyncio.timeout(10):
            while manager.health_server is None or not manager.health_server.started.is_set():
                await asyncio.sleep(0.01)
        probes = f"http://127.0.0.1:{manager.health_server.port}"
        status, body = await get(probes + "/healthz")
        assert (status, body) == (200, "ok")
        async with asyncio.timeout(10):
            await manager.elected.wait()
        async with asyncio.timeout(10):  # the controllers started and report their caches
            while "cacheSync" not in (body := (await get(probes + "/readyz"))[1]):
                await asyncio.sleep(0.02)
        status, body = await get(probes + "/readyz")
        assert status == 500, body
        assert "[-]cacheSync failed: reason withheld" in body
        assert "[+]webhook ok" in body
        env.faults.remove(rule.id)
        async with asyncio.timeout(20):
            while (await get(probes + "/readyz"))[0] != 200:
                await asyncio.sleep(0.1)
        status, body = await get(probes + "/healthz?verbose")
        assert status == 200
        assert "[+]leaderElection ok" in body and body.endswith("healthz check passed\n")
        async with asyncio.timeout(10):
            while True:
                try:
                    await client.get("v1", "ConfigMap", "m1-echo", "default")
                    break
                except Exception:
                    await asyncio.sleep(0.05)
        assert manager.metrics_server is not None
        status, text = await get(f"http://127.0.0.1:{manager.metrics_server.port}/metrics")
        assert status == 200
        for line in (
            'controller_runtime_reconcile_total{controller="probe-echo",result="success"}',
            'controller_runtime_reconcile_total{controller="probe-echo",result="requeue_after"} 0.0',
            'controller_runtime_max_concurrent_reconciles{controller="probe-echo"} 4.0',
            'controller_runtime_active_workers{controller="probe-echo"}',
            'controller_runtime_reconcile_time_seconds_bucket{controller="probe-echo",le="0.005"}',
            'workqueue_adds_total{controller="probe-echo",name="probe-echo"}',
            'workqueue_depth{controller="probe-echo",name="probe-echo",priority=""}',
            'workqueue_queue_duration_seconds_bucket{controller="probe-echo",le="1e-08",name="probe-echo"}',
            'workqueue_longest_running_processor_seconds{controller="probe-echo",name="probe-echo"}',
            'leader_election_master_status{name="probe-test"} 1.0',
            "rest_client_requests_total{",
        ):
            assert line in text, line
    finally:
        stop.set()
        async with asyncio.timeout(15):
            await task
        await client.close()
    assert manager.elector is not None and not manager.elector.is_leader()
