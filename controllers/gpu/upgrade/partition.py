"""The NVIDIADriver path of the upgrade (gpu-operator.md §4.4): one partition per NVIDIADriver.

When NVIDIADriver objects own the drivers (no ClusterPolicy, or one with
``driver.useNvidiaDriverCRD``), the cluster is split by the node label
``nvidia.com/gpu-operator.driver.owner``: each NVIDIADriver upgrades its own
nodes with its own ``upgradePolicy`` (unset: NVIDIA's defaults, auto upgrade
on, one node at a time, 25% unavailable) and its own slots. Driver pods are
found by ``app.kubernetes.io/component=nvidia-driver``; a node's pod is in
sync when it runs the newest revision of the DaemonSet that owns it, so every
pool's DaemonSet decides for its own nodes, and an NVIDIADriver whose spec did
not change leaves its nodes alone. A pod no driver DaemonSet owns (a
ClusterPolicy driver orphaned by the handover) is out of sync: the node is
upgraded onto its NVIDIADriver's DaemonSet.

Pure: ``partitions`` reads the cached NVIDIADrivers, Nodes and DaemonSets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from pydantic import ValidationError

from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriverUpgradePolicySpec
from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade.policy import DEFAULT_STALL_SECONDS, UpgradePolicy
from nimctl_runtime.meta import ObjView, controller_of, dig, name_of

NVIDIADRIVER_API: Final = "nvidia.com/v1alpha1"
NVIDIADRIVER_KIND: Final = "NVIDIADriver"

__all__ = ["NVIDIADRIVER_API", "NVIDIADRIVER_KIND", "DriverPartition", "partitions"]


@dataclass(frozen=True)
class DriverPartition:
    """The nodes one NVIDIADriver owns, its driver DaemonSets and its upgrade policy."""

    owner: str
    nodes: list[ObjView] = field(default_factory=list)
    daemonsets: list[ObjView] = field(default_factory=list)
    policy: UpgradePolicy | None = None
    """None: auto upgrade is off for this NVIDIADriver (its nodes' states are removed)."""
    error: str = ""
    """Why the policy could not be read (the partition is then left alone)."""


def _policy(driver: ObjView, stall_after_seconds: float) -> tuple[UpgradePolicy | None, str]:
    raw = dig(driver, "spec", "upgradePolicy")
    try:
        spec = NVIDIADriverUpgradePolicySpec.model_validate(raw or {})
    except ValidationError as err:
        return None, f"NVIDIADriver {name_of(driver)}: spec.upgradePolicy: {err.errors()[0]['msg']}"
    if not spec.auto_upgrade:
        return None, ""
    policy = UpgradePolicy.from_spec(
        spec,
        driver_pod_selector=c.DRIVER_COMPONENT_LABEL,
        stall_after_seconds=stall_after_seconds,
    )
    return policy, ""


def partitions(
    drivers: Iterable[ObjView],
    nodes: Iterable[ObjView],
    daemonsets: Iterable[ObjView],
    *,
    stall_after_seconds: float = DEFAULT_STALL_SECONDS,
) -> list[DriverPartition]:
    """One partition per NVIDIADriver not being deleted, sorted by name."""
    node_list = list(nodes)
    ds_list = list(daemonsets)
    out: list[DriverPartition] = []
    for driver in sorted(drivers, key=name_of):
        if dig(driver, "metadata", "deletionTimestamp"):
            continue
        owner = name_of(driver)
        owned_nodes = [
            n
            for n in node_list
            if (dig(n, "metadata", "labels") or {}).get(c.DRIVER_OWNER_LABEL) == owner
        ]
        owned_ds = [
            ds
            for ds in ds_list
            if (ref := controller_of(ds)) is not None
            and ref.get("kind") == NVIDIADRIVER_KIND
            and ref.get("name") == owner
        ]
        policy, error = _policy(driver, stall_after_seconds)
        out.append(DriverPartition(owner, owned_nodes, owned_ds, policy, error))
    return out
