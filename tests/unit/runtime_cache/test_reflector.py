"""Reflector state machine and SharedInformer delivery, driven by an in-memory server."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from nimctl_runtime.cache.informer import SharedInformer
from nimctl_runtime.cache.reflector import PAGE_SIZE, Reflector, VeryShortWatchError
from nimctl_runtime.cache.store import DeletedFinalStateUnknown
from nimctl_runtime.client.errors import ApiConnectionError, Gone, TooManyRequests
from nimctl_runtime.client.ratelimit import Backoff

from .fakes import FakeListerWatcher, make_obj


def fast_backoff() -> Backoff:
    return Backoff(0.001, cap=0.01, jitter=0.0, reset_after=None)


def informer_for(fake: FakeListerWatcher) -> SharedInformer:
    informer = SharedInformer(fake, api_version="v1", kind="ConfigMap")
    informer.reflector.backoff = fast_backoff()
    informer.reflector.watch_backoff = fast_backoff()
    return informer


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.changed = asyncio.Event()

    def on_add(self, obj: dict, initial: bool) -> None:
        self.events.append(("add", obj["metadata"]["name"], initial))
        self.changed.set()

    def on_update(self, old: dict, new: dict) -> None:
        self.events.append(("update", new["metadata"]["name"], new["data"].get("v")))
        self.changed.set()

    def on_delete(self, obj: Any) -> None:
        tomb = isinstance(obj, DeletedFinalStateUnknown)
        name = (obj.obj if tomb else obj)["metadata"]["name"]
        self.events.append(("delete", name, tomb))
        self.changed.set()

    async def wait_for(self, predicate, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate(self.events):
                self.changed.clear()
                await self.changed.wait()


async def wait_until(predicate, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_first_list_asks_for_rv_0_in_pages_of_500_then_watches_from_list_rv():
    fake = FakeListerWatcher()
    for i in range(1200):
        fake.create(make_obj(f"cm-{i:04d}"))
    informer = informer_for(fake)
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    assert await informer.wait_for_sync(5)
    assert len(informer.store) == 1200
    assert [c["limit"] for c in fake.list_calls] == [PAGE_SIZE] * 3
    assert fake.list_calls[0]["resource_version"] == "0"
    await wait_until(lambda: fake.watch_calls)
    call = fake.watch_calls[0]
    assert call["resource_version"] == str(fake.rv)
    assert call["allow_bookmarks"] is True
    assert 300 <= call["timeout_seconds"] <= 600
    # Items in a list lack apiVersion/kind: the cache fills them in.
    got = informer.store.get("default/cm-0000")
    assert got["kind"] == "ConfigMap" and got["apiVersion"] == "v1"
    stop.set()
    await task


async def test_watch_events_reach_store_before_handlers_and_in_order():
    fake = FakeListerWatcher()
    fake.create(make_obj("a"))
    informer = informer_for(fake)
    rec = Recorder()
    store_behind: list[bool] = []

    def on_update(old: dict, new: dict) -> None:
        # The store is updated before handlers run: it is never behind the event.
        stored_rv = informer.store.resource_version("default/a")
        new_rv = int(new["metadata"]["resourceVersion"])
        store_behind.append(stored_rv is not None and int(stored_rv) < new_rv)
        rec.on_update(old, new)

    informer.add_event_handler(rec.on_add, on_update, rec.on_delete)
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    await rec.wait_for(lambda ev: ("add", "a", True) in ev)
    await wait_until(fake.watchers)
    fake.update("default", "a", v="1")
    fake.update("default", "a", v="2")
    fake.create(make_obj("b"))
    fake.delete("default", "a")
    await rec.wait_for(lambda ev: ("delete", "a", False) in ev)
    assert rec.events == [
        ("add", "a", True),
        ("update", "a", "1"),
        ("update", "a", "2"),
        ("add", "b", False),
        ("delete", "a", False),
    ]
    assert store_behind == [False, False]
    stop.set()
    await task


async def test_relist_after_410_delivers_deletes_for_objects_removed_while_disconnected():
    fake = FakeListerWatcher()
    for name in ("a", "b", "c"):
        fake.create(make_obj(name))
    informer = informer_for(fake)
    rec = Recorder()
    informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    await rec.wait_for(lambda ev: len(ev) == 3)
    await wait_until(lambda: fake.watch_calls)
    # Disconnect; meanwhile b is deleted, c changes, d appears, history is compacted.
    fake.close_watch_immediately = True
    fake.drop_watches()
    fake.delete("default", "b", silently=True)
    fake.update("default", "c", v="9")
    fake.create(make_obj("d"))
    fake.compact()
    fake.close_watch_immediately = False
    await rec.wait_for(lambda ev: ("delete", "b", True) in ev and ("add", "d", False) in ev)
    assert ("update", "c", "9") in rec.events
    assert sorted(informer.store.keys()) == ["default/a", "default/c", "default/d"]
    # The relist after the 410 asked for a quorum read (RV "") once "not older than" expired.
    rvs = [c["resource_version"] for c in fake.list_calls]
    assert rvs[0] == "0" and "" in rvs
    stop.set()
    await task


async def test_429_and_connection_refused_on_watch_rewatch_from_same_rv_without_relist():
    fake = FakeListerWatcher()
    fake.create(make_obj("a"))
    fake.watch_failures = [
        TooManyRequests(429, "TooManyRequests", "slow down", retry_after=0.001),
        ApiConnectionError(0, "ConnectionFailed", "connection refused"),
        TooManyRequests(429, "TooManyRequests", "slow down"),
    ]
    informer = informer_for(fake)
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    await wait_until(lambda: len(fake.watch_calls) >= 4)
    assert len(fake.list_calls) == 1
    assert {c["resource_version"] for c in fake.watch_calls} == {"101"}
    fake.update("default", "a", v="after-storm")
    await wait_until(lambda: informer.store.get("default/a")["data"]["v"] == "after-storm")
    stop.set()
    await task


async def test_clean_watch_end_rewatches_from_last_rv_and_bookmarks_advance_it():
    fake = FakeListerWatcher()
    fake.create(make_obj("a"))
    informer = informer_for(fake)
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    await wait_until(fake.watchers)
    fake.update("default", "a", v="1")
    await wait_until(lambda: informer.store.get("default/a")["data"]["v"] == "1")
    fake.bookmark()
    bookmark_rv = str(fake.rv)
    await wait_until(lambda: informer.reflector.last_sync_resource_version == bookmark_rv)
    fake.drop_watches()  # it delivered events: not a "very short" watch, however quick
    await wait_until(lambda: len(fake.watch_calls) >= 2)
    assert fake.watch_calls[1]["resource_version"] == bookmark_rv
    assert len(fake.list_calls) == 1
    stop.set()
    await task


async def test_very_short_watch_is_an_error_that_leads_to_backoff_and_relist():
    fake = FakeListerWatcher()
    fake.create(make_obj("a"))
    fake.close_watch_immediately = True
    store = SharedInformer(fake, api_version="v1", kind="ConfigMap")
    reflector = Reflector(fake, store, backoff=fast_backoff(), watch_backoff=fast_backoff())
    with pytest.raises(VeryShortWatchError):
        await reflector.list_and_watch()
    assert reflector.relist_resource_version() == str(fake.rv)


async def test_list_410_relists_immediately_with_empty_rv():
    fake = FakeListerWatcher()
    fake.create(make_obj("a"))
    store = SharedInformer(fake, api_version="v1", kind="ConfigMap")
    reflector = Reflector(fake, store)
    reflector.last_sync_resource_version = "5"
    fake.compact()
    await reflector.list()
    assert [c["resource_version"] for c in fake.list_calls] == ["5", ""]
    # An exact-RV list is unpaginated (watch cache), the quorum relist paged by 500.
    assert [c["limit"] for c in fake.list_calls] == [None, PAGE_SIZE]
    assert reflector.last_sync_resource_version == str(fake.rv)
    assert not reflector.is_last_sync_resource_version_unavailable


async def test_expired_continue_token_restarts_list_unpaginated():
    fake = FakeListerWatcher()
    for i in range(600):
        fake.create(make_obj(f"cm-{i}"))
    fake.list_failures = []
    original = fake.list

    async def flaky_list(**kw):
        if kw["continue_"]:
            fake.list_calls.append(kw)
            raise Gone(410, "Expired", "continue token expired")
        return await original(**kw)

    fake.list = flaky_list  # type: ignore[method-assign]
    store = SharedInformer(fake, api_version="v1", kind="ConfigMap")
    reflector = Reflector(fake, store)
    await reflector.list()
    assert len(store.store) == 600


async def test_a_handler_that_raises_does_not_stop_the_informer_or_other_handlers():
    fake = FakeListerWatcher()
    informer = informer_for(fake)
    rec = Recorder()

    def bad(obj: dict) -> None:
        raise RuntimeError("boom")

    informer.add_event_handler(bad, bad, bad)
    informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    assert await informer.wait_for_sync(5)
    await wait_until(lambda: fake.watch_calls)
    fake.create(make_obj("x"))
    fake.create(make_obj("y"))
    await rec.wait_for(lambda ev: len(ev) == 2)
    assert informer.running
    stop.set()
    await task


async def test_async_handlers_late_registration_and_resync():
    fake = FakeListerWatcher()
    fake.create(make_obj("a"))
    informer = informer_for(fake)
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    assert await informer.wait_for_sync(5)
    seen: list[tuple[str, str]] = []

    async def on_add(obj: dict) -> None:
        await asyncio.sleep(0)
        seen.append(("add", obj["metadata"]["name"]))

    async def on_update(old: dict, new: dict) -> None:
        seen.append(("resync" if old == new else "update", new["metadata"]["name"]))

    reg = informer.add_event_handler(on_add, on_update, resync_period=1.0)
    await wait_until(reg.has_synced)
    assert seen == [("add", "a")]
    await wait_until(lambda: ("resync", "a") in seen, timeout=5)
    stop.set()
    await task


async def test_random_watch_drops_and_compactions_converge_to_server_state():
    rng = random.Random(7)
    fake = FakeListerWatcher()
    informer = informer_for(fake)
    latest: dict[str, str] = {}
    informer.add_event_handler(
        lambda o: latest.__setitem__(o["metadata"]["name"], o["data"]["v"]),
        lambda old, new: latest.__setitem__(new["metadata"]["name"], new["data"]["v"]),
        lambda o: latest.pop(
            (o.obj if isinstance(o, DeletedFinalStateUnknown) else o)["metadata"]["name"], None
        ),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    assert await informer.wait_for_sync(5)
    names = [f"o{i}" for i in range(20)]
    for step in range(400):
        name = rng.choice(names)
        key = f"default/{name}"
        if key in fake.objects:
            if rng.random() < 0.2:
                fake.delete("default", name)
            else:
                fake.update("default", name, v=str(step))
        else:
            fake.create(make_obj(name))
        if rng.random() < 0.05:
            fake.drop_watches()
        if rng.random() < 0.02:
            fake.compact()
        await asyncio.sleep(0)
    expected = {o["metadata"]["name"]: o["data"]["v"] for o in fake.objects.values()}
    await wait_until(lambda: latest == expected, timeout=10)
    assert {k.split("/")[1] for k in informer.store} == set(expected)
    stop.set()
    await task


async def test_a_server_refusing_streaming_lists_gets_a_list_instead():
    from nimctl_runtime.client.errors import Invalid

    class NoWatchList(FakeListerWatcher):
        def watch_list(self, *, resource_version: str, timeout_seconds: int):
            async def refuse():
                raise Invalid(422, "Invalid", "sendInitialEvents is forbidden")
                yield  # pragma: no cover

            return refuse()

    fake = NoWatchList()
    fake.create(make_obj("a"))
    informer = SharedInformer(fake, api_version="v1", kind="ConfigMap", use_watch_list=True)
    assert informer.reflector.use_watch_list
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    assert await informer.wait_for_sync(5)
    assert informer.store.get("default/a") is not None
    assert not informer.reflector.use_watch_list
    assert len(fake.list_calls) == 1
    stop.set()
    await task


async def test_a_sync_handler_is_called_inline_and_an_async_one_keeps_its_order():
    """A synchronous handler whose queue is empty is called in the reflector's task, no
    wake-up of its own task per event (counted); an async handler's awaitables are
    awaited one after the other, so its notifications still arrive in order, and a
    slow one delays only itself."""
    fake = FakeListerWatcher()
    fake.create(make_obj("a"))
    informer = informer_for(fake)
    rec = Recorder()
    sync_reg = informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    seen_async: list[str] = []
    gate = asyncio.Event()

    async def slow_update(old: dict, new: dict) -> None:
        if new["data"].get("v") == "1":
            await gate.wait()  # the first update waits; the later ones must queue behind it
        seen_async.append(new["data"]["v"])

    async_reg = informer.add_event_handler(None, slow_update, None)
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    await rec.wait_for(lambda ev: ("add", "a", True) in ev)
    await wait_until(fake.watchers)
    await wait_until(lambda: sync_reg._idle and async_reg._idle)
    inline_before = sync_reg.delivered_inline
    for v in ("1", "2", "3"):
        fake.update("default", "a", v=v)
    await rec.wait_for(lambda ev: ("update", "a", "3") in ev)
    assert sync_reg.delivered_inline - inline_before == 3, "a sync handler waited for its task"
    assert [e for e in rec.events if e[0] == "update"] == [
        ("update", "a", "1"),
        ("update", "a", "2"),
        ("update", "a", "3"),
    ]
    assert seen_async == []  # held by the first update's awaitable
    gate.set()
    await wait_until(lambda: len(seen_async) == 3)
    assert seen_async == ["1", "2", "3"]
    stop.set()
    await task
