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
