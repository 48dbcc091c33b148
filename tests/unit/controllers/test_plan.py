"""controllers.plan: which writes bring the cluster to the render, counted without a server."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controllers.plan import WritePolicy, drain, key, plan
from controllers.sync import update_body
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


def deployment(name: str, replicas: int, image: str = "nim:1") -> dict[str, Any]:
    obj = configmap(name, "")
    obj.update(apiVersion="apps/v1", kind="Deployment")
    del obj["data"]
    obj["spec"] = {"replicas": replicas, "template": {"spec": {"image": image}}}
    return obj


def hpa_for(name: str) -> dict[str, Any]:
    obj = configmap(f"{name}-hpa", "")
    obj.update(apiVersion="autoscaling/v2", kind="HorizontalPodAutoscaler")
    del obj["data"]
    obj["spec"] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}}
    return obj


def test_the_one_hpa_rule_keeps_the_live_replicas_of_a_scaled_deployment() -> None:
    # the render says the replicas a create starts with (2); the HPA scaled it to 5
    first = plan([hpa_for("d"), deployment("d", 2)], [], {}, owner_uid=OWNER)
    created = {a.kind: a for a in first}
    assert created["Deployment"].policy.keep_live_replicas
    live = copy.deepcopy(created["Deployment"].obj)
    live["spec"]["replicas"] = 5
    hpa_live = copy.deepcopy(created["HorizontalPodAutoscaler"].obj)
    cached = {key(live): live, key(hpa_live): hpa_live}
    assert plan([hpa_for("d"), deployment("d", 2)], [live, hpa_live], cached, owner_uid=OWNER) == []
    # a spec change is written, and the update carries the live count (update_body)
    changed = plan(
        [hpa_for("d"), deployment("d", 2, "nim:2")], [live, hpa_live], cached, owner_uid=OWNER
    )
    assert [(a.verb, a.kind) for a in changed] == [("apply", "Deployment")]
    body = update_body(
        changed[0].obj, live, keep_live_replicas=changed[0].policy.keep_live_replicas
    )
    assert body["spec"]["replicas"] == 5
    # without an HPA the render's count wins: replica drift is written back
    plain = stamped_copy(deployment("p", 2))
    drifted = {**plain, "spec": {**plain["spec"], "replicas": 5}}
    back = plan([deployment("p", 2)], [drifted], {key(drifted): drifted}, owner_uid=OWNER)
    assert [(a.verb, a.name, a.policy.keep_live_replicas) for a in back] == [("apply", "p", False)]


def test_write_policies_are_asked_per_object_and_carried_to_the_executor() -> None:
    kept, orphaned, gone = (
        configmap("kept", "x"),
        configmap("orphaned", "x"),
        configmap("gone", "x"),
    )
    live = stamped_copy(configmap("once", "old"))

    def policy(obj: Mapping[str, Any]) -> WritePolicy:
        name = obj["metadata"]["name"]
        return WritePolicy(
            create_only=name == "once",
            keep_on_prune=name == "kept",
            overwrite_foreign=name != "theirs",
            propagation="Orphan" if name == "orphaned" else None,
        )

    desired = [configmap("once", "new"), configmap("theirs", "x")]
    actions = plan(
        desired, [kept, orphaned, gone, live], {key(live): live}, owner_uid=OWNER, policy=policy
    )
    # "once" exists and is create-only: not rewritten; "kept" survives the prune
    assert [(a.verb, a.name) for a in actions] == [
        ("apply", "theirs"),
        ("delete", "orphaned"),
        ("delete", "gone"),
    ]
    by_name = {a.name: a.policy for a in actions}
    assert by_name["theirs"].overwrite_foreign is False
    assert by_name["orphaned"].propagation == "Orphan"
    assert by_name["gone"].propagation is None


def test_the_default_policy_creates_pvcs_once_and_keeps_them() -> None:
    pvc = configmap("store", "x")
    pvc["kind"] = "PersistentVolumeClaim"
    live = stamped_copy(pvc)
    changed = {**pvc, "data": {"m": "y"}}
    assert plan([changed], [live], {key(live): live}, owner_uid=OWNER) == []
    assert plan([], [live], {}, owner_uid=OWNER) == []


def test_drain_deletes_in_the_foreground_what_goes_before_the_finalizer() -> None:
    first, going, plugin = configmap("b", "x"), configmap("a", "x"), configmap("plugin", "x")
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    foreign = configmap("c", "x", owner="someone-else")

    def policy(obj: Mapping[str, Any]) -> WritePolicy:
        return WritePolicy(drain_on_delete=obj["metadata"]["name"] != "plugin")

    actions, waiting = drain([first, going, plugin, foreign], owner_uid=OWNER, policy=policy)
    # the one already going is waited for, not deleted again; the plugin stays
    assert [(a.verb, a.name, a.policy.propagation) for a in actions] == [
        ("delete", "b", "Foreground")
    ]
    assert waiting == ["a", "b"]
    assert drain([plugin], owner_uid=OWNER, policy=policy) == ([], [])
