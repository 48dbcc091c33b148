"""WorkQueue: per-key exclusivity, dedup, delayed adds, rate limiting, shutdown."""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Callable

import pytest
from prometheus_client import generate_latest

from nimctl_runtime import metrics
from nimctl_runtime.workqueue import (
    BucketRateLimiter,
    ItemBackoffBucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    ShutDown,
    WorkQueue,
    default_controller_rate_limiter,
)
from tests.conditions import until


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_adds_of_a_queued_key_collapse_into_one() -> None:
    q: WorkQueue[str] = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert len(q) == 0


async def test_key_being_processed_is_not_handed_out_again_until_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    item = await q.get()
    for _ in range(10):
        q.add("a")  # events during the reconcile
    assert len(q) == 0, "a processing key must not be queued for a second worker"
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await q.get()
    q.done(item)
    assert len(q) == 1, "the adds during processing collapse into one re-run"
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_done_without_readd_does_not_requeue() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.done(await q.get())
    assert len(q) == 0


async def test_fifo_order() -> None:
    q: WorkQueue[int] = WorkQueue()
    for i in range(20):
        q.add(i)
    assert [await q.get() for _ in range(20)] == list(range(20))


async def test_blocked_getter_wakes_on_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    q.add("x")
    async with asyncio.timeout(2):
        assert await getter == "x"


async def test_cancelled_getter_passes_wakeup_on() -> None:
    q: WorkQueue[str] = WorkQueue()
    g1 = asyncio.create_task(q.get())
    g2 = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("x")
    g1.cancel()  # woken but cancelled before it ran
    async with asyncio.timeout(2):
        assert await g2 == "x"
    assert g1.cancelled()


async def test_many_workers_never_share_a_key() -> None:
    q: WorkQueue[int] = WorkQueue()
    active: set[int] = set()
    overlaps = 0
    processed = 0

    async def worker() -> None:
        nonlocal overlaps, processed
        while True:
            try:
                k = await q.get()
            except ShutDown:
                return
            if k in active:
                overlaps += 1
            active.add(k)
            await asyncio.sleep(0)
            active.discard(k)
            processed += 1
            q.done(k)

    workers = [asyncio.create_task(worker()) for _ in range(8)]
    for i in range(2000):
        q.add(i % 7)
        if i % 50 == 0:
            await asyncio.sleep(0)
    async with asyncio.timeout(5):
        assert await q.shut_down_with_drain(5)
        await asyncio.gather(*workers)
    assert overlaps == 0
    assert processed < 2000, "adds were deduplicated"


async def test_add_after_delays_and_keeps_earliest_time() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 0.3)
    q.add_after("a", 0.05)  # earlier wins
    q.add_after("a", 10)  # later is ignored
    assert len(q) == 0 and q.waiting() == 1
    async with asyncio.timeout(0.25):
        assert await q.get() == "a"
    q.done("a")
    assert q.waiting() == 0
    await asyncio.sleep(0.35)
    assert len(q) == 0, "the superseded later time must not add the key again"


async def test_add_after_zero_adds_now() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 0)
    assert len(q) == 1


async def test_delayed_items_come_out_in_time_order() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("c", 0.06)
    q.add_after("a", 0.02)
    q.add_after("b", 0.04)
    async with asyncio.timeout(2):
        got = [await q.get() for _ in range(3)]
    assert got == ["a", "b", "c"]


def test_exponential_backoff_5ms_to_1000s() -> None:
    rl: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.005, 1000)
    delays = [rl.when("k") for _ in range(25)]
    assert delays[0] == pytest.approx(0.005)
    assert delays[1] == pytest.approx(0.010)
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655 s
    assert delays[18] == 1000 and delays[24] == 1000
    assert rl.num_requeues("k") == 25
    assert rl.when("other") == pytest.approx(0.005), "backoff is per item"
    rl.forget("k")
    assert rl.num_requeues("k") == 0
    assert rl.when("k") == pytest.approx(0.005)


def test_exponential_backoff_never_overflows() -> None:
    rl: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.005, 1000)
    for _ in range(5000):
        d = rl.when("k")
    assert d == 1000


