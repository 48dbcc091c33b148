"""The driver auto-upgrade annotation under NVIDIADriver (gpu-operator.md §3.2, §4.4).

k8s-driver-manager reads ``nvidia.com/gpu-driver-upgrade-enabled`` on its node:
with ``"true"`` it leaves cordon and drain to the upgrade controller. With
``useNvidiaDriverCRD`` the value must follow the node's owning NVIDIADriver's
``upgradePolicy.autoUpgrade``, not the ClusterPolicy's.
"""

from __future__ import annotations

from typing import Any

import pytest

from api.nvidia.v1.clusterpolicy import ClusterPolicySpec
from controllers.gpu.nodelabels import driver_auto_upgrades, node_patch

ANNOTATION = "nvidia.com/gpu-driver-upgrade-enabled"
OWNER = "nvidia.com/gpu-operator.driver.owner"
GPU = {"feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true"}


def spec(use_crd: bool, cp_auto: bool, sandbox: bool = False) -> ClusterPolicySpec:
    base: dict[str, Any] = {
        k: {}
        for k in (
            "daemonsets",
            "dcgm",
            "dcgmExporter",
            "devicePlugin",
            "gfd",
            "nodeStatusExporter",
            "operator",
            "toolkit",
        )
    }
    base["driver"] = {"useNvidiaDriverCRD": use_crd, "upgradePolicy": {"autoUpgrade": cp_auto}}
    base["sandboxWorkloads"] = {"enabled": sandbox}
    return ClusterPolicySpec.model_validate(base)


def driver(name: str, policy: dict[str, Any] | None) -> dict[str, Any]:
    spec_: dict[str, Any] = {} if policy is None else {"upgradePolicy": policy}
    return {"metadata": {"name": name}, "spec": spec_}


DRIVERS = driver_auto_upgrades(
    [
        driver("auto", {"autoUpgrade": True}),
        driver("manual", {"autoUpgrade": False}),
        driver("defaults", None),
        driver("partial", {"maxParallelUpgrades": 2}),
    ]
)


def annotation_change(patch: dict[str, Any] | None) -> object:
    """What the patch does to the annotation: "true", None (removed) or "untouched"."""
    annotations = ((patch or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANNOTATION, "untouched")


def test_an_unset_upgrade_policy_means_auto_upgrade_as_nvidia_defaults_it() -> None:
    assert DRIVERS == {"auto": True, "manual": False, "defaults": True, "partial": True}


@pytest.mark.parametrize(
    ("owner", "have", "cp_auto", "want"),
    [
        # The owning NVIDIADriver decides, whatever the ClusterPolicy says.
        ("auto", None, False, "true"),
        ("defaults", None, False, "true"),
        ("manual", "true", True, None),
        ("manual", None, True, "untouched"),
        ("auto", "true", False, "untouched"),
        # A node no (existing) NVIDIADriver owns keeps what it has, as NVIDIA's.
        (None, "true", False, "untouched"),
        (None, None, True, "untouched"),
        ("deleted-driver", "true", False, "untouched"),
    ],
)
def test_with_nvidiadriver_the_owner_decides(
    owner: str | None, have: str | None, cp_auto: bool, want: object
) -> None:
    labels = {**GPU, **({OWNER: owner} if owner else {})}
    annotations = {ANNOTATION: have} if have else {}
    patch = node_patch(labels, annotations, spec(True, cp_auto), DRIVERS)
    assert annotation_change(patch) == want


def test_without_the_crd_the_clusterpolicy_decides_even_on_owned_nodes() -> None:
    labels = {**GPU, OWNER: "manual"}
    assert annotation_change(node_patch(labels, {}, spec(False, True), DRIVERS)) == "true"
    on = {ANNOTATION: "true"}
    assert annotation_change(node_patch(labels, on, spec(False, False), DRIVERS)) is None


def test_sandbox_workloads_remove_it_even_with_the_crd() -> None:
    labels = {**GPU, OWNER: "auto"}
    patch = node_patch(labels, {ANNOTATION: "true"}, spec(True, True, sandbox=True), DRIVERS)
    assert annotation_change(patch) is None
