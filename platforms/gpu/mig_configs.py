"""The default MIG layouts (``default-mig-parted-config``): every configuration NVIDIA's
GPU Operator ships, written as a compact table and turned into mig-parted's
``config.yaml`` here.

Most configurations are uniform: ``all-<profile>`` puts ``count`` instances of one
profile on every GPU (a ``+`` in the profile is a ``.`` in the name, so
``1g.5gb+me`` is ``all-1g.5gb.me``). A few depend on the GPU model and list one
layout per ``device-filter`` (PCI device and vendor IDs, ``0x<device>10DE``).
"""

from __future__ import annotations

from typing import Final

# GPU models by PCI ID, as mig-parted's device-filter matches them.
A100_40GB: Final = ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE")
"""A100-40GB, A800-40GB."""
A100_H100_80GB: Final = (
    "0x233010DE",
    "0x233110DE",
    "0x232210DE",
    "0x20B210DE",
    "0x20B510DE",
    "0x20F310DE",
    "0x20F510DE",
    "0x232410DE",
)
"""H100-80GB, H800-80GB, A100-80GB, A800-80GB."""
A30: Final = "0x20B710DE"
H100_NVL: Final = ("0x232110DE", "0x233A10DE")
"""H100 NVL, H800 NVL."""
H100_96GB: Final = ("0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE")
"""H100-96GB, PG506-96GB, GH200, H20."""
H200: Final = ("0x233510DE", "0x233B10DE")
"""H200-141GB, H200 NVL."""
GH200_144GB: Final = ("0x234810DE",)
B200: Final = ("0x290110DE",)
B300: Final = ("0x318210DE",)
GB200: Final = ("0x294110DE",)
GB300: Final = ("0x31C210DE",)
RTX_PRO_6000: Final = ("0x2BB510DE",)

Filter = str | tuple[str, ...]
Layout = tuple[Filter, tuple[tuple[str, int], ...]]

