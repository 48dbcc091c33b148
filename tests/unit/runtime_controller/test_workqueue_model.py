"""The workqueue against a reference model, on random operation sequences (hypothesis).

The model is client-go's queue/dirty/processing sets plus controller-runtime's
priorities: highest priority first, FIFO within a priority.
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from nimctl_runtime.workqueue import WorkQueue

KEYS = st.sampled_from("abcde")
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.tuples(KEYS, st.sampled_from([-100, 0, 5]))),
        st.tuples(st.just("get"), st.just("")),
        st.tuples(st.just("done"), st.integers(min_value=0, max_value=4)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_queue_matches_the_dirty_processing_model(ops: list[tuple[str, object]]) -> None:
    async def run() -> None:
        q: WorkQueue[str] = WorkQueue()
        # the model: client-go's three structures
        queue: list[str] = []
        dirty: set[str] = set()
        processing: list[str] = []
        prio: dict[str, int] = {}

        def take() -> str:
            best = max(prio[k] for k in queue)
            key = next(k for k in queue if prio[k] == best)
            queue.remove(key)
            return key
        for op, arg in ops:
            if op == "add":
                assert isinstance(arg, tuple)
                key, p = str(arg[0]), int(arg[1])
                q.add(key, p)
                if key not in dirty:
                    dirty.add(key)
                    prio[key] = p
                    if key not in processing:
                        queue.append(key)
                elif p > prio[key]:
                    prio[key] = p
                    if key in queue:  # moves to the back of its new priority
                        queue.remove(key)
                        queue.append(key)
            elif op == "get":
                if not queue:
                    continue  # get would block
                got = await q.get()
                want = take()
                assert got == want
                assert got not in processing, "handed out a key that is being processed"
                processing.append(got)
                dirty.discard(got)
            elif op == "done":
                if not processing:
                    continue
                key = processing.pop(int(str(arg)) % len(processing))
                q.done(key)
                if key in dirty:
                    queue.append(key)
            assert len(q) == len(queue)
            for key in "abcde":
                assert q.is_processing(key) == (key in processing)
                assert q.is_dirty(key) == (key in dirty)

    asyncio.run(run())
