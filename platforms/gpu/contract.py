"""ClusterPolicy on the kind contract: the 20 states flattened, their readiness aggregated.

``render`` applies every state on every pass (gpu-operator.md §2.5): the
objects of the enabled states, in NVIDIA's order; a disabled state contributes
nothing, so the skeleton prunes (deletes) what it had. ``readiness`` walks the
same states and collects the ones whose DaemonSets are not ready, as NVIDIA's
``statesNotReady``; ordering between operands happens on the node (deploy
labels and validation files), never here. The result, in NVIDIA's words:

- some state not ready: ``notReady``, ``OperandNotReady``, "ClusterPolicy is
  not ready; states not ready: [state-driver ...]", requeue after 5 s. We add
  which DaemonSet and why (§9.1: users could not tell what was stuck);
- with ``driver.useNvidiaDriverCRD``, a node an NVIDIADriver owns
  (``nvidia.com/gpu-operator.driver.owner``) whose upgrade state is neither
  unset nor ``upgrade-done`` (pending, in progress, failed, or unknown to us),
  unless it carries ``nvidia.com/gpu-driver-upgrade.skip=true``: ``notReady``,
  ``OperandNotReady``, "ClusterPolicy is not ready; [states not ready: [...];]
  NVIDIADriver upgrade has not completed; one or more NVIDIADriver-owned Nodes
  are marked pending, in-progress, or failed", then (ours) how many nodes (the
  ``DriverUpgrade`` condition says what each waits for). With no state not
  ready there is no periodic requeue: the Node label
  events bring the next pass, as NVIDIA's;
- a node NFD found a GPU on is not labelled ``gpu.present`` yet: ``notReady``
  (NVIDIA reports ``ready`` for the nodes labelled so far, or ``NoGPUNodes``);
- no node carries an NFD label: ``ready``, ``NFDLabelsMissing``, requeue 45 s;
- no GPU node: ``ready``, ``NoGPUNodes``;
- otherwise ``ready``, ``Reconciled``.

Pure: the driver pods and ControllerRevisions the OnDelete check reads come
in ``PolicyFacts``, gathered from the cache by ``controllers.gpu.clusterpolicy``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from api.nvidia.v1.clusterpolicy import (
    REASON_NFD_LABELS_MISSING,
    REASON_NO_GPU_NODES,
    REASON_OPERAND_NOT_READY,
    REASON_RECONCILE_FAILED,
    REASON_RECONCILED,
    STATE_NOT_READY,
    STATE_READY,
    ClusterPolicy,
)
from nimctl_runtime.meta import Obj
from platforms.blockers import Blocker
from platforms.capabilities import GVK, SECURITY_CONTEXT_CONSTRAINTS, Capabilities
from platforms.contract import Observed, Readiness, ReconcileError, observed_key
from platforms.gpu import ClusterFacts, RenderError, StateRender
from platforms.gpu import owned_kinds as gpu_owned_kinds
from platforms.gpu import render as render_states
from platforms.gpu.facts import PROMETHEUS_RULE, SERVICE_MONITOR
from platforms.gpu.readiness import daemonset_blocker, daemonset_ready

API_VERSION: Final = "nvidia.com/v1"
KIND: Final = "ClusterPolicy"
DRIVER_STATE: Final = "state-driver"
DRIVER_DAEMONSET: Final = "nvidia-driver-daemonset"
DRIVER_OWNER_LABEL: Final = "nvidia.com/gpu-operator.driver.owner"
UPGRADE_STATE_LABEL: Final = "nvidia.com/gpu-driver-upgrade-state"
UPGRADE_SKIP_LABEL: Final = "nvidia.com/gpu-driver-upgrade.skip"
UPGRADE_DONE: Final = "upgrade-done"
UPGRADE_INCOMPLETE_REASONS: Final = (
    "NVIDIADriver upgrade has not completed",
    "one or more NVIDIADriver-owned Nodes are marked pending, in-progress, or failed",
)
NOT_READY_REQUEUE: Final = 5.0
NFD_MISSING_REQUEUE: Final = 45.0
READY_MESSAGE: Final = "ClusterPolicy is ready as all resources have been successfully reconciled"
NFD_MISSING_MESSAGE: Final = "No NFD labels found"
NO_GPU_NODES_MESSAGE: Final = "No GPU nodes found"
UNLABELLED_MESSAGE: Final = (
    "ClusterPolicy is not ready; GPU nodes found by NFD wait for node labelling "
    "(nvidia.com/gpu.present=true)"
)


__all__ = [
    "API_VERSION",
    "KIND",
    "NFD_MISSING_REQUEUE",
    "NOT_READY_REQUEUE",
    "ClusterPolicyContract",
    "PolicyFacts",
    "incomplete_driver_upgrades",
    "not_ready_message",
]


@dataclass(frozen=True)
class PolicyFacts:
    """What a ClusterPolicy is rendered and judged against."""

    cluster: ClusterFacts
    driver_pods: tuple[Mapping[str, Any], ...] = ()
    """Driver pods of the operator namespace (the OnDelete readiness check)."""
    revisions: tuple[Mapping[str, Any], ...] = ()
    """ControllerRevisions of the operator namespace."""
    unlabelled_gpu_nodes: int = 0
    """Nodes NFD found a GPU on that node labelling has not marked ``gpu.present`` yet."""
    upgrading_nodes: tuple[tuple[str, str], ...] = ()
    """``incomplete_driver_upgrades`` of the nodes: (node, upgrade state), by name."""


def incomplete_driver_upgrades(nodes: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    """NVIDIADriver-owned nodes whose driver upgrade is pending, in progress or failed.

    A node counts when it carries the driver owner label, its upgrade state is
    neither unset nor ``upgrade-done`` (an unknown state counts), and it is not
    skip-labelled (``nvidia.com/gpu-driver-upgrade.skip=true``).
    """
    out: list[tuple[str, str]] = []
    for node in nodes:
        meta = node.get("metadata") or {}
        labels: Mapping[str, str] = meta.get("labels") or {}
        state = labels.get(UPGRADE_STATE_LABEL, "")
        if (
            labels.get(DRIVER_OWNER_LABEL)
            and state not in ("", UPGRADE_DONE)
            and labels.get(UPGRADE_SKIP_LABEL) != "true"
        ):
            out.append((str(meta.get("name", "")), state))
    return tuple(sorted(out))


def not_ready_message(states: list[str], details: list[str], reasons: Iterable[str] = ()) -> str:
    """NVIDIA's message (the states not ready, then its other reasons), then ours: which
    DaemonSet of each state holds it and why, which nodes are mid-upgrade."""
    parts = ["ClusterPolicy is not ready"]
    if states:
        parts.append(f"states not ready: [{' '.join(states)}]")
    parts.extend(reasons)
    parts.extend(details)
    return "; ".join(parts)


def _upgrading_detail(nodes: tuple[tuple[str, str], ...]) -> str:
    """How many nodes hold the policy; which state each is in changes too often for a
    status message (the DriverUpgrade condition and the node Events say it)."""
    return f"{len(nodes)} node(s) mid-upgrade; the DriverUpgrade condition says what each waits for"


def _stale_driver_pods(state: StateRender, facts: PolicyFacts, observed: Observed) -> bool:
    """Driver pods of a ClusterPolicy driver DaemonSet the render no longer has (§2.3: the
    state stays not ready until the pods of a replaced driver DaemonSet are gone)."""
    current = set()
    for obj in state.objects:
        live = observed.objects.get(observed_key(obj))
        if obj.get("kind") == "DaemonSet" and live is not None:
            current.add(str((live.get("metadata") or {}).get("uid", "")))
    for pod in facts.driver_pods:
        for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
            if (
                ref.get("controller")
                and ref.get("kind") == "DaemonSet"
                and str(ref.get("name", "")).startswith(DRIVER_DAEMONSET)
                and ref.get("uid") not in current
            ):
                return True
    return False


class ClusterPolicyContract:
    """What a ClusterPolicy becomes, and when it is ready (see the module docstring)."""

    api_version = API_VERSION
    kind = KIND

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        crds = frozenset(g for g in (SERVICE_MONITOR, PROMETHEUS_RULE) if capabilities.has(g))
        # Where SecurityContextConstraints are served (OpenShift) the operands get one each.
        openshift = "" if capabilities.has(SECURITY_CONTEXT_CONSTRAINTS) else None
        facts = ClusterFacts(operator_namespace="", crds=crds, openshift=openshift)
        return tuple(gpu_owned_kinds(facts))

    def __init__(self) -> None:
        # The states of the last (policy, facts) pair: a pass renders, then judges
        # readiness over the same states, so they are rendered once.
        self._last: tuple[ClusterPolicy, PolicyFacts, list[StateRender]] | None = None

    def states(self, cr: ClusterPolicy, facts: PolicyFacts) -> list[StateRender]:
        """Every state, in order; a spec that cannot be rendered is a ReconcileFailed error."""
        last = self._last
        if last is not None and last[0] is cr and last[1] is facts:
            return last[2]
        try:
            states = render_states(cr, facts.cluster)
            self._last = (cr, facts, states)
            return states
        except RenderError as err:
            state = err.state or "clusterpolicy"
            raise ReconcileError(
                f"Failed to reconcile {state}: {err.message}", reason=REASON_RECONCILE_FAILED
            ) from None

    def render(self, cr: ClusterPolicy, facts: PolicyFacts) -> list[Obj]:
        return [
            copy.deepcopy(obj)
            for state in self.states(cr, facts)
            if state.enabled
            for obj in state.objects
        ]

    def readiness(self, cr: ClusterPolicy, facts: PolicyFacts, observed: Observed) -> Readiness:
        not_ready: list[str] = []
        details: list[str] = []
        first: Blocker | None = None
        states = self.states(cr, facts)
        self._last = None  # the pass is over: do not keep its facts (every node's labels)
        for state in states:
            if not state.enabled:
                continue
            for obj in state.objects:
                if obj.get("kind") != "DaemonSet":
                    continue
                key = observed_key(obj)
                if key in observed.created:
                    ok, why = False, "just created"
                else:
                    ok, why = daemonset_ready(
                        observed.objects.get(key),
                        pods=facts.driver_pods,
                        revisions=facts.revisions,
                    )
                if not ok:
                    not_ready.append(state.name)
                    detail = f"{state.name}: DaemonSet {key[2]}: {why}"
                    # Beyond NVIDIA's words: the pod (and node) that holds it back.
                    found = (
                        None
                        if key in observed.created
                        else daemonset_blocker(observed.objects.get(key), facts.driver_pods)
                    )
                    if found is not None:
                        detail = (
                            f"{state.name}: {found.message}"
                            if found.reason == "DaemonSetNotReady"
                            else f"{detail}: {found.message}"
                        )
                        first = first or found
                    details.append(detail)
                    break
            else:
                if state.name == DRIVER_STATE and _stale_driver_pods(state, facts, observed):
                    not_ready.append(state.name)
                    details.append(f"{state.name}: pods of a removed driver DaemonSet still run")
        upgrading = facts.upgrading_nodes if cr.spec.driver.use_nvidia_driver_crd else ()
        if not_ready or upgrading:
            reasons: tuple[str, ...] = ()
            if upgrading:
                reasons = UPGRADE_INCOMPLETE_REASONS
                details.append(_upgrading_detail(upgrading))
            return Readiness(
                state=STATE_NOT_READY,
                reason=REASON_OPERAND_NOT_READY,
                message=not_ready_message(not_ready, details, reasons),
                # Only an operand is polled; an upgrade moves on Node label events.
                requeue_after=NOT_READY_REQUEUE if not_ready else None,
                blocker=first.key if first is not None else None,
            )
        if facts.unlabelled_gpu_nodes:
            return Readiness(
                state=STATE_NOT_READY,
                reason=REASON_OPERAND_NOT_READY,
                message=UNLABELLED_MESSAGE,
                requeue_after=NOT_READY_REQUEUE,
            )
        cluster = facts.cluster
        if not cluster.has_nfd_labels:
            return Readiness(
                state=STATE_READY,
                reason=REASON_NFD_LABELS_MISSING,
                message=NFD_MISSING_MESSAGE,
                ready=True,
                requeue_after=NFD_MISSING_REQUEUE,
            )
        if not cluster.nodes:
            return Readiness(
                state=STATE_READY,
                reason=REASON_NO_GPU_NODES,
                message=NO_GPU_NODES_MESSAGE,
                ready=True,
            )
        return Readiness(
            state=STATE_READY, reason=REASON_RECONCILED, message=READY_MESSAGE, ready=True
        )
