"""Controller: Result semantics, error handling, exclusivity, watches, shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from nimctl_runtime import metrics
from nimctl_runtime.controller import CacheSyncTimeoutError, Controller
from nimctl_runtime.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
)
from nimctl_runtime.predicate import GenerationChangedPredicate
from nimctl_runtime.reconcile import Request, Result, TerminalError
from nimctl_runtime.workqueue import ItemExponentialFailureRateLimiter
from tests.conditions import controller_idle, until

from .fakes import FakeCache, obj

AV, KIND = "example.com/v1", "Widget"
_names = iter(range(10**6))


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


class Recorder:
    """A reconciler driven by a script: fn(request, attempt) -> Result or raises."""

    def __init__(self, fn: Callable[[Request, int], Awaitable[Result]] | None = None) -> None:
        self.calls: list[Request] = []
        self.fn = fn
        self.event = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request)
        self.event.set()
        if self.fn is None:
            return Result()
        return await self.fn(request, len([c for c in self.calls if c == request]))

    async def wait_calls(self, n: int, timeout: float = 3.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.calls) < n:
                self.event.clear()
                await self.event.wait()


def fast_limiter() -> ItemExponentialFailureRateLimiter[Request]:
    return ItemExponentialFailureRateLimiter(0.001, 0.01)


class Running:
    def __init__(self, ctrl: Controller) -> None:
        self.ctrl = ctrl
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(self.ctrl.run(self.stop))
        async with asyncio.timeout(3):
            while not self.ctrl.has_synced():
                await asyncio.sleep(0.001)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.stop.set()
        assert self.task is not None
        async with asyncio.timeout(5):
            await self.task


def make(rec: Recorder, cache: FakeCache, **kw: Any) -> Controller:
    ctrl = Controller(unique("ctl"), rec, cache, rate_limiter=fast_limiter(), **kw)
    ctrl.watch(AV, KIND, EnqueueRequestForObject())
    return ctrl


def sample(name: str, ctrl: Controller, **labels: str) -> float:
    v = metrics.REGISTRY.get_sample_value(name, {"controller": ctrl.name, **labels})
    return v or 0.0


async def test_add_event_reconciles_the_object() -> None:
    cache, rec = FakeCache(), Recorder()
    ctrl = make(rec, cache)
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("a", "ns1"))
        await rec.wait_calls(1)
    assert rec.calls == [Request("ns1", "a")]
    assert sample("controller_runtime_reconcile_total", ctrl, result="success") == 1
    assert sample("controller_runtime_reconcile_total", ctrl, result="error") == 0
    assert sample("controller_runtime_max_concurrent_reconciles", ctrl) == 1
    assert ctrl.queue.num_requeues(Request("ns1", "a")) == 0


async def test_error_is_retried_with_backoff_and_worker_survives() -> None:
    async def fail_twice(req: Request, attempt: int) -> Result:
        if req.name == "bad" and attempt <= 2:
            raise KeyError("boom")
        return Result()

    cache, rec = FakeCache(), Recorder(fail_twice)
    ctrl = make(rec, cache)
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("bad"))
        await rec.wait_calls(3)
        cache.informer(AV, KIND).add(obj("good"))
        await rec.wait_calls(4)
    assert [c.name for c in rec.calls] == ["bad", "bad", "bad", "good"]
    assert sample("controller_runtime_reconcile_errors_total", ctrl) == 2
    assert sample("controller_runtime_reconcile_panics_total", ctrl) == 2
    assert sample("controller_runtime_reconcile_total", ctrl, result="success") == 2
    assert ctrl.queue.num_requeues(Request("default", "bad")) == 0, "success forgets backoff"


async def test_terminal_error_is_not_requeued() -> None:
    async def terminal(req: Request, attempt: int) -> Result:
        raise TerminalError("spec.image is empty")

    cache, rec = FakeCache(), Recorder(terminal)
    ctrl = make(rec, cache)
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("t"))
        await rec.wait_calls(1)
        await until(lambda: controller_idle(ctrl), what="no retry queued or running")
    assert len(rec.calls) == 1
    assert sample("controller_runtime_terminal_reconcile_errors_total", ctrl) == 1
    assert sample("controller_runtime_reconcile_total", ctrl, result="error") == 1


async def test_requeue_after_reconciles_again_and_forgets_backoff() -> None:
    async def again(req: Request, attempt: int) -> Result:
        if attempt == 1:
            raise RuntimeError("transient")
        return Result(requeue_after=0.02) if attempt < 4 else Result()

    cache, rec = FakeCache(), Recorder(again)
    ctrl = make(rec, cache)
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("r"))
        await rec.wait_calls(4)
        assert ctrl.queue.num_requeues(Request("default", "r")) == 0
    assert sample("controller_runtime_reconcile_total", ctrl, result="requeue_after") == 2
    assert sample("controller_runtime_reconcile_panics_total", ctrl) == 0


async def test_requeue_true_uses_rate_limiter() -> None:
    async def requeue(req: Request, attempt: int) -> Result:
        return Result(requeue=True) if attempt < 3 else Result()

    cache, rec = FakeCache(), Recorder(requeue)
    ctrl = make(rec, cache)
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("q"))
        await rec.wait_calls(3)
    assert sample("controller_runtime_reconcile_total", ctrl, result="requeue") == 2


async def test_reconcile_timeout_counts_and_retries() -> None:
    async def slow(req: Request, attempt: int) -> Result:
        if attempt == 1:
            await asyncio.Event().wait()  # hangs until the reconcile timeout cancels it
        return Result()

    cache, rec = FakeCache(), Recorder(slow)
    ctrl = make(rec, cache, reconcile_timeout=0.05)
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("s"))
        await rec.wait_calls(2)
    assert sample("controller_runtime_reconcile_timeouts_total", ctrl) == 1
    assert sample("controller_runtime_reconcile_errors_total", ctrl) == 1


async def test_a_key_is_never_reconciled_concurrently_but_keys_run_in_parallel() -> None:
    active: set[Request] = set()
    overlaps = 0
    max_parallel = 0

    async def work(req: Request, attempt: int) -> Result:
        nonlocal overlaps, max_parallel
        if req in active:
            overlaps += 1
        active.add(req)
        max_parallel = max(max_parallel, len(active))
        await asyncio.sleep(0)  # other workers run meanwhile
        active.discard(req)
        return Result()

    cache, rec = FakeCache(), Recorder(work)
    ctrl = make(rec, cache, max_concurrent_reconciles=4)
    inf = cache.informer(AV, KIND)
    async with Running(ctrl):
        for i in range(300):
            inf.update(obj("hot", rv=str(i)), obj("hot", rv=str(i + 1)))
            inf.add(obj(f"cold-{i % 8}"))
            if i % 10 == 0:
                await asyncio.sleep(0)
        await until(lambda: controller_idle(ctrl), what="every queued key reconciled")
    assert overlaps == 0
    assert max_parallel > 1
    # 300 updates of a busy key coalesce in the queue and none is lost; every
    # other key gets its own reconcile
    hot_calls = rec.calls.count(Request("default", "hot"))
    assert 1 <= hot_calls < 300
    assert {Request("default", f"cold-{i}") for i in range(8)} <= set(rec.calls)


async def test_stop_drains_in_flight_and_takes_no_new_work() -> None:
    release = asyncio.Event()
    finished: list[str] = []

    async def work(req: Request, attempt: int) -> Result:
        await release.wait()
        finished.append(req.name)
        return Result()

    cache, rec = FakeCache(), Recorder(work)
    ctrl = make(rec, cache)
    stop = asyncio.Event()
    task = asyncio.create_task(ctrl.run(stop))
    async with asyncio.timeout(3):
        while not ctrl.has_synced():
            await asyncio.sleep(0.001)
    cache.informer(AV, KIND).add(obj("first"))
    cache.informer(AV, KIND).add(obj("queued"))
    await rec.wait_calls(1)
    stop.set()
    await until(ctrl.queue.shutting_down, what="the controller saw the stop")
    assert not task.done(), "run waits for the in-flight reconcile"
    release.set()
    async with asyncio.timeout(3):
        await task
    assert finished == ["first"], "the queued key is not started after stop"


async def test_generation_changed_predicate_drops_status_updates() -> None:
    cache, rec = FakeCache(), Recorder()
    ctrl = Controller(unique("ctl"), rec, cache, rate_limiter=fast_limiter())
    ctrl.watch(AV, KIND, EnqueueRequestForObject(), GenerationChangedPredicate())
    inf = cache.informer(AV, KIND)
    async with Running(ctrl):
        inf.update(obj("p", generation=1, rv="1"), obj("p", generation=1, rv="2"))
        await until(lambda: controller_idle(ctrl))
        assert rec.calls == []
        inf.update(obj("p", generation=1, rv="2"), obj("p", generation=2, rv="3"))
        await rec.wait_calls(1)


async def test_owned_object_events_enqueue_the_controller_owner() -> None:
    cache, rec = FakeCache(), Recorder()
    ctrl = Controller(unique("ctl"), rec, cache, rate_limiter=fast_limiter())
    ctrl.watch(AV, KIND, EnqueueRequestForObject())
    ctrl.watch("apps/v1", "Deployment", EnqueueRequestForOwner(AV, KIND))
    owners: list[dict[str, Any]] = [
        {"apiVersion": "example.com/v1beta1", "kind": KIND, "name": "owner", "controller": True},
        {"apiVersion": AV, "kind": KIND, "name": "not-controller"},
        {"apiVersion": "other.com/v1", "kind": KIND, "name": "other-group", "controller": True},
    ]
    async with Running(ctrl):
        cache.informer("apps/v1", "Deployment").delete(
            obj("dep", "ns", kind="Deployment", api_version="apps/v1", owners=owners)
        )
        await rec.wait_calls(1)
        await until(lambda: controller_idle(ctrl))
    assert rec.calls == [Request("ns", "owner")]


async def test_watches_with_async_map_function() -> None:
    cache, rec = FakeCache(), Recorder()

    async def map_fn(o: dict[str, Any]) -> list[Request]:
        await asyncio.sleep(0)
        return [Request("default", n) for n in o["data"]["users"]]

    ctrl = Controller(unique("ctl"), rec, cache, rate_limiter=fast_limiter())
    ctrl.watch("v1", "ConfigMap", EnqueueRequestsFromMapFunc(map_fn))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
          "data": {"users": ["x", "y"]}}  # fmt: skip
    async with Running(ctrl):
        cache.informer("v1", "ConfigMap").add(cm)
        await rec.wait_calls(2)
    assert sorted(c.name for c in rec.calls) == ["x", "y"]


async def test_cache_sync_timeout_fails_start_with_a_clear_error() -> None:
    ctrl = make(Recorder(), FakeCache(synced=False), cache_sync_timeout=0.05)
    with pytest.raises(CacheSyncTimeoutError, match="timed out"):
        async with asyncio.timeout(3):
            await ctrl.run(asyncio.Event())


async def test_stop_during_cache_sync_returns() -> None:
    cache = FakeCache(synced=False)
    ctrl = make(Recorder(), cache, cache_sync_timeout=60)
    stop = asyncio.Event()
    task = asyncio.create_task(ctrl.run(stop))
    await until(lambda: cache.sync_waits, what="the controller waits for its caches")
    stop.set()
    async with asyncio.timeout(3):
        await task


async def test_events_reach_the_workqueue_while_the_informer_calls_back() -> None:
    """No second queue: a plain handler's key is on the WorkQueue when the callback returns."""
    cache = FakeCache()
    release = asyncio.Event()

    async def slow(request: Request, attempt: int) -> Result:
        await release.wait()
        return Result()

    rec = Recorder(slow)
    ctrl = make(rec, cache)
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("busy"))
        await rec.wait_calls(1)  # the only worker is now held by "busy"
        cache.informer(AV, KIND).add(obj("a"))
        cache.informer(AV, KIND).add(obj("b"))
        assert len(ctrl.queue) == 2  # queued synchronously, before any await
        release.set()
        await rec.wait_calls(3)
    assert [c.name for c in rec.calls] == ["busy", "a", "b"]


