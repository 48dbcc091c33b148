"""A rate-limited, delaying work queue: client-go's ``util/workqueue`` on asyncio.

Controllers are level-triggered: what matters is *that* a key needs work, not
how many events said so. The queue therefore keeps three structures
(runtime.md §1.4):

* ``queue``: the FIFO of keys ready to be handed out;
* ``dirty``: every key that needs work (at most once in ``queue``);
* ``processing``: keys a worker is handling right now.

A key being processed is never handed to a second worker; adds that arrive
meanwhile only mark it dirty, and ``done`` puts it back once, so N events
during a reconcile collapse into one re-run.

On top of that, ``add_after`` holds keys back until a point in time (keeping
the *earliest* time when a key is added twice), and ``add_rate_limited`` asks
a ``RateLimiter`` for the delay. The default limiter
(:class:`ItemBackoffBucketRateLimiter`) starts like client-go's
``DefaultTypedControllerRateLimiter`` (per-item exponential backoff 5 ms · 2^n
capped at 1000 s, and a global 10 qps / burst 100 token bucket for bursts) but
each retry of a key waits at least twice its previous delay, whoever imposed
it. client-go's max-of-both makes N keys failing forever retry as one stream at
10/s as long as the bucket's debt exceeds their own backoff (O(t) retries);
here each key's retries are O(log t).

Ready keys carry a priority (controller-runtime's priority queue): the
highest goes first, FIFO within a priority, and a key added twice keeps the
higher one. Everything defaults to 0, which is client-go's plain FIFO; event
handlers queue the initial list and resyncs at ``LOW_PRIORITY`` so fresh
events are not stuck behind them after a restart.

The queue lives on one event loop and is not thread-safe; it never blocks the
loop (``get`` is a coroutine).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, Protocol, TypeVar

from nimctl_runtime import metrics

__all__ = [
    "LOW_PRIORITY",
    "BucketRateLimiter",
    "ItemBackoffBucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "ShutDown",
    "WorkQueue",
    "default_controller_rate_limiter",
    "default_item_based_rate_limiter",
]

T = TypeVar("T", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

Clock = Callable[[], float]


class ShutDown(Exception):
    """Raised by ``WorkQueue.get`` once the queue is shut down and drained of ready keys."""


# -- rate limiters -------------------------------------------------------------


class RateLimiter(Protocol[K_contra]):
    """How long a key should wait before it is retried (client-go ``TypedRateLimiter``)."""

    def when(self, item: K_contra) -> float:
        """Return the delay in seconds for this retry; counts the retry."""
        ...

    def forget(self, item: K_contra) -> None:
        """Stop tracking the key: its next failure starts from the base delay again."""
        ...

    def num_requeues(self, item: K_contra) -> int:
        """How many times the key has been retried since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """``base · 2^failures(item)``, capped at ``max_delay``; each call counts a failure."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError("need 0 < base_delay <= max_delay")
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        # 2**exp overflows a float only past exp≈1023; cap the exponent early.
        if exp > 64:
            return self.max_delay
        backoff = self.base_delay * math.pow(2, exp)
        return min(backoff, self.max_delay)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[T]):
    """One token bucket shared by every key (``golang.org/x/time/rate`` ``Reserve().Delay()``).

    Tokens refill at ``qps`` per second up to ``burst``. Each ``when`` takes one
    token; when the bucket is empty the token is borrowed from the future and
    the returned delay is how long until it exists.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("need qps > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def when(self, item: T) -> float:
        now = self._clock()
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def forget(self, item: T) -> None:
        return None

    def num_requeues(self, item: T) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The longest delay of several limiters (every limiter counts every call)."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters: Sequence[RateLimiter[T]] = limiters

    def when(self, item: T) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: T) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


class ItemBackoffBucketRateLimiter(Generic[T]):
    """Per-item exponential backoff that never shrinks, with a shared bucket for bursts.

    ``delay = min(max_delay, max(base · 2^n, 2 · previous delay of the key, bucket))``.
    The bucket (``qps``/``burst``) spaces a burst of failing keys; whatever
    spaced a key's last retry, its next waits at least twice as long, so a key
    failing forever is retried O(log t) times by time t, and N such keys
    O(N log t) in all (:func:`default_controller_rate_limiter`).
    """

    def __init__(
        self,
        base_delay: float = 0.005,
        max_delay: float = 1000.0,
        qps: float = 10.0,
        burst: int = 100,
        clock: Clock = time.monotonic,
    ) -> None:
        self.max_delay = max_delay
        self.item: ItemExponentialFailureRateLimiter[T] = ItemExponentialFailureRateLimiter(
            base_delay, max_delay
        )
        self.bucket: BucketRateLimiter[T] = BucketRateLimiter(qps, burst, clock)
        self._last: dict[T, float] = {}

    def when(self, item: T) -> float:
        delay = max(self.item.when(item), self.bucket.when(item), 2 * self._last.get(item, 0.0))
        delay = min(delay, self.max_delay)
        self._last[item] = delay
        return delay

    def forget(self, item: T) -> None:
        self.item.forget(item)
        self._last.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self.item.num_requeues(item)


