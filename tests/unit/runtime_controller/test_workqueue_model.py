"""The workqueue against a reference model, on random operation sequences (hypothesis)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from nimctl_runtime.workqueue import WorkQueue

KEYS = st.sampled_from("abcde")
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), KEYS),
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
        for op, arg in ops:
            if op == "add":
                key = str(arg)
                q.add(key)
                if key not in dirty:
                    dirty.add(key)
                    if key not in processing:
                        queue.append(key)
            elif op == "get":
                if not queue:
                    continue  # get would block
                got = await q.get()
                want = queue.pop(0)
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