def test_bucket_allows_burst_then_10_qps() -> None:
    clock = FakeClock()
    rl: BucketRateLimiter[str] = BucketRateLimiter(10, 100, clock)
    assert [rl.when(str(i)) for i in range(100)] == [0.0] * 100
    assert rl.when("x") == pytest.approx(0.1)
    assert rl.when("y") == pytest.approx(0.2)
    clock.now += 1.0  # 10 tokens refill, 2 were borrowed
    assert rl.when("z") == 0.0
    clock.now += 1000
    assert [rl.when(str(i)) for i in range(100)] == [0.0] * 100, "refill capped at burst"
    assert rl.when("w") > 0


def test_default_controller_limiter_is_per_item_backoff_and_a_bucket() -> None:
    clock = FakeClock()
    rl: ItemBackoffBucketRateLimiter[str] = default_controller_rate_limiter(clock)
    # per-item dominates for one key failing repeatedly
    assert rl.when("a") == pytest.approx(0.005)
    assert rl.when("a") == pytest.approx(0.010)
    # the bucket dominates when many keys retry at once
    for i in range(98):
        rl.when(f"k{i}")
    assert rl.when("fresh") == pytest.approx(0.1)
    # ... and a key the bucket held back waits at least twice that next time
    assert rl.when("fresh") == pytest.approx(0.2)
    assert rl.num_requeues("a") == 2
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    clock.now += 100  # the bucket refilled
    assert rl.when("a") == pytest.approx(0.005), "forget resets the backoff"


def retries_when_failing_forever(
    limiter: Callable[[FakeClock], RateLimiter[int]], keys: int, horizon: float
) -> list[int]:
    """Retries per key by ``horizon`` s when every reconcile of every key fails (instantly)."""
    clock = FakeClock()
    rl = limiter(clock)
    start = clock.now
    due = [(start, k) for k in range(keys)]
    heapq.heapify(due)
    retries = [0] * keys
    while due and due[0][0] <= start + horizon:
        at, key = heapq.heappop(due)
        clock.now = at
        if at > start:
            retries[key] += 1
        heapq.heappush(due, (at + rl.when(key), key))
    return retries


def client_go_default(clock: FakeClock) -> RateLimiter[int]:
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0), BucketRateLimiter(10.0, 100, clock)
    )


def test_keys_failing_forever_cost_log_t_retries_each_not_a_10_per_second_stream() -> None:
    """750 always-failing keys (issue 26): client-go's max-of-both keeps retrying at the bucket's
    10/s for as long as its debt outgrows the keys' own backoff; ours doubles each key's delay."""
    ours = {t: retries_when_failing_forever(default_controller_rate_limiter, 750, t)
            for t in (240.0, 3600.0)}  # fmt: skip
    theirs = {t: retries_when_failing_forever(client_go_default, 750, t) for t in (240.0, 3600.0)}
    print({f"{name} {t:g}s": sum(r[t]) for name, r in (("ours", ours), ("client-go", theirs))
           for t in r})  # fmt: skip
    bound = math.log2(3600.0 / 0.005) + 1  # doubling from the 5 ms base
    assert max(ours[3600.0]) <= bound
    # O(log t) per key: an hour costs each key only a few retries more than 4 minutes
    assert max(b - a for a, b in zip(ours[240.0], ours[3600.0], strict=True)) <= 5
    assert sum(ours[240.0]) < sum(theirs[240.0])
    # client-go: 10/s until its keys' own backoff outgrows the bucket's debt (~20 min)
    theirs_later = sum(theirs[3600.0]) - sum(theirs[240.0])
    ours_later = sum(ours[3600.0]) - sum(ours[240.0])
    assert ours_later <= 5 * 750
    assert 3 * ours_later < theirs_later


