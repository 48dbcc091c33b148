"""The operand entrypoint scripts (the ``*-entrypoint`` ConfigMaps) behave as NVIDIA's:
each waits for the driver validation, takes what it reports, and starts its
operand with the environment NVIDIA's script would give it.

The scripts are run for real with ``sh`` in a temp dir: the host paths they read
(``/run/nvidia/validations``, ``/proc/modules``) are pointed into the temp dir, and
the operand binaries and ``sleep`` are fakes on PATH that record what they saw.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit.platforms_gpu.helpers import ctr, daemonset, objects

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")

DRIVER_READY = "IS_HOST_DRIVER=false\nNVIDIA_DRIVER_ROOT=/run/nvidia/driver\n"
# /proc/modules lines: name, size, users, used-by, state, address.
GDRDRV = "gdrdrv 24576 0 - Live 0x0000000000000000 (OE)\n"
NVIDIA_FS = "nvidia_fs 262144 0 - Live 0x0000000000000000 (OE)\n"
NVIDIA = "nvidia 56791040 12 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n"
# Names that only start like a module must not count.
LOOKALIKES = "gdrdrv_extra 4096 0 - Live 0x0 (OE)\nnvidia_fs_x 4096 0 - Live 0x0 (OE)\n"


def _script(config_map: str) -> str:
    for obj in objects():
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == config_map:
            text: str = obj["data"]["entrypoint.sh"]
            return text
    raise AssertionError(f"no ConfigMap {config_map}")


def _run(
    tmp: Path,
    config_map: str,
    binary: str,
    *,
    modules: str = NVIDIA,
    env: dict[str, str] | None = None,
    ready_after_sleeps: int = 0,
    driver_ready: str = DRIVER_READY,
) -> tuple[dict[str, str], int, str]:
    """Run the entrypoint; (environment the operand started with, sleeps, stdout)."""
    validations = tmp / "validations"
    validations.mkdir()
    ready = validations / "driver-ready"
    (tmp / "modules").write_text(modules)
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    # The fake sleep counts its calls and writes driver-ready once it was called enough.
    (bin_dir / "sleep").write_text(
        "#!/bin/sh\n"
        f'echo x >> "{tmp}/sleeps"\n'
        f'if [ "$(wc -l < "{tmp}/sleeps")" -ge {ready_after_sleeps} ]; then\n'
        f"  printf '%s' '{driver_ready}' > \"{ready}\"\n"
        "fi\n"
    )
    (bin_dir / binary).write_text(f'#!/bin/sh\nenv > "{tmp}/operand-env"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    if ready_after_sleeps == 0:
        ready.write_text(driver_ready)
    script = (
        _script(config_map)
        .replace("/run/nvidia/validations", str(validations))
        .replace("/proc/modules", str(tmp / "modules"))
    )
    (tmp / "entrypoint.sh").write_text(script)
    clean = {"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}", **(env or {})}
    done = subprocess.run(
        ["sh", str(tmp / "entrypoint.sh")],
        env=clean,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    seen = dict(
        line.split("=", 1) for line in (tmp / "operand-env").read_text().splitlines() if "=" in line
    )
    sleeps_file = tmp / "sleeps"
    sleeps = len(sleeps_file.read_text().splitlines()) if sleeps_file.exists() else 0
    return seen, sleeps, done.stdout


FEATURES = ("GDRCOPY_ENABLED", "GDS_ENABLED", "MOFED_ENABLED")

# modules loaded -> the feature flags NVIDIA's device plugin entrypoint turns on
DEVICE_PLUGIN: dict[str, tuple[str, dict[str, str]]] = {
    "driver only": (NVIDIA, {}),
    "lookalike names": (NVIDIA + LOOKALIKES, {}),
    "gdrcopy": (NVIDIA + GDRDRV, {"GDRCOPY_ENABLED": "true"}),
    "gds": (NVIDIA + NVIDIA_FS, {"GDS_ENABLED": "true", "MOFED_ENABLED": "true"}),
    "both": (
        NVIDIA + NVIDIA_FS + GDRDRV,
        {"GDRCOPY_ENABLED": "true", "GDS_ENABLED": "true", "MOFED_ENABLED": "true"},
    ),
}


@pytest.mark.parametrize("case", sorted(DEVICE_PLUGIN))
def test_device_plugin_turns_on_the_features_of_the_loaded_modules(
    tmp_path: Path, case: str
) -> None:
    modules, flags = DEVICE_PLUGIN[case]
    seen, _, _ = _run(
        tmp_path, "nvidia-device-plugin-entrypoint", "nvidia-device-plugin", modules=modules
    )
    assert {k: seen[k] for k in FEATURES if k in seen} == flags
    # What the driver validation reported reaches the plugin.
    assert seen["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver"
    assert seen["IS_HOST_DRIVER"] == "false"


def test_device_plugin_keeps_flags_already_set(tmp_path: Path) -> None:
    """NVIDIA only sets a flag that is empty: the ClusterPolicy's (or user's) value wins."""
    seen, _, _ = _run(
        tmp_path,
        "nvidia-device-plugin-entrypoint",
        "nvidia-device-plugin",
        modules=NVIDIA + NVIDIA_FS + GDRDRV,
        env={"GDS_ENABLED": "false", "GDRCOPY_ENABLED": "false"},
    )
    assert (seen["GDS_ENABLED"], seen["GDRCOPY_ENABLED"], seen["MOFED_ENABLED"]) == (
        "false",
        "false",
        "true",
    )


@pytest.mark.parametrize(
    ("config_map", "binary"),
    [
        ("nvidia-device-plugin-entrypoint", "nvidia-device-plugin"),
        ("nvidia-container-toolkit-entrypoint", "nvidia-toolkit"),
        ("nvidia-mig-manager-entrypoint", "nvidia-mig-manager"),
    ],
)
def test_entrypoints_wait_for_the_driver_validation(
    tmp_path: Path, config_map: str, binary: str
) -> None:
    seen, sleeps, out = _run(tmp_path, config_map, binary, ready_after_sleeps=3)
    assert "waiting for the driver validations to be ready..." in out
    # Three 5 s waits until driver-ready appeared (the toolkit then pauses once more).
    assert sleeps == (4 if binary == "nvidia-toolkit" else 3)
    assert seen["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver"


@pytest.mark.parametrize(("is_host", "shutdown"), [("true", "true"), ("false", "false")])
def test_mig_manager_shuts_host_gpu_clients_down_only_with_a_host_driver(
    tmp_path: Path, is_host: str, shutdown: str
) -> None:
    ready = DRIVER_READY.replace("IS_HOST_DRIVER=false", f"IS_HOST_DRIVER={is_host}")
    seen, _, out = _run(
        tmp_path, "nvidia-mig-manager-entrypoint", "nvidia-mig-manager", driver_ready=ready
    )
    assert seen["WITH_SHUTDOWN_HOST_GPU_CLIENTS"] == shutdown
    assert f"WITH_SHUTDOWN_HOST_GPU_CLIENTS={shutdown}" in out


def test_toolkit_pauses_once_before_starting(tmp_path: Path) -> None:
    """NVIDIA's workaround for containerd >= 1.6.9: one 5 s pause before nvidia-toolkit."""
    seen, sleeps, _ = _run(tmp_path, "nvidia-container-toolkit-entrypoint", "nvidia-toolkit")
    assert sleeps == 1
    assert seen["IS_HOST_DRIVER"] == "false"


