"""Predicates filter the right events; handlers map events to the right requests."""

from __future__ import annotations

from typing import Any

from nimctl_runtime.handler import (
    CreateEvent,
    DeleteEvent,
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    GenericEvent,
    UpdateEvent,
)
from nimctl_runtime.predicate import (
    AnnotationChangedPredicate,
    Funcs,
    GenerationChangedPredicate,
    LabelChangedPredicate,
    LabelSelectorPredicate,
    ResourceVersionChangedPredicate,
    and_,
    new_predicate_funcs,
    not_,
    or_,
)
from nimctl_runtime.reconcile import Request, Result, TerminalError, is_terminal

from .fakes import obj


class ListQueue:
    def __init__(self) -> None:
        self.items: list[Request] = []
        self.priorities: list[int] = []

    def add(self, item: Request, priority: int = 0) -> None:
        self.items.append(item)
        self.priorities.append(priority)

    def add_after(self, item: Request, delay: float, priority: int = 0) -> None:
        self.add(item, priority)


def upd(old: dict, new: dict) -> UpdateEvent:  # type: ignore[type-arg]
    return UpdateEvent(old, new)


def test_generation_changed_passes_spec_changes_only() -> None:
    p = GenerationChangedPredicate()
    assert not p.update(upd(obj("a", generation=1, rv="1"), obj("a", generation=1, rv="2")))
    assert p.update(upd(obj("a", generation=1), obj("a", generation=2)))
    assert p.create(CreateEvent(obj("a")))
    assert p.delete(DeleteEvent(obj("a")))


def test_resource_version_label_and_annotation_predicates() -> None:
    rv = ResourceVersionChangedPredicate()
    assert not rv.update(upd(obj("a", rv="5"), obj("a", rv="5"))), "resync dropped"
    assert rv.update(upd(obj("a", rv="5"), obj("a", rv="6")))
    lab = LabelChangedPredicate()
    assert lab.update(upd(obj("a", labels={"x": "1"}), obj("a", labels={"x": "2"})))
    assert not lab.update(upd(obj("a", labels={"x": "1"}), obj("a", labels={"x": "1"}, rv="9")))
    old, new = obj("a"), obj("a")
    new["metadata"]["annotations"] = {"k": "v"}
    assert AnnotationChangedPredicate().update(upd(old, new))


def test_label_selector_predicate_from_string_and_dict() -> None:
    managed = obj("a", labels={"app.kubernetes.io/managed-by": "k8s-nim-operator"})
    other = obj("b", labels={"app": "x"})
    for sel in (
        "app.kubernetes.io/managed-by=k8s-nim-operator",
        {"matchLabels": {"app.kubernetes.io/managed-by": "k8s-nim-operator"}},
    ):
        p = LabelSelectorPredicate(sel)
        assert p.create(CreateEvent(managed))
        assert not p.create(CreateEvent(other))
        assert p.update(upd(other, managed))
        assert not p.delete(DeleteEvent(other))
        assert p.generic(GenericEvent(managed))


def test_and_or_not_and_custom() -> None:
    yes, no = Funcs(), Funcs(create=lambda e: False)
    ev = CreateEvent(obj("a"))
    assert and_(yes, yes).create(ev) and not and_(yes, no).create(ev)
    assert or_(no, yes).create(ev) and not or_(no, no).create(ev)
    assert not_(no).create(ev)
    only_a = new_predicate_funcs(lambda o: o["metadata"]["name"] == "a")
    assert only_a.create(ev) and not only_a.create(CreateEvent(obj("b")))
    assert only_a.update(upd(obj("b"), obj("a")))


async def test_enqueue_for_object_uses_namespace_and_name() -> None:
    q = ListQueue()
    h = EnqueueRequestForObject()
    h.create(CreateEvent(obj("a", "ns")), q)
    h.update(upd(obj("a", "ns"), obj("a", "ns")), q)
    h.delete(DeleteEvent(obj("node-1", None)), q)
    assert q.items == [Request("ns", "a"), Request("ns", "a"), Request(None, "node-1")]
    assert Request("", "x") == Request(None, "x") and str(Request("ns", "a")) == "ns/a"


