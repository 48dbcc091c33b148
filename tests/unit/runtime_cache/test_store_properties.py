"""Property: whatever sequence of upserts, deletes and relists, indexes agree with contents."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nimctl_runtime.cache.store import NAMESPACE_INDEX, OWNER_UID_INDEX, Store

NAMES = st.sampled_from(["a", "b", "c", "d"])
NAMESPACES = st.sampled_from(["n1", "n2"])
OWNERS = st.sampled_from([None, "u1", "u2"])
CACHES = st.sampled_from([None, "c1", "c2"])

OBJECT = st.tuples(NAMES, NAMESPACES, OWNERS, CACHES)
OP = st.one_of(
    st.tuples(st.just("upsert"), OBJECT),
    st.tuples(st.just("delete"), st.tuples(NAMES, NAMESPACES)),
    st.tuples(st.just("replace"), st.lists(OBJECT, max_size=6)),
)


def build(name, ns, owner, cache, rv):
    meta = {"name": name, "namespace": ns, "resourceVersion": str(rv), "uid": f"{ns}-{name}"}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True, "kind": "X", "name": "x"}]
    return {"metadata": meta, "spec": {"cache": cache} if cache else {}}


@settings(max_examples=150, deadline=None)
@given(st.lists(OP, max_size=25))
def test_indexes_always_match_the_stored_objects(ops):
    store = Store({"cache": lambda o: o["spec"].get("cache")})
    for rv, (kind, arg) in enumerate(ops, start=1):
        if kind == "upsert":
            store.upsert(build(*arg, rv))
        elif kind == "delete":
            store.delete(f"{arg[1]}/{arg[0]}")
        else:
            unique = {(o[0], o[1]): o for o in arg}
            store.replace([build(*o, rv) for o in unique.values()])
    objects = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in store.objects()}
    for ns in ("n1", "n2"):
        expected = sorted(k for k, o in objects.items() if o["metadata"]["namespace"] == ns)
        assert store.index_keys(NAMESPACE_INDEX, ns) == expected
    for owner in ("u1", "u2"):
        expected = sorted(
            k
            for k, o in objects.items()
            if any(r["uid"] == owner for r in o["metadata"].get("ownerReferences", []))
        )
        assert store.index_keys(OWNER_UID_INDEX, owner) == expected
    for cache in ("c1", "c2"):
        expected = sorted(k for k, o in objects.items() if o["spec"].get("cache") == cache)
        assert store.index_keys("cache", cache) == expected
