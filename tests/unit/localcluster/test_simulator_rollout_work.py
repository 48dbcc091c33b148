"""The simulator's work per Deployment rollout, counted (issue 30): never timed.

One Deployment with one replica and its Service, as the operator makes for a
NIMService, rolled out by the simulator on a manual clock. Pinned: the writes the
simulator makes (the objects and status transitions a client sees), that it decodes
none of the watch events its own writes cause, that a Deployment's pod-template
hash is computed once per template however often the Deployment is reconciled,
that a long queue of keys gives the event loop turns in between, and on the
storage side that each write copies its input through orjson alone and a create
decodes its namespace once per version of it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from localcluster.registry import Registry
from localcluster.simulator import engine, objects
from localcluster.simulator.clock import ManualClock
from localcluster.simulator.engine import Simulator
from localcluster.simulator.kubelet import KubeletTiming
from localcluster.storage import Storage
from localcluster.watchcache import StoredEvent

START, READY = 5.0, 10.0


def deployment(name: str, image: str = "app:1") -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"app": name}, "ports": [{"name": "api", "port": 8000}]},
    }


@contextmanager
def counted_decodes() -> Iterator[Counter[str]]:
    """Count ``StoredEvent.object`` decodes by resource (the simulator's listener is the
    only one on a bare Storage)."""
    counts: Counter[str] = Counter()
    original = StoredEvent.object

    def decode(event: StoredEvent) -> dict[str, Any]:
        counts[event.resource] += 1
        return original.fget(event)  # type: ignore[attr-defined,no-any-return]

    StoredEvent.object = property(decode)  # type: ignore[assignment,method-assign]
    try:
        yield counts
    finally:
        StoredEvent.object = original  # type: ignore[method-assign]


async def started(emit_events: bool = True) -> tuple[Storage, Simulator, ManualClock]:
    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    clock = ManualClock()
    sim = Simulator(
        storage,
        clock=clock,
        timing=KubeletTiming(start_delay=START, ready_delay=READY),
        emit_events=emit_events,
    )
    await sim.start()
    assert await sim.wait_idle()
    return storage, sim, clock


async def roll_out(sim: Simulator, clock: ManualClock) -> None:
    assert await sim.wait_idle()
    clock.advance(START)
    assert await sim.wait_idle()
    clock.advance(READY)
    assert await sim.wait_idle()


async def test_a_rollout_writes_what_it_wrote_before_and_decodes_none_of_its_own_events() -> None:
    storage, sim, clock = await started()
    writes: Counter[tuple[str, str]] = Counter()
    deployment_states: list[tuple[Any, ...]] = []

    def record(event: StoredEvent) -> None:
        writes[(event.resource, event.type)] += 1
        if event.resource == "deployments":
            status = event.object.get("status") or {}
            conditions = {c["type"]: c["reason"] for c in status.get("conditions") or []}
            deployment_states.append(
                (
                    status.get("replicas", 0),
                    status.get("readyReplicas", 0),
                    status.get("availableReplicas", 0),
                    conditions.get("Progressing"),
                )
            )

    try:
        with counted_decodes() as decodes:
            storage.subscribe(record)
            storage.create(deployment("llm"))
            storage.create(service("llm"))
            await roll_out(sim, clock)
            # The simulator's listener decoded only the two objects it did not write;
            # the recorder above decodes each of the Deployment's events itself.
            assert decodes == Counter({"deployments": 1 + len(deployment_states), "services": 1})
    finally:
        await sim.stop()
    # The writes a client sees for one rollout, as before the simulator's CPU was cut.
    assert writes == Counter(
        {
            ("deployments", "ADDED"): 1,
            ("deployments", "MODIFIED"): 5,  # the revision annotation, then four statuses
            ("services", "ADDED"): 1,
            ("services", "MODIFIED"): 1,
            ("replicasets", "ADDED"): 1,
            ("replicasets", "MODIFIED"): 3,
            ("pods", "ADDED"): 1,
            ("pods", "MODIFIED"): 4,  # bound, then three kubelet statuses
            ("endpoints", "ADDED"): 1,
            ("endpoints", "MODIFIED"): 2,
            ("endpointslices", "ADDED"): 1,
            ("endpointslices", "MODIFIED"): 2,
            ("events", "ADDED"): 7,
        }
    )
    assert deployment_states == [  # created, the revision annotation, then the statuses
        (0, 0, 0, None),
        (0, 0, 0, None),
        (0, 0, 0, "NewReplicaSetCreated"),
        (0, 0, 0, "NewReplicaSetCreated"),
        (1, 0, 0, "ReplicaSetUpdated"),
        (1, 1, 1, "NewReplicaSetAvailable"),
    ]
    pods = storage.list("v1", "Pod", "default")
    assert [p["status"]["phase"] for p in pods] == ["Running"]
    endpoints = storage.get("v1", "Endpoints", "llm", "default")
    assert [a["ip"] for a in endpoints["subsets"][0]["addresses"]] == [pods[0]["status"]["podIP"]]


async def test_the_template_hash_is_computed_once_per_template(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hashed: list[Any] = []
    real = objects.template_hash

    def counting(template: Any, collision_count: int = 0) -> str:
        hashed.append(template)
        return real(template, collision_count)

    monkeypatch.setattr(objects, "template_hash", counting)
    storage, sim, clock = await started(emit_events=False)
    reconciles = Counter[str]()
    process = sim._process

    async def counted(key: engine.Key) -> None:
        reconciles[key[0]] += 1
        await process(key)

    monkeypatch.setattr(sim, "_process", counted)
    try:
        storage.create(deployment("llm"))
        await roll_out(sim, clock)
        assert reconciles["Deployment"] >= 4
        assert len(hashed) == 1
        first = storage.list("apps/v1", "ReplicaSet", "default")
        assert [rs["metadata"]["name"] for rs in first] == [
            f"llm-{real(deployment('llm')['spec']['template'])}"
        ]
        # A new template (generation 2) is hashed once more, and gets its own ReplicaSet.
        current = storage.get("apps/v1", "Deployment", "llm", "default")
        current["spec"]["template"]["spec"]["containers"][0]["image"] = "app:2"
        storage.update(current)
        await roll_out(sim, clock)
        assert len(hashed) == 2
        names = {rs["metadata"]["name"] for rs in storage.list("apps/v1", "ReplicaSet", "default")}
        assert f"llm-{real(current['spec']['template'])}" in names
    finally:
        await sim.stop()


def test_an_owner_hash_is_the_template_hash_and_checks_the_template() -> None:
    owner = deployment("d")
    owner["metadata"].update(uid="u-1", generation=3)
    template = owner["spec"]["template"]
    assert objects.owner_template_hash(owner) == objects.template_hash(template)
    assert objects.owner_template_hash(owner, 2) == objects.template_hash(template, 2)
    # Same uid and generation but another template (an object that did not come from
    # storage): the hash follows the template, not the memo.
    template["spec"]["containers"][0]["image"] = "other:1"
    assert objects.owner_template_hash(owner) == objects.template_hash(template)
    del owner["metadata"]["uid"]
    assert objects.owner_template_hash(owner) == objects.template_hash(template)


async def test_a_long_queue_gives_the_event_loop_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "YIELD_SECONDS", 0.0)  # a turn after every key
    storage, sim, clock = await started(emit_events=False)
    turns = 0
    done = asyncio.Event()

    async def api_requests() -> None:
        nonlocal turns
        while not done.is_set():
            turns += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(api_requests())
    try:
        sim.stall()
        for i in range(20):
            storage.create(deployment(f"d{i}"))
        before = sim.yields
        sim.resume()
        assert await sim.wait_idle()
        # 20 Deployments, their ReplicaSets and pods: dozens of keys, a turn after each.
        assert sim.yields - before >= 40
        assert turns >= sim.yields - before
    finally:
        done.set()
        await ticker
        await sim.stop()
    del clock


async def test_an_unschedulable_pod_is_tried_again_on_a_cluster_change_not_its_own_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from localcluster.simulator.nodes import build_nodes, load_profile

    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    sim = Simulator(storage, profile="no-gpu", clock=ManualClock(), emit_events=False)
    passes: list[str] = []
    schedule = sim._schedule

    async def counted(pod: dict[str, Any]) -> None:
        passes.append(pod["metadata"]["name"])
        await schedule(pod)

    monkeypatch.setattr(sim, "_schedule", counted)
    await sim.start()
    try:
        gpu = deployment("gpu")["spec"]["template"]
        gpu["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        meta = {"name": "g", "namespace": "default"}
        storage.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": gpu["spec"]})
        assert await sim.wait_idle()
        pending = storage.get("v1", "Pod", "g", "default")
        scheduled = next(c for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
        assert passes == ["g"]  # its FailedScheduling status write did not bring it back
        assert sim.unschedulable_echoes == 1
        # A GPU node joins: the pod is tried again and placed there.
        node = build_nodes(load_profile("default"))[0]
        storage.create(node)
        assert await sim.wait_idle()
        assert passes == ["g", "g"]
        bound = storage.get("v1", "Pod", "g", "default")
        assert bound["spec"]["nodeName"] == node["metadata"]["name"]
    finally:
        await sim.stop()


async def test_a_rollouts_storage_writes_copy_cheaply_and_decode_the_namespace_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The storage side of a rollout: each write copies its input through orjson alone
    (never the json-exact encode and decode, which check floats and long integers for
    bytes nobody keeps), a status write copies only the status, the namespace of the
    13 creates is decoded once, and no update decodes the object it replaces."""
    from localcluster import storage as storage_module
    from localcluster.store import Entry

    storage, sim, clock = await started()
    long_way: Counter[str] = Counter()
    for name in ("encode", "decode"):
        real = getattr(storage_module, name)

        def counting(data: Any, _real: Any = real, _name: str = name) -> Any:
            long_way[_name] += 1
            return _real(data)

        monkeypatch.setattr(storage_module, name, counting)
    entry_decodes = 0
    entry_decode = Entry.decode

    def counted_decode(entry: Entry) -> dict[str, Any]:
        nonlocal entry_decodes
        entry_decodes += 1
        return entry_decode(entry)

    monkeypatch.setattr(Entry, "decode", counted_decode)
    writes: Counter[str] = Counter()
    storage.subscribe(lambda event: writes.update([event.type]))
    try:
        storage.create(deployment("llm"))
        storage.create(service("llm"))
        await roll_out(sim, clock)
    finally:
        await sim.stop()
    assert writes == Counter({"ADDED": 13, "MODIFIED": 17})  # as pinned above
    # No json-exact copy: encode only checks each of the 11 status writes' new status,
    # after which the whole object is stored as orjson writes it (no float check over
    # the spec and metadata it kept from the stored object).
    assert long_way == Counter({"encode": 11})
    assert storage.plain_writes == 11
    # One decode, of the namespace. Each of the 17 updates (11 status writes, the
    # revision annotation, the binding, two of Endpoints and two of the EndpointSlice)
    # hands the view's object, which is the stored one: the object it replaces is not
    # decoded again (it was before: 17 decodes).
    assert storage.namespace_decodes == 1
    assert storage.decodes_spared == writes["MODIFIED"] == 17
    assert entry_decodes == 1
    # A namespace that changes is decoded again (its deletion is checked on create).
    ns = storage.get("v1", "Namespace", "default")
    ns["metadata"]["labels"]["team"] = "a"
    storage.update(ns)
    storage.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    )
    storage.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d", "namespace": "default"}}
    )
    assert storage.namespace_decodes == 2