async def test_enqueue_for_owner_on_update_wakes_old_and_new_owner() -> None:
    def owned_by(name: str) -> list[dict[str, Any]]:
        return [{"apiVersion": "example.com/v1", "kind": "Widget", "name": name,
                 "controller": True}]  # fmt: skip

    q = ListQueue()
    h = EnqueueRequestForOwner("example.com/v1", "Widget")
    h.update(upd(obj("d", "ns", owners=owned_by("w1")), obj("d", "ns", owners=owned_by("w2"))), q)
    assert q.items == [Request("ns", "w1"), Request("ns", "w2")]
    q.items.clear()
    cluster = EnqueueRequestForOwner("example.com/v1", "Widget", owner_namespaced=False)
    cluster.create(CreateEvent(obj("d", "ns", owners=owned_by("w1"))), q)
    assert q.items == [Request(None, "w1")]
    q.items.clear()
    every = EnqueueRequestForOwner("example.com/v1", "Widget", only_controller=False)
    refs: list[dict[str, Any]] = [{"apiVersion": "example.com/v2", "kind": "Widget", "name": "n1"},
            {"apiVersion": "example.com/v1", "kind": "Widget", "name": "n2", "controller": True}]  # fmt: skip
    every.generic(GenericEvent(obj("d", "ns", owners=refs)), q)
    assert q.items == [Request("ns", "n1"), Request("ns", "n2")]


def test_result_and_terminal_error() -> None:
    assert Result().is_zero() and not Result(requeue_after=5).is_zero()
    try:
        try:
            raise TerminalError("bad spec")
        except TerminalError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        assert is_terminal(wrapped)
    assert not is_terminal(ValueError())


async def test_initial_list_and_resyncs_are_low_priority() -> None:
    from nimctl_runtime.handler import LOW_PRIORITY

    q = ListQueue()
    h = EnqueueRequestForObject()
    h.create(CreateEvent(obj("a"), is_in_initial_list=True), q)
    h.create(CreateEvent(obj("b")), q)
    h.update(upd(obj("a", rv="7"), obj("a", rv="7")), q)  # resync
    h.update(upd(obj("a", rv="7"), obj("a", rv="8")), q)
    assert q.priorities == [LOW_PRIORITY, 0, LOW_PRIORITY, 0]


async def test_an_owned_objects_state_queues_behind_news_with_state_priority() -> None:
    """``state_priority``: an owned object's creation (the owner's own write coming
    back) and its status-only updates queue at that priority; a spec change or a
    delete of the owned object is news (0)."""
    from nimctl_runtime.handler import LOW_PRIORITY

    owners: list[dict[str, Any]] = [
        {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "controller": True}
    ]
    q = ListQueue()
    h = EnqueueRequestForOwner("example.com/v1", "Widget", state_priority=LOW_PRIORITY)
    h.create(CreateEvent(obj("d", "ns", owners=owners, generation=1)), q)
    h.update(upd(obj("d", "ns", owners=owners, generation=1, rv="1"),
                 obj("d", "ns", owners=owners, generation=1, rv="2")), q)  # fmt: skip
    h.update(upd(obj("d", "ns", owners=owners, generation=1, rv="2"),
                 obj("d", "ns", owners=owners, generation=2, rv="3")), q)  # fmt: skip
    cm_old, cm_new = obj("cm", "ns", owners=owners, rv="1"), obj("cm", "ns", owners=owners, rv="2")
    for cm in (cm_old, cm_new):
        del cm["metadata"]["generation"]  # a kind without one (ConfigMap): any change is news
    h.update(upd(cm_old, cm_new), q)
    h.delete(DeleteEvent(obj("d", "ns", owners=owners, generation=2)), q)
    assert q.priorities == [LOW_PRIORITY, LOW_PRIORITY, 0, 0, 0]
    q.items.clear()
    q.priorities.clear()
    plain = EnqueueRequestForOwner("example.com/v1", "Widget")
    plain.update(upd(obj("d", "ns", owners=owners, generation=1, rv="1"),
                     obj("d", "ns", owners=owners, generation=1, rv="2")), q)  # fmt: skip
    assert q.priorities == [0], "the default is unchanged: every event is news"


async def test_a_map_func_watch_caps_its_priority() -> None:
    from nimctl_runtime.handler import LOW_PRIORITY, EnqueueRequestsFromMapFunc

    q = ListQueue()
    h = EnqueueRequestsFromMapFunc(lambda o: [Request("ns", "w")], priority=LOW_PRIORITY)
    h.create(CreateEvent(obj("p")), q)
    h.update(upd(obj("p", rv="1"), obj("p", rv="2")), q)
    h.delete(DeleteEvent(obj("p")), q)
    assert q.priorities == [LOW_PRIORITY] * 3
