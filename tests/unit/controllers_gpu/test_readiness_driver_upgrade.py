"""ClusterPolicy readiness while NVIDIADriver-owned nodes are mid-upgrade (gpu-operator.md §2.5).

With ``useNvidiaDriverCRD``, NVIDIA's ClusterPolicy says ``notReady`` while
any node an NVIDIADriver owns is pending, in progress or failed in its driver
upgrade (skip-labelled nodes aside), with its words, and waits for Node events
instead of polling every 5 s. What a user sees in ``kubectl get clusterpolicy``.
"""

from __future__ import annotations

from typing import Any

import pytest

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from controllers.gpu.setup import node_facts_changed
from nimctl_runtime.handler import DeleteEvent, UpdateEvent
from platforms.contract import Observed
from platforms.gpu import ClusterFacts
from platforms.gpu.contract import (
    ClusterPolicyContract,
    PolicyFacts,
    incomplete_driver_upgrades,
)
from platforms.gpu.images import DEFAULT_OPERATOR_ENV

OWNER = "nvidia.com/gpu-operator.driver.owner"
STATE = "nvidia.com/gpu-driver-upgrade-state"
SKIP = "nvidia.com/gpu-driver-upgrade.skip"
NVIDIA_WORDS = (
    "NVIDIADriver upgrade has not completed; one or more NVIDIADriver-owned Nodes are "
    "marked pending, in-progress, or failed"
)


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def policy(use_crd: bool) -> ClusterPolicy:
    spec: dict[str, Any] = {
        k: {}
        for k in ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "gfd",
                  "nodeStatusExporter", "operator", "toolkit")
    }  # fmt: skip
    spec["driver"] = {"useNvidiaDriverCRD": use_crd}
    return ClusterPolicy.model_validate({"metadata": {"name": "cp", "uid": "u"}, "spec": spec})


@pytest.mark.parametrize(
    ("labels", "incomplete"),
    [
        ({OWNER: "default", STATE: "pod-restart-required"}, True),
        ({OWNER: "default", STATE: "upgrade-required"}, True),
        ({OWNER: "default", STATE: "upgrade-failed"}, True),
        ({OWNER: "default", STATE: "uncordon-required"}, True),
        ({OWNER: "default", STATE: "new-state"}, True),  # unknown to us: incomplete
        ({OWNER: "default", STATE: "upgrade-done"}, False),
        ({OWNER: "default"}, False),  # no state yet
        ({STATE: "pod-restart-required"}, False),  # not NVIDIADriver-owned
        ({OWNER: "default", STATE: "upgrade-required", SKIP: "true"}, False),
    ],
)
def test_which_nodes_hold_the_policy(labels: dict[str, str], incomplete: bool) -> None:
    assert bool(incomplete_driver_upgrades([node("n", **labels)])) is incomplete


def test_one_pending_node_among_done_ones_keeps_the_rollout_incomplete() -> None:
    nodes = [node("a", **{OWNER: "d1", STATE: "upgrade-done"}),
             node("b", **{OWNER: "d2", STATE: "upgrade-failed"})]  # fmt: skip
    assert incomplete_driver_upgrades(nodes) == (("b", "upgrade-failed"),)


def _facts(*nodes: dict[str, Any]) -> PolicyFacts:
    # No NFD labels on these nodes: a ready policy would say NFDLabelsMissing (45 s).
    cluster = ClusterFacts.from_nodes(
        nodes, operator_namespace="gpu-operator", operator_env=DEFAULT_OPERATOR_ENV
    )
    return PolicyFacts(cluster, upgrading_nodes=incomplete_driver_upgrades(nodes))


def test_mid_upgrade_the_policy_is_not_ready_in_nvidias_words_and_waits_for_node_events() -> None:
    contract = ClusterPolicyContract()
    done = _facts(node("gpu-0", **{OWNER: "driver-a", STATE: "upgrade-done"}))
    ready = contract.readiness(policy(True), done, Observed())
    assert (ready.state, ready.reason, ready.requeue_after) == ("ready", "NFDLabelsMissing", 45.0)

    pending = _facts(node("gpu-0", **{OWNER: "driver-a", STATE: "upgrade-required"}))
    held = contract.readiness(policy(True), pending, Observed())
    assert (held.state, held.reason, held.ready) == ("notReady", "OperandNotReady", False)
    assert held.requeue_after is None
    assert held.message == (
        f"ClusterPolicy is not ready; {NVIDIA_WORDS}; "
        "1 node(s) mid-upgrade; the DriverUpgrade condition says what each waits for"
    )

    skipped = _facts(node("gpu-0", **{OWNER: "driver-a", STATE: "upgrade-required", SKIP: "true"}))
    assert contract.readiness(policy(True), skipped, Observed()).state == "ready"


def test_legacy_driver_management_ignores_the_upgrade_labels() -> None:
    contract = ClusterPolicyContract()
    failed = _facts(node("gpu-0", **{OWNER: "driver-a", STATE: "upgrade-failed"}))
    assert contract.readiness(policy(False), failed, Observed()).state == "ready"


def test_states_not_ready_come_first_and_keep_the_5s_poll() -> None:
    contract = ClusterPolicyContract()
    gpu = node(
        "gpu-0",
        **{
            "nvidia.com/gpu.present": "true",
            "feature.node.kubernetes.io/pci-10de.present": "true",
            OWNER: "driver-a",
            STATE: "upgrade-failed",
        },
    )
    cp, facts = policy(True), _facts(gpu)
    desired = contract.render(cp, facts)
    missing = Observed.of(
        o for o in desired if o["metadata"]["name"] != "nvidia-device-plugin-daemonset"
    )
    result = contract.readiness(cp, facts, missing)
    assert result.requeue_after == 5.0
    assert result.message.startswith(
        f"ClusterPolicy is not ready; states not ready: [state-device-plugin]; {NVIDIA_WORDS}; "
    )


@pytest.mark.parametrize(
    ("old", "new", "wakes"),
    [
        ({OWNER: "old-driver"}, {OWNER: "new-driver"}, True),
        ({STATE: "upgrade-required"}, {STATE: "upgrade-done"}, True),
        ({SKIP: "false"}, {SKIP: "true"}, True),
        ({"unrelated": "a"}, {"unrelated": "b"}, False),
    ],
)
def test_the_driver_upgrade_labels_wake_the_clusterpolicy(
    old: dict[str, str], new: dict[str, str], wakes: bool
) -> None:
    # With no periodic requeue while only an upgrade holds it, these events are what
    # brings the ClusterPolicy back to ready.
    predicate = node_facts_changed()
    assert predicate.update(UpdateEvent(node("n", **old), node("n", **new))) is wakes


def test_deleting_an_nvidiadriver_owned_node_wakes_the_clusterpolicy() -> None:
    predicate = node_facts_changed()
    assert predicate.delete(DeleteEvent(node("n", **{OWNER: "driver-a"})))
    assert not predicate.delete(DeleteEvent(node("n", unrelated="x")))
