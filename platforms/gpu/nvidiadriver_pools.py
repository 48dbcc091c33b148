"""NVIDIADriver node pools, node ownership and selector conflicts, as pure functions of Nodes.

gpu-operator.md §3.2 and §6.1:

- **ownership**: every GPU node (``nvidia.com/gpu.present=true``) belongs to at
  most one NVIDIADriver, written as the node label
  ``nvidia.com/gpu-operator.driver.owner=<name>``. A non-default NVIDIADriver
  whose ``nodeSelector`` matches the node wins; otherwise the one
  ``default: true`` NVIDIADriver takes it. A node two non-default NVIDIADrivers
  select is owned by neither (fail closed);
- **conflicts**: two non-default NVIDIADrivers that select the same GPU node
  conflict (``ConflictingNodeSelector``, "multiple NVIDIADrivers match the same
  node <node>: [a b]"). NVIDIA reports it on every NVIDIADriver of the cluster
  while any two overlap; we report it on the ones that overlap only;
- **pools**: an NVIDIADriver's nodes grouped by OS (``system-os_release.ID`` and
  ``VERSION_ID``) and, with precompiled drivers, by kernel
  (``kernel-version.full``); on OpenShift (without precompiled drivers) by RHCOS
  release (``system-os_release.OSTREE_VERSION``). Each pool gets one driver
  DaemonSet, whose nodeSelector is the pool's: the NVIDIADriver's nodeSelector,
  GPU present, the owner label, the OS ID, the OS version (its major,
  ``VERSION_ID.major``, for ol, rocky and rhel, whose image tags carry only the
  major) and the kernel. A node without the NFD labels its pool needs is left
  out (and named in the status).

Names (§6.1): the DaemonSet is ``nvidia-<driverType>-driver-<osTag>-<hash>``,
the hash NVIDIA's short hash of the CR's UID (plus ``-<kernel>`` for
precompiled pools, ``-<rhcos version>`` for OpenShift pools), the prefix cut so the
name fits 63 characters; the
ServiceAccount and RBAC are ``nvidia-<driverType>-driver-<cr>-<osTag>``
(``nvidia-vgpu-manager-<cr>-<osTag>`` for ``vgpu-host-manager``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from manifests.hashing import short_hash
from platforms.gpu.facts import (
    GPU_PRESENT_LABEL,
    KERNEL_LABEL,
    OS_ID_LABEL,
    OS_VERSION_LABEL,
    GPUNode,
)
from platforms.gpu.images import sanitize_kernel

DRIVER_OWNER_LABEL: Final = "nvidia.com/gpu-operator.driver.owner"
APP_NAME_MAX: Final = 63
OBJECT_NAME_MAX: Final = 253
OS_MAJOR_LABEL: Final = "feature.node.kubernetes.io/system-os_release.VERSION_ID.major"
OSTREE_LABEL: Final = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"

__all__ = [
    "APP_NAME_MAX",
    "DRIVER_OWNER_LABEL",
    "DriverSelector",
    "NodePool",
    "app_name",
    "assign_owners",
    "conflicts",
    "driver_name",
    "node_pools",
    "selects",
]


@dataclass(frozen=True)
class DriverSelector:
    """What ownership needs of one NVIDIADriver: its name, nodeSelector and ``default``."""

    name: str
    node_selector: Mapping[str, str] = field(default_factory=dict)
    default: bool = False


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether a GPU node with ``labels`` matches ``selector`` (an equality nodeSelector)."""
    if labels.get(GPU_PRESENT_LABEL) != "true":
        return False
    return all(labels.get(k) == v for k, v in selector.items())


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    meta = node.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    return labels


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def conflicts(
    drivers: Sequence[DriverSelector], nodes: Iterable[Mapping[str, Any]]
) -> dict[str, str]:
    """NVIDIADriver name -> the conflict message, for the non-default ones that overlap.

    The message names the first node (by name) two or more of them select, and
    those NVIDIADrivers sorted, in NVIDIA's words.
    """
    out: dict[str, str] = {}
    candidates = [d for d in drivers if not d.default]
    for node in sorted(nodes, key=_name):
        labels = _labels(node)
        owners = sorted(d.name for d in candidates if selects(d.node_selector, labels))
        if len(owners) < 2:
            continue
        message = f"multiple NVIDIADrivers match the same node {_name(node)}: [{' '.join(owners)}]"
        for owner in owners:
            out.setdefault(owner, message)
    return out


def assign_owners(
    drivers: Sequence[DriverSelector], nodes: Iterable[Mapping[str, Any]]
) -> dict[str, str | None]:
    """GPU node name -> the NVIDIADriver that owns it (None: none; a conflict keeps the label).

    Non-GPU nodes are left out. With more than one default NVIDIADriver none of
    them owns anything (each reports the error).
    """
    defaults = [d for d in drivers if d.default]
    default = defaults[0].name if len(defaults) == 1 else None
    candidates = [d for d in drivers if not d.default]
    out: dict[str, str | None] = {}
    for node in nodes:
        labels = _labels(node)
        if labels.get(GPU_PRESENT_LABEL) != "true":
            continue
        matching = [d.name for d in candidates if selects(d.node_selector, labels)]
        if len(matching) == 1:
            out[_name(node)] = matching[0]
        elif not matching:
            out[_name(node)] = default
        else:
            # A conflict changes nothing: the node keeps the owner it had (if any),
            # so its running driver is not taken away while the conflict lasts.
            out[_name(node)] = labels.get(DRIVER_OWNER_LABEL) or None
    return out


