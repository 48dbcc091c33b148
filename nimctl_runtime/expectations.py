"""Create expectations: a controller's own creates, so their watch echo wakes nobody.

A reconcile that creates an object gets the created object back in the
response and computes the owner's status from it. The watch then delivers the
same object (same resourceVersion) as an ADDED event, and ``EnqueueRequestForOwner``
would queue the owner for a pass that can learn nothing new: at 1,000
NIMServices applied at once that second pass (parse, render memo, the owned
objects listed again, readiness, status compared) was about a third of the
operator's CPU until every Deployment existed (issue 30). The ReplicaSet
controller's ``ControllerExpectations`` solve the same problem by counting the
creates it waits to observe; this is the per-object form of it:

* ``expect(key)`` before the create is sent, ``created(key, rv)`` once it
  succeeded (the pass holds the response), ``cancel(key)`` when no create
  happened (an update instead, an error);
* ``echo(obj)`` (the predicate on the owned kinds' watches): an ADDED event for
  a key whose create is in flight, or whose created resourceVersion it
  carries, is the echo: dropped once, and the expectation with it. Anything
  else (another resourceVersion: changed since, or recreated) passes.

Dropping an event only ever spares a pass that would have seen what the
creating pass saw: a create that fails, or finds the object already there,
reads the live object in the same pass or fails it (requeued with backoff).
Expectations whose echo never comes (the object created and deleted while the
watch was down) are bounded: past ``limit`` the oldest are dropped, which costs
at most one extra pass each.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from nimctl_runtime.handler import CreateEvent
from nimctl_runtime.predicate import Funcs

__all__ = ["CreateExpectations", "ExpectKey", "expect_key"]

ExpectKey = tuple[str, str, str, str]
"""``(apiVersion, kind, namespace, name)``."""

#: The create is in flight: its resourceVersion is not known yet.
_IN_FLIGHT = ""


def expect_key(obj: Mapping[str, Any], namespace: str | None = None) -> ExpectKey:
    """The expectation key of an object (``namespace`` when the object names none)."""
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or namespace or ""),
        str(meta.get("name", "")),
    )


class CreateExpectations:
    """The creates one controller made whose watch echo it has not seen yet."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        #: key -> resourceVersion the create returned ("" while in flight; a
        #: ``_Seen`` once the echo came first, while still in flight)
        self._expected: OrderedDict[ExpectKey, str | _Seen] = OrderedDict()
        #: ADDED events recognised as echoes and dropped.
        self.echoes = 0

    def __len__(self) -> int:
        return len(self._expected)

    def expect(self, key: ExpectKey) -> None:
        """A create of ``key`` is about to be sent."""
        self._expected[key] = _IN_FLIGHT
        self._expected.move_to_end(key)
        while len(self._expected) > self._limit:
            self._expected.popitem(last=False)

    def created(self, key: ExpectKey, resource_version: str) -> None:
        """The create succeeded with ``resource_version``; its echo is now expected."""
        state = self._expected.get(key)
        if state is None:
            return
        if isinstance(state, _Seen) or not resource_version:
            del self._expected[key]  # the echo already came (or cannot be told apart)
            return
        self._expected[key] = resource_version

    def cancel(self, key: ExpectKey) -> None:
        """No create of ``key`` happened after all."""
        self._expected.pop(key, None)

    def echo(self, obj: Mapping[str, Any]) -> bool:
        """Whether an ADDED ``obj`` is the echo of an expected create (forgotten once seen)."""
        if not self._expected:
            return False
        key = expect_key(obj)
        state = self._expected.get(key)
        if state is None:
            return False
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if isinstance(state, _Seen):
            del self._expected[key]  # a second ADDED for the key: news
            return False
        if state == _IN_FLIGHT:
            self._expected[key] = _Seen(rv)
        elif state == rv:
            del self._expected[key]
        else:
            del self._expected[key]
            return False
        self.echoes += 1
        return True

    def predicate(self) -> Funcs:
        """Drops the ADDED events that are echoes (for the owned kinds' watches)."""

        def create(event: CreateEvent) -> bool:
            return not self.echo(event.object)

        return Funcs(create=create)


class _Seen(str):
    """The echo of an in-flight create was seen (and dropped) before the create returned."""

    __slots__ = ()
