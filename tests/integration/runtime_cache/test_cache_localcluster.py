"""The Cache against localcluster over HTTPS, with its fault injection.

What a user of the cache would notice: deletes missed while disconnected still
arrive, dropped watches lose no update, throttling and 5xx storms are ridden out,
the cache never goes back in time, and the filtered cache shows only labelled
objects.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from localcluster.cluster import LocalCluster
from nimctl_runtime.cache import ByObject, Cache, DeletedFinalStateUnknown
from nimctl_runtime.client import Client, NotFound, load_config

NS = "default"


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
        "data": dict(data),
    }


@pytest.fixture
async def client(cluster: LocalCluster) -> AsyncIterator[Client]:
    async with Client(load_config(str(cluster.kubeconfig_path))) as c:
        yield c


@pytest.fixture
async def writer(cluster: LocalCluster, tmp_path: Path) -> AsyncIterator[Client]:
    """A second user, so faults aimed at the cache's user (admin) spare the test's writes."""
    path = cluster.write_kubeconfig(tmp_path / "writer.kubeconfig", user="writer")
    async with Client(load_config(str(path))) as c:
        yield c


def faults(cluster: LocalCluster) -> Any:
    return cluster.extensions.faults  # type: ignore[attr-defined]


async def eventually(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


class Seen:
    """Handler recording the latest state per name, tombstones and every data value."""

    def __init__(self) -> None:
        self.latest: dict[str, dict[str, Any]] = {}
        self.tombstones: list[str] = []
        self.deleted: list[str] = []
        self.values: list[str] = []
        self.names: set[str] = set()

    def on_add(self, obj: dict[str, Any]) -> None:
        self._record(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._record(new)

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self.tombstones.append(obj.obj["metadata"]["name"])
            obj = obj.obj
        name = obj["metadata"]["name"]
        self.deleted.append(name)
        self.latest.pop(name, None)

    def _record(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        self.names.add(name)
        self.latest[name] = obj
        if "v" in (obj.get("data") or {}):
            self.values.append(obj["data"]["v"])


@contextlib.asynccontextmanager
async def running(cache: Cache) -> AsyncIterator[Cache]:
    stop = asyncio.Event()
    task = asyncio.create_task(cache.run(stop))
    try:
        yield cache
    finally:
        stop.set()
        async with asyncio.timeout(10):
            await task


class MonotonicReader:
    """Polls cache.get and records whether a read ever went back in resourceVersion."""

    def __init__(self, cache: Cache, name: str) -> None:
        self.cache = cache
        self.name = name
        self.went_back: list[tuple[int, int]] = []
        self.reads = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        highest = 0
        while True:
            with contextlib.suppress(NotFound):
                obj = await self.cache.get("v1", "ConfigMap", self.name, NS)
                rv = int(obj["metadata"]["resourceVersion"])
                self.reads += 1
                if rv < highest:
                    self.went_back.append((highest, rv))
                highest = max(highest, rv)
            await asyncio.sleep(0.005)

    def __enter__(self) -> MonotonicReader:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def test_get_list_and_index_are_served_from_memory_as_private_copies(client, writer):
    await writer.create(cm("a", {"app": "x"}, cache="c1"))
    await writer.create(cm("b", {"app": "y"}, cache="c1"))
    await writer.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    other = cm("c", {"app": "x"}, cache="c2")
    other["metadata"]["namespace"] = "other"
    await writer.create(other)
    cache = Cache(client)
    cache.add_index("v1", "ConfigMap", "data.cache", lambda o: (o.get("data") or {}).get("cache"))
    async with running(cache):
        await cache.get_informer("v1", "ConfigMap")
        assert await cache.wait_for_sync(10)
        got = await cache.get("v1", "ConfigMap", "a", NS)
        assert got["data"]["cache"] == "c1"
        assert "managedFields" not in got["metadata"]
        got["data"]["cache"] = "mutated"
        assert (await cache.get("v1", "ConfigMap", "a", NS))["data"]["cache"] == "c1"
        names = [o["metadata"]["name"] for o in await cache.list("v1", "ConfigMap", NS)]
        assert {"a", "b"} <= set(names) and "c" not in names
        selected = await cache.list("v1", "ConfigMap", label_selector="app=x")
        assert sorted(o["metadata"]["name"] for o in selected) == ["a", "c"]
        indexed = await cache.list("v1", "ConfigMap", index=("data.cache", "c1"))
        assert sorted(o["metadata"]["name"] for o in indexed) == ["a", "b"]
        with pytest.raises(NotFound, match='configmaps "nope" not found'):
            await cache.get("v1", "ConfigMap", "nope", NS)
        # Reads never hit the API server once synced.
        requests_before = client_requests(client)
        for _ in range(20):
            await cache.get("v1", "ConfigMap", "a", NS)
            await cache.list("v1", "ConfigMap", NS)
        assert client_requests(client) == requests_before


def client_requests(client: Client) -> float:
    from nimctl_runtime import metrics

    total = 0.0
    for family in metrics.REGISTRY.collect():
        if family.name != "rest_client_requests":
            continue
        for sample in family.samples:
            if (
                sample.name == "rest_client_requests_total"
                and sample.labels.get("host") == client._host_label
                and sample.labels.get("method") == "GET"
            ):
                total += sample.value
    return total


@pytest.mark.parametrize("watch_list", [False, True], ids=["list", "watchlist"])
async def test_relist_after_410_delivers_deletes_for_objects_removed_while_disconnected(
    cluster, client, writer, watch_list
):
    for name in ("keep", "gone-1", "gone-2"):
        await writer.create(cm(name))
    cache = Cache(client, watch_list=watch_list)
    seen = Seen()
    async with running(cache):
        informer = await cache.get_informer("v1", "ConfigMap")
        informer.add_event_handler(seen.on_add, seen.on_update, seen.on_delete)
        assert await cache.wait_for_sync(10)
        await eventually(lambda: {"keep", "gone-1", "gone-2"} <= seen.names)
        # Cut the cache off: its (admin) watches and lists fail while the writer deletes.
        rule = faults(cluster).inject_errors(503, verbs=["watch", "list"], users="admin")
        faults(cluster).close_watches()
        await writer.delete("v1", "ConfigMap", "gone-1", NS)
        await writer.delete("v1", "ConfigMap", "gone-2", NS)
        await writer.create(cm("new"))
        faults(cluster).compact()
        faults(cluster).remove(rule.id)
        await eventually(lambda: {"gone-1", "gone-2"} <= set(seen.tombstones))
        await eventually(lambda: "new" in seen.names)
        assert rule.injected > 0
        names = {o["metadata"]["name"] for o in await cache.list("v1", "ConfigMap", NS)}
        assert {"keep", "new"} <= names
        assert not names & {"gone-1", "gone-2"}
        with pytest.raises(NotFound):
            await cache.get("v1", "ConfigMap", "gone-1", NS)
        assert informer.reflector.use_watch_list is watch_list


@pytest.mark.parametrize("watch_list", [False, True], ids=["list", "watchlist"])
async def test_watches_dropped_mid_stream_lose_no_update(cluster, client, writer, watch_list):
    await writer.create(cm("counter", v="0"))
    cache = Cache(client, watch_list=watch_list)
    seen = Seen()
    async with running(cache):
        informer = await cache.get_informer("v1", "ConfigMap")
        informer.add_event_handler(seen.on_add, seen.on_update, seen.on_delete)
        assert await cache.wait_for_sync(10)
        written = []
        with MonotonicReader(cache, "counter") as reader:
            for i in range(1, 121):
                await writer.patch(
                    "v1", "ConfigMap", "counter", {"data": {"v": str(i)}}, namespace=NS
                )
                written.append(str(i))
                if i % 30 == 0:  # the next writes race the informer's re-watch
                    faults(cluster).close_watches()
            await eventually(lambda: seen.values and seen.values[-1] == "120")
        assert faults(cluster).watches_closed == 4
        assert informer.reflector.watches >= 3
        assert [v for v in seen.values if v != "0"] == written
        assert reader.reads > 0 and reader.went_back == []


async def test_429_storm_is_ridden_out_with_backoff(cluster, client, writer):
    cache = Cache(client)
    seen = Seen()
    async with running(cache):
        informer = await cache.get_informer("v1", "ConfigMap")
        informer.add_event_handler(seen.on_add, seen.on_update, seen.on_delete)
        assert await cache.wait_for_sync(10)
        # Every request of the cache's user is refused 15 times in a row with
        # Retry-After: the client waits as told up to its retry limit, then the
        # reflector backs off and re-watches.
        rule = faults(cluster).inject_errors(429, users="admin", retry_after=0, times=15)
        faults(cluster).close_watches()
        for i in range(10):
            await writer.create(cm(f"storm-{i}", v=str(i)))
        await eventually(lambda: all(f"storm-{i}" in seen.latest for i in range(10)), 30)
        assert rule.injected == 15
        faults(cluster).remove(rule.id)
        assert len(await cache.list("v1", "ConfigMap", NS)) >= 10


async def test_500_storm_is_ridden_out_and_the_cache_never_goes_back(cluster, client, writer):
    await writer.create(cm("obj", v="0"))
    cache = Cache(client)
    seen = Seen()
    async with running(cache):
        informer = await cache.get_informer("v1", "ConfigMap")
        informer.add_event_handler(seen.on_add, seen.on_update, seen.on_delete)
        assert await cache.wait_for_sync(10)
        with MonotonicReader(cache, "obj") as reader:
            rule = faults(cluster).inject_errors(500, users="admin")
            faults(cluster).close_watches()
            for i in range(1, 6):
                await writer.patch("v1", "ConfigMap", "obj", {"data": {"v": str(i)}}, namespace=NS)
            # the informer's re-watches and re-lists are refused a few times
            await eventually(lambda: rule.injected >= 2, 30)
            faults(cluster).compact()
            faults(cluster).remove(rule.id)
            await eventually(lambda: seen.latest.get("obj", {}).get("data", {}).get("v") == "5", 30)
        assert reader.went_back == []
        assert (await cache.get("v1", "ConfigMap", "obj", NS))["data"]["v"] == "5"


async def test_filtered_cache_holds_only_labelled_objects_and_drops_one_losing_its_label(
    client, writer
):
    selector = {"app.kubernetes.io/managed-by": "nimctl"}
    cache = Cache(client, by_object={("v1", "ConfigMap"): ByObject(label_selector=selector)})
    seen = Seen()
    await writer.create(cm("ours", selector))
    await writer.create(cm("theirs"))
    async with running(cache):
        informer = await cache.get_informer("v1", "ConfigMap")
        informer.add_event_handler(seen.on_add, seen.on_update, seen.on_delete)
        assert await cache.wait_for_sync(10)
        await writer.create(cm("later-ours", selector))
        await writer.create(cm("later-theirs", {"app.kubernetes.io/managed-by": "helm"}))
        await eventually(lambda: "later-ours" in seen.names)
        names = {o["metadata"]["name"] for o in await cache.list("v1", "ConfigMap", NS)}
        assert names == {"ours", "later-ours"}
        with pytest.raises(NotFound):
            await cache.get("v1", "ConfigMap", "theirs", NS)
        # The uncached reader still sees what the filter hides.
        assert (await cache.api_reader.get("v1", "ConfigMap", "theirs", NS))["metadata"]
        # Losing the label: the object leaves the cache and handlers get a delete.
        await writer.patch(
            "v1",
            "ConfigMap",
            "ours",
            {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}},
            namespace=NS,
        )
        await eventually(lambda: "ours" in seen.deleted)
        with pytest.raises(NotFound):
            await cache.get("v1", "ConfigMap", "ours", NS)
        assert not seen.names & {"theirs", "later-theirs"}


async def test_reading_an_unwatched_kind_starts_its_informer_and_a_stopped_cache_refuses(
    client, writer
):
    from nimctl_runtime.cache import CacheNotStartedError
    from nimctl_runtime.client import NoKindMatchError

    await writer.create(cm("lazy"))
    cache = Cache(client)
    async with asyncio.timeout(10):
        got = await cache.get("v1", "ConfigMap", "lazy", NS)
    assert got["metadata"]["name"] == "lazy"
    assert ("v1", "ConfigMap") in cache.informers()
    with pytest.raises(NoKindMatchError):
        await cache.get("example.com/v1", "Missing", "x", NS)
    await cache.stop()
    with pytest.raises(CacheNotStartedError):
        await cache.get("v1", "ConfigMap", "lazy", NS)


async def test_synchronous_reads_serve_synced_kinds_and_refuse_the_others(client, writer):
    """``get_nowait``/``list_nowait``: what a plain-function map handler reads."""
    from nimctl_runtime.cache import CacheNotSyncedError

    await writer.create(cm("sync-a", {"app": "x"}, cache="c1"))
    await writer.create(cm("sync-b", {"app": "y"}, cache="c1"))
    cache = Cache(client)
    cache.add_index("v1", "ConfigMap", "data.cache", lambda o: (o.get("data") or {}).get("cache"))
    async with running(cache):
        with pytest.raises(CacheNotSyncedError, match="v1/ConfigMap has no informer yet"):
            cache.list_nowait("v1", "ConfigMap", NS)
        await cache.list("v1", "ConfigMap", NS)  # starts the informer and waits for it
        got = cache.get_nowait("v1", "ConfigMap", "sync-a", NS)
        assert got["data"]["cache"] == "c1"
        got["data"]["cache"] = "mutated"
        assert cache.get_nowait("v1", "ConfigMap", "sync-a", NS)["data"]["cache"] == "c1"
        indexed = cache.list_nowait("v1", "ConfigMap", NS, index=("data.cache", "c1"))
        assert [o["metadata"]["name"] for o in indexed] == ["sync-a", "sync-b"]
        selected = cache.list_nowait("v1", "ConfigMap", NS, label_selector={"app": "y"})
        assert [o["metadata"]["name"] for o in selected] == ["sync-b"]
        with pytest.raises(NotFound, match='configmaps "nope" not found'):
            cache.get_nowait("v1", "ConfigMap", "nope", NS)
        await writer.create(cm("sync-c", cache="c1"))
        await eventually(lambda: len(cache.list_nowait("v1", "ConfigMap", NS)) >= 3)
        # A kind whose informer exists but has not listed yet is refused too, not waited for.
        await cache.get_informer("v1", "Secret")  # started; its first LIST is still in flight
        with pytest.raises(CacheNotSyncedError, match="has not synced yet"):
            cache.get_nowait("v1", "Secret", "s", NS)
