"""MIG manager: the default ``default-mig-parted-config`` holds the layouts NVIDIA's GPU
Operator ships (its ``assets/state-mig-manager/0400_configmap.yaml``), and the
config selection follows NVIDIA's ``TransformMIGManager`` / ``createConfigMap``.
The expected values below are NVIDIA's, written out as facts."""

from __future__ import annotations

from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.unit.platforms_gpu.helpers import ctr, daemonset, env, objects, volume

NVIDIA_CONFIG_NAMES = [
    "all-disabled",
    "all-enabled",
    "all-1g.5gb",
    "all-1g.5gb.me",
    "all-2g.10gb",
    "all-3g.20gb",
    "all-4g.20gb",
    "all-7g.40gb",
    "all-1g.24gb.gfx",
    "all-1g.24gb.me.all",
    "all-1g.24gb-me",
    "all-2g.48gb",
    "all-2g.48gb.gfx",
    "all-2g.48gb.me.all",
    "all-2g.48gb-me",
    "all-4g.96gb",
    "all-4g.96gb.gfx",
    "all-1g.10gb",
    "all-1g.10gb.me",
    "all-1g.20gb",
    "all-1g.23gb",
    "all-1g.23gb.me",
    "all-1g.24gb.me",
    "all-2g.20gb",
    "all-3g.40gb",
    "all-4g.40gb",
    "all-7g.80gb",
    "all-1g.6gb",
    "all-1g.6gb.me",
    "all-2g.12gb",
    "all-2g.12gb.me",
    "all-4g.24gb",
    "all-1g.12gb",
    "all-1g.12gb.me",
    "all-1g.24gb",
    "all-1g.45gb",
    "all-1g.47gb",
    "all-2g.24gb",
    "all-2g.45gb",
    "all-2g.47gb",
    "all-3g.47gb",
    "all-4g.47gb",
    "all-7g.94gb",
    "all-3g.48gb",
    "all-3g.90gb",
    "all-3g.93gb",
    "all-3g.95gb",
    "all-4g.48gb",
    "all-4g.90gb",
    "all-4g.93gb",
    "all-4g.95gb",
    "all-7g.96gb",
    "all-7g.180gb",
    "all-7g.186gb",
    "all-7g.189gb",
    "all-balanced",
    "all-1g.18gb",
    "all-1g.18gb.me",
    "all-1g.35gb",
    "all-2g.35gb",
    "all-3g.71gb",
    "all-4g.71gb",
    "all-7g.141gb",
    "all-1g.36gb",
    "all-2g.36gb",
    "all-3g.72gb",
    "all-4g.72gb",
    "all-7g.144gb",
    "all-1g.34gb",
    "all-1g.34gb.me",
    "all-1g.67gb",
    "all-2g.67gb",
    "all-3g.135gb",
    "all-4g.135gb",
    "all-7g.269gb",
    "all-1g.35gb.me",
    "all-1g.70gb",
    "all-2g.70gb",
    "all-3g.139gb",
    "all-4g.139gb",
    "all-7g.278gb",
]

A100_40GB = ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
A100_H100_80GB = [
    "0x233010DE",
    "0x233110DE",
    "0x232210DE",
    "0x20B210DE",
    "0x20B510DE",
    "0x20F310DE",
    "0x20F510DE",
    "0x232410DE",
]

