"""The operator's garbage-collector policy: the start-up heap is frozen once the caches
synced, so full collections stop walking it (issue 30); nothing before that."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from nimctl_runtime.gcpolicy import DEFAULT_THRESHOLDS, GCPolicy


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


async def test_the_heap_is_frozen_once_the_caches_synced_and_not_before() -> None:
    gc.unfreeze()
    synced = asyncio.Event()
    stop = asyncio.Event()

    async def wait_synced() -> bool:
        await synced.wait()
        return True

    policy = GCPolicy(wait_synced)
    task = asyncio.create_task(policy.run(stop))
    await asyncio.sleep(0)
    assert gc.get_freeze_count() == 0 and policy.frozen == 0
    synced.set()
    while policy.frozen == 0:
        await asyncio.sleep(0)
    assert policy.frozen > 0 and gc.get_freeze_count() > 0
    assert gc.get_threshold() == DEFAULT_THRESHOLDS
    stop.set()
    await task


async def test_a_stop_before_the_caches_synced_freezes_nothing() -> None:
    gc.unfreeze()
    stop = asyncio.Event()

    async def never() -> bool:
        await asyncio.Event().wait()
        return True

    policy = GCPolicy(never)
    task = asyncio.create_task(policy.run(stop))
    await asyncio.sleep(0)
    stop.set()
    await task
    assert policy.frozen == 0 and gc.get_freeze_count() == 0


async def test_the_c_heap_is_trimmed_on_its_interval_until_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Freed C-heap pages go back to the OS every ``trim_interval`` seconds (glibc)."""
    import nimctl_runtime.gcpolicy as policy_module

    gc.unfreeze()
    trims = [0]

    def counting_trim() -> bool:
        trims[0] += 1
        return True

    monkeypatch.setattr(policy_module, "trim_heap", counting_trim)

    async def synced() -> bool:
        return True

    stop = asyncio.Event()
    policy = GCPolicy(synced, trim_interval=0.01)
    task = asyncio.create_task(policy.run(stop))
    while trims[0] < 3:
        await asyncio.sleep(0.01)
    stop.set()
    await task
    assert policy.trims == trims[0] >= 3
    assert task.done()  # stopping ends the loop: no trimming left running behind it


def test_trim_heap_runs_where_glibc_is() -> None:
    from nimctl_runtime.gcpolicy import trim_heap

    assert isinstance(trim_heap(), bool)


async def test_the_operator_collects_its_young_generation_ten_times_less_often() -> None:
    """``nimctl run`` raises the young threshold to 100,000 allocations (young
    collections were 7% of its CPU while 1,000 NIMServices were created)."""
    from types import SimpleNamespace

    from nimctl.operator import OPERATOR_GC_THRESHOLDS, _gc_policy

    gc.unfreeze()
    stop = asyncio.Event()

    async def synced() -> bool:
        return True

    manager = SimpleNamespace(cache=SimpleNamespace(wait_for_sync=lambda _: synced()))
    policy = _gc_policy(manager)  # type: ignore[arg-type]
    task = asyncio.create_task(policy.run(stop))
    while policy.frozen == 0:
        await asyncio.sleep(0)
    assert gc.get_threshold() == OPERATOR_GC_THRESHOLDS
    assert OPERATOR_GC_THRESHOLDS[0] == 10 * DEFAULT_THRESHOLDS[0]
    stop.set()
    await task
