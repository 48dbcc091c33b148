"""Simulated time: a speed-scaled clock for normal runs, a manual one for tests.

Every delay in the simulator (pod start, readiness, a container's run time,
crash-loop back-off, Job TTL, progress deadlines) is in simulated seconds.
``ScaledClock(speed=10)`` makes them pass ten times faster than real time;
``ManualClock`` only moves when a test calls ``advance``, which makes
sequences exactly reproducible.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import time
from typing import Protocol


class Clock(Protocol):
    """Simulated time, in seconds, with a wall-clock view for object timestamps."""

    def now(self) -> float: ...

    def wall(self) -> datetime.datetime: ...

    def wall_at(self, moment: float) -> datetime.datetime: ...

    async def sleep_until(self, deadline: float) -> None: ...


def rfc3339(moment: datetime.datetime) -> str:
    """Kubernetes' timestamp format (``metav1.Time``: UTC, whole seconds, ``Z``)."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.lru_cache(maxsize=4096)
def parse_rfc3339(stamp: str) -> datetime.datetime | None:
    """The UTC moment of an :func:`rfc3339` stamp, None when it is not one. Remembered:
    the controllers read the same few stamps (whole seconds) on every reconcile, and
    ``strptime`` costs about 10 us."""
    try:
        moment = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return moment.replace(tzinfo=datetime.UTC)


class ScaledClock:
    """Real time multiplied by ``speed`` (``speed=1`` is real time)."""

    def __init__(self, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError(f"clock speed must be positive, got {speed}")
        self.speed = speed
        self._origin = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._origin) * self.speed

    def wall(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC)

    def wall_at(self, moment: float) -> datetime.datetime:
        return self.wall() - datetime.timedelta(seconds=(self.now() - moment) / self.speed)

    async def sleep_until(self, deadline: float) -> None:
        remaining = (deadline - self.now()) / self.speed
        if remaining > 0:
            await asyncio.sleep(remaining)


class ManualClock:
    """Time that moves only when :meth:`advance` is called."""

    def __init__(self, start: datetime.datetime | None = None) -> None:
        self._now = 0.0
        self._start = start or datetime.datetime.now(datetime.UTC)
        self._moved = asyncio.Event()

    def now(self) -> float:
        return self._now

    def wall(self) -> datetime.datetime:
        return self.wall_at(self._now)

    def wall_at(self, moment: float) -> datetime.datetime:
        return self._start + datetime.timedelta(seconds=moment)

    def advance(self, seconds: float) -> None:
        """Move time forward and wake everything waiting for it."""
        if seconds < 0:
            raise ValueError("a manual clock cannot go backwards")
        self._now += seconds
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    async def sleep_until(self, deadline: float) -> None:
        while self._now < deadline:
            await self._moved.wait()