# config -> NVIDIA's list of (device-filter or None, mig-devices), one per GPU family.
NVIDIA_LAYOUTS: dict[str, list[tuple[Any, dict[str, int]]]] = {
    "all-1g.5gb": [(None, {"1g.5gb": 7})],  # A100-40GB
    "all-1g.5gb.me": [(None, {"1g.5gb+me": 1})],
    "all-7g.40gb": [(None, {"7g.40gb": 1})],
    "all-1g.24gb.gfx": [(None, {"1g.24gb+gfx": 4})],  # RTX PRO 6000
    "all-1g.24gb.me.all": [(None, {"1g.24gb+me.all": 1})],
    "all-1g.24gb-me": [(None, {"1g.24gb-me": 4})],
    "all-4g.96gb.gfx": [(None, {"4g.96gb+gfx": 1})],
    "all-1g.10gb": [(A100_H100_80GB, {"1g.10gb": 7}), (A100_40GB, {"1g.10gb": 4})],
    "all-7g.80gb": [(None, {"7g.80gb": 1})],  # H100/A100 80 GB
    "all-1g.23gb": [(None, {"1g.23gb": 7})],  # GB200, B200
    "all-4g.24gb": [(None, {"4g.24gb": 1})],  # A30
    "all-7g.94gb": [(None, {"7g.94gb": 1})],  # H100 NVL
    "all-7g.96gb": [(None, {"7g.96gb": 1})],  # H100-96GB, GH200
    "all-7g.180gb": [(None, {"7g.180gb": 1})],  # B200
    "all-7g.189gb": [(None, {"7g.189gb": 1})],  # GB200
    "all-7g.141gb": [(None, {"7g.141gb": 1})],  # H200
    "all-7g.144gb": [(None, {"7g.144gb": 1})],  # GH200 144 GB
    "all-1g.35gb": [(["0x233510DE"], {"1g.35gb": 4}), (["0x31C210DE"], {"1g.35gb": 7})],
    "all-7g.269gb": [(None, {"7g.269gb": 1})],  # B300
    "all-7g.278gb": [(None, {"7g.278gb": 1})],  # GB300
    "all-balanced": [
        (["0x294110DE"], {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1}),
        (["0x2BB510DE"], {"1g.24gb": 2, "2g.48gb": 1}),
        (["0x290110DE"], {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}),
        (["0x234810DE"], {"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1}),
        (["0x233510DE", "0x233B10DE"], {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),
        (["0x232110DE", "0x233A10DE"], {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1}),
        (A100_H100_80GB, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
        (A100_40GB, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
        ("0x20B710DE", {"1g.6gb": 2, "2g.12gb": 1}),
        (
            ["0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"],
            {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
        ),
        (["0x318210DE"], {"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1}),
        (["0x31C210DE"], {"1g.35gb": 2, "2g.70gb": 1, "3g.139gb": 1}),
    ],
}


def _config_map(name: str, spec: dict[str, Any] | None = None) -> dict[str, Any] | None:
    for obj in objects(spec):
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == name:
            return obj
    return None


def _mig_configs() -> dict[str, Any]:
    cm = _config_map("default-mig-parted-config")
    assert cm is not None
    doc: dict[str, Any] = YAML(typ="safe").load(cm["data"]["config.yaml"])
    assert doc["version"] == "v1"
    configs: dict[str, Any] = doc["mig-configs"]
    return configs


def test_the_default_config_holds_every_layout_nvidia_ships_in_its_order() -> None:
    configs = _mig_configs()
    assert len(configs) == 81
    assert list(configs) == NVIDIA_CONFIG_NAMES


def test_all_disabled_and_all_enabled() -> None:
    configs = _mig_configs()
    assert configs["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert configs["all-enabled"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]


@pytest.mark.parametrize("name", sorted(NVIDIA_LAYOUTS))
def test_layouts_by_gpu_model(name: str) -> None:
    expected = []
    for device_filter, devices in NVIDIA_LAYOUTS[name]:
        layout: dict[str, Any] = {"devices": "all", "mig-enabled": True, "mig-devices": devices}
        if device_filter is not None:
            layout["device-filter"] = device_filter
        expected.append(layout)
    assert _mig_configs()[name] == expected


def test_every_uniform_config_is_named_after_its_one_profile() -> None:
    """``all-<profile>`` with ``+`` as ``.``, one profile on all GPUs."""
    for name, layouts in _mig_configs().items():
        if name in ("all-disabled", "all-enabled", "all-balanced") or len(layouts) > 1:
            continue
        (profile,) = layouts[0]["mig-devices"]
        assert name == "all-" + profile.replace("+", "."), name


# migManager.config -> (default ConfigMap made, volume's ConfigMap, its items, env set)
SELECTION: dict[str, tuple[dict[str, Any] | None, bool, str, Any, tuple[str, str]]] = {
    "no config": (
        None,
        True,
        "default-mig-parted-config",
        [{"key": "config.yaml", "path": "config-default.yaml"}],
        ("DEFAULT_CONFIG_FILE", "/mig-parted-config/config-default.yaml"),
    ),
    "empty name": (
        {"name": ""},
        True,
        "default-mig-parted-config",
        [{"key": "config.yaml", "path": "config-default.yaml"}],
        ("DEFAULT_CONFIG_FILE", "/mig-parted-config/config-default.yaml"),
    ),
    # NVIDIA: a named config is custom even when it names the default ConfigMap.
    "the default's name": (
        {"name": "default-mig-parted-config"},
        True,
        "default-mig-parted-config",
        None,
        ("CONFIG_FILE", "/mig-parted-config/config.yaml"),
    ),
    "own ConfigMap": (
        {"name": "my-layouts"},
        False,
        "my-layouts",
        None,
        ("CONFIG_FILE", "/mig-parted-config/config.yaml"),
    ),
}


@pytest.mark.parametrize("case", sorted(SELECTION))
def test_config_selection_as_nvidia(case: str) -> None:
    config, made, mounted, items, (var, path) = SELECTION[case]
    spec = {"migManager": {"config": config}} if config is not None else None
    assert (_config_map("default-mig-parted-config", spec) is not None) is made
    ds = daemonset("nvidia-mig-manager", spec)
    source = volume(ds, "mig-parted-config")["configMap"]
    assert source["name"] == mounted
    assert source.get("items") == items
    manager_env = env(ctr(ds, "nvidia-mig-manager"))
    assert manager_env[var] == path
    other = "CONFIG_FILE" if var == "DEFAULT_CONFIG_FILE" else "DEFAULT_CONFIG_FILE"
    assert other not in manager_env


@pytest.mark.parametrize(
    ("clients", "made", "mounted"),
    [
        (None, True, "default-gpu-clients"),
        ({"name": "default-gpu-clients"}, True, "default-gpu-clients"),
        ({"name": "my-clients"}, False, "my-clients"),
    ],
)
def test_gpu_clients_selection(clients: dict[str, str] | None, made: bool, mounted: str) -> None:
    spec = {"migManager": {"gpuClientsConfig": clients}} if clients else None
    assert (_config_map("default-gpu-clients", spec) is not None) is made
    assert volume(daemonset("nvidia-mig-manager", spec), "gpu-clients")["configMap"] == {
        "name": mounted
    }


SANDBOX: dict[str, Any] = {"sandboxWorkloads": {"enabled": True}}


@pytest.mark.parametrize(
    ("config", "made", "mounted"),
    [
        ({"name": ""}, True, "default-vgpu-devices-config"),
        ({"name": "default-vgpu-devices-config"}, True, "default-vgpu-devices-config"),
        ({"name": "my-vgpus"}, False, "my-vgpus"),
    ],
)
def test_vgpu_devices_config_selection(config: dict[str, str], made: bool, mounted: str) -> None:
    """NVIDIA: the default vGPU devices ConfigMap is made unless another one is named."""
    spec = {**SANDBOX, "vgpuDeviceManager": {"config": config}}
    assert (_config_map("default-vgpu-devices-config", spec) is not None) is made
    ds = daemonset("nvidia-vgpu-device-manager", spec)
    assert volume(ds, "vgpu-config")["configMap"] == {"name": mounted}
    assert env(ctr(ds, "nvidia-vgpu-device-manager"))["CONFIG_FILE"] == "/vgpu-config/config.yaml"


def _vgpu_configs() -> dict[str, Any]:
    cm = _config_map("default-vgpu-devices-config", SANDBOX)
    assert cm is not None
    doc: dict[str, Any] = YAML(typ="safe").load(cm["data"]["config.yaml"])
    assert doc["version"] == "v1"
    configs: dict[str, Any] = doc["vgpu-configs"]
    return configs


# NVIDIA's vGPU device configurations: a sample of single-type ones (type: count per GPU),
# its total and the first entries of ``default`` (device-filter, type, count).
NVIDIA_VGPU = {
    "6000D-1-42C": 2,
    "A2-1Q": 16,
    "A10-24Q": 1,
    "A100-1-5C": 7,
    "H100XM-1-10C": 7,
    "L4-24Q": 1,
    "T4-16Q": 1,
    "V100-16C": 1,
    "B300X-269C": 1,
    "DC-4-96QGFX": 1,
}
NVIDIA_VGPU_DEFAULT_HEAD = [
    ("0x1DB110DE", "V100X-8Q", 2),
    ("0x1DB310DE", "V100L-8Q", 2),
    ("0x1DB410DE", "V100-8Q", 2),
]
NVIDIA_VGPU_DEFAULT_TAIL = [
    ("0x2BB910DE", "6000D-84Q", 1),
    ("0x2C3A10DE", "DC-16Q", 2),
    ("0x318210DE", "B300X-269C", 1),
]


def test_the_default_vgpu_config_holds_every_type_nvidia_ships() -> None:
    configs = _vgpu_configs()
    assert len(configs) == 711
    assert next(iter(configs)) == "6000D-1-42C"
    assert list(configs)[-1] == "default"
    for name, count in NVIDIA_VGPU.items():
        assert configs[name] == [{"devices": "all", "vgpu-devices": {name: count}}], name
    default = [
        (e["device-filter"], *next(iter(e["vgpu-devices"].items()))) for e in configs["default"]
    ]
    assert len(default) == 56
    assert default[:3] == NVIDIA_VGPU_DEFAULT_HEAD
    assert default[-3:] == NVIDIA_VGPU_DEFAULT_TAIL
    assert all(e["devices"] == "all" for e in configs["default"])
