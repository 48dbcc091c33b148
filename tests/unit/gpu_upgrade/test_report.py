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
    revisions,
    validator_pod,
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
