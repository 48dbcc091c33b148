"""NVIDIADriver (nvidia.com/v1alpha1) on the kind contract: pools rendered, readiness judged.

``render`` is ``nvidiadriver_render.render_driver``: one driver DaemonSet per
node pool (plus the pools' RBAC and one startup-probe ConfigMap); a pool that
is gone leaves its DaemonSet out, so the skeleton prunes it. ``readiness``
follows NVIDIA's NVIDIADriver controller (gpu-operator.md §6.1):

- no node to install on: ``notReady``, ``ReconcileFailed``, "no nodes matching
  the given node selector for <name>" (we add the nodes left out for missing
  NFD labels);
- a DaemonSet not ready (NVIDIA's state-skeleton rule: every desired pod
  available and updated; or nothing desired nor running once the DaemonSet
  controller observed it): ``notReady``, ``DriverNotReady``, "Waiting for driver
  pod to be ready", requeue after 5 s; we name the DaemonSet;
- otherwise ``ready``, ``Reconciled``, "All resources have been successfully
  reconciled".

The states where nothing is rendered (disabled by ClusterPolicy, conflicting
selectors, several default NVIDIADrivers) are decided by the controller from
the cluster (``Blocked``); their texts are here.
"""

from __future__ import annotations

from typing import Any, Final

from api.nvidia.v1.clusterpolicy import (
    REASON_CONFLICTING_NODE_SELECTOR,
    REASON_DRIVER_NOT_READY,
    REASON_RECONCILE_FAILED,
    REASON_RECONCILED,
)
from api.nvidia.v1alpha1.nvidiadriver import (
    STATE_DISABLED,
    STATE_NOT_READY,
    STATE_READY,
    NVIDIADriver,
)
from platforms.capabilities import GVK, SECURITY_CONTEXT_CONSTRAINTS, Capabilities
from platforms.contract import Observed, Readiness, ReconcileError
from platforms.gpu.errors import RenderError
from platforms.gpu.nvidiadriver_render import NVIDIADriverFacts, pools_of, render_driver
from platforms.gpu.readiness import daemonset_blocker, daemonset_ready

API_VERSION: Final = "nvidia.com/v1alpha1"
KIND: Final = "NVIDIADriver"
NOT_READY_REQUEUE: Final = 5.0
READY_MESSAGE: Final = "All resources have been successfully reconciled"
NOT_READY_MESSAGE: Final = "Waiting for driver pod to be ready"
DISABLED_MESSAGE: Final = "useNvidiaDriverCRD is not enabled in ClusterPolicy"
MULTIPLE_DEFAULTS_MESSAGE: Final = "multiple default NVIDIADrivers are not allowed"

OWNED_KINDS: Final[tuple[GVK, ...]] = (
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("v1", "ConfigMap"),
    ("apps/v1", "DaemonSet"),
)

__all__ = [
    "API_VERSION",
    "DISABLED_MESSAGE",
    "KIND",
    "MULTIPLE_DEFAULTS_MESSAGE",
    "NOT_READY_REQUEUE",
    "NVIDIADriverContract",
    "conflict_readiness",
    "disabled_readiness",
    "multiple_defaults_readiness",
]


def disabled_readiness() -> Readiness:
    """A ClusterPolicy manages the driver itself: NVIDIADriver does nothing."""
    return Readiness(state=STATE_DISABLED, reason=REASON_RECONCILED, message=DISABLED_MESSAGE)


def conflict_readiness(message: str) -> Readiness:
    """Another NVIDIADriver selects some of the same nodes: nothing is rendered."""
    return Readiness(
        state=STATE_NOT_READY, reason=REASON_CONFLICTING_NODE_SELECTOR, message=message
    )


def multiple_defaults_readiness(names: list[str]) -> Readiness:
    """More than one ``default: true`` NVIDIADriver: none of them owns a node."""
    return Readiness(
        state=STATE_NOT_READY,
        reason=REASON_RECONCILE_FAILED,
        message=f"{MULTIPLE_DEFAULTS_MESSAGE}: [{' '.join(sorted(names))}]",
    )


class NVIDIADriverContract:
    """What an NVIDIADriver becomes, and when it is ready (see the module docstring)."""

    api_version = API_VERSION
    kind = KIND

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        # On OpenShift (SecurityContextConstraints served) each pool also has its SCC.
        if capabilities.has(SECURITY_CONTEXT_CONSTRAINTS):
            return (*OWNED_KINDS, SECURITY_CONTEXT_CONSTRAINTS)
        return OWNED_KINDS

    def render(self, cr: NVIDIADriver, facts: NVIDIADriverFacts) -> list[dict[str, Any]]:
        try:
            return render_driver(cr, facts)
        except RenderError as err:
            raise ReconcileError(
                f"Error syncing state state-driver: {err.message}", reason=REASON_RECONCILE_FAILED
            ) from None

    def readiness(
        self, cr: NVIDIADriver, facts: NVIDIADriverFacts, observed: Observed
    ) -> Readiness:
        pools, missing = pools_of(cr, facts)
        if not pools:
            message = f"no nodes matching the given node selector for {cr.metadata.name}"
            if missing:
                message += (
                    f"; nodes without the NFD OS (or kernel) labels: {', '.join(missing[:5])}"
                )
            return Readiness(state=STATE_NOT_READY, reason=REASON_RECONCILE_FAILED, message=message)
        waiting = sorted(
            (
                (key[2], obj)
                for key, obj in observed.objects.items()
                if key[1] == "DaemonSet"
                and (key in observed.created or not daemonset_ready(obj)[0])
            ),
            key=lambda pair: pair[0],
        )
        if waiting:
            message = (
                f"{NOT_READY_MESSAGE}; DaemonSets not ready: [{' '.join(n for n, _ in waiting)}]"
            )
            # Beyond NVIDIA's words: the driver pod (and node) that holds it back.
            found = next(
                (b for _, obj in waiting if (b := daemonset_blocker(obj, facts.pods)) is not None),
                None,
            )
            if found is not None:
                message += f": {found.message}"
            return Readiness(
                state=STATE_NOT_READY,
                reason=REASON_DRIVER_NOT_READY,
                message=message,
                requeue_after=NOT_READY_REQUEUE,
                blocker=found.key if found is not None else None,
            )
        return Readiness(
            state=STATE_READY, reason=REASON_RECONCILED, message=READY_MESSAGE, ready=True
        )
