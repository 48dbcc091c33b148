"""Sandbox workloads (GPUs for virtual machines): the operands' settings from the policy."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers import ctr, daemonset, env, objects

SANDBOX: dict[str, Any] = {"sandboxWorkloads": {"enabled": True}}
KATA: dict[str, Any] = {"sandboxWorkloads": {"enabled": True, "mode": "kata"}}


@pytest.mark.parametrize(
    ("spec", "name", "container", "expected"),
    [
        (
            {**KATA, "ccManager": {"enabled": True, "defaultMode": "on"}},
            "nvidia-cc-manager",
            "nvidia-cc-manager",
            {"DEFAULT_CC_MODE": "on", "NVIDIA_VISIBLE_DEVICES": "void"},
        ),
        (
            SANDBOX,
            "nvidia-vgpu-device-manager",
            "nvidia-vgpu-device-manager",
            {"DEFAULT_VGPU_CONFIG": "default", "CONFIG_FILE": "/vgpu-config/config.yaml"},
        ),
        (
            {**SANDBOX, "vgpuDeviceManager": {"config": {"name": "mine", "default": "A100-1-5C"}}},
            "nvidia-vgpu-device-manager",
            "nvidia-vgpu-device-manager",
            {"DEFAULT_VGPU_CONFIG": "A100-1-5C"},
        ),
        (SANDBOX, "nvidia-vfio-manager", "nvidia-vfio-manager", {"HOST_ROOT": "/host"}),
        (
            SANDBOX,
            "nvidia-vfio-manager",
            "k8s-driver-manager",
            {"ENABLE_GPU_POD_EVICTION": "false", "ENABLE_AUTO_DRAIN": "false"},
        ),
        (
            {"sandboxWorkloads": {"enabled": True, "defaultWorkload": "vm-passthrough"}},
            "nvidia-sandbox-validator",
            "vgpu-devices-validation",
            {
                "DEFAULT_GPU_WORKLOAD_CONFIG": "vm-passthrough",
                "COMPONENT": "vgpu-devices",
                "WITH_WAIT": "true",
            },
        ),
    ],
)
def test_sandbox_env(
    spec: dict[str, Any], name: str, container: str, expected: dict[str, str]
) -> None:
    got = env(ctr(daemonset(name, spec), container))
    assert {k: got.get(k) for k in expected} == expected


def test_sandbox_images_from_the_sample() -> None:
    images = {
        "nvidia-vfio-manager": ("nvidia-vfio-manager", "nvcr.io/nvidia/cuda:13.0.1-base-ubi9"),
        "nvidia-vgpu-device-manager": (
            "nvidia-vgpu-device-manager",
            "nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.4.1",
        ),
        "nvidia-sandbox-device-plugin-daemonset": (
            "nvidia-sandbox-device-plugin-ctr",
            "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0",
        ),
        "nvidia-sandbox-validator": (
            "nvidia-sandbox-validator",
            "nvcr.io/nvidia/gpu-operator:v26.7.0",
        ),
    }
    for ds_name, (container, image) in images.items():
        assert ctr(daemonset(ds_name, SANDBOX), container)["image"] == image, ds_name


def test_custom_vgpu_devices_config_skips_the_default_config_map() -> None:
    def config_maps(spec: dict[str, Any]) -> set[str]:
        return {o["metadata"]["name"] for o in objects(spec) if o["kind"] == "ConfigMap"}

    assert "default-vgpu-devices-config" in config_maps(SANDBOX)
    assert "default-vgpu-devices-config" not in config_maps(
        {**SANDBOX, "vgpuDeviceManager": {"config": {"name": "mine"}}}
    )


def test_sandbox_device_plugin_args() -> None:
    ds = daemonset(
        "nvidia-sandbox-device-plugin-daemonset",
        {**SANDBOX, "sandboxDevicePlugin": {"args": ["--pci-passthrough-devices=true"]}},
    )
    assert ctr(ds, "nvidia-sandbox-device-plugin-ctr")["args"] == ["--pci-passthrough-devices=true"]


def test_sandbox_operands_get_no_runtime_class() -> None:
    for name in (
        "nvidia-vfio-manager",
        "nvidia-sandbox-device-plugin-daemonset",
        "nvidia-sandbox-validator",
    ):
        assert "runtimeClassName" not in daemonset(name, SANDBOX)["spec"]["template"]["spec"], name


# NVIDIA's mounts of the sandbox operands, as (volume, mountPath, readOnly, propagation),
# and each container's SELinux level (None: no seLinuxOptions).
HTOC, BIDIR = "HostToContainer", "Bidirectional"
VALIDATIONS = ("run-nvidia-validations", "/run/nvidia/validations", False, BIDIR)
HOST_ROOT_RO = ("host-root", "/host", True, HTOC)
SANDBOX_MOUNTS: dict[
    tuple[str, str], tuple[list[tuple[str, str, bool, str | None]], str | None]
] = {
    ("nvidia-sandbox-validator", "cc-manager-validation"): ([VALIDATIONS], "s0"),
    ("nvidia-sandbox-validator", "vfio-pci-validation"): ([HOST_ROOT_RO, VALIDATIONS], "s0"),
    ("nvidia-sandbox-validator", "vgpu-manager-validation"): (
        [HOST_ROOT_RO, ("driver-install-path", "/run/nvidia/driver", False, HTOC), VALIDATIONS],
        "s0",
    ),
    ("nvidia-sandbox-validator", "vgpu-devices-validation"): ([VALIDATIONS], None),
    ("nvidia-sandbox-validator", "nvidia-sandbox-validator"): ([VALIDATIONS], None),
    ("nvidia-vgpu-device-manager", "nvidia-vgpu-device-manager"): (
        [
            ("vgpu-config", "/vgpu-config", False, None),
            ("host-sys", "/sys", False, None),
            ("host-root", "/host", False, HTOC),
            ("driver-install-dir", "/driver-root", False, HTOC),
        ],
        None,
    ),
    ("nvidia-vgpu-device-manager", "vgpu-manager-validation"): ([VALIDATIONS], None),
    ("nvidia-vfio-manager", "k8s-driver-manager"): (
        [
            ("run-nvidia", "/run/nvidia", False, BIDIR),
            HOST_ROOT_RO,
            ("host-sys", "/sys", False, None),
        ],
        None,
    ),
    ("nvidia-vfio-manager", "nvidia-vfio-manager"): (
        [
            ("host-sys", "/sys", False, None),
            ("host-lib-modules", "/lib/modules", True, None),
            ("host-root", "/host", False, None),
        ],
        "s0",
    ),
}


@pytest.mark.parametrize(("ds_name", "container"), sorted(SANDBOX_MOUNTS))
def test_sandbox_operand_mounts_and_selinux_level_are_nvidias(ds_name: str, container: str) -> None:
    mounts, level = SANDBOX_MOUNTS[ds_name, container]
    ds = daemonset(ds_name, {**SANDBOX, "ccManager": {"enabled": True}})
    c = ctr(ds, container)
    assert [
        (m["name"], m["mountPath"], m.get("readOnly", False), m.get("mountPropagation"))
        for m in c["volumeMounts"]
    ] == mounts
    assert (c["securityContext"].get("seLinuxOptions") or {}).get("level") == level
    volumes = {v["name"] for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert {m[0] for m in mounts} <= volumes


def test_vgpu_device_manager_waits_for_either_vgpu_manager() -> None:
    ds = daemonset("nvidia-vgpu-device-manager", SANDBOX)
    assert ctr(ds, "vgpu-manager-validation")["args"] == [
        "until [ -f /run/nvidia/validations/vgpu-manager-ready ] || "
        "[ -f /run/nvidia/validations/host-vgpu-manager-ready ]; do "
        "echo waiting for NVIDIA vGPU Manager to be setup; sleep 5; done"
    ]


def test_cc_manager_prestop_is_nvidias_command() -> None:
    ds = daemonset("nvidia-cc-manager", {**KATA, "ccManager": {"enabled": True}})
    assert ctr(ds, "nvidia-cc-manager")["lifecycle"] == {
        "preStop": {
            "exec": {"command": ["/bin/rm", "-f", "/run/nvidia/validations/.cc-manager-ctr-ready"]}
        }
    }