async def test_add_rate_limited_uses_backoff_and_forget_resets_it() -> None:
    q: WorkQueue[str] = WorkQueue(rate_limiter=ItemExponentialFailureRateLimiter(0.01, 1))
    q.add_rate_limited("a")
    assert len(q) == 0 and q.waiting() == 1
    async with asyncio.timeout(2):
        assert await q.get() == "a"
    q.done("a")
    q.add_rate_limited("a")
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 3
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert q.waiting() == 1, "forget does not remove the key from the queue"


async def test_shutdown_rejects_adds_but_drains_ready_keys() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.add_after("later", 0.01)
    q.shut_down()
    q.add("c")
    q.add_after("d", 0.01)
    assert q.shutting_down()
    assert await q.get() == "a"
    assert await q.get() == "b"
    with pytest.raises(ShutDown):
        await q.get()
    await asyncio.sleep(0.03)
    assert len(q) == 0, "delayed adds are dropped on shutdown"


async def test_shutdown_wakes_idle_getters() -> None:
    q: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)
    q.shut_down()
    async with asyncio.timeout(2):
        results = await asyncio.gather(*getters, return_exceptions=True)
    assert all(isinstance(r, ShutDown) for r in results)


async def test_shutdown_with_drain_waits_for_in_flight() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    item = await q.get()
    drain = asyncio.create_task(q.shut_down_with_drain(5))
    await until(q.shutting_down, what="the drain began")
    assert not drain.done(), "drain must wait for the key being processed"
    q.done(item)
    async with asyncio.timeout(2):
        assert await drain is True


async def test_shutdown_with_drain_gives_up_after_grace_period() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    await q.get()
    async with asyncio.timeout(2):
        assert await q.shut_down_with_drain(0.02) is False


async def test_later_shutdown_aborts_drain() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    await q.get()
    drain = asyncio.create_task(q.shut_down_with_drain(None))
    await until(q.shutting_down, what="the drain began")
    q.shut_down()
    async with asyncio.timeout(2):
        assert await drain is False


async def test_metrics_follow_the_queue() -> None:
    name = "wq-metrics-test"
    q: WorkQueue[str] = WorkQueue(name)
    q.add("a")
    q.add("a")
    q.add("b")

    def sample(metric: str, **labels: str) -> float | None:
        value = metrics.REGISTRY.get_sample_value(
            metric, {"name": name, "controller": name, **labels}
        )
        return value

    assert sample("workqueue_adds_total") == 3
    assert sample("workqueue_depth", priority="") == 2
    await q.get()
    assert sample("workqueue_depth", priority="") == 1
    assert sample("workqueue_queue_duration_seconds_count") == 1
    assert (sample("workqueue_longest_running_processor_seconds") or 0) >= 0
    q.done("a")
    assert sample("workqueue_work_duration_seconds_count") == 1
    q.add_after("c", 0.5)
    assert sample("workqueue_retries_total") == 1
    text = generate_latest(metrics.REGISTRY).decode()
    assert f'workqueue_unfinished_work_seconds{{controller="{name}",name="{name}"}}' in text
    q.shut_down()


async def test_higher_priority_keys_are_handed_out_first() -> None:
    from nimctl_runtime.workqueue import LOW_PRIORITY

    q: WorkQueue[str] = WorkQueue()
    for i in range(3):
        q.add(f"initial-{i}", LOW_PRIORITY)  # a restart's initial list
    q.add("fresh-1")
    q.add("urgent", 10)
    q.add("fresh-2")
    q.add("initial-2", 0)  # a real event for a listed key raises its priority
    got = [await q.get() for _ in range(len(q))]
    assert got == ["urgent", "fresh-1", "fresh-2", "initial-2", "initial-0", "initial-1"]


async def test_priority_survives_processing_and_delays() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a", -100)
    item = await q.get()
    q.add("a", 5)  # re-added while processing: keeps the priority for the re-run
    q.add("b", 0)
    q.done(item)
    assert await q.get() == "a"
    q.add_after("c", 0.01, 7)
    q.add_after("c", 0.02, 1)  # the higher priority is kept
    q.add("d", 3)
    await until(lambda: len(q) == 3, what="the delayed key is ready")
    assert [await q.get() for _ in range(3)] == ["c", "d", "b"]