def test_a_status_write_uses_the_callers_object_only_when_it_is_the_stored_one() -> None:
    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    storage.create(deployment("d"))
    current = storage.get("apps/v1", "Deployment", "d", "default")
    first = {**current, "status": {"replicas": 1}}
    written = storage.update_status(first, current=current)
    assert storage.decodes_spared == 1
    assert written == {**current, "status": {"replicas": 1}, "metadata": written["metadata"]}
    assert written["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]
    assert storage.get("apps/v1", "Deployment", "d", "default") == written
    # A stale object (the one before that write) or one changed in place is not the
    # stored one: it is ignored, and the stored object decoded, so nothing of it leaks.
    storage.update_status({**written, "status": {"replicas": 2}}, current=current)
    changed = storage.get("apps/v1", "Deployment", "d", "default")
    changed["metadata"]["labels"] = {"not": "stored"}
    storage.update_status({**changed, "status": {"replicas": 3}}, current=changed)
    assert storage.decodes_spared == 1
    stored = storage.get("apps/v1", "Deployment", "d", "default")
    assert stored["status"] == {"replicas": 3}
    assert "labels" not in stored["metadata"]
    assert stored["spec"] == current["spec"]
    # A full update likewise: the stored object is used as the caller holds it...
    relabelled = {**stored, "metadata": {**stored["metadata"], "labels": {"a": "b"}}}
    updated = storage.update(relabelled, current=stored)
    assert storage.decodes_spared == 2
    assert updated["status"] == {"replicas": 3}  # kept from the stored object
    # ...and not when the caller's object is out of date.
    storage.update({**updated, "metadata": {**updated["metadata"], "labels": {}}}, current=stored)
    assert storage.decodes_spared == 2
    assert "labels" not in storage.get("apps/v1", "Deployment", "d", "default")["metadata"]


def test_the_storage_copy_is_deep_and_keeps_what_orjson_cannot_write() -> None:
    from localcluster.storage import _copy

    obj: dict[str, Any] = {"a": [{"b": 1, "c": 2.5, "d": None, "e": True}], "f": "x"}
    copied = _copy(obj)
    assert copied == obj
    copied["a"][0]["b"] = 2
    assert obj["a"][0]["b"] == 1
    # Beyond 64 bits and keys that are not str: the json-exact way, as before.
    assert _copy({"big": 2**70}) == {"big": 2**70}
    int_keys: dict[Any, Any] = {1: "x"}
    assert _copy(int_keys) == {"1": "x"}


def test_json_copy_is_a_deep_copy_of_json_and_of_what_json_is_not() -> None:
    import datetime

    value: dict[str, Any] = {"a": [{"b": 1, "c": 2.5, "d": None, "e": True}], "f": "x"}
    copied = objects.json_copy(value)
    assert copied == value
    copied["a"][0]["b"] = 2
    assert value["a"][0]["b"] == 1
    # What orjson would write its own way or refuses is copied in Python, unchanged.
    moment = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    odd = {"when": moment, "big": 2**70, 3: "int key"}
    assert objects.json_copy(odd) == odd
    assert isinstance(objects.json_copy(odd)["when"], datetime.datetime)  # not its ISO text


def test_a_status_write_stores_the_bytes_encode_would_whatever_floats_it_holds() -> None:
    """Over the caller's own stored object a status write skips the float check of the
    whole object: its bytes must still be ``encode``'s, byte for byte, with floats
    written alike by json and orjson (0.5, 1e+16) or differently (1e-05), in the kept
    spec or in the new status."""
    from localcluster.store import encode

    storage = Storage(Registry())
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for i, (kept, status) in enumerate(
        [
            (None, {"replicas": 1}),
            (0.5, {"replicas": 1}),
            (1e-05, {"replicas": 1}),
            (None, {"ratio": 1e-05}),
            (1e16, {"ratio": 0.25}),
        ]
    ):
        obj = deployment(f"f{i}")
        if kept is not None:
            obj["spec"]["x-float"] = kept
        storage.create(obj)
        current = storage.get("apps/v1", "Deployment", f"f{i}", "default")
        written = storage.update_status({**current, "status": status}, current=current)
        entry = storage.get_entry(storage.resolve("apps/v1", "Deployment"), "default", f"f{i}")
        assert entry is not None
        assert entry.data == encode(written)
        assert storage.get("apps/v1", "Deployment", f"f{i}", "default")["status"] == status
    # 1e-05 is 0.00001 to orjson: kept, the caller's object is not the stored bytes (so
    # decoded); written, the status is not written alike (so the whole object checked).
    assert storage.decodes_spared == 4
    assert storage.plain_writes == 3
