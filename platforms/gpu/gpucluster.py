"""GPUCluster (nvidia.com/v1alpha1) on the kind contract: four states rendered, readiness judged.

``render_states`` renders NVIDIA's four states in order (``state-dra-driver``,
``state-dcgm``, ``state-dcgm-exporter``, ``state-dra-validation``); a disabled
state renders nothing, so the skeleton prunes what it rendered before. A state
that cannot be rendered (the DRA API not served, a bad image) fails the pass
with NVIDIA's words: ``Error syncing state <state>: <error>``, reason
``ReconcileFailed``.

``readiness`` is NVIDIA's (gpucluster.md §3): every DaemonSet of every state
ready (desired == available == updated, or nothing desired once the DaemonSet
controller observed it) gives ``ready`` / ``Reconciled`` "All resources have
been successfully reconciled", rechecked every minute; otherwise ``notReady`` /
``OperandNotReady`` "Waiting for operand pods to be ready" (we name the
DaemonSets), rechecked after 5 s. A ClusterPolicy beside it is
``PrerequisiteNotMet`` (the controller decides it from the cluster; the text
is here).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from api.nvidia.v1alpha1.gpucluster import STATE_NOT_READY, STATE_READY, GPUCluster
from manifests.hashing import stamped_copy
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from manifests.meta import owner_reference
from platforms.capabilities import GVK, SERVICE_MONITOR, Capabilities
from platforms.contract import Observed, Readiness, ReconcileError
from platforms.gpu import gpucluster_dra_driver, gpucluster_operands
from platforms.gpu.errors import RenderError
from platforms.gpu.gpucluster_common import GPUClusterFacts
from platforms.gpu.readiness import daemonset_ready

__all__ = [
    "API_VERSION",
    "KIND",
    "OWNED_KINDS",
    "REASON_OPERAND_NOT_READY",
    "REASON_PREREQUISITE_NOT_MET",
    "REASON_RECONCILED",
    "REASON_RECONCILE_FAILED",
    "STATES",
    "GPUClusterContract",
    "gpucluster_conflict_readiness",
    "prerequisite_readiness",
    "render_states",
]

API_VERSION: Final = "nvidia.com/v1alpha1"
KIND: Final = "GPUCluster"
REASON_RECONCILED: Final = "Reconciled"
REASON_RECONCILE_FAILED: Final = "ReconcileFailed"
REASON_OPERAND_NOT_READY: Final = "OperandNotReady"
REASON_PREREQUISITE_NOT_MET: Final = "PrerequisiteNotMet"
READY_MESSAGE: Final = "All resources have been successfully reconciled"
NOT_READY_MESSAGE: Final = "Waiting for operand pods to be ready"
READY_REQUEUE: Final = 60.0
NOT_READY_REQUEUE: Final = 5.0
PREREQUISITE_REQUEUE: Final = 60.0

Builder = Callable[[GPUCluster, GPUClusterFacts], list[dict[str, Any]]]
STATES: Final[tuple[tuple[str, Builder], ...]] = (
    (gpucluster_dra_driver.STATE, gpucluster_dra_driver.build),
    (gpucluster_operands.DCGM_STATE, gpucluster_operands.build_dcgm),
    (gpucluster_operands.EXPORTER_STATE, gpucluster_operands.build_exporter),
    (gpucluster_operands.VALIDATION_STATE, gpucluster_operands.build_validation),
)

_RBAC = "rbac.authorization.k8s.io/v1"
_ADM = "admissionregistration.k8s.io/v1"
OWNED_KINDS: Final[tuple[GVK, ...]] = (
    ("v1", "ServiceAccount"),
    (_RBAC, "Role"),
    (_RBAC, "RoleBinding"),
    (_RBAC, "ClusterRole"),
    (_RBAC, "ClusterRoleBinding"),
    ("resource.k8s.io/v1", "DeviceClass"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    ("v1", "Service"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "Deployment"),
    (_ADM, "ValidatingAdmissionPolicy"),
    (_ADM, "ValidatingAdmissionPolicyBinding"),
)


def render_states(cr: GPUCluster, facts: GPUClusterFacts) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each state's objects as NVIDIA renders them (no owner, labels or hash added);
    RenderError names the state that failed."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for state, build in STATES:
        try:
            objs = build(cr, facts)
        except RenderError as err:
            raise RenderError(err.message, state=state) from None
        if state == gpucluster_dra_driver.STATE and not objs:
            raise RenderError("no objects rendered for the DRA driver state", state=state)
        out.append((state, objs))
    return out


def gpucluster_conflict_readiness(cluster: str) -> Readiness:
    """What a ClusterPolicy reports while a GPUCluster exists (it deploys nothing)."""
    return Readiness(
        state=STATE_NOT_READY,
        reason=REASON_RECONCILE_FAILED,
        message=f'conflicting GPUCluster resource "{cluster}" detected; ClusterPolicy and '
        "GPUCluster cannot co-exist",
    )


def prerequisite_readiness(policy: str) -> Readiness:
    """A ClusterPolicy exists: the GPUCluster deploys nothing."""
    return Readiness(
        state=STATE_NOT_READY,
        reason=REASON_PREREQUISITE_NOT_MET,
        message=f'A ClusterPolicy CR "{policy}" exists; a ClusterPolicy CR and GPUCluster CR '
        "may not exist at the same time",
        requeue_after=PREREQUISITE_REQUEUE,
    )


class GPUClusterContract:
    """What the GPUCluster becomes, and when it is ready (see the module docstring)."""

    api_version = API_VERSION
    kind = KIND

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        if capabilities.has(SERVICE_MONITOR):
            return (*OWNED_KINDS, SERVICE_MONITOR)
        return OWNED_KINDS

    def render(self, cr: GPUCluster, facts: GPUClusterFacts) -> list[dict[str, Any]]:
        try:
            states = render_states(cr, facts)
        except RenderError as err:
            raise ReconcileError(
                f"Error syncing state {err.state}: {err.message}", reason=REASON_RECONCILE_FAILED
            ) from None
        owner = owner_reference(
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "metadata": {"name": cr.metadata.name or "", "uid": cr.metadata.uid or ""},
            }
        )
        return [_finish(obj, owner) for _state, objs in states for obj in objs]

    def readiness(self, cr: GPUCluster, facts: GPUClusterFacts, observed: Observed) -> Readiness:
        waiting = sorted(
            key[2]
            for key, obj in observed.objects.items()
            if key[1] == "DaemonSet" and (key in observed.created or not daemonset_ready(obj)[0])
        )
        if waiting:
            return Readiness(
                state=STATE_NOT_READY,
                reason=REASON_OPERAND_NOT_READY,
                message=f"{NOT_READY_MESSAGE}; DaemonSets not ready: [{' '.join(waiting)}]",
                requeue_after=NOT_READY_REQUEUE,
            )
        return Readiness(
            state=STATE_READY,
            reason=REASON_RECONCILED,
            message=READY_MESSAGE,
            ready=True,
            requeue_after=READY_REQUEUE,
        )


def _finish(obj: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    meta["ownerReferences"] = [owner]
    return stamped_copy(obj)