def default_controller_rate_limiter(
    clock: Clock = time.monotonic,
) -> ItemBackoffBucketRateLimiter[T]:
    """5 ms → 1000 s per item, never shrinking, and 10 qps / burst 100 for bursts."""
    return ItemBackoffBucketRateLimiter(0.005, 1000.0, 10.0, 100, clock)


def default_item_based_rate_limiter() -> ItemExponentialFailureRateLimiter[T]:
    """client-go's ``DefaultTypedItemBasedRateLimiter``: per item 1 ms → 1000 s."""
    return ItemExponentialFailureRateLimiter(0.001, 1000.0)


# -- the queue ------------------------------------------------------------------

#: Priority of adds that are not news: the initial list after a (re)start and
#: resyncs (controller-runtime's ``handler.LowPriority``).
LOW_PRIORITY = -100


class _ReadyQueue(Generic[T]):
    """FIFO per priority; ``pop`` takes from the highest priority first."""

    def __init__(self) -> None:
        self._by_priority: dict[int, OrderedDict[T, None]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def push(self, item: T, priority: int) -> None:
        bucket = self._by_priority.get(priority)
        if bucket is None:
            bucket = self._by_priority[priority] = OrderedDict()
        bucket[item] = None
        self._count += 1

    def pop(self) -> T:
        priority = max(p for p, bucket in self._by_priority.items() if bucket)
        item, _ = self._by_priority[priority].popitem(last=False)
        self._count -= 1
        return item

    def raise_priority(self, item: T, old: int, new: int) -> None:
        bucket = self._by_priority.get(old)
        if bucket is not None and item in bucket:
            del bucket[item]
            self._count -= 1
            self.push(item, new)


class WorkQueue(Generic[T]):
    """Deduplicating FIFO with per-key exclusivity, delayed adds and rate-limited retries.

    ``name`` labels the ``workqueue_*`` metrics (both ``name`` and
    ``controller`` carry it, as controller-runtime does); ``name=None`` keeps the
    queue out of the metrics.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        rate_limiter: RateLimiter[T] | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.name = name
        self.rate_limiter: RateLimiter[T] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock)
        )
        self._clock = clock
        self._queue: _ReadyQueue[T] = _ReadyQueue()
        self._priority: dict[T, int] = {}
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._shutting_down = False
        self._drain_aborted = False
        self._getters: deque[asyncio.Future[None]] = deque()
        self._processing_empty: asyncio.Event | None = None
        # delayed adds: earliest ready time per key + a lazy-deletion heap
        self._waiting: dict[T, float] = {}
        self._waiting_priority: dict[T, int] = {}
        self._heap: list[tuple[float, int, T]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        # metrics bookkeeping
        self._added_at: dict[T, float] = {}
        self._started_at: dict[T, float] = {}
        self._metrics = name is not None
        if self._metrics:
            assert name is not None
            self._m_depth = metrics.workqueue_depth.labels(name, name, "")
            self._m_adds = metrics.workqueue_adds_total.labels(name, name)
            self._m_queue_duration = metrics.workqueue_queue_duration_seconds.labels(name, name)
            self._m_work_duration = metrics.workqueue_work_duration_seconds.labels(name, name)
            self._m_retries = metrics.workqueue_retries_total.labels(name, name)
            self._m_depth.set(0)
            metrics.workqueue_unfinished_work_seconds.labels(name, name).set_function(
                self.unfinished_work_seconds
            )
            metrics.workqueue_longest_running_processor_seconds.labels(name, name).set_function(
                self.longest_running_processor_seconds
            )

    # -- base queue ----------------------------------------------------------------

    def add(self, item: T, priority: int = 0) -> None:
        """Mark ``item`` as needing work; a no-op if it already does or the queue is shut down.

        Ready keys are handed out highest ``priority`` first, FIFO within a
        priority; adding a key that is already waiting only ever raises its
        priority (``LOW_PRIORITY`` is for the initial list and resyncs).
        """
        if self._shutting_down:
            return
        if self._metrics:
            self._m_adds.inc()
        if item in self._dirty:
            old = self._priority.get(item, 0)
            if priority > old:
                self._priority[item] = priority
                if item not in self._processing:
                    self._queue.raise_priority(item, old, priority)
            return
        self._dirty.add(item)
        self._priority[item] = priority
        self._added_at.setdefault(item, self._clock())
        if item in self._processing:
            return
        self._push(item)

    def _push(self, item: T) -> None:
        self._queue.push(item, self._priority.get(item, 0))
        if self._metrics:
            self._m_depth.set(len(self._queue))
        self._wake_one()

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _wake_all(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)

    async def get(self) -> T:
        """Wait for a ready key and mark it as processing; the caller must call ``done``.

        Raises ``ShutDown`` only when the queue is shut down *and* no ready key
        is left, so workers drain what was queued before the shutdown.
        """
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    # we were woken but will not take the key: pass the wake-up on
                    self._wake_one()
                else:
                    with contextlib.suppress(ValueError):
                        self._getters.remove(fut)
                raise
        item = self._queue.pop()
        self._processing.add(item)
        self._dirty.discard(item)
        self._priority.pop(item, None)
        now = self._clock()
        added = self._added_at.pop(item, None)
        self._started_at[item] = now
        if self._metrics:
            self._m_depth.set(len(self._queue))
            if added is not None:
                self._m_queue_duration.observe(max(0.0, now - added))
        if self._queue:
            # more ready work: make sure another idle worker looks
            self._wake_one()
        return item

    def done(self, item: T) -> None:
        """Finish processing ``item``; if it was added meanwhile it goes back in the queue once."""
        self._processing.discard(item)
        started = self._started_at.pop(item, None)
        if self._metrics and started is not None:
            self._m_work_duration.observe(max(0.0, self._clock() - started))
        if item in self._dirty:
            self._push(item)
        if not self._processing and self._processing_empty is not None:
            self._processing_empty.set()

    def __len__(self) -> int:
        """Number of keys ready to be handed out (``workqueue_depth``)."""
        return len(self._queue)

    def shutting_down(self) -> bool:
        return self._shutting_down

    def shut_down(self) -> None:
        """Refuse new adds, drop delayed adds, and let idle ``get`` calls raise ``ShutDown``.

        Keys already ready are still handed out. Calling it during
        ``shut_down_with_drain`` aborts the wait.
        """
        if self._shutting_down and self._processing_empty is not None:
            self._drain_aborted = True
            self._processing_empty.set()
        self._shutting_down = True
        self._cancel_timer()
        self._waiting.clear()
        self._waiting_priority.clear()
        self._heap.clear()
        self._wake_all()

    async def shut_down_with_drain(self, grace_period: float | None = None) -> bool:
        """Shut down, then wait until no key is being processed (workers must call ``done``).

        Returns True when drained; False when ``grace_period`` ran out or when a later ``shut_down``
        aborted the wait.
        """
        if self._processing_empty is None:
            self._processing_empty = asyncio.Event()
        self._drain_aborted = False
        was_shutting_down = self._shutting_down
        self._shutting_down = True
        if not was_shutting_down:
            self._cancel_timer()
            self._waiting.clear()
            self._waiting_priority.clear()
            self._heap.clear()
            self._wake_all()
        if not self._processing:
            return True
        self._processing_empty.clear()
        try:
            while self._processing:
                await asyncio.wait_for(self._processing_empty.wait(), grace_period)
                if self._drain_aborted:
                    return False
                self._processing_empty.clear()
        except TimeoutError:
            return False
        return True

    def is_processing(self, item: T) -> bool:
        return item in self._processing

    def is_dirty(self, item: T) -> bool:
        return item in self._dirty

    # -- metrics helpers ------------------------------------------------------------

    def unfinished_work_seconds(self) -> float:
        """Seconds of work in progress not yet observed by work duration."""
        now = self._clock()
        return sum(now - t for t in self._started_at.values())

    def longest_running_processor_seconds(self) -> float:
        now = self._clock()
        return max((now - t for t in self._started_at.values()), default=0.0)

    # -- delaying queue -------------------------------------------------------------

    def add_after(self, item: T, delay: float, priority: int = 0) -> None:
        """Add ``item`` after ``delay`` seconds; if it already waits, keep the earlier time.

        A key waiting twice keeps the higher of the two priorities.
        """
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item, priority)
            return
        if self._metrics:
            self._m_retries.inc()
        loop = asyncio.get_running_loop()
        ready_at = loop.time() + delay
        if item not in self._waiting_priority or priority > self._waiting_priority[item]:
            self._waiting_priority[item] = priority
        current = self._waiting.get(item)
        if current is not None and current <= ready_at:
            return
        self._waiting[item] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._seq), item))
        if ready_at < self._timer_at:
            self._arm_timer(loop, ready_at)

    def waiting(self) -> int:
        """Number of keys held back by ``add_after``."""
        return len(self._waiting)

    def _arm_timer(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        self._cancel_timer()
        self._timer_at = when
        self._timer = loop.call_at(when, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = math.inf

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        loop = asyncio.get_running_loop()
        # timers may fire a clock tick early; never re-arm for a past instant
        now = loop.time() + 1e-6
        while self._heap:
            ready_at, _, item = self._heap[0]
            if self._waiting.get(item) != ready_at:
                heapq.heappop(self._heap)  # superseded by an earlier time
                continue
            if ready_at > now:
                break
            heapq.heappop(self._heap)
            del self._waiting[item]
            self.add(item, self._waiting_priority.pop(item, 0))
        if self._heap:
            self._arm_timer(loop, self._heap[0][0])

    # -- rate-limiting queue ---------------------------------------------------------

    def add_rate_limited(self, item: T, priority: int = 0) -> None:
        """Add ``item`` after the delay the rate limiter gives it (counts a retry)."""
        if self._shutting_down:
            return
        self.add_after(item, self.rate_limiter.when(item), priority)

    def forget(self, item: T) -> None:
        """Reset the key's backoff; does not remove it from the queue."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)
