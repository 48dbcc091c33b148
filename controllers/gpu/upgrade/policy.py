"""The upgrade policy the plan reads: NVIDIA's ``upgradePolicy`` plus the operator's fixed parts.

``UpgradePolicy.from_spec`` turns ClusterPolicy's (or an NVIDIADriver's)
``DriverUpgradePolicySpec`` into plain values. The fixed parts are what
NVIDIA's main.go wires into the state manager (§7): pod deletion enabled with
the GPU pod filter, validation by ``app=nvidia-operator-validator`` with its
600 s timeout, and the restart-only predicate. ``stall_after_seconds`` is
ours: how long a node may sit in one non-final state before it is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.nvidia.v1.clusterpolicy import DriverUpgradePolicySpec
from controllers.gpu.upgrade.consts import (
    DRIVER_POD_LABEL,
    VALIDATION_TIMEOUT_SECONDS,
    VALIDATOR_POD_LABEL,
)

__all__ = ["DEFAULT_STALL_SECONDS", "UpgradePolicy"]

DEFAULT_STALL_SECONDS = 1800.0


@dataclass(frozen=True)
class UpgradePolicy:
    """Everything ``plan`` needs to know about how to upgrade (see the module docstring)."""

    max_parallel_upgrades: int = 1
    max_unavailable: int | str | None = "25%"
    wait_for_jobs_selector: str | None = None
    wait_for_jobs_timeout: int = 0
    pod_deletion_enabled: bool = True
    pod_deletion_force: bool = False
    pod_deletion_timeout: int = 300
    pod_deletion_delete_empty_dir: bool = False
    drain_enabled: bool = False
    drain_force: bool = False
    drain_pod_selector: str | None = None
    drain_timeout: int = 300
    drain_delete_empty_dir: bool = False
    driver_pod_selector: str = DRIVER_POD_LABEL
    validator_pod_selector: str | None = VALIDATOR_POD_LABEL
    validation_timeout: int = VALIDATION_TIMEOUT_SECONDS
    stall_after_seconds: float = DEFAULT_STALL_SECONDS

    @classmethod
    def from_spec(
        cls,
        spec: DriverUpgradePolicySpec,
        *,
        driver_pod_selector: str = DRIVER_POD_LABEL,
        stall_after_seconds: float = DEFAULT_STALL_SECONDS,
    ) -> UpgradePolicy:
        """The policy of a ClusterPolicy's or NVIDIADriver's ``upgradePolicy``."""
        deletion = spec.pod_deletion
        wait = spec.wait_for_completion
        drain = spec.drain
        return cls(
            max_parallel_upgrades=spec.max_parallel_upgrades,
            max_unavailable=spec.max_unavailable,
            wait_for_jobs_selector=(wait.pod_selector or None) if wait else None,
            wait_for_jobs_timeout=wait.timeout_seconds if wait else 0,
            pod_deletion_force=deletion.force if deletion else False,
            pod_deletion_timeout=deletion.timeout_seconds if deletion else 300,
            pod_deletion_delete_empty_dir=deletion.delete_empty_dir if deletion else False,
            drain_enabled=drain.enable if drain else False,
            drain_force=drain.force if drain else False,
            drain_pod_selector=(drain.pod_selector or None) if drain else None,
            drain_timeout=drain.timeout_seconds if drain else 300,
            drain_delete_empty_dir=drain.delete_empty_dir if drain else False,
            driver_pod_selector=driver_pod_selector,
            stall_after_seconds=stall_after_seconds,
        )
