"""``DRIVER_CONFIG_DIGEST``: the driver install configuration's hash, in NVIDIA's format.

NVIDIA's operator stamps every driver DaemonSet (the ``k8s-driver-manager`` init
container, ``nvidia-driver-ctr`` and the OpenShift Driver Toolkit container) with
``DRIVER_CONFIG_DIGEST``, a 32-bit FNV-1a hash printed in decimal. The driver
manager and the driver container compare it with the digest of the driver
already installed on the node to skip a reinstall. A digest computed any other
way is a pod template change on a cluster NVIDIA's operator set up, and a
driver reinstall on every node, so ours is NVIDIA's, field for field:

- the input is NVIDIA's ``DriverInstallState``: images, driver type, kernel
  module type, the driver container's command/args, per-container literal env,
  the secretEnv source, the RDMA/GDS/GDRCopy switches, the names of the
  licensing/topology/kernel-module/repo/cert configs, precompiled and
  OpenShift settings, proxy settings, volumes, mounts and the host root;
- only fields that are set take part (empty strings, false, empty lists are
  left out), in the order of their Go field names;
- each field is written as ``<Name>:`` followed by its value as go-spew's
  ``%#v`` prints it (``(string)x``, ``(bool)true``, ``([]string)[a b]``,
  ``([]config.EnvVar)[{Name:(string)A Value:(string)b}]``...), and the bytes
  of all fields are hashed together.

Two builders fill the state: ``from_pod_spec`` for ClusterPolicy's driver
DaemonSet (read back from the rendered pod spec, as NVIDIA's ClusterPolicy
controller does) and the NVIDIADriver render, which fills it from the spec
(``platforms.gpu.nvidiadriver_daemonset``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "DriverInstallState",
    "EnvVar",
    "VolumeConfig",
    "VolumeMountConfig",
    "config_digest",
    "env_vars",
    "from_pod_spec",
    "volume_mounts",
    "volumes",
]

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def _fnv1a_32(data: bytes) -> int:
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return h


@dataclass(frozen=True)
class EnvVar:
    """A literal env variable (``config.EnvVar``)."""

    Name: str
    Value: str


@dataclass(frozen=True)
class VolumeConfig:
    """What of a volume counts (``config.VolumeConfig``)."""

    Name: str
    ConfigMapName: str = ""
    SecretName: str = ""
    HostPath: str = ""


@dataclass(frozen=True)
class VolumeMountConfig:
    """What of a volume mount counts (``config.VolumeMountConfig``)."""

    Name: str
    MountPath: str
    SubPath: str = ""
    ReadOnly: bool = False


# Go's type names, as go-spew prints them.
_LIST_TYPES: dict[type, str] = {
    str: "[]string",
    EnvVar: "[]config.EnvVar",
    VolumeConfig: "[]config.VolumeConfig",
    VolumeMountConfig: "[]config.VolumeMountConfig",
}


@dataclass
class DriverInstallState:
    """Every field that decides how the driver is installed (NVIDIA's names, as they
    are hashed)."""

    DriverImage: str = ""
    DriverManagerImage: str = ""
    PeermemImage: str = ""
    GDSImage: str = ""
    GDRCopyImage: str = ""
    DTKImage: str = ""
    DriverType: str = ""
    KernelModuleType: str = ""
    DriverCommand: list[str] = field(default_factory=list)
    DriverArgs: list[str] = field(default_factory=list)
    DriverEnv: list[EnvVar] = field(default_factory=list)
    ManagerEnv: list[EnvVar] = field(default_factory=list)
    GDSEnv: list[EnvVar] = field(default_factory=list)
    GDRCopyEnv: list[EnvVar] = field(default_factory=list)
    SecretEnvSource: str = ""
    GPUDirectRDMAEnabled: bool = False
    UseHostMOFED: bool = False
    GDSEnabled: bool = False
    GDRCopyEnabled: bool = False
    LicensingConfigName: str = ""
    VirtualTopologyConfig: str = ""
    KernelModuleConfig: str = ""
    RepoConfig: str = ""
    CertConfig: str = ""
    UsePrecompiled: bool = False
    KernelVersion: str = ""
    OpenshiftVersion: str = ""
    DTKEnabled: bool = False
    RHCOSVersion: str = ""
    HTTPProxy: str = ""
    HTTPSProxy: str = ""
    NoProxy: str = ""
    TrustedCAConfigMapName: str = ""
    AdditionalVolumes: list[VolumeConfig] = field(default_factory=list)
    AdditionalVolumeMounts: list[VolumeMountConfig] = field(default_factory=list)
    HostRoot: str = ""


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "(bool)" + ("true" if value else "false")
    return "(string)" + str(value)


def _item(value: Any) -> str:
    """A list element: no type prefix, a struct's fields with theirs."""
    if isinstance(value, str):
        return value
    parts = [f"{f.name}:{_scalar(getattr(value, f.name))}" for f in fields(value)]
    return "{" + " ".join(parts) + "}"


