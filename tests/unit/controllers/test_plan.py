"""controllers.plan: which writes bring the cluster to the render, counted without a server."""

from __future__ import annotations

import copy
from typing import Any

from controllers.plan import key, plan
from manifests.hashing import stamped_copy

OWNER = "uid-owner"


def configmap(name: str, message: str, *, owner: str | None = OWNER) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if owner:
        meta["ownerReferences"] = [{"kind": "X", "name": "x", "uid": owner, "controller": True}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"m": message}}


def test_an_unchanged_render_plans_nothing_and_a_changed_one_one_update() -> None:
    live = stamped_copy(configmap("a", "hi"))
    assert plan([configmap("a", "hi")], [live], {key(live): live}, owner_uid=OWNER) == []
    actions = plan([configmap("a", "bye")], [live], {key(live): live}, owner_uid=OWNER)
    assert [(a.verb, a.name) for a in actions] == [("apply", "a")]


def test_a_render_that_stamps_no_hash_is_still_updated_when_it_changes() -> None:
    # a new kind's render need not stamp nvidia.com/last-applied-hash itself:
    # without the plan's stamp, desired and live both had no hash and looked equal
    live = configmap("a", "hi")
    first = plan([configmap("a", "hi")], [live], {key(live): live}, owner_uid=OWNER)
    assert [(a.verb, a.name) for a in first] == [("apply", "a")]
    written = copy.deepcopy(first[0].obj)
    assert plan([configmap("a", "hi")], [written], {key(written): written}, owner_uid=OWNER) == []
    changed = plan([configmap("a", "bye")], [written], {key(written): written}, owner_uid=OWNER)
    assert [(a.verb, a.name) for a in changed] == [("apply", "a")]


def test_prune_deletes_only_what_the_owner_controls() -> None:
    mine, foreign = configmap("old", "x"), configmap("theirs", "x", owner="someone-else")
    actions = plan([], [mine, foreign], {}, owner_uid=OWNER)
    assert [(a.verb, a.name) for a in actions] == [("delete", "old")]
