"""Node labels, annotations and states of the driver upgrade (gpu-operator.md §4.1, §4.2).

The keys are NVIDIA's (k8s-operator-libs with driver name ``gpu``), so a node
upgraded by NVIDIA's operator and one upgraded by nimctl look the same to
users and tooling. Keys under ``nimctl.io/`` are ours: timers NVIDIA keeps in
memory (drain, pod deletion), the time a node entered its state and why it
failed, so a restart of the operator does not reset them, a stalled node can
be named and a failed one says what blocked it.
"""

from __future__ import annotations

from typing import Final

STATE_LABEL: Final = "nvidia.com/gpu-driver-upgrade-state"
SKIP_LABEL: Final = "nvidia.com/gpu-driver-upgrade.skip"
DRAIN_SKIP_LABEL: Final = "nvidia.com/gpu-driver-upgrade-drain.skip"
AUTO_UPGRADE_ANNOTATION: Final = "nvidia.com/gpu-driver-upgrade-enabled"
SAFE_LOAD_ANNOTATION: Final = "nvidia.com/gpu-driver-upgrade.driver-wait-for-safe-load"
INITIAL_UNSCHEDULABLE_ANNOTATION: Final = (
    "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
)
WAIT_FOR_JOBS_START_ANNOTATION: Final = (
    "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time"
)
VALIDATION_START_ANNOTATION: Final = "nvidia.com/gpu-driver-upgrade-validation-start-time"
UPGRADE_REQUESTED_ANNOTATION: Final = "nvidia.com/gpu-driver-upgrade-requested"
REQUESTOR_MODE_ANNOTATION: Final = "nvidia.com/gpu-driver-upgrade-requestor-mode"

POD_DELETION_START_ANNOTATION: Final = "nimctl.io/gpu-driver-upgrade-pod-deletion-start-time"
DRAIN_START_ANNOTATION: Final = "nimctl.io/gpu-driver-upgrade-drain-start-time"
STATE_SINCE_ANNOTATION: Final = "nimctl.io/gpu-driver-upgrade-state-since"
FAILED_REVISION_ANNOTATION: Final = "nimctl.io/gpu-driver-upgrade-failed-revision"
FAILED_CAUSE_ANNOTATION: Final = "nimctl.io/gpu-driver-upgrade-failed-cause"
"""Why the node entered upgrade-failed (the drain's blocking pod and PDB, the driver pod),
kept so the node's report and the ``DriverUpgrade`` condition still name it afterwards."""
MAX_FAILED_CAUSE: Final = 1000

DRIVER_POD_LABEL: Final = "app=nvidia-driver-daemonset"
DRIVER_COMPONENT_LABEL: Final = "app.kubernetes.io/component=nvidia-driver"
VALIDATOR_POD_LABEL: Final = "app=nvidia-operator-validator"
REVISION_HASH_LABEL: Final = "controller-revision-hash"
CONFIG_DIGEST_ENV: Final = "DRIVER_CONFIG_DIGEST"
DRIVER_OWNER_LABEL: Final = "nvidia.com/gpu-operator.driver.owner"

VALIDATION_TIMEOUT_SECONDS: Final = 600
MAX_DRIVER_RESTARTS: Final = 10
REQUEUE_SECONDS: Final = 120.0

UNKNOWN: Final = ""
DONE: Final = "upgrade-done"
REQUIRED: Final = "upgrade-required"
CORDON_REQUIRED: Final = "cordon-required"
WAIT_FOR_JOBS_REQUIRED: Final = "wait-for-jobs-required"
POD_DELETION_REQUIRED: Final = "pod-deletion-required"
DRAIN_REQUIRED: Final = "drain-required"
NODE_MAINTENANCE_REQUIRED: Final = "node-maintenance-required"
POST_MAINTENANCE_REQUIRED: Final = "post-maintenance-required"
POD_RESTART_REQUIRED: Final = "pod-restart-required"
VALIDATION_REQUIRED: Final = "validation-required"
UNCORDON_REQUIRED: Final = "uncordon-required"
FAILED: Final = "upgrade-failed"

ORDER: Final = (
    UNKNOWN,
    DONE,
    REQUIRED,
    CORDON_REQUIRED,
    WAIT_FOR_JOBS_REQUIRED,
    POD_DELETION_REQUIRED,
    DRAIN_REQUIRED,
    NODE_MAINTENANCE_REQUIRED,
    POST_MAINTENANCE_REQUIRED,
    POD_RESTART_REQUIRED,
    FAILED,
    VALIDATION_REQUIRED,
    UNCORDON_REQUIRED,
)
"""``ApplyState``'s fixed processing order (§4.2)."""

IDLE_STATES: Final = frozenset({UNKNOWN, DONE, REQUIRED})
"""States that are not "in progress" for the slot arithmetic (§4.3)."""
FINAL_STATES: Final = frozenset({UNKNOWN, DONE})
"""States in which a node waits for nothing."""
