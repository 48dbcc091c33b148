"""Node labelling rules (gpu-operator.md §3), table-driven: labels in, one merge patch out."""

from __future__ import annotations

from typing import Any

import pytest

from api.nvidia.v1.clusterpolicy import ClusterPolicySpec
from controllers.gpu.nodelabels import node_patch

NFD = {"feature.node.kubernetes.io/pci-10de.present": "true"}
D = "nvidia.com/gpu.deploy."
CONTAINER = [
    "driver",
    "gpu-feature-discovery",
    "container-toolkit",
    "device-plugin",
    "dcgm",
    "dcgm-exporter",
    "node-status-exporter",
    "operator-validator",
    "client",
]


def spec(**overrides: Any) -> ClusterPolicySpec:
    base: dict[str, Any] = {
        "daemonsets": {},
        "dcgm": {},
        "dcgmExporter": {},
        "devicePlugin": {},
        "driver": {},
        "gfd": {},
        "nodeStatusExporter": {},
        "operator": {},
        "toolkit": {},
    }
    base.update(overrides)
    return ClusterPolicySpec.model_validate(base)


def labels_of(patch: dict[str, Any] | None) -> dict[str, Any]:
    return dict(((patch or {}).get("metadata") or {}).get("labels") or {})


def test_bare_gpu_node_gets_presence_and_container_labels() -> None:
    got = labels_of(node_patch(NFD, {}, spec()))
    assert got == {"nvidia.com/gpu.present": "true", **{D + c: "true" for c in CONTAINER}}


def test_labelled_node_needs_no_patch() -> None:
    labels = {**NFD, "nvidia.com/gpu.present": "true", **{D + c: "true" for c in CONTAINER}}
    assert node_patch(labels, {}, spec()) is None


def test_cpu_node_is_left_alone() -> None:
    assert node_patch({"kubernetes.io/os": "linux"}, {}, spec()) is None


def test_gpu_gone_sets_present_false_and_sweeps_deploy_labels() -> None:
    labels = {"nvidia.com/gpu.present": "true", D + "driver": "true", D + "mig-manager": "true"}
    got = labels_of(node_patch(labels, {}, spec()))
    assert got == {"nvidia.com/gpu.present": "false", D + "driver": None, D + "mig-manager": None}


def test_kill_switch_removes_every_state_label() -> None:
    labels = {
        **NFD,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.deploy.operands": "false",
        **{D + c: "true" for c in CONTAINER},
        D + "mig-manager": "true",
    }
    got = labels_of(node_patch(labels, {}, spec()))
    assert got == {**{D + c: None for c in CONTAINER}, D + "mig-manager": None}


@pytest.mark.parametrize("paused", ["paused-for-driver-upgrade", "pre-installed", "false"])
def test_existing_non_empty_values_are_honoured(paused: str) -> None:
    labels = {
        **NFD,
        "nvidia.com/gpu.present": "true",
        **{D + c: "true" for c in CONTAINER},
        D + "driver": paused,
    }
    assert node_patch(labels, {}, spec()) is None


def test_empty_value_counts_as_absent() -> None:
    labels = {**NFD, "nvidia.com/gpu.present": "true", **{D + c: "true" for c in CONTAINER}}
    labels[D + "device-plugin"] = ""
    assert labels_of(node_patch(labels, {}, spec())) == {D + "device-plugin": "true"}


@pytest.mark.parametrize(
    ("extra", "capable"),
    [
        ({"nvidia.com/mig.capable": "true"}, True),
        ({"nvidia.com/mig.capable": "false", "nvidia.com/gpu.product": "NVIDIA-A100"}, False),
        ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, True),
        ({"nvidia.com/gpu.product": "NVIDIA-L4"}, False),
        (
            {"nvidia.com/gpu.product": "NVIDIA-A100", "nvidia.com/vgpu.host-driver-version": "1"},
            False,
        ),
    ],
)
def test_mig_capable_nodes_get_mig_manager_and_default_config(
    extra: dict[str, str], capable: bool
) -> None:
    labels = {**NFD, "nvidia.com/gpu.present": "true", **{D + c: "true" for c in CONTAINER}}
    got = labels_of(node_patch({**labels, **extra}, {}, spec()))
    if capable:
        assert got == {D + "mig-manager": "true", "nvidia.com/mig.config": "all-disabled"}
    else:
        assert got == {}


def test_no_default_mig_config_when_the_node_has_one_or_the_default_is_empty() -> None:
    labels = {
        **NFD,
        "nvidia.com/gpu.present": "true",
        **{D + c: "true" for c in CONTAINER},
        D + "mig-manager": "true",
        "nvidia.com/mig.capable": "true",
    }
    assert node_patch({**labels, "nvidia.com/mig.config": "all-1g.10gb"}, {}, spec()) is None
    no_default = spec(migManager={"config": {"name": "custom", "default": ""}})
    assert node_patch(labels, {}, no_default) is None


def test_mig_manager_label_is_not_swept_in_container_config() -> None:
    labels = {
        **NFD,
        "nvidia.com/gpu.present": "true",
        **{D + c: "true" for c in CONTAINER},
        D + "mig-manager": "true",
        "nvidia.com/gpu.product": "NVIDIA-L4",
    }
    assert node_patch(labels, {}, spec()) is None


def test_sandbox_vm_passthrough_node() -> None:
    labels = {
        **NFD,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.workload.config": "vm-passthrough",
        **{D + c: "true" for c in CONTAINER},
    }
    got = labels_of(node_patch(labels, {}, spec(sandboxWorkloads={"enabled": True})))
    assert got == {
        D + "sandbox-device-plugin": "true",
        D + "sandbox-validator": "true",
        D + "vfio-manager": "true",
        D + "kata-manager": "true",
        D + "cc-manager": "true",
        **{D + c: None for c in CONTAINER if c != "client"},
    }


def test_sandbox_default_workload_applies_without_a_node_label() -> None:
    s = spec(sandboxWorkloads={"enabled": True, "defaultWorkload": "vm-vgpu"})
    got = labels_of(node_patch(NFD, {}, s))
    assert got[D + "vgpu-manager"] == "true"
    assert D + "driver" not in got


def test_driver_auto_upgrade_annotation() -> None:
    labels = {**NFD, "nvidia.com/gpu.present": "true", **{D + c: "true" for c in CONTAINER}}
    on = spec(driver={"upgradePolicy": {"autoUpgrade": True}})
    patch = node_patch(labels, {}, on)
    assert patch == {"metadata": {"annotations": {"nvidia.com/gpu-driver-upgrade-enabled": "true"}}}
    annotated = {"nvidia.com/gpu-driver-upgrade-enabled": "true"}
    assert node_patch(labels, annotated, on) is None
    assert node_patch(labels, annotated, spec()) == {
        "metadata": {"annotations": {"nvidia.com/gpu-driver-upgrade-enabled": None}}
    }