@dataclass(frozen=True)
class NodePool:
    """A set of nodes one driver DaemonSet serves (see the module docstring)."""

    os_id: str
    os_version: str
    kernel: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    nodes: tuple[str, ...] = ()
    first: GPUNode | None = None
    """A node of the pool (the OS-dependent parts of the render read it)."""
    rhcos: str = ""
    """The RHCOS (OSTree) release of an OpenShift pool ("" elsewhere)."""

    @property
    def os_tag(self) -> str:
        """``<ID><VERSION_ID>`` (major only for ol, rocky and rhel), as in image tags."""
        return GPUNode(name="", os_id=self.os_id, os_version=self.os_version).os_tag

    @property
    def name(self) -> str:
        """``<osTag>``, ``<osTag>-<sanitized kernel>`` for a precompiled pool, the RHCOS
        release for an OpenShift one."""
        if self.rhcos:
            return self.rhcos
        if self.kernel:
            return f"{self.os_tag}-{sanitize_kernel(self.kernel)}"
        return self.os_tag


def node_pools(
    owner: str,
    nodes: Iterable[Mapping[str, Any]],
    owners: Mapping[str, str | None],
    *,
    precompiled: bool,
    selector: Mapping[str, str] | None = None,
    openshift: bool = False,
) -> tuple[list[NodePool], list[str]]:
    """The pools of the GPU nodes ``owners`` (``assign_owners``) gives to ``owner``, sorted
    by pool name, and the names of its nodes left out for missing NFD labels.
    ``selector`` is the NVIDIADriver's own nodeSelector (part of every pool's)."""
    grouped: dict[tuple[str, str, str, str], list[GPUNode]] = {}
    missing: list[str] = []
    rhcos_pools = openshift and not precompiled
    for node in sorted(nodes, key=_name):
        if owners.get(_name(node)) != owner:
            continue
        gpu = GPUNode.from_node(node)
        rhcos = gpu.labels.get(OSTREE_LABEL, "") if rhcos_pools else ""
        major = "" if gpu.os_tag.endswith(gpu.os_version) else gpu.labels.get(OS_MAJOR_LABEL, "")
        if (
            not gpu.os_id
            or not gpu.os_version
            or (precompiled and not gpu.kernel)
            or (rhcos_pools and not rhcos)
            or (not gpu.os_tag.endswith(gpu.os_version) and not major)
        ):
            missing.append(gpu.name)
            continue
        # one pool per OS tag (per kernel, per RHCOS release), as NVIDIA names its pools
        key = (gpu.os_id, gpu.os_tag, gpu.kernel if precompiled else "", rhcos)
        grouped.setdefault(key, []).append(gpu)
    pools: list[NodePool] = []
    for (os_id, _tag, kernel, rhcos), members in grouped.items():
        os_version = members[0].os_version
        pool_selector = {
            **(selector or {}),
            GPU_PRESENT_LABEL: "true",
            DRIVER_OWNER_LABEL: owner,
            OS_ID_LABEL: os_id,
        }
        first = members[0]
        if first.os_tag.endswith(os_version):
            pool_selector[OS_VERSION_LABEL] = os_version
        else:
            pool_selector[OS_MAJOR_LABEL] = first.labels.get(OS_MAJOR_LABEL, "")
        if kernel:
            pool_selector[KERNEL_LABEL] = kernel
        if rhcos:
            pool_selector[OSTREE_LABEL] = rhcos
        pools.append(
            NodePool(
                os_id=os_id,
                os_version=os_version,
                kernel=kernel,
                node_selector=pool_selector,
                nodes=tuple(n.name for n in members),
                first=first,
                rhcos=rhcos,
            )
        )
    pools.sort(key=lambda p: p.name)
    return pools, missing


def app_name(driver_type: str, uid: str, pool: NodePool) -> str:
    """The DaemonSet name: ``nvidia-<driverType>-driver-<osTag>-<hash>`` (≤ 63 characters)."""
    prefix = f"nvidia-{driver_type}-driver-{pool.os_tag}"
    if pool.kernel:
        digest = short_hash(f"{uid}-{pool.kernel}")
    elif pool.rhcos:
        digest = short_hash(f"{uid}-{pool.rhcos}")
    else:
        digest = short_hash(uid)
    name = f"{prefix}-{digest}"
    if len(name) > APP_NAME_MAX:
        name = f"{prefix[: APP_NAME_MAX - len(digest) - 1]}-{digest}"
    return name


def driver_name(driver_type: str, cr_name: str, pool: NodePool) -> str:
    """The ServiceAccount and RBAC name of a pool (≤ 253 characters)."""
    if driver_type == "vgpu-host-manager":
        name = f"nvidia-vgpu-manager-{cr_name}-{pool.os_tag}"
    else:
        name = f"nvidia-{driver_type}-driver-{cr_name}-{pool.os_tag}"
    return name[:OBJECT_NAME_MAX]