# In NVIDIA's order. A (profile, count) pair is a uniform configuration; a
# (name, layouts) pair a per-model one.
CONFIGS: Final[tuple[tuple[str, int] | tuple[str, tuple[Layout, ...]], ...]] = (
    # A100-40GB
    ("1g.5gb", 7),
    ("1g.5gb+me", 1),
    ("2g.10gb", 3),
    ("3g.20gb", 2),
    ("4g.20gb", 1),
    ("7g.40gb", 1),
    # RTX PRO 6000 (96 GB)
    ("1g.24gb+gfx", 4),
    ("1g.24gb+me.all", 1),
    ("1g.24gb-me", 4),
    ("2g.48gb", 2),
    ("2g.48gb+gfx", 2),
    ("2g.48gb+me.all", 1),
    ("2g.48gb-me", 2),
    ("4g.96gb", 1),
    ("4g.96gb+gfx", 1),
    # 80 GB A100/H100 (7 slices), 40 GB A100 (4)
    ("all-1g.10gb", ((A100_H100_80GB, (("1g.10gb", 7),)), (A100_40GB, (("1g.10gb", 4),)))),
    ("1g.10gb+me", 1),
    ("1g.20gb", 4),
    # GB200, B200
    ("1g.23gb", 7),
    ("1g.23gb+me", 1),
    ("1g.24gb+me", 1),
    ("2g.20gb", 3),
    ("3g.40gb", 2),
    ("4g.40gb", 1),
    ("7g.80gb", 1),
    # A30
    ("1g.6gb", 4),
    ("1g.6gb+me", 1),
    ("2g.12gb", 2),
    ("2g.12gb+me", 1),
    ("4g.24gb", 1),
    # H100 NVL, GH200
    ("1g.12gb", 7),
    ("1g.12gb+me", 1),
    ("1g.24gb", 4),
    ("1g.45gb", 4),
    ("1g.47gb", 4),
    ("2g.24gb", 3),
    ("2g.45gb", 3),
    ("2g.47gb", 3),
    ("3g.47gb", 2),
    ("4g.47gb", 1),
    ("7g.94gb", 1),
    # H100-96GB and the larger B200/GB200
    ("3g.48gb", 2),
    ("3g.90gb", 2),
    ("3g.93gb", 2),
    ("3g.95gb", 2),
    ("4g.48gb", 1),
    ("4g.90gb", 1),
    ("4g.93gb", 1),
    ("4g.95gb", 1),
    ("7g.96gb", 1),
    ("7g.180gb", 1),
    ("7g.186gb", 1),
    ("7g.189gb", 1),
    # One small, one medium, one large instance per GPU, by model.
    (
        "all-balanced",
        (
            (GB200, (("1g.23gb", 2), ("2g.47gb", 1), ("3g.93gb", 1))),
            (RTX_PRO_6000, (("1g.24gb", 2), ("2g.48gb", 1))),
            (B200, (("1g.23gb", 2), ("2g.45gb", 1), ("3g.90gb", 1))),
            (GH200_144GB, (("1g.18gb", 2), ("2g.36gb", 1), ("3g.72gb", 1))),
            (H200, (("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1))),
            (H100_NVL, (("1g.12gb", 2), ("2g.24gb", 1), ("3g.47gb", 1))),
            (A100_H100_80GB, (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1))),
            (A100_40GB, (("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1))),
            (A30, (("1g.6gb", 2), ("2g.12gb", 1))),
            (H100_96GB, (("1g.12gb", 2), ("2g.24gb", 1), ("3g.48gb", 1))),
            (B300, (("1g.34gb", 2), ("2g.67gb", 1), ("3g.135gb", 1))),
            (GB300, (("1g.35gb", 2), ("2g.70gb", 1), ("3g.139gb", 1))),
        ),
    ),
    # H200, GH200 144 GB
    ("1g.18gb", 7),
    ("1g.18gb+me", 1),
    ("all-1g.35gb", ((("0x233510DE",), (("1g.35gb", 4),)), (GB300, (("1g.35gb", 7),)))),
    ("2g.35gb", 3),
    ("3g.71gb", 2),
    ("4g.71gb", 1),
    ("7g.141gb", 1),
    ("1g.36gb", 4),
    ("2g.36gb", 3),
    ("3g.72gb", 2),
    ("4g.72gb", 1),
    ("7g.144gb", 1),
    # B300
    ("1g.34gb", 7),
    ("1g.34gb+me", 1),
    ("1g.67gb", 4),
    ("2g.67gb", 3),
    ("3g.135gb", 2),
    ("4g.135gb", 1),
    ("7g.269gb", 1),
    # GB300
    ("1g.35gb+me", 1),
    ("1g.70gb", 4),
    ("2g.70gb", 3),
    ("3g.139gb", 2),
    ("4g.139gb", 1),
    ("7g.278gb", 1),
)


def config_name(profile: str) -> str:
    """The name of the uniform configuration of ``profile`` (``1g.5gb+me`` -> ``all-1g.5gb.me``)."""
    return "all-" + profile.replace("+", ".")


def _filter(value: Filter) -> str:
    # Quoted: unquoted, YAML reads 0x... as a number.
    if isinstance(value, str):
        return f'"{value}"'
    return "[" + ", ".join(f'"{v}"' for v in value) + "]"


def _layout(devices: tuple[tuple[str, int], ...], device_filter: Filter | None) -> str:
    head = (
        f"    - device-filter: {_filter(device_filter)}\n      devices: all\n"
        if (device_filter is not None)
        else "    - devices: all\n"
    )
    body = "".join(f'        "{profile}": {count}\n' for profile, count in devices)
    return f"{head}      mig-enabled: true\n      mig-devices:\n{body}"


def config_yaml() -> str:
    """mig-parted's ``config.yaml``: ``all-disabled``, ``all-enabled``, then ``CONFIGS``."""
    out = [
        "version: v1\n",
        "mig-configs:\n",
        "  all-disabled:\n    - devices: all\n      mig-enabled: false\n",
        "  all-enabled:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {}\n",
    ]
    for name, value in CONFIGS:
        if isinstance(value, int):
            out.append(f"  {config_name(name)}:\n" + _layout(((name, value),), None))
        else:
            out.append(f"  {name}:\n" + "".join(_layout(d, f) for f, d in value))
    return "".join(out)


def names() -> list[str]:
    """Every configuration's name, in order."""
    return ["all-disabled", "all-enabled"] + [
        config_name(n) if isinstance(v, int) else n for n, v in CONFIGS
    ]