async def test_plain_map_function_reading_synchronously() -> None:
    cache, rec = FakeCache(), Recorder()
    users = {"c": ["x", "y"]}

    def map_fn(o: dict[str, Any]) -> list[Request]:
        return [Request("default", n) for n in users[o["metadata"]["name"]]]

    ctrl = Controller(unique("ctl"), rec, cache, rate_limiter=fast_limiter())
    ctrl.watch("v1", "ConfigMap", EnqueueRequestsFromMapFunc(map_fn))
    async with Running(ctrl):
        cache.informer("v1", "ConfigMap").add(obj("c", kind="ConfigMap", api_version="v1"))
        assert len(ctrl.queue) + ctrl.in_flight() == 2
        await rec.wait_calls(2)
    assert sorted(c.name for c in rec.calls) == ["x", "y"]


async def test_a_stopped_controller_leaves_the_shared_informer() -> None:
    """The cache outlives a controller (leadership lost): its callbacks are unregistered."""
    cache, rec = FakeCache(), Recorder()
    ctrl = make(rec, cache)
    async with Running(ctrl):
        assert len(cache.informer(AV, KIND).handlers) == 1
    assert cache.informer(AV, KIND).handlers == []
    cache.informer(AV, KIND).add(obj("late"))
    assert rec.calls == []