@pytest.mark.parametrize(
    ("config_map", "app"),
    [
        ("nvidia-device-plugin-entrypoint", "nvidia-device-plugin-daemonset"),
        ("nvidia-container-toolkit-entrypoint", "nvidia-container-toolkit-daemonset"),
        ("nvidia-mig-manager-entrypoint", "nvidia-mig-manager"),
    ],
)
def test_entrypoint_config_maps_carry_their_daemonsets_app_label(config_map: str, app: str) -> None:
    (cm,) = [
        o for o in objects() if o["kind"] == "ConfigMap" and o["metadata"]["name"] == config_map
    ]
    assert cm["metadata"]["labels"]["app"] == app


STACK = (
    "until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for nvidia container "
    "stack to be setup; sleep 5; done"
)


def _workload_wait(workload: str, skipped: str, ready: str, waiting: str) -> str:
    base = "/run/nvidia/validations"
    return (
        f"until [ -f {base}/workload-type ]; do echo waiting for workload type status file; "
        f'sleep 5; done; if [ "$(cat {base}/workload-type)" != "{workload}" ]; then echo '
        f"{skipped} not needed, skipping validation; exit 0; fi; until [ -f {base}/{ready} ]; "
        f"do echo {waiting}; sleep 5; done;"
    )


# (DaemonSet, init container) -> NVIDIA's command string. It is part of the pod template,
# so any other wording would roll every operand pod when nimctl takes a cluster over.
INIT_WAITS: dict[tuple[str, str], str] = {
    ("nvidia-device-plugin-daemonset", "toolkit-validation"): STACK,
    ("nvidia-device-plugin-mps-control-daemon", "toolkit-validation"): STACK,
    ("nvidia-dcgm-exporter", "toolkit-validation"): STACK,
    ("nvidia-dcgm", "toolkit-validation"): STACK,
    ("gpu-feature-discovery", "toolkit-validation"): STACK,
    ("nvidia-mig-manager", "toolkit-validation"): STACK.replace(
        "container stack", "container toolkit"
    ),
    ("nvidia-sandbox-device-plugin-daemonset", "vfio-pci-validation"): _workload_wait(
        "vm-passthrough", "vfio-pci", "vfio-pci-ready", "waiting for vfio-pci driver ..."
    ),
    ("nvidia-sandbox-device-plugin-daemonset", "vgpu-devices-validation"): _workload_wait(
        "vm-vgpu", "vgpu-devices", "vgpu-devices-ready", "waiting for vGPU devices..."
    ),
    ("nvidia-kata-sandbox-device-plugin-daemonset", "vfio-pci-validation"): _workload_wait(
        "vm-passthrough", "kata", "vfio-pci-ready", "waiting for vfio-pci driver ..."
    ),
}
EVERY_OPERAND: dict[str, Any] = {"dcgm": {"enabled": True}}
SANDBOX: dict[str, Any] = {"sandboxWorkloads": {"enabled": True}}
KATA: dict[str, Any] = {
    "sandboxWorkloads": {"enabled": True, "mode": "kata"},
    "kataSandboxDevicePlugin": {"enabled": True},
}


@pytest.mark.parametrize(("ds_name", "init"), sorted(INIT_WAITS))
def test_init_container_waits_are_nvidias_command_strings(ds_name: str, init: str) -> None:
    spec = KATA if "kata" in ds_name else SANDBOX if "sandbox" in ds_name else EVERY_OPERAND
    ds = daemonset(ds_name, spec)
    c = ctr(ds, init)
    assert (c["command"], c["args"]) == (["sh", "-c"], [INIT_WAITS[ds_name, init]])
