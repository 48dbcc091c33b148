"""Issue 19 (found by the fuzz bench): a large JSON body is decoded without GC passes.

A 3 MiB body of small objects stalled localcluster's event loop for 9 s: every
generation-2 collection during the decode walked the whole server heap. The
decode (and the nesting check) now run with the cyclic GC paused, and the GC is
on again afterwards.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator

import pytest

from localcluster.codec import decode_body


@pytest.fixture
def collections() -> Iterator[list[int]]:
    seen: list[int] = []

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(callback)


def test_a_large_body_decodes_without_garbage_collection(collections: list[int]) -> None:
    body = json.dumps({"spec": {"items": [{"a": [i]} for i in range(100_000)]}}).encode()
    assert len(body) > 1024 * 1024
    collections.clear()
    doc = decode_body(body, "application/json")
    # at most the one pass the allocations owe once the GC is back (was ~140 passes)
    assert len(collections) <= 1
    assert len(doc["spec"]["items"]) == 100_000
    assert gc.isenabled()


def test_a_malformed_large_body_is_still_400_and_the_gc_comes_back() -> None:
    body = b'{"spec": [' + b"1," * 300_000 + b"]"
    with pytest.raises(Exception, match="json parse error"):
        decode_body(body, "application/json")
    assert gc.isenabled()
