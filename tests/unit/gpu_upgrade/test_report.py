"""What users read about an upgrade: the DriverUpgrade condition, node reports, trimmed cache."""

from __future__ import annotations

from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade.cache import trim_node, trim_pod
from controllers.gpu.upgrade.executor import Outcome
from controllers.gpu.upgrade.plan import plan
from controllers.gpu.upgrade.policy import UpgradePolicy
from controllers.gpu.upgrade.report import condition, merged_conditions, node_reports
from tests.unit.gpu_upgrade.builders import (
    NEW,
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


def test_condition_names_the_failed_node_and_why() -> None:
    nodes = [node("a", c.POD_RESTART_REQUIRED, cordoned=True), node("b", c.DONE)]
    pods = [driver_pod("a", NEW, ready=False, restarts=12), driver_pod("b", NEW)]
    out = plan(nodes, pods, [daemonset()], UpgradePolicy(), NOW, revisions=revisions())
    reports = node_reports(out, Outcome())
    assert reports["a"].reason == "DriverUpgradeFailed" and reports["a"].type == "Warning"
    cond = condition(out, reports)
    assert (cond["status"], cond["reason"]) == ("True", "UpgradeFailed")
    assert cond["message"].startswith("1 of 2 nodes upgraded, 1 failed.")
    assert (
        "a upgrade-failed: driver pod gpu-operator/nvidia-driver-daemonset-a is not ready"
        in (cond["message"])
    )


def test_condition_done_and_written_only_on_change() -> None:
    out = plan([node("a", c.DONE)], [driver_pod("a", NEW)], [daemonset()], UpgradePolicy(), NOW,
               revisions=revisions())  # fmt: skip
    cond = condition(out, node_reports(out, Outcome()))
    assert cond == {"type": "DriverUpgrade", "status": "False", "reason": "UpgradeDone",
                    "message": "1 of 1 nodes run the current driver"}  # fmt: skip
    merged = merged_conditions([{"type": "Ready", "status": "True"}], cond)
    assert merged is not None and merged[1]["lastTransitionTime"]
    assert merged_conditions(merged, cond) is None


def test_refused_evictions_and_stalls_reach_the_node_report() -> None:
    since = {c.STATE_SINCE_ANNOTATION: str(int(NOW - 7200))}
    nodes = [node("a", c.VALIDATION_REQUIRED, cordoned=True, annotations=since)]
    pods = [driver_pod("a", NEW), validator_pod("a", ready=False)]
    out = plan(nodes, pods, [daemonset()], UpgradePolicy(stall_after_seconds=600), NOW,
               revisions=revisions())  # fmt: skip
    outcome = Outcome(refused={"a": ["eviction of default/x refused: Cannot evict pod"]})
    report = node_reports(out, outcome)["a"]
    assert report.reason == "DriverUpgradeStalled"
    assert "eviction of default/x refused" in report.message
    assert report.message.endswith("(no progress for 120m)")
    assert condition(out, {"a": report})["reason"] == "UpgradeStalled"


def test_trimmed_node_and_pod_keep_what_the_plan_reads() -> None:
    raw = node("a", c.REQUIRED, cordoned=True, labels={"feature.node.kubernetes.io/x": "1"},
               annotations={c.INITIAL_UNSCHEDULABLE_ANNOTATION: "true", "other": "x"})  # fmt: skip
    trimmed = trim_node(raw)
    assert trimmed["metadata"]["labels"] == {
        "nvidia.com/gpu.present": "true",
        c.STATE_LABEL: c.REQUIRED,
    }
    assert trimmed["metadata"]["annotations"] == {c.INITIAL_UNSCHEDULABLE_ANNOTATION: "true"}
    assert trimmed["spec"] == {"unschedulable": True}
    pod = driver_pod("a", OLD, digest="d9", restarts=3)
    slim = trim_pod(pod)
    assert slim["spec"]["containers"][0]["env"] == [{"name": c.CONFIG_DIGEST_ENV, "value": "d9"}]
    assert slim["status"]["containerStatuses"][0]["restartCount"] == 3
    same = plan([raw], [pod], [daemonset()], UpgradePolicy(), NOW, revisions=revisions())
    slimmed = plan([trimmed], [slim], [daemonset()], UpgradePolicy(), NOW, revisions=revisions())
    assert same.patches == slimmed.patches and same.waiting == slimmed.waiting


def test_a_drain_a_pdb_held_past_its_timeout_is_named_after_the_node_failed() -> None:
    """The pass that fails the node names the pod and PDB; so do the passes after it
    (the condition then shows the node's state and the cause, not only the follow-up)."""
    policy = UpgradePolicy(max_parallel_upgrades=1, max_unavailable="100%",
                           drain_enabled=True, drain_timeout=300)  # fmt: skip
    pods = [driver_pod("a", OLD), workload("db-0", "a", labels={"app": "db"})]
    budgets = [pdb("db", {"app": "db"}, 0)]
    started = {c.DRAIN_START_ANNOTATION: str(int(NOW - 301))}
    nodes = [node("a", c.DRAIN_REQUIRED, cordoned=True, annotations=started), node("b", c.DONE)]
    first = plan(nodes, pods, [daemonset()], policy, NOW, revisions=revisions(), pdbs=budgets)
    assert first.states["a"] == c.FAILED
    blocker = "eviction of default/db-0 blocked by PodDisruptionBudget default/db"
    cause = first.patches["a"].annotations[c.FAILED_CAUSE_ANNOTATION]
    assert cause is not None and blocker in cause and "drain timed out after 300s" in cause

    # the next pass: the node is upgrade-failed, its driver pod still on the old revision
    failed = node("a", c.FAILED, cordoned=True, annotations={
        c.FAILED_CAUSE_ANNOTATION: cause, c.FAILED_REVISION_ANNOTATION: NEW})  # fmt: skip
    later = plan([failed, node("b", c.DONE)], pods, [daemonset()], policy, NOW + 60,
                 revisions=revisions(), pdbs=budgets)  # fmt: skip
    report = node_reports(later, Outcome())["a"]
    assert report.reason == "DriverUpgradeFailed"
    assert blocker in report.message
    cond = condition(later, node_reports(later, Outcome()))
    assert cond["reason"] == "UpgradeFailed"
    assert (
        f"a upgrade-failed: upgrade failed: drain timed out after 300s: {blocker}"
        in (cond["message"])
    )
    assert (
        "now driver pod gpu-operator/nvidia-driver-daemonset-a runs an old revision"
        in (cond["message"])
    )

    # a retry clears the cause with the state
    retried = node("a", c.FAILED, cordoned=True, annotations={
        c.FAILED_CAUSE_ANNOTATION: cause, c.UPGRADE_REQUESTED_ANNOTATION: "true"})  # fmt: skip
    again = plan([retried], pods, [daemonset()], policy, NOW + 120, revisions=revisions(),
                 pdbs=budgets)  # fmt: skip
    assert again.states["a"] == c.CORDON_REQUIRED
    assert again.patches["a"].annotations[c.FAILED_CAUSE_ANNOTATION] is None
