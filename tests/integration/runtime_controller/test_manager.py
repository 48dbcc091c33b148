"""Manager lifecycle against localcluster: drain on stop, grace period, failures, events."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from nimctl_runtime.builder import Builder
from nimctl_runtime.manager import Manager
from nimctl_runtime.reconcile import Request, Result

from .conftest import Env
from .echo import source_cm


class Slow:
    """Reconciles take ``seconds``; remembers which started and which finished."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []
        self.first = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        self.started.append(request.name)
        self.first.set()
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled.append(request.name)
            raise
        self.finished.append(request.name)
        return Result()


async def run_slow(env: Env, seconds: float, grace: float) -> tuple[Slow, float]:
    async with env.client() as admin:
        for i in range(3):
            await admin.create(source_cm(f"slow-{i}"))
        manager = Manager(admin, graceful_shutdown_timeout=grace)
        rec = Slow(seconds)
        Builder(manager).named("slow").for_("v1", "ConfigMap").complete(rec)
        stop = asyncio.Event()
        task = asyncio.create_task(manager.start(stop))
        async with asyncio.timeout(10):
            await rec.first.wait()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        stop.set()
        async with asyncio.timeout(10):
            await task
        return rec, loop.time() - t0


async def test_stop_drains_the_in_flight_reconcile_and_starts_no_new_one(env: Env) -> None:
    rec, took = await run_slow(env, seconds=0.3, grace=10)
    assert rec.finished == rec.started[:1], "the in-flight reconcile finished"
    assert len(rec.started) == 1, "queued keys were not started after stop"
    assert rec.cancelled == []
    assert took < 2


async def test_stop_cancels_reconciles_that_outlive_the_grace_period(env: Env) -> None:
    rec, took = await run_slow(env, seconds=30, grace=0.2)
    assert rec.cancelled == rec.started[:1]
    assert took < 3, "the grace period bounds the stop"


class Boom:
    """A runnable that fails once ``after`` holds (the other runnables are up)."""

    needs_leader_election = False

    def __init__(self, after: Callable[[], bool]) -> None:
        self.after = after

    async def run(self, stop: asyncio.Event) -> None:
        while not self.after():
            await asyncio.sleep(0.01)
        raise RuntimeError("webhook server could not load its certificate")


async def test_a_failing_runnable_stops_the_manager_with_its_error(env: Env) -> None:
    async with env.client() as admin:
        manager = Manager(admin)
        rec = Slow(0)
        victim = Builder(manager).named("victim").for_("v1", "ConfigMap").complete(rec)
        manager.add(Boom(victim.has_synced))
        with pytest.raises(RuntimeError, match="could not load its certificate"):
            async with asyncio.timeout(10):
                await manager.start(asyncio.Event())


async def test_events_are_written_and_repeats_aggregated(env: Env) -> None:
    class Eventful:
        def __init__(self, manager: Manager) -> None:
            self.manager = manager
            self.recorder = manager.event_recorder("eventful-controller")

        async def reconcile(self, request: Request) -> Result:
            obj = await self.manager.cache.get("v1", "ConfigMap", request.name, request.namespace)
            for _ in range(3):
                self.recorder.event(obj, "Normal", "Seen", f"saw {request.name}")
            self.recorder.event(obj, "Warning", "Odd", "something odd")
            return Result()

    async with env.client() as admin:
        await admin.create(source_cm("ev"))
        manager = Manager(admin)
        Builder(manager).named("eventful").for_("v1", "ConfigMap").complete(Eventful(manager))
        stop = asyncio.Event()
        task = asyncio.create_task(manager.start(stop))
        try:
            events: list[dict[str, Any]] = []
            async with asyncio.timeout(10):
                while True:
                    events = (await admin.list("v1", "Event", "default"))["items"]
                    mine = [e for e in events if e["involvedObject"].get("name") == "ev"]
                    if sum(e.get("count", 0) for e in mine) >= 4:
                        break
                    await asyncio.sleep(0.05)
        finally:
            stop.set()
            async with asyncio.timeout(10):
                await task
    by_reason = {e["reason"]: e for e in mine}
    assert by_reason["Seen"]["count"] == 3 and by_reason["Odd"]["count"] == 1
    assert len([e for e in mine if e["reason"] == "Seen"]) == 1, "repeats aggregate into one Event"
    seen = by_reason["Seen"]
    assert seen["involvedObject"]["kind"] == "ConfigMap"
    assert seen["involvedObject"]["uid"]
    assert seen["source"]["component"] == "eventful-controller"
    assert by_reason["Odd"]["type"] == "Warning"


async def test_a_probe_address_in_use_fails_start_with_a_clear_error(env: Env) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        async with env.client() as admin:
            manager = Manager(admin, health_probe_bind_address=f"127.0.0.1:{port}")
            with pytest.raises(RuntimeError, match="health-probe-server could not start"):
                async with asyncio.timeout(10):
                    await manager.start(asyncio.Event())


def test_options_from_cli_flags() -> None:
    import argparse

    from nimctl_runtime.manager import ManagerOptions

    args = argparse.Namespace(
        leader_elect=True,
        leader_election_id="nimctl.apps.nvidia.com",
        leader_election_namespace="nim-operator",
        metrics_bind_address=":8080",
        health_probe_bind_address=":8081",
        watch_namespace="",
    )
    opts = ManagerOptions.from_args(args, graceful_shutdown_timeout=5)
    assert opts.leader_election and opts.leader_election_id == "nimctl.apps.nvidia.com"
    assert opts.leader_election_namespace == "nim-operator"
    assert (opts.metrics_bind_address, opts.health_probe_bind_address) == (":8080", ":8081")
    assert opts.cache_namespace is None and opts.graceful_shutdown_timeout == 5
    assert (opts.lease_duration, opts.renew_deadline, opts.retry_period) == (15.0, 10.0, 2.0)