# -- fencing and restarts (issue 26) ------------------------------------------------------


async def test_a_key_dequeued_while_the_fence_refuses_is_put_back_not_reconciled() -> None:
    from nimctl_runtime.client.errors import NotLeaderError

    cache, rec = FakeCache(), Recorder()
    ctrl = make(rec, cache)
    leading = [True]

    def fence() -> None:
        if not leading[0]:
            raise NotLeaderError("write not sent: not the leader")

    ctrl.leader_fence = fence
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("a"))
        await rec.wait_calls(1)
        leading[0] = False  # e.g. resumed after a pause past the lease
        cache.informer(AV, KIND).add(obj("b"))
        async with asyncio.timeout(3):
            while ctrl.fenced < 1:
                await asyncio.sleep(0.001)
        assert [c.name for c in rec.calls] == ["a"], "b was not reconciled"
        assert len(ctrl.queue) == 1, "b is back on the queue for whoever leads next"
    assert sample("controller_runtime_reconcile_errors_total", ctrl) == 0


async def test_a_write_refused_by_the_fence_requeues_without_counting_an_error() -> None:
    from nimctl_runtime.client.errors import NotLeaderError

    async def refused(req: Request, attempt: int) -> Result:
        try:
            raise NotLeaderError("write not sent")
        except NotLeaderError as exc:  # a reconciler wrapping it keeps it in the chain
            raise RuntimeError("could not update status") from exc

    cache, rec = FakeCache(), Recorder(refused)
    ctrl = make(rec, cache)
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("a"))
        await rec.wait_calls(1)
        async with asyncio.timeout(3):
            while ctrl.fenced < 1:
                await asyncio.sleep(0.001)
    assert ctrl.fenced >= 1
    assert sample("controller_runtime_reconcile_errors_total", ctrl) == 0


async def test_a_controller_runs_again_after_it_was_stopped() -> None:
    """Leadership lost and won back: the same controller starts again with a fresh queue."""
    cache, rec = FakeCache(), Recorder()
    ctrl = make(rec, cache)
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("a"))
        await rec.wait_calls(1)
    assert not ctrl.has_synced()
    async with Running(ctrl):
        cache.informer(AV, KIND).add(obj("b"))
        await rec.wait_calls(2)
    assert [c.name for c in rec.calls][-1] == "b"
