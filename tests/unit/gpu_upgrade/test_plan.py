"""The upgrade state machine (§4.2) one pass at a time, table-driven from NVIDIA's cases."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade.plan import Plan, PodAction, clear_states, plan
from controllers.gpu.upgrade.policy import UpgradePolicy
from nimctl_runtime.meta import Obj
from tests.unit.gpu_upgrade.builders import (
    NEW,
    NS,
    OLD,
    daemonset,
    driver_pod,
    node,
    pdb,
    revisions,
    validator_pod,
    workload,
)

NOW = 1_000_000.0
POLICY = UpgradePolicy(max_parallel_upgrades=1, max_unavailable="100%")


def run(
    nodes: list[Obj],
    pods: list[Obj],
    policy: UpgradePolicy = POLICY,
    *,
    now: float = NOW,
    digest: str = "d1",
    pdbs: list[Obj] | None = None,
) -> Plan:
    return plan(
        nodes, pods, [daemonset(digest)], policy, now, revisions=revisions(), pdbs=pdbs or []
    )


def state_after(
    state: str, pods: list[Obj], policy: UpgradePolicy = POLICY, **node_kw: Any
) -> tuple[str, Plan]:
    out = run([node("n1", state, **node_kw)], pods, policy)
    return out.states["n1"], out


# (case, start state, node kwargs, pods on n1, policy changes, expected state)
TRANSITIONS: list[tuple[str, str, dict[str, Any], list[Obj], dict[str, Any], str]] = [
    ("unknown, pod in sync -> done", "", {}, [driver_pod("n1", NEW)], {}, c.DONE),
    ("unknown, pod out of sync -> required", "", {}, [driver_pod("n1", OLD)], {}, c.REQUIRED),
    ("done stays done when in sync", c.DONE, {}, [driver_pod("n1", NEW)], {}, c.DONE),
    ("done, new revision -> required", c.DONE, {}, [driver_pod("n1", OLD)], {}, c.REQUIRED),
    ("done, upgrade requested -> required", c.DONE,
     {"annotations": {c.UPGRADE_REQUESTED_ANNOTATION: "true"}}, [driver_pod("n1", NEW)], {},
     c.REQUIRED),
    ("done, waiting for safe load -> required", c.DONE,
     {"annotations": {c.SAFE_LOAD_ANNOTATION: "true"}}, [driver_pod("n1", NEW)], {}, c.REQUIRED),
    ("required -> cordon", c.REQUIRED, {}, [driver_pod("n1", OLD)], {}, c.CORDON_REQUIRED),
    ("required, restart only -> pod-restart", c.REQUIRED, {},
     [driver_pod("n1", OLD, digest="d1")], {}, c.POD_RESTART_REQUIRED),
    ("required, change reverted (pod in sync) -> done", c.REQUIRED, {},
     [driver_pod("n1", NEW)], {}, c.DONE),
    ("required, in sync but upgrade requested -> cordon", c.REQUIRED,
     {"annotations": {c.UPGRADE_REQUESTED_ANNOTATION: "true"}}, [driver_pod("n1", NEW)], {},
     c.CORDON_REQUIRED),
    ("required, skip label: stays", c.REQUIRED, {"labels": {c.SKIP_LABEL: "true"}},
     [driver_pod("n1", OLD)], {}, c.REQUIRED),
    ("cordon -> wait-for-jobs", c.CORDON_REQUIRED, {}, [driver_pod("n1", OLD)], {},
     c.WAIT_FOR_JOBS_REQUIRED),
    ("wait-for-jobs without selector -> pod-deletion", c.WAIT_FOR_JOBS_REQUIRED, {},
     [driver_pod("n1", OLD)], {}, c.POD_DELETION_REQUIRED),
    ("wait-for-jobs, pod deletion off -> drain", c.WAIT_FOR_JOBS_REQUIRED, {},
     [driver_pod("n1", OLD)], {"pod_deletion_enabled": False}, c.DRAIN_REQUIRED),
    ("wait-for-jobs, job running: stays", c.WAIT_FOR_JOBS_REQUIRED, {},
     [driver_pod("n1", OLD), workload("job", "n1", labels={"kind": "job"})],
     {"wait_for_jobs_selector": "kind=job"}, c.WAIT_FOR_JOBS_REQUIRED),
    ("wait-for-jobs, job finished -> pod-deletion", c.WAIT_FOR_JOBS_REQUIRED, {},
     [driver_pod("n1", OLD), workload("job", "n1", labels={"kind": "job"}, phase="Succeeded")],
     {"wait_for_jobs_selector": "kind=job"}, c.POD_DELETION_REQUIRED),
    ("wait-for-jobs, timed out -> pod-deletion", c.WAIT_FOR_JOBS_REQUIRED,
     {"annotations": {c.WAIT_FOR_JOBS_START_ANNOTATION: str(int(NOW - 61))}},
     [driver_pod("n1", OLD), workload("job", "n1", labels={"kind": "job"})],
     {"wait_for_jobs_selector": "kind=job", "wait_for_jobs_timeout": 60}, c.POD_DELETION_REQUIRED),
    ("pod-deletion, no GPU pods -> pod-restart", c.POD_DELETION_REQUIRED, {},
     [driver_pod("n1", OLD), workload("cpu", "n1", gpus=0)], {}, c.POD_RESTART_REQUIRED),
    ("pod-deletion, GPU pod present: stays", c.POD_DELETION_REQUIRED, {},
     [driver_pod("n1", OLD), workload("gpu", "n1")], {}, c.POD_DELETION_REQUIRED),
    ("pod-deletion, unmanaged pod -> failed", c.POD_DELETION_REQUIRED, {},
     [driver_pod("n1", OLD), workload("bare", "n1", controller=False)], {}, c.FAILED),
    ("pod-deletion, unmanaged pod with drain -> drain", c.POD_DELETION_REQUIRED, {},
     [driver_pod("n1", OLD), workload("bare", "n1", controller=False)],
     {"drain_enabled": True}, c.DRAIN_REQUIRED),
    ("pod-deletion, emptyDir needs deleteEmptyDir", c.POD_DELETION_REQUIRED, {},
     [driver_pod("n1", OLD), workload("scratch", "n1", empty_dir=True)], {}, c.FAILED),
    ("pod-deletion, timed out -> failed", c.POD_DELETION_REQUIRED,
     {"annotations": {c.POD_DELETION_START_ANNOTATION: str(int(NOW - 300))}},
     [driver_pod("n1", OLD), workload("gpu", "n1")], {}, c.FAILED),
    ("drain disabled -> pod-restart", c.DRAIN_REQUIRED, {}, [driver_pod("n1", OLD)], {},
     c.POD_RESTART_REQUIRED),
    ("drain, pods left: stays", c.DRAIN_REQUIRED, {},
     [driver_pod("n1", OLD), workload("web", "n1", gpus=0)], {"drain_enabled": True},
     c.DRAIN_REQUIRED),
    ("drain, only DaemonSet pods -> pod-restart", c.DRAIN_REQUIRED, {},
     [driver_pod("n1", OLD), validator_pod("n1")], {"drain_enabled": True},
     c.POD_RESTART_REQUIRED),
    ("drain, podSelector leaves others -> pod-restart", c.DRAIN_REQUIRED, {},
     [driver_pod("n1", OLD), workload("web", "n1", labels={"tier": "web"})],
     {"drain_enabled": True, "drain_pod_selector": "tier=gpu"}, c.POD_RESTART_REQUIRED),
    ("drain, drain-skip pods are left", c.DRAIN_REQUIRED, {},
     [driver_pod("n1", OLD), workload("op", "n1", labels={c.DRAIN_SKIP_LABEL: "true"})],
     {"drain_enabled": True}, c.POD_RESTART_REQUIRED),
    ("drain, unmanaged pod without force -> failed", c.DRAIN_REQUIRED, {},
     [driver_pod("n1", OLD), workload("bare", "n1", controller=False)],
     {"drain_enabled": True}, c.FAILED),
    ("drain, unmanaged pod with force: evicts", c.DRAIN_REQUIRED, {},
     [driver_pod("n1", OLD), workload("bare", "n1", controller=False)],
     {"drain_enabled": True, "drain_force": True}, c.DRAIN_REQUIRED),
    ("drain, timed out -> failed", c.DRAIN_REQUIRED,
     {"annotations": {c.DRAIN_START_ANNOTATION: str(int(NOW - 300))}},
     [driver_pod("n1", OLD), workload("web", "n1")], {"drain_enabled": True}, c.FAILED),
    ("drain, timeout 0 waits forever", c.DRAIN_REQUIRED,
     {"annotations": {c.DRAIN_START_ANNOTATION: str(int(NOW - 10**6))}},
     [driver_pod("n1", OLD), workload("web", "n1")],
     {"drain_enabled": True, "drain_timeout": 0}, c.DRAIN_REQUIRED),
    ("pod-restart, old pod: deleted, stays", c.POD_RESTART_REQUIRED, {},
     [driver_pod("n1", OLD)], {}, c.POD_RESTART_REQUIRED),
    ("pod-restart, new pod ready -> validation", c.POD_RESTART_REQUIRED, {},
     [driver_pod("n1", NEW)], {}, c.VALIDATION_REQUIRED),
    ("pod-restart, new pod starting: stays", c.POD_RESTART_REQUIRED, {},
     [driver_pod("n1", NEW, ready=False, restarts=3)], {}, c.POD_RESTART_REQUIRED),
    ("pod-restart, new pod crash-looping -> failed", c.POD_RESTART_REQUIRED, {},
     [driver_pod("n1", NEW, ready=False, restarts=11)], {}, c.FAILED),
    ("validation, validator ready -> uncordon", c.VALIDATION_REQUIRED, {"cordoned": True},
     [driver_pod("n1", NEW), validator_pod("n1")], {}, c.UNCORDON_REQUIRED),
    ("validation, cordoned before -> done", c.VALIDATION_REQUIRED,
     {"cordoned": True, "annotations": {c.INITIAL_UNSCHEDULABLE_ANNOTATION: "true"}},
     [driver_pod("n1", NEW), validator_pod("n1")], {}, c.DONE),
    ("validation, validator not ready: stays", c.VALIDATION_REQUIRED, {"cordoned": True},
     [driver_pod("n1", NEW), validator_pod("n1", ready=False)], {}, c.VALIDATION_REQUIRED),
    ("validation, 600 s passed -> failed", c.VALIDATION_REQUIRED,
     {"cordoned": True, "annotations": {c.VALIDATION_START_ANNOTATION: str(int(NOW - 600))}},
     [driver_pod("n1", NEW), validator_pod("n1", ready=False)], {}, c.FAILED),
    ("validation, 599 s passed: stays", c.VALIDATION_REQUIRED,
     {"cordoned": True, "annotations": {c.VALIDATION_START_ANNOTATION: str(int(NOW - 599))}},
     [driver_pod("n1", NEW), validator_pod("n1", ready=False)], {}, c.VALIDATION_REQUIRED),
    ("uncordon -> done", c.UNCORDON_REQUIRED, {"cordoned": True}, [driver_pod("n1", NEW)], {},
     c.DONE),
    ("failed, driver fixed -> uncordon", c.FAILED, {"cordoned": True}, [driver_pod("n1", NEW)],
     {}, c.UNCORDON_REQUIRED),
    ("failed, cordoned before, fixed -> done", c.FAILED,
     {"cordoned": True, "annotations": {c.INITIAL_UNSCHEDULABLE_ANNOTATION: "true"}},
     [driver_pod("n1", NEW)], {}, c.DONE),
    ("failed, still failing: stays", c.FAILED, {"cordoned": True},
     [driver_pod("n1", NEW, ready=False, restarts=20)], {}, c.FAILED),
    ("failed, a newer driver revision was published -> cordon (keeps its slot)", c.FAILED,
     {"cordoned": True, "annotations": {c.FAILED_REVISION_ANNOTATION: "brokenhash"}},
     [driver_pod("n1", OLD, ready=False, restarts=20)], {}, c.CORDON_REQUIRED),
    ("failed, the revision that failed is still current: stays", c.FAILED,
     {"cordoned": True, "annotations": {c.FAILED_REVISION_ANNOTATION: NEW}},
     [driver_pod("n1", OLD, ready=False, restarts=20)], {}, c.FAILED),
    ("failed, retry requested -> cordon", c.FAILED,
     {"cordoned": True, "annotations": {c.UPGRADE_REQUESTED_ANNOTATION: "true"}},
     [driver_pod("n1", OLD)], {}, c.CORDON_REQUIRED),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "start", "node_kw", "pods", "changes", "want"),
    TRANSITIONS,
    ids=[t[0] for t in TRANSITIONS],
)
def test_transition(
    case: str, start: str, node_kw: dict[str, Any], pods: list[Obj], changes: dict[str, Any],
    want: str,
) -> None:  # fmt: skip
    got, out = state_after(start, pods, replace(POLICY, **changes), **node_kw)
    assert got == want, case
    if got != start:
        assert out.patches["n1"].labels[c.STATE_LABEL] == want
        assert out.patches["n1"].annotations[c.STATE_SINCE_ANNOTATION] == str(int(NOW))
    else:
        assert c.STATE_LABEL not in (out.patches.get("n1") or replace_patch()).labels
    if got not in c.FINAL_STATES and got != start:
        return
    if got not in c.FINAL_STATES:
        assert out.waiting.get("n1"), f"{case}: a waiting node says why"


def replace_patch() -> Any:
    from controllers.gpu.upgrade.plan import NodePatch

    return NodePatch()


def test_every_state_is_handled_in_nvidias_order() -> None:
    assert c.ORDER.index(c.FAILED) < c.ORDER.index(c.VALIDATION_REQUIRED)
    assert c.ORDER[:3] == (c.UNKNOWN, c.DONE, c.REQUIRED)
    assert c.ORDER[-1] == c.UNCORDON_REQUIRED


def test_a_node_moves_one_state_per_pass() -> None:
    out = run([node("n1", c.CORDON_REQUIRED)], [driver_pod("n1", OLD)])
    assert out.transitions == [("n1", c.CORDON_REQUIRED, c.WAIT_FOR_JOBS_REQUIRED)]


def test_cordon_and_uncordon_patch_spec_unschedulable() -> None:
    _, out = state_after(c.CORDON_REQUIRED, [driver_pod("n1", OLD)])
    assert out.patches["n1"].body()["spec"] == {"unschedulable": True}
    _, out = state_after(c.UNCORDON_REQUIRED, [driver_pod("n1", NEW)], cordoned=True)
    assert out.patches["n1"].body()["spec"] == {"unschedulable": False}


def test_node_cordoned_before_the_upgrade_stays_cordoned() -> None:
    _, out = state_after(c.DONE, [driver_pod("n1", OLD)], cordoned=True)
    assert out.patches["n1"].annotations[c.INITIAL_UNSCHEDULABLE_ANNOTATION] == "true"
    got, out = state_after(
        c.VALIDATION_REQUIRED,
        [driver_pod("n1", NEW), validator_pod("n1")],
        cordoned=True,
        annotations={c.INITIAL_UNSCHEDULABLE_ANNOTATION: "true"},
    )
    assert got == c.DONE
    assert out.patches["n1"].unschedulable is None, "never uncordoned"
    assert out.patches["n1"].annotations[c.INITIAL_UNSCHEDULABLE_ANNOTATION] is None


def test_cordoned_node_proceeds_without_a_slot() -> None:
    nodes = [
        node("a", c.CORDON_REQUIRED),
        node("b", c.REQUIRED, cordoned=True),
        node("c", c.REQUIRED),
    ]
    pods = [driver_pod(n, OLD) for n in ("a", "b", "c")]
    out = run(nodes, pods)
    assert out.available == 0
    assert out.states == {"a": c.WAIT_FOR_JOBS_REQUIRED, "b": c.CORDON_REQUIRED, "c": c.REQUIRED}
    assert "waiting for an upgrade slot: 1 of maxParallelUpgrades 1 in progress" in out.waiting["c"]


def test_max_parallel_upgrades_limits_starts() -> None:
    nodes = [node(f"n{i}", c.REQUIRED) for i in range(5)]
    out = run(
        nodes,
        [driver_pod(f"n{i}", OLD) for i in range(5)],
        replace(POLICY, max_parallel_upgrades=2),
    )
    started = [n for n, s in out.states.items() if s == c.CORDON_REQUIRED]
    assert started == ["n0", "n1"]


def test_max_unavailable_counts_notready_nodes() -> None:
    nodes = [node("down", c.DONE, ready=False)] + [node(f"n{i}", c.REQUIRED) for i in range(3)]
    pods = [driver_pod("down", NEW)] + [driver_pod(f"n{i}", OLD) for i in range(3)]
    out = run(nodes, pods, replace(POLICY, max_parallel_upgrades=0, max_unavailable="50%"))
    assert out.max_unavailable == 2
    assert sorted(n for n, s in out.states.items() if s == c.CORDON_REQUIRED) == ["n0"]


def test_gpu_pod_deletion_deletes_only_gpu_pods() -> None:
    pods = [
        driver_pod("n1", OLD),
        workload("train", "n1"),
        workload("mig", "n1", resource="nvidia.com/mig-1g.10gb"),
        workload("web", "n1", gpus=0),
        workload("done", "n1", phase="Succeeded"),
    ]
    _, out = state_after(c.POD_DELETION_REQUIRED, pods)
    assert out.pod_actions == [
        PodAction("delete", "default", "train", "n1"),
        PodAction("delete", "default", "mig", "n1"),
    ]
    assert out.patches["n1"].annotations[c.POD_DELETION_START_ANNOTATION] == str(int(NOW))


def test_gpu_pod_with_dra_claim_is_deleted() -> None:
    pod = workload("dra", "n1", gpus=0)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "dra-gpu"}]
    out = plan([node("n1", c.POD_DELETION_REQUIRED)], [driver_pod("n1", OLD), pod],
               [daemonset()], POLICY, NOW, revisions=revisions(),
               gpu_claims={("default", "dra-gpu")})  # fmt: skip
    assert out.pod_actions == [PodAction("delete", "default", "dra", "n1")]


def test_drain_evicts_and_names_the_blocking_pdb() -> None:
    pods = [driver_pod("n1", OLD), workload("web-1", "n1", labels={"app": "web"}),
            workload("db-1", "n1", labels={"app": "db"})]  # fmt: skip
    policy = replace(POLICY, drain_enabled=True)
    out = run([node("n1", c.DRAIN_REQUIRED)], pods, policy, pdbs=[pdb("web", {"app": "web"}, 0)])
    assert [a.name for a in out.pod_actions] == ["db-1"], "no eviction the PDB would refuse"
    message = out.waiting["n1"]
    assert "eviction of default/web-1 blocked by PodDisruptionBudget default/web" in message
    assert "evicting default/db-1" in message
    assert out.requeue_after is not None


def test_drain_asks_a_pdb_for_no_more_than_it_allows() -> None:
    pods = [driver_pod("n1", OLD)] + [
        workload(f"web-{i}", "n1", labels={"app": "web"}) for i in range(3)
    ]
    policy = replace(POLICY, drain_enabled=True)
    out = run([node("n1", c.DRAIN_REQUIRED)], pods, policy, pdbs=[pdb("web", {"app": "web"}, 2)])
    assert [a.name for a in out.pod_actions] == ["web-0", "web-1"]
    assert (
        "eviction of default/web-2 blocked by PodDisruptionBudget default/web" in out.waiting["n1"]
    )


def test_pod_restart_deletes_the_old_driver_pod_once() -> None:
    _, out = state_after(c.POD_RESTART_REQUIRED, [driver_pod("n1", OLD)])
    assert out.pod_actions == [PodAction("delete", NS, "nvidia-driver-daemonset-n1", "n1")]
    _, out = state_after(c.POD_RESTART_REQUIRED, [driver_pod("n1", OLD, deleting=True)])
    assert out.pod_actions == []


def test_a_retried_failed_node_is_uncordoned_at_the_end() -> None:
    annotations = {c.FAILED_REVISION_ANNOTATION: "brokenhash"}
    _, out = state_after(c.FAILED, [driver_pod("n1", OLD, ready=False)], cordoned=True,
                         annotations=annotations)  # fmt: skip
    assert c.INITIAL_UNSCHEDULABLE_ANNOTATION not in out.patches["n1"].annotations
    assert out.patches["n1"].annotations[c.FAILED_REVISION_ANNOTATION] is None


def test_failure_records_the_revision_that_failed() -> None:
    got, out = state_after(
        c.POD_RESTART_REQUIRED, [driver_pod("n1", NEW, ready=False, restarts=11)]
    )
    assert got == c.FAILED
    assert out.patches["n1"].annotations[c.FAILED_REVISION_ANNOTATION] == NEW
    assert "not ready after 11 restarts" in out.waiting["n1"]


def test_restart_only_cordons_without_draining() -> None:
    got, out = state_after(c.REQUIRED, [driver_pod("n1", OLD, digest="d1")])
    assert got == c.POD_RESTART_REQUIRED
    assert out.patches["n1"].unschedulable is True


def test_node_without_driver_pod_mid_restart_keeps_its_slot() -> None:
    nodes = [node("a", c.POD_RESTART_REQUIRED, cordoned=True), node("b", c.REQUIRED)]
    out = run(nodes, [driver_pod("b", OLD)])
    assert out.counts.in_progress == 1
    assert out.states["b"] == c.REQUIRED
    assert "new driver pod" in out.waiting["a"]


def test_stalled_node_is_reported() -> None:
    since = {c.STATE_SINCE_ANNOTATION: str(int(NOW - 3600))}
    policy = replace(POLICY, stall_after_seconds=1800)
    out = run([node("n1", c.VALIDATION_REQUIRED, cordoned=True, annotations=since)],
              [driver_pod("n1", NEW), validator_pod("n1", ready=False)], policy)  # fmt: skip
    assert out.stalled == {"n1": 3600}
    out = run([node("n1", c.VALIDATION_REQUIRED, cordoned=True, annotations=since)],
              [driver_pod("n1", NEW), validator_pod("n1", ready=False)],
              replace(policy, stall_after_seconds=7200))  # fmt: skip
    assert out.stalled == {}


def test_steady_cluster_writes_nothing() -> None:
    nodes = [node(f"n{i}", c.DONE) for i in range(3)]
    out = run(nodes, [driver_pod(f"n{i}", NEW) for i in range(3)])
    assert out.patches == {} and out.pod_actions == [] and out.waiting == {}


def test_clear_states_removes_the_label() -> None:
    patches = clear_states([node("a", c.DONE), node("b")])
    assert list(patches) == ["a"]
    assert patches["a"].body() == {"metadata": {"labels": {c.STATE_LABEL: None}}}


def test_release_nodes_undoes_an_upgrade_nothing_governs_any_more() -> None:
    """ClusterPolicy deleted mid-upgrade (issue 26): our cordons and marks go, others' stay."""
    from controllers.gpu.upgrade.plan import release_nodes

    ours = node("cordoned-by-us", c.POD_RESTART_REQUIRED, cordoned=True,
                annotations={c.STATE_SINCE_ANNOTATION: "1", c.DRAIN_START_ANNOTATION: "2"})
    theirs = node("cordoned-before", c.DRAIN_REQUIRED, cordoned=True,
                  annotations={c.INITIAL_UNSCHEDULABLE_ANNOTATION: "true"})
    waiting = node("waiting", c.REQUIRED, annotations={c.UPGRADE_REQUESTED_ANNOTATION: "true"})
    admin = node("cordoned-by-admin", c.DONE, cordoned=True)
    untouched = node("untouched")
    patches = release_nodes([ours, theirs, waiting, admin, untouched])  # fmt: skip
    assert patches["cordoned-by-us"].body() == {
        "metadata": {
            "labels": {c.STATE_LABEL: None},
            "annotations": {c.DRAIN_START_ANNOTATION: None, c.STATE_SINCE_ANNOTATION: None},
        },
        "spec": {"unschedulable": False},
    }
    assert patches["cordoned-before"].body() == {
        "metadata": {
            "labels": {c.STATE_LABEL: None},
            "annotations": {c.INITIAL_UNSCHEDULABLE_ANNOTATION: None},
        }
    }, "cordoned before the upgrade: stays cordoned"
    # the user's request is the user's; a DONE node was cordoned by someone else
    assert patches["waiting"].body() == {"metadata": {"labels": {c.STATE_LABEL: None}}}
    assert patches["cordoned-by-admin"].body() == {"metadata": {"labels": {c.STATE_LABEL: None}}}
    assert "untouched" not in patches
