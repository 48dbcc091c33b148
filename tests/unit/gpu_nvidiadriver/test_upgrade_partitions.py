"""The upgrade's NVIDIADriver path: each NVIDIADriver plans its own nodes, with its own policy."""

from __future__ import annotations

from typing import Any

from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade.partition import partitions
from controllers.gpu.upgrade.plan import plan

OWNER = "nvidia.com/gpu-operator.driver.owner"


def _node(name: str, owner: str, state: str = "upgrade-done") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {OWNER: owner, c.STATE_LABEL: state}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def _driver(name: str, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if policy is not None:
        spec["upgradePolicy"] = policy
    return {"metadata": {"name": name}, "spec": spec}


def _ds(name: str, owner: str, uid: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "labels": {"app.kubernetes.io/component": "nvidia-driver"},
            "ownerReferences": [{"kind": "NVIDIADriver", "name": owner, "controller": True}],
        }
    }


def _revision(ds: str, uid: str, hash_: str, number: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{ds}-{hash_}", "ownerReferences": [{"uid": uid}]},
        "revision": number,
    }


def _pod(node: str, ds: str, uid: str, hash_: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{ds}-{node}",
            "uid": f"pod-{node}",
            "labels": {
                "app.kubernetes.io/component": "nvidia-driver",
                "app": ds,
                "controller-revision-hash": hash_,
            },
            "ownerReferences": [{"kind": "DaemonSet", "name": ds, "uid": uid, "controller": True}],
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "containerStatuses": [{"ready": True}]},
    }


NODES = [_node("a1", "pool-a"), _node("a2", "pool-a"), _node("b1", "pool-b"), _node("x", "")]
DAEMONSETS = [_ds("ds-a", "pool-a", "ua"), _ds("ds-b", "pool-b", "ub")]


def test_each_nvidiadriver_gets_its_nodes_its_daemonsets_and_its_policy() -> None:
    parts = partitions(
        [_driver("pool-b", {"autoUpgrade": False}), _driver("pool-a", {"maxParallelUpgrades": 2})],
        NODES,
        DAEMONSETS,
    )
    assert [p.owner for p in parts] == ["pool-a", "pool-b"]
    a, b = parts
    assert [n["metadata"]["name"] for n in a.nodes] == ["a1", "a2"]
    assert [d["metadata"]["name"] for d in a.daemonsets] == ["ds-a"]
    assert a.policy is not None and a.policy.max_parallel_upgrades == 2
    assert a.policy.driver_pod_selector == "app.kubernetes.io/component=nvidia-driver"
    assert b.policy is None  # autoUpgrade false: its states are removed


def test_an_unset_upgrade_policy_means_nvidias_defaults_with_auto_upgrade_on() -> None:
    (part,) = partitions([_driver("pool-a")], NODES, DAEMONSETS)
    assert part.policy is not None
    assert (part.policy.max_parallel_upgrades, part.policy.max_unavailable) == (1, "25%")


def test_an_invalid_policy_is_reported_and_its_nodes_left_alone() -> None:
    (part,) = partitions([_driver("pool-a", {"maxParallelUpgrades": -1})], NODES, DAEMONSETS)
    assert part.policy is None
    assert part.error.startswith("NVIDIADriver pool-a: spec.upgradePolicy:")


def test_a_new_revision_of_one_pool_moves_only_that_pools_nodes() -> None:
    revisions = [
        _revision("ds-a", "ua", "old", 1),
        _revision("ds-a", "ua", "new", 2),
        _revision("ds-b", "ub", "old", 1),
    ]
    pods = [
        _pod("a1", "ds-a", "ua", "old"),
        _pod("a2", "ds-a", "ua", "old"),
        _pod("b1", "ds-b", "ub", "old"),
    ]
    parts = partitions([_driver("pool-a"), _driver("pool-b")], NODES, DAEMONSETS)
    moved: dict[str, str] = {}
    for part in parts:
        assert part.policy is not None
        decided = plan(part.nodes, pods, part.daemonsets, part.policy, 0.0, revisions=revisions)
        for node, patch in decided.patches.items():
            if c.STATE_LABEL in patch.labels:
                moved[node] = str(patch.labels[c.STATE_LABEL])
    assert moved == {"a1": "upgrade-required", "a2": "upgrade-required"}


def test_an_orphaned_driver_pod_is_upgraded_onto_its_nvidiadriver() -> None:
    orphan = _pod("a1", "nvidia-driver-daemonset", "gone", "old")
    revisions = [_revision("ds-a", "ua", "new", 1)]
    (part,) = partitions([_driver("pool-a")], NODES[:1], DAEMONSETS)
    assert part.policy is not None
    decided = plan(part.nodes, [orphan], part.daemonsets, part.policy, 0.0, revisions=revisions)
    assert decided.patches["a1"].labels[c.STATE_LABEL] == "upgrade-required"


def test_a_node_with_an_orphan_beside_its_new_pod_is_judged_by_the_orphan() -> None:
    new = _pod("a1", "ds-a", "ua", "new")
    orphan = _pod("a1", "nvidia-driver-daemonset", "gone", "old")
    orphan["metadata"]["uid"] = "pod-orphan"
    revisions = [_revision("ds-a", "ua", "new", 1)]
    (part,) = partitions([_driver("pool-a")], NODES[:1], DAEMONSETS)
    assert part.policy is not None
    for pods in ([new, orphan], [orphan, new]):
        decided = plan(part.nodes, pods, part.daemonsets, part.policy, 0.0, revisions=revisions)
        assert decided.patches["a1"].labels[c.STATE_LABEL] == "upgrade-required"
