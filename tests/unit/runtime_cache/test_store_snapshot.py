"""Store.snapshot: a whole kind decoded once per change, shared between readers.

A NIMService whose pod waits for a GPU reads every Node to name the cause; each
such pass decoded every Node again (O(nodes) per event). Counted, not timed.
"""

from __future__ import annotations

from typing import Any

import pytest

import nimctl_runtime.cache.store as store_module
from nimctl_runtime.cache.store import Store


def node(name: str, rv: str, gpus: str = "8", heartbeat: str = "t0") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": rv, "uid": f"uid-{name}"},
        "status": {"allocatable": {"nvidia.com/gpu": gpus}, "heartbeat": heartbeat},
    }


def trim(obj: dict[str, Any]) -> dict[str, Any]:
    """What a controller reads of a Node: no heartbeat."""
    obj = {**obj, "status": {k: v for k, v in obj["status"].items() if k != "heartbeat"}}
    return obj


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    calls: list[bytes] = []
    real = store_module.decode

    def counted(data: bytes) -> Any:
        calls.append(data)
        return real(data)

    monkeypatch.setattr(store_module, "decode", counted)
    return calls


def test_a_snapshot_is_decoded_once_until_the_kind_changes(decodes: list[bytes]) -> None:
    store = Store(transform=trim)
    for i in range(3):
        store.upsert(node(f"n{i}", "1"))
    decodes.clear()

    first = store.snapshot()
    assert [n["metadata"]["name"] for n in first] == ["n0", "n1", "n2"]
    assert len(decodes) == 3
    for _ in range(5):
        assert store.snapshot() is first
    assert len(decodes) == 3, "an unchanged kind was decoded again"

    # A heartbeat the trim drops changes nothing a reader sees: the snapshot stays.
    store.upsert(node("n1", "2", heartbeat="t1"))
    assert store.snapshot() is first

    # A change a reader sees (a GPU fewer), an add and a delete each decode once more.
    store.upsert(node("n1", "3", gpus="7"))
    second = store.snapshot()
    assert second is not first and second[1]["status"]["allocatable"]["nvidia.com/gpu"] == "7"
    store.upsert(node("n3", "1"))
    assert len(store.snapshot()) == 4
    store.delete("n0")
    assert [n["metadata"]["name"] for n in store.snapshot()] == ["n1", "n2", "n3"]
    store.replace([node("n9", "1")])
    assert [n["metadata"]["name"] for n in store.snapshot()] == ["n9"]
