"""Object semantics of the storage engine, as controllers observe them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from localcluster.errors import StatusError
from localcluster.registry import Registry
from localcluster.storage import Storage
from nimctl_runtime.labels import FieldSelector, Selector


@pytest.fixture
def storage() -> Storage:
    s = Storage(Registry(), history_size=100, watch_buffer=5)
    s.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    return s


def _deploy(name: str = "web", replicas: int = 1, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": {"replicas": replicas},
        "status": {"replicas": 0},
    }


def test_create_sets_server_fields_and_generate_name(storage: Storage) -> None:
    a = storage.create(_deploy(name="", generateName="web-"))
    assert a["metadata"]["name"].startswith("web-") and len(a["metadata"]["name"]) == 9
    assert a["metadata"]["uid"] and a["metadata"]["creationTimestamp"].endswith("Z")
    assert a["metadata"]["generation"] == 1
    b = storage.create(_deploy(name="other"))
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    with pytest.raises(StatusError) as exc:
        storage.create(_deploy(name="other"))
    assert exc.value.code == 409 and exc.value.reason == "AlreadyExists"


def test_namespace_must_exist(storage: Storage) -> None:
    obj = _deploy()
    obj["metadata"]["namespace"] = "nope"
    with pytest.raises(StatusError) as exc:
        storage.create(obj)
    assert exc.value.code == 404 and 'namespaces "nope" not found' in exc.value.message


def test_stale_update_conflicts_and_generation_tracks_spec(storage: Storage) -> None:
    created = storage.create(_deploy())
    stale = dict(created)
    labelled = storage.get("apps/v1", "Deployment", "web", "default")
    labelled["metadata"]["labels"] = {"a": "b"}
    labelled = storage.update(labelled)
    assert labelled["metadata"]["generation"] == 1  # metadata-only change
    with pytest.raises(StatusError) as exc:
        storage.update(stale)
    assert exc.value.code == 409 and "the object has been modified" in exc.value.message
    labelled["spec"]["replicas"] = 3
    scaled = storage.update(labelled)
    assert scaled["metadata"]["generation"] == 2
    same = storage.update(scaled)
    assert same["metadata"]["resourceVersion"] == scaled["metadata"]["resourceVersion"]


def test_status_subresource_separates_spec_and_status(storage: Storage) -> None:
    obj = storage.create(_deploy())
    obj["status"] = {"replicas": 5}
    obj["spec"]["replicas"] = 9
    after = storage.update_status(obj)
    assert after["status"] == {"replicas": 5} and after["spec"]["replicas"] == 1
    after["status"] = {"replicas": 0}
    after["spec"]["replicas"] = 2
    main = storage.update(after)
    assert main["status"] == {"replicas": 5} and main["spec"]["replicas"] == 2


def test_finalizers_hold_deletion(storage: Storage) -> None:
    storage.create(_deploy(finalizers=["example.com/hold"]))
    deleting = storage.delete("apps/v1", "Deployment", "web", "default")
    assert deleting["metadata"]["deletionTimestamp"]
    obj = storage.get("apps/v1", "Deployment", "web", "default")
    obj["metadata"]["finalizers"].append("new/one")
    with pytest.raises(StatusError) as exc:
        storage.update(obj)
    assert exc.value.code == 422
    obj["metadata"]["finalizers"] = []
    storage.update(obj)
    with pytest.raises(StatusError) as gone:
        storage.get("apps/v1", "Deployment", "web", "default")
    assert gone.value.code == 404


def test_delete_preconditions(storage: Storage) -> None:
    storage.create(_deploy())
    with pytest.raises(StatusError) as exc:
        storage.delete("apps/v1", "Deployment", "web", "default", preconditions={"uid": "x"})
    assert exc.value.code == 409 and "Precondition failed" in exc.value.message


def test_list_selectors_and_pagination(storage: Storage) -> None:
    info = storage.resolve("v1", "Pod")
    for i in range(7):
        storage.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}", "namespace": "default", "labels": {"n": str(i % 2)}},
                "spec": {"nodeName": f"node{i % 3}"},
            }
        )
    assert [p["metadata"]["name"] for p in storage.list("v1", "Pod", label_selector="n=1")] == [
        "p1",
        "p3",
        "p5",
    ]
    on_node0 = storage.list("v1", "Pod", field_selector="spec.nodeName=node0")
    assert [p["metadata"]["name"] for p in on_node0] == ["p0", "p3", "p6"]
    names: list[str] = []
    start = None
    while True:
        page, last, remaining = storage.list_entries(
            info, "default", Selector.everything(), FieldSelector.everything(),
            start_after=start, limit=3,
        )  # fmt: skip
        names.extend(e.name for e in page)
        if last is None:
            break
        assert remaining == 7 - len(names)
        start = last
    assert names == [f"p{i}" for i in range(7)]


async def test_slow_watcher_is_dropped_not_blocking_writers(storage: Storage) -> None:
    watcher = storage.watch("apps/v1", "Deployment", "default", resource_version="1")
    for i in range(10):
        storage.create(_deploy(name=f"d{i}"))
    assert watcher.closed and watcher.error is not None
    assert len(storage.list("apps/v1", "Deployment")) == 10
    events = [ev async for ev in _drain(watcher)]
    assert len(events) == 5


async def _drain(watcher: Any) -> Any:
    async with asyncio.timeout(2):
        try:
            async for ev in watcher:
                yield ev
        except Exception:  # the overflow error ends the stream
            return


def test_compaction_makes_old_versions_gone(storage: Storage) -> None:
    storage.create(_deploy())
    rv = str(storage.resource_version)
    storage.create(_deploy(name="b"))
    storage.compact()
    with pytest.raises(StatusError) as exc:
        storage.watch("apps/v1", "Deployment", resource_version=rv)
    assert exc.value.code == 410


def test_secret_string_data_is_stored_as_base64_data(storage: Storage) -> None:
    secret = storage.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"},
            "stringData": {"token": "abc"},
        }
    )
    assert secret["data"] == {"token": "YWJj"} and "stringData" not in secret
    assert secret["type"] == "Opaque"
