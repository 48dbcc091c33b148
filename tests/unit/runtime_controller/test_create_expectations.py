"""A controller's own creates: their watch echo is dropped once, anything else passes.

What a user sees: the operator's CPU per NIMService while 1,000 are applied (issue 30).
The ADDED event of an object this reconciler just created carries what the creating
pass already saw; before, it queued the owner for a pass that changed nothing.
"""

from __future__ import annotations

from typing import Any

from nimctl_runtime.expectations import CreateExpectations, expect_key
from nimctl_runtime.handler import CreateEvent


def dep(name: str = "llm", rv: str = "7") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv},
    }


KEY = expect_key(dep())


def test_the_echo_of_a_create_is_dropped_once() -> None:
    e = CreateExpectations()
    e.expect(KEY)
    e.created(KEY, "7")
    passes = e.predicate()
    assert not passes.create(CreateEvent(dep(rv="7")))
    assert passes.create(CreateEvent(dep(rv="7"))), "a second ADDED is news"
    assert e.echoes == 1 and len(e) == 0


def test_an_echo_that_beats_the_create_response_is_dropped() -> None:
    e = CreateExpectations()
    e.expect(KEY)
    assert e.echo(dep(rv="7"))  # the watch was faster than the create's answer
    e.created(KEY, "7")
    assert len(e) == 0
    assert not e.echo(dep(rv="7"))


def test_another_version_or_object_passes() -> None:
    e = CreateExpectations()
    e.expect(KEY)
    e.created(KEY, "7")
    assert not e.echo(dep(rv="9")), "changed since the create: news"
    assert len(e) == 0
    e.expect(KEY)
    e.created(KEY, "7")
    assert not e.echo(dep(name="other", rv="7"))
    assert len(e) == 1


def test_a_create_that_did_not_happen_expects_nothing() -> None:
    e = CreateExpectations()
    e.expect(KEY)
    e.cancel(KEY)  # AlreadyExists, an update instead, an error
    assert not e.echo(dep())
    assert len(e) == 0


def test_expectations_whose_echo_never_comes_are_bounded() -> None:
    e = CreateExpectations(limit=3)
    for i in range(10):
        k = expect_key(dep(name=f"d{i}"))
        e.expect(k)
        e.created(k, "1")
    assert len(e) == 3
    assert e.echo(dep(name="d9", rv="1"))
    assert not e.echo(dep(name="d0", rv="1")), "dropped expectation: one extra pass"
