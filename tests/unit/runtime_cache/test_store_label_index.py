"""Issue 19 item 3: label-selector reads are answered by an index and decode only what they return."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nimctl_runtime.cache import store as store_mod
from nimctl_runtime.cache.store import Store
from nimctl_runtime.labels import Selector


def pod(name: str, namespace: str, labels: dict[str, str], rv: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"{namespace}-{name}",
            "resourceVersion": str(rv),
            "labels": labels,
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every object the store decodes."""
    counter = [0]
    real = store_mod.decode

    def counting(data: bytes) -> dict[str, Any]:
        counter[0] += 1
        return real(data)

    monkeypatch.setattr(store_mod, "decode", counting)
    return counter


def test_a_job_selector_in_a_namespace_of_3000_pods_decodes_only_the_job_pods(
    decodes: list[int],
) -> None:
    store = Store()
    for i in range(3000):
        store.upsert(pod(f"web-{i}", "busy", {"app": "web", "pod-template-hash": str(i % 7)}))
    for i in range(3):
        store.upsert(pod(f"cache-job-{i}", "busy", {"job-name": "cache-job", "app": "cache"}))
    store.upsert(pod("cache-job-x", "elsewhere", {"job-name": "cache-job"}))
    decodes[0] = 0

    found = store.select(Selector.from_labels({"job-name": "cache-job"}), namespace="busy")

    assert [p["metadata"]["name"] for p in found] == [f"cache-job-{i}" for i in range(3)]
    assert decodes[0] == 3


def test_updates_and_deletes_move_objects_between_label_values() -> None:
    store = Store()
    store.upsert(pod("a", "ns", {"tier": "db"}, rv=1))
    store.upsert(pod("a", "ns", {"tier": "web"}, rv=2))
    store.upsert(pod("b", "ns", {"tier": "db"}, rv=1))
    assert store.select_keys(Selector.parse("tier=web")) == ["ns/a"]
    assert store.select_keys(Selector.parse("tier=db")) == ["ns/b"]
    store.delete("ns/b")
    assert store.select_keys(Selector.parse("tier=db")) == []
    assert store.select_keys(Selector.parse("tier")) == ["ns/a"]
    store.replace([pod("c", "ns", {"tier": "db"})])
    assert store.select_keys(Selector.parse("tier")) == ["ns/c"]


def test_nothing_selector_selects_nothing_and_empty_selects_all() -> None:
    store = Store()
    store.upsert(pod("a", "ns", {}))
    assert store.select_keys(Selector.nothing()) == []
    assert store.select_keys(Selector.everything()) == ["ns/a"]


KEYS = st.sampled_from(["app", "tier", "n"])
VALUES = st.sampled_from(["a", "b", "1", "7"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=3)
REQUIREMENT = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", KEYS, VALUES),
    st.builds(lambda k, v: f"{k}!={v}", KEYS, VALUES),
    st.builds(lambda k, vs: f"{k} in ({','.join(vs)})", KEYS, st.lists(VALUES, min_size=1)),
    st.builds(lambda k, vs: f"{k} notin ({','.join(vs)})", KEYS, st.lists(VALUES, min_size=1)),
    KEYS,
    st.builds(lambda k: f"!{k}", KEYS),
    st.builds(lambda v: f"n>{v}", st.sampled_from(["0", "1", "5"])),
    st.builds(lambda v: f"n<{v}", st.sampled_from(["0", "1", "5"])),
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.sampled_from(["n1", "n2"]), LABELS), max_size=12),
    st.lists(REQUIREMENT, max_size=3),
    st.sampled_from([None, "n1", "n2"]),
)
def test_indexed_selection_equals_matching_each_object(
    objects: list[tuple[str, dict[str, str]]], requirements: list[str], namespace: str | None
) -> None:
    store = Store()
    for i, (ns, labels) in enumerate(objects):
        store.upsert(pod(f"p{i}", ns, labels))
    selector = Selector.parse(",".join(requirements))
    expected = sorted(
        f"{ns}/p{i}"
        for i, (ns, labels) in enumerate(objects)
        if selector.matches(labels) and namespace in (None, ns)
    )
    assert store.select_keys(selector, namespace=namespace) == expected


_LABELS = st.dictionaries(
    st.sampled_from(["app", "tier", "nvidia.com/gpu.present", "zone"]),
    st.sampled_from(["a", "b", "true", ""]),
    max_size=4,
)
_SELECTORS = st.sampled_from(
    ["app=a", "app!=a", "tier in (a,b)", "tier notin (a)", "zone", "!zone",
     "nvidia.com/gpu.present=true,app=b", ""]
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(objects=st.lists(_LABELS, max_size=12), selector=_SELECTORS, namespaced=st.booleans())
def test_without_the_label_index_selectors_answer_the_same(
    objects: list[dict[str, str]], selector: str, namespaced: bool
) -> None:
    indexed, scanning = Store(), Store(index_labels=False)
    for i, labels in enumerate(objects):
        for s in (indexed, scanning):
            s.upsert(pod(f"p{i}", "ns" if i % 2 else "other", labels))
    for i in range(0, len(objects), 3):  # some updates and deletes keep both in step
        for s in (indexed, scanning):
            s.upsert(pod(f"p{i}", "ns" if i % 2 else "other", {"app": "b"}, rv=2))
    sel = Selector.parse(selector) if selector else None
    ns = "ns" if namespaced else None
    assert scanning.select_keys(sel, namespace=ns) == indexed.select_keys(sel, namespace=ns)
    assert scanning._labels == {}, "no label index is kept"


def test_without_the_label_index_only_returned_objects_are_decoded(decodes: list[int]) -> None:
    store = Store(index_labels=False)
    for i in range(500):
        store.upsert(pod(f"n-{i}", "", {"nvidia.com/gpu.present": "true" if i < 5 else "false"}))
    decodes[0] = 0
    found = store.select(Selector.from_labels({"nvidia.com/gpu.present": "true"}))
    assert len(found) == 5 and decodes[0] == 5
