"""Store: keys, indexes, copies on read, managedFields stripped, relist tombstones."""

from __future__ import annotations

import json

from nimctl_runtime.cache.store import (
    NAMESPACE_INDEX,
    OWNER_UID_INDEX,
    DeletedFinalStateUnknown,
    Store,
    decode,
    object_key,
)


def obj(name: str, ns: str | None = "default", rv: str = "1", uid: str | None = None, **extra):
    meta = {"name": name, "resourceVersion": rv, "uid": uid or f"uid-{name}"}
    if ns:
        meta["namespace"] = ns
    o = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}
    o.update(extra)
    return o


def test_keys_are_namespace_slash_name_or_name_for_cluster_scoped():
    assert object_key(obj("a")) == "default/a"
    assert object_key(obj("node-1", ns=None)) == "node-1"


def test_returned_objects_are_private_copies():
    store = Store()
    store.upsert(obj("a"))
    first = store.get("default/a")
    assert first is not None
    first["data"]["k"] = "mutated"
    first["metadata"]["labels"] = {"x": "y"}
    again = store.get("default/a")
    assert again is not None
    assert again["data"]["k"] == "v"
    assert "labels" not in again["metadata"]
    listed = store.objects()
    listed[0]["data"].clear()
    assert store.get("default/a")["data"] == {"k": "v"}


def test_managed_fields_are_not_stored_and_storage_is_compact():
    store = Store()
    o = obj("a")
    o["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:data": {}}}]
    o["data"] = {f"key-{i}": "x" * 40 for i in range(40)}
    size = len(json.dumps(o, separators=(",", ":")))
    store.upsert(o)
    got = store.get("default/a")
    assert "managedFields" not in got["metadata"]
    assert store.size_bytes() <= size


def test_namespace_owner_and_custom_field_indexes():
    store = Store({"spec.storage.nimCache.name": lambda o: (o.get("spec") or {}).get("cache")})
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "d",
        "uid": "owner-1",
        "controller": True,
    }
    a = obj("a", spec={"cache": "c1"})
    a["metadata"]["ownerReferences"] = [owner]
    store.upsert(a)
    store.upsert(obj("b", ns="other", spec={"cache": "c1"}))
    store.upsert(obj("c", spec={"cache": "c2"}))
    assert [o["metadata"]["name"] for o in store.by_index(NAMESPACE_INDEX, "default")] == ["a", "c"]
    assert [o["metadata"]["name"] for o in store.by_index(OWNER_UID_INDEX, "owner-1")] == ["a"]
    assert store.index_keys("spec.storage.nimCache.name", "c1") == ["default/a", "other/b"]
    # Index follows updates and deletes.
    store.upsert(obj("a", rv="2", spec={"cache": "c2"}))
    assert store.index_keys("spec.storage.nimCache.name", "c1") == ["other/b"]
    assert store.index_keys("spec.storage.nimCache.name", "c2") == ["default/a", "default/c"]
    assert store.index_keys(OWNER_UID_INDEX, "owner-1") == []
    store.delete("other/b")
    assert store.index_keys("spec.storage.nimCache.name", "c1") == []


def test_index_added_later_covers_existing_objects():
    store = Store()
    store.upsert(obj("a", spec={"cache": "c1"}))
    store.add_indexers({"cache": lambda o: o["spec"]["cache"]})
    assert store.index_keys("cache", "c1") == ["default/a"]


def test_an_older_resource_version_never_replaces_a_newer_one():
    store = Store()
    store.upsert(obj("a", rv="10"))
    assert store.upsert(obj("a", rv="9")) is None
    assert store.get("default/a")["metadata"]["resourceVersion"] == "10"
    # A re-created object (new UID) is not "older" even with a smaller RV.
    assert store.upsert(obj("a", rv="5", uid="new")) is not None


def test_replace_reports_adds_changes_and_tombstones():
    store = Store()
    store.upsert(obj("keep", rv="1"))
    store.upsert(obj("change", rv="1"))
    store.upsert(obj("gone", rv="1"))
    added, updated, deleted = store.replace(
        [obj("keep", rv="1"), obj("change", rv="2"), obj("new", rv="3")]
    )
    assert [decode(o)["metadata"]["name"] for o in added] == ["new"]
    assert [
        (
            decode(old)["metadata"]["resourceVersion"],
            decode(new)["metadata"]["resourceVersion"],
        )
        for old, new in updated
    ] == [("1", "2")]
    assert deleted == [DeletedFinalStateUnknown("default/gone", store_obj := deleted[0].obj)]
    assert store_obj["metadata"]["name"] == "gone"
    assert sorted(store.keys()) == ["default/change", "default/keep", "default/new"]
