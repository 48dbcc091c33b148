"""Watch contract through kubernetes-asyncio, the client our runtime and users rely on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from localcluster.cluster import LocalCluster


@pytest.fixture
async def api(cluster: LocalCluster) -> AsyncIterator[client.ApiClient]:
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=str(cluster.kubeconfig_path), client_configuration=cfg
    )
    async with client.ApiClient(cfg) as api_client:
        yield api_client


def _cm(name: str, value: str = "1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": {"v": value},
    }


async def _collect(
    api: client.ApiClient, n: int, timeout: float = 5, **kw: Any
) -> list[tuple[str, str, str]]:
    core = client.CoreV1Api(api)
    out: list[tuple[str, str, str]] = []
    async with watch.Watch() as w:
        async with asyncio.timeout(timeout):
            async for ev in w.stream(
                core.list_namespaced_config_map, "default", timeout_seconds=30, **kw
            ):
                if ev["type"] == "BOOKMARK":
                    continue
                obj = ev["object"]
                out.append((ev["type"], obj.metadata.name, obj.metadata.resource_version))
                if len(out) >= n:
                    break
    return out


async def test_resume_from_resource_version_loses_nothing(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_config_map("default", _cm("a"))
    listed = await core.list_namespaced_config_map("default")
    rv = listed.metadata.resource_version
    await core.create_namespaced_config_map("default", _cm("b"))
    await core.patch_namespaced_config_map("a", "default", {"data": {"v": "2"}})
    await core.delete_namespaced_config_map("b", "default")
    events = await _collect(api, 3, resource_version=rv)
    assert [(t, n) for t, n, _ in events] == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    rvs = [int(r) for _, _, r in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)
    # resuming from the middle replays only what came after
    again = await _collect(api, 2, resource_version=events[0][2])
    assert [(t, n) for t, n, _ in again] == [("MODIFIED", "a"), ("DELETED", "b")]


async def test_compaction_yields_410(cluster: LocalCluster, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_config_map("default", _cm("a"))
    old_rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", _cm("b"))
    cluster.storage.compact()
    with pytest.raises(ApiException) as info:
        await _collect(api, 1, resource_version=old_rv)
    assert info.value.status == 410
    # a fresh list gives a resourceVersion that can be watched again
    fresh = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", _cm("c"))
    assert [n for _, n, _ in await _collect(api, 1, resource_version=fresh)] == ["c"]


async def test_bookmarks_arrive(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    bookmarks: list[str] = []
    async with watch.Watch() as w:
        async with asyncio.timeout(10):
            async for ev in w.stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=30,
            ):
                if ev["type"] == "BOOKMARK":
                    bookmarks.append(ev["raw_object"]["metadata"]["resourceVersion"])
                    break
    assert bookmarks and int(bookmarks[0]) >= int(rv)


async def test_delete_and_recreate_gives_distinct_uids(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    first = await core.create_namespaced_config_map("default", _cm("same"))
    await core.delete_namespaced_config_map("same", "default")
    second = await core.create_namespaced_config_map("default", _cm("same"))
    assert first.metadata.uid != second.metadata.uid
    events = await _collect(api, 3, resource_version="1")
    assert [(t, n) for t, n, _ in events] == [
        ("ADDED", "same"),
        ("DELETED", "same"),
        ("ADDED", "same"),
    ]


async def test_label_selector_watch_sees_objects_leave_and_enter(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", _cm("x", labels={"app": "nim"}))
    await core.patch_namespaced_config_map(
        "x", "default", {"metadata": {"labels": {"app": "other"}}}
    )
    await core.patch_namespaced_config_map("x", "default", {"metadata": {"labels": {"app": "nim"}}})
    events = await _collect(api, 3, resource_version=rv, label_selector="app=nim")
    assert [t for t, _, _ in events] == ["ADDED", "DELETED", "ADDED"]


async def test_initial_events_end_with_bookmark(cluster: LocalCluster) -> None:
    import aiohttp

    headers = {"Authorization": f"Bearer {cluster.token_for('admin')}"}
    storage = cluster.storage
    storage.create(_cm("pre") | {"metadata": {"name": "pre", "namespace": "default"}})
    url = (
        f"{cluster.url}/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5"
    )
    import json

    async with (
        aiohttp.ClientSession() as session,
        session.get(url, headers=headers, ssl=cluster.client_ssl_context()) as resp,
    ):
        assert resp.status == 200
        first = json.loads(await resp.content.readline())
        second = json.loads(await resp.content.readline())
    assert first["type"] == "ADDED" and first["object"]["metadata"]["name"] == "pre"
    assert second["type"] == "BOOKMARK"
    annotations = second["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


async def test_abandoned_watches_are_released(cluster: LocalCluster) -> None:
    import aiohttp

    headers = {"Authorization": f"Bearer {cluster.token_for('admin')}"}
    url = f"{cluster.url}/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=600"
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, headers=headers, ssl=cluster.client_ssl_context()) as resp,
    ):
        assert resp.status == 200
        assert cluster.storage.watcher_count() == 1
    async with asyncio.timeout(10):
        while cluster.storage.watcher_count():
            await asyncio.sleep(0.1)
