"""Client-side throttling and retry delays: a token bucket and a jittered exponential backoff.

:class:`TokenBucket` is client-go's ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)``:
requests wait (asynchronously) for a token. :class:`Backoff` is
``wait.Backoff{Duration, Factor, Jitter, Cap}`` with client-go's reset-after-quiet rule,
used by the client's retries and by the Reflector.
"""

from __future__ import annotations

import asyncio
import random
import time


class TokenBucket:
    """*qps* tokens per second, at most *burst* banked; :meth:`acquire` waits for one."""

    def __init__(self, qps: float, burst: int) -> None:
        if qps <= 0:
            raise ValueError("qps must be positive (use no limiter to disable throttling)")
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now

    def try_acquire(self) -> bool:
        """Take a token if one is available now."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> None:
        """Wait until a token is available and take it (FIFO among waiters)."""
        async with self._lock:
            while True:
                self._refill()
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                await asyncio.sleep((1.0 - self._tokens) / self.qps)


_JITTER = random.Random()
"""The jitter source of every Backoff not given its own: seeding a ``random.Random``
reads the OS's entropy, and the client makes a Backoff per request (a seventh of
the operator's CPU at 1,000 NIMServices before it was shared; issue 30)."""


class Backoff:
    """Exponential backoff ``initial * factor**n`` capped at *cap*, randomised by *jitter*.

    With ``jitter=1.0`` a nominal delay ``d`` becomes ``d + rand[0, d)`` (client-go's
    ``wait.Jitter``). After *reset_after* seconds without a call to :meth:`next_delay`
    the sequence starts again from *initial* (client-go's ``DelayWithReset``).
    """

    def __init__(
        self,
        initial: float = 0.8,
        *,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float | None = 120.0,
        rng: random.Random | None = None,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._rng = rng or _JITTER
        self._current = initial
        self._last: float | None = None

    def reset(self) -> None:
        self._current = self.initial
        self._last = None

    def next_delay(self) -> float:
        """The next delay to wait; advances the sequence."""
        now = time.monotonic()
        if (
            self.reset_after is not None
            and self._last is not None
            and now - self._last >= self.reset_after
        ):
            self._current = self.initial
        self._last = now
        nominal = self._current
        self._current = min(self.cap, self._current * self.factor)
        if self.jitter > 0:
            return nominal + self._rng.random() * self.jitter * nominal
        return nominal
