"""The Client against localcluster over HTTPS: verbs, typed errors, pagination, watch, CRDs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from localcluster.cluster import LocalCluster
from nimctl_runtime.client import (
    AlreadyExists,
    Client,
    Conflict,
    Invalid,
    NoKindMatchError,
    NotFound,
    load_config,
)

NS = "default"


def cm(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": dict(data),
    }


@pytest.fixture
async def client(cluster: LocalCluster) -> AsyncIterator[Client]:
    async with Client(load_config(str(cluster.kubeconfig_path))) as c:
        yield c


async def test_create_get_update_patch_delete_round_trip(client):
    created = await client.create(cm("a", x="1"))
    assert created["metadata"]["uid"]
    got = await client.get("v1", "ConfigMap", "a", NS)
    assert got["data"] == {"x": "1"}
    got["data"]["x"] = "2"
    updated = await client.update(got)
    assert updated["data"]["x"] == "2"
    merged = await client.patch("v1", "ConfigMap", "a", {"data": {"y": "3"}}, namespace=NS)
    assert merged["data"] == {"x": "2", "y": "3"}
    jsonpatched = await client.patch(
        "v1",
        "ConfigMap",
        "a",
        [{"op": "remove", "path": "/data/x"}],
        namespace=NS,
        patch_type="json",
    )
    assert jsonpatched["data"] == {"y": "3"}
    await client.delete("v1", "ConfigMap", "a", NS)
    with pytest.raises(NotFound):
        await client.get("v1", "ConfigMap", "a", NS)


async def test_optimistic_concurrency_and_typed_errors(client):
    first = await client.create(cm("b"))
    with pytest.raises(AlreadyExists):
        await client.create(cm("b"))
    await client.patch("v1", "ConfigMap", "b", {"data": {"z": "1"}}, namespace=NS)
    with pytest.raises(Conflict):
        await client.update(first)  # stale resourceVersion
    with pytest.raises(Conflict):
        await client.delete("v1", "ConfigMap", "b", NS, preconditions={"uid": "not-the-uid"})
    bad = cm("Not_A_Valid_Name")
    with pytest.raises(Invalid) as info:
        await client.create(bad)
    assert info.value.status == 422
    with pytest.raises(NoKindMatchError):
        await client.get("example.com/v1", "Nothing", "x", NS)


async def test_dry_run_create_persists_nothing_and_generate_name_is_honoured(client):
    await client.create(cm("dry"), dry_run=True)
    with pytest.raises(NotFound):
        await client.get("v1", "ConfigMap", "dry", NS)
    generated = cm("")
    del generated["metadata"]["name"]
    generated["metadata"]["generateName"] = "gen-"
    made = await client.create(generated)
    assert made["metadata"]["name"].startswith("gen-")


async def test_list_is_paginated_transparently(client):
    for i in range(7):
        await client.create(cm(f"page-{i}"))
    result = await client.list("v1", "ConfigMap", NS, limit=2)
    names = [i["metadata"]["name"] for i in result["items"]]
    assert [n for n in names if n.startswith("page-")] == [f"page-{i}" for i in range(7)]
    assert result["metadata"]["resourceVersion"]
    assert "continue" not in result["metadata"]
    page = await client.list_page("v1", "ConfigMap", NS, limit=2)
    assert len(page["items"]) == 2 and page["metadata"]["continue"]


async def test_server_side_apply_with_field_manager(client):
    applied = await client.apply(cm("ssa", owner="me"), field_manager="nimctl")
    assert applied["data"] == {"owner": "me"}
    managers = {m["manager"] for m in applied["metadata"].get("managedFields", [])}
    assert "nimctl" in managers
    # A second manager changing the same field conflicts unless forced.
    with pytest.raises(Conflict):
        await client.apply(cm("ssa", owner="them"), field_manager="other")
    forced = await client.apply(cm("ssa", owner="them"), field_manager="other", force=True)
    assert forced["data"]["owner"] == "them"


async def test_watch_from_a_resource_version_sees_later_changes_in_order(client):
    listed = await client.list("v1", "ConfigMap", NS)
    rv = listed["metadata"]["resourceVersion"]
    await client.create(cm("w", v="1"))
    await client.patch("v1", "ConfigMap", "w", {"data": {"v": "2"}}, namespace=NS)
    await client.delete("v1", "ConfigMap", "w", NS)
    seen: list[tuple[str, str | None]] = []
    async with asyncio.timeout(10):
        async for event in client.watch("v1", "ConfigMap", NS, resource_version=rv):
            if event.type == "BOOKMARK":
                continue
            seen.append((event.type, (event.object.get("data") or {}).get("v")))
            if event.type == "DELETED":
                break
    assert seen == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")]


async def test_status_subresource_and_crd_installed_after_start(client):
    # The client has already discovered the apiextensions group before the CRD exists.
    with pytest.raises(NoKindMatchError):
        await client.get("example.com/v1", "Widget", "w", NS)
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "listKind": "WidgetList",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer"}},
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {"ready": {"type": "boolean"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }
    await client.create(crd)
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": NS},
        "spec": {"size": 1},
    }
    async with asyncio.timeout(10):
        while True:
            try:
                created = await client.create(widget)
                break
            except NoKindMatchError:
                await asyncio.sleep(0.1)
    created["status"] = {"ready": True}
    created["spec"]["size"] = 5
    after = await client.update_status(created)
    assert after["status"] == {"ready": True}
    assert after["spec"]["size"] == 1  # status writes ignore spec
    patched = await client.patch(
        "example.com/v1",
        "Widget",
        "w",
        {"status": {"ready": False}},
        namespace=NS,
        subresource="status",
    )
    assert patched["status"]["ready"] is False


async def test_delete_all_of_removes_only_selected_objects(client):
    for name, team in (("s1", "a"), ("s2", "a"), ("s3", "b")):
        obj = cm(name)
        obj["metadata"]["labels"] = {"team": team}
        await client.create(obj)
    await client.delete_all_of("v1", "ConfigMap", NS, label_selector={"team": "a"})
    left = {i["metadata"]["name"] for i in (await client.list("v1", "ConfigMap", NS))["items"]}
    assert "s3" in left and not left & {"s1", "s2"}
