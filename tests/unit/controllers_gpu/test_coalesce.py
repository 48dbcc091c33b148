"""Node/pod events of a rollout share one ClusterPolicy reconcile (controllers.gpu.coalesce)."""

from __future__ import annotations

import asyncio

import pytest

from controllers.gpu.coalesce import Coalesced
from nimctl_runtime.handler import (
    CreateEvent,
    DeleteEvent,
    EnqueueRequestsFromMapFunc,
    UpdateEvent,
)
from nimctl_runtime.reconcile import Request
from nimctl_runtime.workqueue import WorkQueue

POLICY = Request("", "cluster-policy")


def _node(name: str, rv: str) -> dict[str, object]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


async def test_a_burst_of_node_events_queues_the_policy_once_after_the_window() -> None:
    queue: WorkQueue[Request] = WorkQueue()
    handler = Coalesced(EnqueueRequestsFromMapFunc(lambda _: [POLICY]), delay=0.2)
    handler.create(CreateEvent(_node("n0", "1")), queue)
    for i in range(50):
        handler.update(UpdateEvent(_node(f"n{i}", "1"), _node(f"n{i}", "2")), queue)
    handler.delete(DeleteEvent(_node("n1", "2")), queue)
    # Nothing is ready to reconcile yet: the key waits for the window to close.
    assert len(queue) == 0
    assert queue.waiting() == 1
    got = await asyncio.wait_for(queue.get(), timeout=5)
    assert got == POLICY
    queue.done(got)
    # Every event of the window was served by that one reconcile.
    assert len(queue) == 0 and queue.waiting() == 0


async def test_an_async_map_function_is_deferred_too() -> None:
    queue: WorkQueue[Request] = WorkQueue()

    async def every_policy(_: object) -> list[Request]:
        return [POLICY]

    handler = Coalesced(EnqueueRequestsFromMapFunc(every_policy), delay=0.2)
    pending = handler.create(CreateEvent(_node("n0", "1")), queue)
    assert pending is not None
    await pending
    assert len(queue) == 0 and queue.waiting() == 1
    assert await asyncio.wait_for(queue.get(), timeout=5) == POLICY


def test_a_window_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        Coalesced(EnqueueRequestsFromMapFunc(lambda _: [POLICY]), delay=0)
