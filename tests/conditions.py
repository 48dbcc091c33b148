"""Waiting on a condition instead of sleeping a fixed time.

``until`` polls a check (plain or async) until it returns something truthy and
returns that, or fails with the last value seen once ``timeout`` passes. A test
that waits with it takes as long as the thing it waits for, and no longer; a
test that sleeps a fixed time is either slow or racy (see tests/tools/fixed_sleeps.py).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

Check = Callable[[], Any] | Callable[[], Awaitable[Any]]


async def until(
    check: Check, *, timeout: float = 10.0, interval: float = 0.005, what: str = ""
) -> Any:
    """Poll ``check`` until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = check()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{what or 'condition'} not met within {timeout}s; last value: {last!r}"
            )
        await asyncio.sleep(interval)


def controller_idle(controller: Any, *, delayed: bool = True) -> bool:
    """Nothing queued, nothing in flight and (with ``delayed``) no delayed requeue waiting."""
    queue = controller.queue
    waiting = queue.waiting() if delayed else 0
    return len(queue) == 0 and controller.in_flight() == 0 and waiting == 0