def _spew(value: Any) -> str:
    if isinstance(value, list):
        kind = _LIST_TYPES[type(value[0])]
        return f"({kind})[" + " ".join(_item(v) for v in value) + "]"
    return _scalar(value)


def config_digest(state: DriverInstallState) -> str:
    """The decimal FNV-1a 32-bit digest of the set fields of ``state`` (module docstring)."""
    text = "".join(
        f"{f.name}:{_spew(getattr(state, f.name))}"
        for f in sorted(fields(state), key=lambda f: f.name)
        if getattr(state, f.name)
    )
    return str(_fnv1a_32(text.encode()))


def env_vars(items: Iterable[Mapping[str, Any]]) -> list[EnvVar]:
    """Literal env variables (``valueFrom`` ones are left out), sorted by name."""
    out = [
        EnvVar(str(e.get("name", "")), str(e.get("value") or ""))
        for e in items
        if e.get("valueFrom") is None
    ]
    return sorted(out, key=lambda e: e.Name)


def volume_mounts(items: Iterable[Mapping[str, Any]]) -> list[VolumeMountConfig]:
    """Mounts, sorted by name then mount path."""
    out = [
        VolumeMountConfig(
            str(m.get("name", "")),
            str(m.get("mountPath", "")),
            str(m.get("subPath") or ""),
            bool(m.get("readOnly")),
        )
        for m in items
    ]
    return sorted(out, key=lambda m: (m.Name, m.MountPath))


def volumes(items: Iterable[Mapping[str, Any]]) -> list[VolumeConfig]:
    """Volumes (configMap, secret and hostPath sources only), sorted by name."""
    out = [
        VolumeConfig(
            str(v.get("name", "")),
            str((v.get("configMap") or {}).get("name") or ""),
            str((v.get("secret") or {}).get("secretName") or ""),
            str((v.get("hostPath") or {}).get("path") or ""),
        )
        for v in items
    ]
    return sorted(out, key=lambda v: v.Name)


def _names(items: Sequence[Mapping[str, Any]] | None) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("name")): c for c in items or ()}


def from_pod_spec(pod: Mapping[str, Any]) -> DriverInstallState:
    """The state of a fully transformed ClusterPolicy driver pod spec (before the digest
    and hostNetwork are set), read as NVIDIA's ClusterPolicy controller reads it."""
    state = DriverInstallState()
    manager = _names(pod.get("initContainers")).get("k8s-driver-manager")
    if manager is not None:
        state.DriverManagerImage = str(manager.get("image") or "")
        state.ManagerEnv = env_vars(manager.get("env") or [])
    for name, c in _names(pod.get("containers")).items():
        if name == "nvidia-driver-ctr":
            state.DriverImage = str(c.get("image") or "")
            state.DriverCommand = list(c.get("command") or [])
            state.DriverArgs = list(c.get("args") or [])
            state.DriverEnv = env_vars(c.get("env") or [])
            for source in c.get("envFrom") or []:
                if source.get("secretRef") is not None:
                    state.SecretEnvSource = str(source["secretRef"].get("name") or "")
            state.AdditionalVolumeMounts = volume_mounts(c.get("volumeMounts") or [])
        elif name == "nvidia-peermem-ctr":
            state.PeermemImage = str(c.get("image") or "")
            state.GPUDirectRDMAEnabled = True
        elif name == "nvidia-fs-ctr":
            state.GDSImage = str(c.get("image") or "")
            state.GDSEnabled = True
            state.GDSEnv = env_vars(c.get("env") or [])
        elif name == "nvidia-gdrcopy-ctr":
            state.GDRCopyImage = str(c.get("image") or "")
            state.GDRCopyEnabled = True
            state.GDRCopyEnv = env_vars(c.get("env") or [])
        elif name == "openshift-driver-toolkit-ctr":
            state.DTKImage = str(c.get("image") or "")
            state.DTKEnabled = True
    state.AdditionalVolumes = volumes(pod.get("volumes") or [])
    for v in pod.get("volumes") or []:
        if v.get("name") == "host-root" and v.get("hostPath") is not None:
            state.HostRoot = str(v["hostPath"].get("path") or "")
    return state
