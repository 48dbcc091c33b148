"""Issue 18 (memory): index values naming one object cost no set, and reads stay exact.

Most index values (an owner UID, ``app.kubernetes.io/instance``) name a single
object; the store keeps such a value's key without a set until a second object
shares it. These tests check that answers are unchanged through every
single <-> many transition, and that the per-object cost of the indexes fell.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nimctl_runtime.cache.store import NAMESPACE_INDEX, OWNER_UID_INDEX, Store
from nimctl_runtime.labels import Selector


def obj(name: str, ns: str, labels: dict[str, str], owner: str | None, rv: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "uid": f"{ns}-{name}",
        "resourceVersion": str(rv),
        "labels": labels,
    }
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True, "kind": "X", "name": owner}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
NAMESPACES = st.sampled_from(["n1", "n2"])
LABELS = st.dictionaries(
    st.sampled_from(["app", "tier"]), st.sampled_from(["x", "y", "z"]), max_size=2
)
OWNERS = st.sampled_from([None, "u1", "u2", "u3"])
OBJECT = st.tuples(NAMES, NAMESPACES, LABELS, OWNERS)
OP = st.one_of(
    st.tuples(st.just("upsert"), OBJECT),
    st.tuples(st.just("delete"), st.tuples(NAMES, NAMESPACES)),
    st.tuples(st.just("replace"), st.lists(OBJECT, max_size=5)),
)
SELECTORS = ["app=x", "app!=y", "tier in (x,z)", "tier notin (x)", "app", "!tier", "app=x,tier=y"]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(OP, max_size=30))
def test_selections_and_indexes_match_the_objects_through_updates_and_deletes(
    ops: list[tuple[str, Any]],
) -> None:
    store = Store()
    for rv, (kind, arg) in enumerate(ops, start=1):
        if kind == "upsert":
            store.upsert(obj(*arg, rv))
        elif kind == "delete":
            store.delete(f"{arg[1]}/{arg[0]}")
        else:
            unique = {(o[0], o[1]): o for o in arg}
            store.replace([obj(*o, rv) for o in unique.values()])
    held = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in store.objects()}
    for text in SELECTORS:
        selector = Selector.parse(text)
        for ns in (None, "n1", "n2"):
            expected = sorted(
                k
                for k, o in held.items()
                if selector.matches(o["metadata"]["labels"])
                and ns in (None, o["metadata"]["namespace"])
            )
            assert store.select_keys(selector, namespace=ns) == expected, (text, ns)
    for owner in ("u1", "u2", "u3"):
        expected = sorted(
            k
            for k, o in held.items()
            if any(r["uid"] == owner for r in o["metadata"].get("ownerReferences", []))
        )
        assert store.index_keys(OWNER_UID_INDEX, owner) == expected
    for ns in ("n1", "n2"):
        expected = sorted(k for k in held if k.startswith(f"{ns}/"))
        assert store.index_keys(NAMESPACE_INDEX, ns) == expected
    if not held:
        assert store._labels == {} and all(not i for i in store._indices.values())


def test_a_result_set_is_the_callers_own() -> None:
    store = Store()
    store.upsert(obj("a", "n1", {"app": "x"}, "u1", 1))
    keys = store.index_keys(OWNER_UID_INDEX, "u1")
    keys.append("n1/zzz")
    assert store.index_keys(OWNER_UID_INDEX, "u1") == ["n1/a"]
    assert store.select_keys(Selector.parse("app=x"), namespace="n1") == ["n1/a"]


def _fill(count: int) -> Store:
    store = Store()
    for i in range(count):
        store.upsert(obj(f"o-{i}", "ns", {"app": "web", "instance": f"i-{i}"}, f"owner-{i}", i + 1))
    return store


def _index_bytes_per_object(count: int) -> float:
    """Memory the indexes take per object, for objects that each have a unique owner and label."""
    _fill(count)  # warm up: one-time growth (the interned-string table) is not per object
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        store = _fill(count)
        total = tracemalloc.get_traced_memory()[0] - base
        data = sum(len(e.data) for e in store._items.values())
    finally:
        tracemalloc.stop()
    return (total - data) / count


def test_unique_owner_and_label_values_cost_less_than_a_set_each() -> None:
    # Before: a one-key set per owner UID and per unique label value (~216 B each)
    # plus the entry (1,250 B per object here); now the key itself (~750 B).
    per_object = _index_bytes_per_object(2000)
    assert per_object < 1000, f"{per_object:.0f} B per object beside its stored bytes"


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(OP, max_size=25))
def test_a_store_without_label_pairs_answers_selectors_the_same(ops: list[tuple[str, Any]]) -> None:
    indexed, bare = Store(), Store(index_labels=False, keep_labels=False)
    for rv, (kind, arg) in enumerate(ops, start=1):
        for store in (indexed, bare):
            if kind == "upsert":
                store.upsert(obj(*arg, rv))
            elif kind == "delete":
                store.delete(f"{arg[1]}/{arg[0]}")
            else:
                unique = {(o[0], o[1]): o for o in arg}
                store.replace([obj(*o, rv) for o in unique.values()])
    for text in SELECTORS:
        for ns in (None, "n1"):
            selector = Selector.parse(text)
            assert bare.select_keys(selector, namespace=ns) == indexed.select_keys(
                selector, namespace=ns
            )
    assert all(not e.labels for e in bare._items.values()) and bare._labels == {}


def test_nodes_without_label_pairs_cost_less_per_object() -> None:
    def labelled(i: int) -> dict[str, Any]:
        labels = {f"nvidia.com/gpu.deploy.{c}": "true" for c in "abcdefghij"}
        labels["kubernetes.io/hostname"] = f"gpu-node-{i}"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"gpu-node-{i}",
                "uid": f"u-{i}",
                "resourceVersion": "1",
                "labels": labels,
            },
        }

    def fill(store: Store) -> Store:
        for i in range(1000):
            store.upsert(labelled(i))
        return store

    def per_node(store_factory: Any) -> float:
        fill(store_factory())  # warm up (one-time growth such as the interned strings)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            kept = fill(store_factory())
            return (tracemalloc.get_traced_memory()[0] - base) / len(kept)
        finally:
            tracemalloc.stop()

    scanning = per_node(lambda: Store(index_labels=False))
    bare = per_node(lambda: Store(index_labels=False, keep_labels=False))
    assert bare + 150 < scanning, (bare, scanning)
