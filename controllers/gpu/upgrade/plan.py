"""The driver upgrade as a pure plan: snapshot in, node patches and pod actions out (§4.2, §4.3).

``plan(nodes, pods, daemonsets, policy, now)`` walks the managed nodes state
by state in NVIDIA's fixed order (``consts.ORDER``); a node moves at most one
state per pass, as in NVIDIA's ``ApplyState`` (the restart-only path cordons
and moves in one step, as NVIDIA's does). Every node change of a pass is one
merge patch (labels, annotations, ``spec.unschedulable``); pods are deleted
(GPU pods, driver pods) or evicted (drain) by the executor.

Beyond NVIDIA, the plan also says what every node in a non-final state waits
for (``Plan.waiting``: the slot counts, the pods and PodDisruptionBudgets that
hold a drain, the validator pod and its deadline) and which nodes made no
progress for ``policy.stall_after_seconds`` (``Plan.stalled``); the messages
hold no counters that tick, so reporting them writes only on a change.

Where we deliberately differ from NVIDIA (docs/differences.md):
- a node cordoned by someone else while it waits in ``upgrade-required`` is
  recorded as cordoned before the upgrade, so it stays cordoned (NVIDIA only
  looks at ``""``/``upgrade-done``);
- an ``upgrade-failed`` node is retried (from ``cordon-required``, keeping its
  slot, through drain and restart again) when the driver DaemonSet has moved on to a newer
  revision than the one that failed (a fixed driver was published), or when
  annotated ``nvidia.com/gpu-driver-upgrade-requested=true``; NVIDIA leaves it
  failed until its old driver pod happens to be in sync;
- a node waiting in ``upgrade-required`` whose driver pod is back in sync (the
  change was reverted) returns to ``upgrade-done`` instead of being drained;
- drain and pod-deletion timers live in node annotations, not in memory;
- a drain does not send an eviction its PodDisruptionBudget's status says
  would be refused (429), and asks no PDB for more disruptions in one pass
  than it allows; the pod is retried when the budget allows it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade.pods import (
    drain_selector,
    finished,
    is_gpu_pod,
    pod_key,
    refusal,
    selectable_for_drain,
)
from controllers.gpu.upgrade.policy import UpgradePolicy
from controllers.gpu.upgrade.slots import SlotCounts, scaled_value, upgrades_available
from controllers.gpu.upgrade.snapshot import (
    ManagedNode,
    build_nodes,
    node_ready,
    pod_ready,
    restart_count,
)
from nimctl_runtime.labels import Selector
from nimctl_runtime.meta import ObjView, dig, name_of, namespace_of

RETRY_SECONDS = 1.0
"""How soon a node that waits for pods to go (deletion, eviction) is looked at again."""
BLOCKED_RETRY_SECONDS = 5.0
"""How soon an eviction a PodDisruptionBudget refused is tried again (kubectl drain's 5 s)."""

__all__ = [
    "RETRY_SECONDS",
    "NodePatch",
    "Plan",
    "PodAction",
    "clear_states",
    "plan",
    "release_nodes",
]


@dataclass
class NodePatch:
    """One merge patch of a node: labels and annotations (None removes), cordon."""

    labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    unschedulable: bool | None = None

    def body(self) -> dict[str, Any]:
        """The merge-patch body."""
        meta: dict[str, Any] = {}
        if self.labels:
            meta["labels"] = dict(self.labels)
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        out: dict[str, Any] = {"metadata": meta} if meta else {}
        if self.unschedulable is not None:
            out["spec"] = {"unschedulable": self.unschedulable}
        return out


@dataclass(frozen=True)
class PodAction:
    """Delete (GPU pods, the driver pod) or evict (drain) one pod."""

    verb: str
    namespace: str
    name: str
    node: str


@dataclass
class Plan:
    """What one pass decided (see the module docstring)."""

    patches: dict[str, NodePatch] = field(default_factory=dict)
    pod_actions: list[PodAction] = field(default_factory=list)
    transitions: list[tuple[str, str, str]] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)
    stalled: dict[str, float] = field(default_factory=dict)
    rollout_stalled: float | None = None
    counts: SlotCounts = field(default_factory=lambda: SlotCounts(0, 0, 0, 0))
    counts_by_state: dict[str, int] = field(default_factory=dict)
    max_unavailable: int = 0
    available: int = 0
    requeue_after: float | None = None


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _timer(annotations: Mapping[str, str], key: str) -> float | None:
    value = annotations.get(key)
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def _names(pods: Iterable[ObjView], limit: int = 5) -> str:
    keys = sorted(pod_key(p) for p in pods)
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _pdb_of(pod: ObjView, pdbs: Iterable[ObjView]) -> ObjView | None:
    """The PodDisruptionBudget of the pod's namespace that selects it, if any."""
    labels = dig(pod, "metadata", "labels") or {}
    for pdb in pdbs:
        if namespace_of(pdb) != namespace_of(pod):
            continue
        if Selector.from_label_selector(dig(pdb, "spec", "selector")).matches(labels):
            return pdb
    return None


class _Pass:
    """One pass over the snapshot; builds the Plan."""

    def __init__(self, policy: UpgradePolicy, now: float, pdbs: Collection[ObjView],
                 gpu_claims: Collection[tuple[str, str]]) -> None:  # fmt: skip
        self.policy = policy
        self.now = now
        self.pdbs = pdbs
        self.gpu_claims = gpu_claims
        self.out = Plan()
        self.slots = 0
        self.budgets = {
            f"{namespace_of(p)}/{name_of(p)}": int(dig(p, "status", "disruptionsAllowed") or 0)
            for p in pdbs
        }

    # -- outputs ---------------------------------------------------------------------

    def patch(self, m: ManagedNode) -> NodePatch:
        return self.out.patches.setdefault(m.name, NodePatch())

    def move(self, m: ManagedNode, new: str) -> None:
        p = self.patch(m)
        p.labels[c.STATE_LABEL] = new
        p.annotations[c.STATE_SINCE_ANNOTATION] = str(int(self.now))
        if new == c.FAILED and m.current_revision:
            p.annotations[c.FAILED_REVISION_ANNOTATION] = m.current_revision
        elif m.state == c.FAILED:
            self.annotate(m, c.FAILED_REVISION_ANNOTATION, None)
            self.annotate(m, c.FAILED_CAUSE_ANNOTATION, None)
        self.out.transitions.append((m.name, m.state, new))
        self.out.states[m.name] = new

    def annotate(self, m: ManagedNode, key: str, value: str | None) -> None:
        if m.annotations.get(key) != value:
            self.patch(m).annotations[key] = value

    def wait(self, m: ManagedNode, message: str, retry: float | None = None) -> None:
        self.out.waiting[m.name] = message
        if m.state != c.FAILED and self.out.states.get(m.name) == c.FAILED:
            # the cause (the pod or PDB that held the drain...) outlives this pass
            self.annotate(m, c.FAILED_CAUSE_ANNOTATION, message[: c.MAX_FAILED_CAUSE])
        if retry is not None:
            self.requeue(retry)

    def pod_action(self, verb: str, pod: ObjView, m: ManagedNode) -> None:
        self.out.pod_actions.append(PodAction(verb, namespace_of(pod), name_of(pod), m.name))

    def requeue(self, seconds: float) -> None:
        seconds = max(seconds, 1.0)
        current = self.out.requeue_after
        self.out.requeue_after = seconds if current is None else min(current, seconds)

    def start_timer(self, m: ManagedNode, key: str) -> float:
        start = _timer(m.annotations, key)
        if start is None:
            self.annotate(m, key, str(int(self.now)))
            return self.now
        return start

    # -- state handlers --------------------------------------------------------------

    def unknown_or_done(self, m: ManagedNode) -> None:
        if m.in_sync is None:
            self.wait(m, "waiting for the driver DaemonSet's first ControllerRevision")
            return
        safe_load = c.SAFE_LOAD_ANNOTATION in m.annotations
        requested = m.annotations.get(c.UPGRADE_REQUESTED_ANNOTATION) == "true"
        if m.in_sync and not safe_load and not requested:
            if m.state == c.UNKNOWN:
                self.move(m, c.DONE)
            return
        if m.unschedulable:
            self.annotate(m, c.INITIAL_UNSCHEDULABLE_ANNOTATION, "true")
        self.move(m, c.REQUIRED)

    def upgrade_required(self, m: ManagedNode) -> None:
        requested = m.annotations.get(c.UPGRADE_REQUESTED_ANNOTATION) == "true"
        if c.UPGRADE_REQUESTED_ANNOTATION in m.annotations:
            self.annotate(m, c.UPGRADE_REQUESTED_ANNOTATION, None)
        if m.in_sync and not requested and c.SAFE_LOAD_ANNOTATION not in m.annotations:
            # The DaemonSet came back to the revision the node runs (a reverted change).
            self.annotate(m, c.INITIAL_UNSCHEDULABLE_ANNOTATION, None)
            self.move(m, c.DONE)
            return
        if m.labels.get(c.SKIP_LABEL) == "true":
            self.wait(m, f"skipped: the node is labelled {c.SKIP_LABEL}=true")
            return
        if self.slots <= 0 and not m.unschedulable:
            counts = self.out.counts
            self.wait(
                m,
                "waiting for an upgrade slot: "
                f"{counts.in_progress} of maxParallelUpgrades "
                f"{self.policy.max_parallel_upgrades or 'unlimited'} in progress, "
                f"{counts.unavailable} of maxUnavailable {self.out.max_unavailable} unavailable",
            )
            return
        if m.unschedulable:
            # Cordoned by someone else before we touched it: it stays cordoned.
            self.annotate(m, c.INITIAL_UNSCHEDULABLE_ANNOTATION, "true")
        if m.restart_only:
            if not m.unschedulable:
                self.patch(m).unschedulable = True
            self.move(m, c.POD_RESTART_REQUIRED)
        else:
            self.move(m, c.CORDON_REQUIRED)
        self.slots -= 1

    def cordon_required(self, m: ManagedNode) -> None:
        if not m.unschedulable:
            self.patch(m).unschedulable = True
        self.move(m, c.WAIT_FOR_JOBS_REQUIRED)

    def wait_for_jobs(self, m: ManagedNode) -> None:
        after = c.POD_DELETION_REQUIRED if self.policy.pod_deletion_enabled else c.DRAIN_REQUIRED
        text = self.policy.wait_for_jobs_selector
        if not text:
            self.move(m, after)
            return
        selector = Selector.parse(text)
        running = [
            p for p in m.pods
            if selector.matches(dig(p, "metadata", "labels")) and not finished(p)
        ]  # fmt: skip
        timeout = self.policy.wait_for_jobs_timeout
        if not running:
            self.annotate(m, c.WAIT_FOR_JOBS_START_ANNOTATION, None)
            self.move(m, after)
            return
        message = (
            f"waiting for pods selected by waitForCompletion.podSelector {text!r} "
            f"to complete: {_names(running)}"
        )
        if timeout > 0:
            start = self.start_timer(m, c.WAIT_FOR_JOBS_START_ANNOTATION)
            if self.now - start >= timeout:
                self.annotate(m, c.WAIT_FOR_JOBS_START_ANNOTATION, None)
                self.move(m, after)
                return
            message += f"; moves on at {_rfc3339(start + timeout)}"
            self.requeue(start + timeout - self.now)
        self.wait(m, message)

    def pod_deletion(self, m: ManagedNode) -> None:
        policy = self.policy
        on_failure = c.DRAIN_REQUIRED if policy.drain_enabled else c.FAILED
        driver = m.driver_pod
        gpu = [p for p in m.pods if p is not driver and is_gpu_pod(p, self.gpu_claims)]
        refused = {
            pod_key(p): why
            for p in gpu
            if (why := refusal(p, force=policy.pod_deletion_force,
                               delete_empty_dir=policy.pod_deletion_delete_empty_dir))
        }  # fmt: skip
        if refused:
            self.annotate(m, c.POD_DELETION_START_ANNOTATION, None)
            self.move(m, on_failure)
            detail = "; ".join(f"{k}: {v}" for k, v in sorted(refused.items()))
            self.wait(m, f"GPU pod deletion failed: {detail}")
            return
        if not gpu:
            self.annotate(m, c.POD_DELETION_START_ANNOTATION, None)
            self.move(m, c.POD_RESTART_REQUIRED)
            return
        start = self.start_timer(m, c.POD_DELETION_START_ANNOTATION)
        timeout = policy.pod_deletion_timeout
        if timeout > 0 and self.now - start >= timeout:
            self.annotate(m, c.POD_DELETION_START_ANNOTATION, None)
            self.move(m, on_failure)
            self.wait(m, f"GPU pods still present after {timeout}s: {_names(gpu)}")
            return
        for p in gpu:
            if not dig(p, "metadata", "deletionTimestamp"):
                self.pod_action("delete", p, m)
        self.wait(m, f"deleting GPU pods: {_names(gpu)}", RETRY_SECONDS)

    def drain(self, m: ManagedNode) -> None:
        policy = self.policy
        if not policy.drain_enabled:
            self.move(m, c.POD_RESTART_REQUIRED)
            return
        selector = drain_selector(policy.drain_pod_selector)
        candidates = [p for p in m.pods if selectable_for_drain(p, selector)]
        refused = {
            pod_key(p): why
            for p in candidates
            if (why := refusal(p, force=policy.drain_force,
                               delete_empty_dir=policy.drain_delete_empty_dir))
        }  # fmt: skip
        if refused:
            self.annotate(m, c.DRAIN_START_ANNOTATION, None)
            self.move(m, c.FAILED)
            detail = "; ".join(f"{k}: {v}" for k, v in sorted(refused.items()))
            self.wait(m, f"drain failed: {detail}")
            return
        if not candidates:
            self.annotate(m, c.DRAIN_START_ANNOTATION, None)
            self.move(m, c.POD_RESTART_REQUIRED)
            return
        start = self.start_timer(m, c.DRAIN_START_ANNOTATION)
        timeout = policy.drain_timeout
        blocked: dict[str, str] = {}
        evict: list[ObjView] = []
        for p in candidates:
            if dig(p, "metadata", "deletionTimestamp"):
                continue
            pdb = _pdb_of(p, self.pdbs) if not finished(p) else None
            if pdb is not None:
                key = f"{namespace_of(pdb)}/{name_of(pdb)}"
                if self.budgets.get(key, 0) <= 0:
                    # The API server would answer 429: wait for the budget (kubectl's 5 s).
                    blocked[pod_key(p)] = key
                    continue
                self.budgets[key] -= 1
            evict.append(p)
        if timeout > 0 and self.now - start >= timeout:
            self.annotate(m, c.DRAIN_START_ANNOTATION, None)
            self.move(m, c.FAILED)
            detail = self._drain_detail(candidates, blocked)
            self.wait(m, f"drain timed out after {timeout}s: {detail}")
            return
        for p in evict:
            self.pod_action("evict", p, m)
        message = f"draining: {self._drain_detail(candidates, blocked)}"
        if timeout > 0:
            message += f"; fails at {_rfc3339(start + timeout)}"
        self.wait(m, message, BLOCKED_RETRY_SECONDS if blocked else RETRY_SECONDS)

    @staticmethod
    def _drain_detail(candidates: list[ObjView], blocked: Mapping[str, str]) -> str:
        parts = [
            f"eviction of {pod} blocked by PodDisruptionBudget {pdb} (0 disruptions allowed)"
            for pod, pdb in sorted(blocked.items())
        ]
        rest = [p for p in candidates if pod_key(p) not in blocked]
        if rest:
            parts.append(f"evicting {_names(rest)}")
        return "; ".join(parts)

    def pod_restart(self, m: ManagedNode) -> None:
        pod = m.driver_pod
        if pod is None:
            self.wait(m, "waiting for the driver DaemonSet to create the new driver pod")
            return
        if m.in_sync is False:
            if not dig(pod, "metadata", "deletionTimestamp"):
                self.pod_action("delete", pod, m)
            self.wait(m, f"restarting driver pod {pod_key(pod)} on the new revision")
            return
        if m.in_sync is None:
            self.wait(m, "waiting for the driver DaemonSet's first ControllerRevision")
            return
        self.annotate(m, c.SAFE_LOAD_ANNOTATION, None)
        if pod_ready(pod):
            self.move(m, c.VALIDATION_REQUIRED)
            return
        restarts = restart_count(pod)
        if restarts > c.MAX_DRIVER_RESTARTS:
            self.move(m, c.FAILED)
            self.wait(m, f"driver pod {pod_key(pod)} is not ready after {restarts} restarts")
            return
        self.wait(m, f"waiting for driver pod {pod_key(pod)} to be ready")

    def finish(self, m: ManagedNode) -> None:
        if m.annotations.get(c.INITIAL_UNSCHEDULABLE_ANNOTATION) == "true":
            self.annotate(m, c.INITIAL_UNSCHEDULABLE_ANNOTATION, None)
            self.move(m, c.DONE)
        else:
            self.move(m, c.UNCORDON_REQUIRED)

    def failed(self, m: ManagedNode) -> None:
        pod = m.driver_pod
        if pod is not None and m.in_sync and pod_ready(pod):
            self.finish(m)
            return
        # A retry keeps the node's slot and our cordon: straight to cordon-required (via
        # upgrade-required it would count as cordoned by someone else and stay cordoned).
        if m.annotations.get(c.UPGRADE_REQUESTED_ANNOTATION) == "true":
            self.annotate(m, c.UPGRADE_REQUESTED_ANNOTATION, None)
            self.move(m, c.CORDON_REQUIRED)
            return
        failed_at = m.annotations.get(c.FAILED_REVISION_ANNOTATION)
        if m.in_sync is False and failed_at and failed_at != m.current_revision:
            self.move(m, c.CORDON_REQUIRED)
            return
        if pod is None:
            why = "it has no driver pod"
        elif not m.in_sync:
            why = f"driver pod {pod_key(pod)} runs an old revision"
        else:
            why = f"driver pod {pod_key(pod)} is not ready ({restart_count(pod)} restarts)"
        cause = m.annotations.get(c.FAILED_CAUSE_ANNOTATION)
        if cause:
            why = f"{cause}; now {why}"
        self.wait(
            m,
            f"upgrade failed: {why}; the node recovers when its driver pod is ready on the "
            f"current revision, or retries when annotated {c.UPGRADE_REQUESTED_ANNOTATION}=true",
        )

    def validation(self, m: ManagedNode) -> None:
        text = self.policy.validator_pod_selector
        if not text:
            self.finish(m)
            return
        selector = Selector.parse(text)
        validators = [
            p for p in m.pods
            if selector.matches(dig(p, "metadata", "labels"))
            and not dig(p, "metadata", "deletionTimestamp")
        ]  # fmt: skip
        if any(pod_ready(p) for p in validators):
            self.annotate(m, c.VALIDATION_START_ANNOTATION, None)
            self.finish(m)
            return
        start = self.start_timer(m, c.VALIDATION_START_ANNOTATION)
        timeout = self.policy.validation_timeout
        if self.now - start >= timeout:
            self.annotate(m, c.VALIDATION_START_ANNOTATION, None)
            self.move(m, c.FAILED)
            self.wait(m, f"validator pod ({text}) not ready within {timeout}s")
            return
        what = (
            f"validator pod {pod_key(validators[0])}" if validators else f"a validator pod ({text})"
        )
        self.wait(m, f"waiting for {what} to be ready; fails at {_rfc3339(start + timeout)}")
        self.requeue(start + timeout - self.now)

    def uncordon(self, m: ManagedNode) -> None:
        if m.unschedulable:
            self.patch(m).unschedulable = False
        self.move(m, c.DONE)


def _counts(managed: list[ManagedNode]) -> SlotCounts:
    return SlotCounts(
        total=len(managed),
        in_progress=sum(1 for m in managed if m.state not in c.IDLE_STATES),
        upgrade_required=sum(1 for m in managed if m.state == c.REQUIRED),
        unavailable=sum(
            1
            for m in managed
            if m.unschedulable or not node_ready(m.node) or m.state == c.CORDON_REQUIRED
        ),
    )


def plan(
    nodes: Iterable[ObjView],
    pods: Iterable[ObjView],
    daemonsets: Iterable[ObjView],
    policy: UpgradePolicy,
    now: float,
    *,
    revisions: Iterable[ObjView] = (),
    pdbs: Collection[ObjView] = (),
    gpu_claims: Collection[tuple[str, str]] = (),
) -> Plan:
    """One pass of the upgrade state machine (see the module docstring).

    ``pods`` must hold the driver pods and, for nodes that wait for jobs, delete
    GPU pods, drain or validate, every pod on those nodes.
    """
    managed = build_nodes(
        nodes, pods, daemonsets, revisions, Selector.parse(policy.driver_pod_selector)
    )
    run = _Pass(policy, now, pdbs, gpu_claims)
    out = run.out
    out.counts = _counts(managed)
    out.max_unavailable = scaled_value(policy.max_unavailable, out.counts.total, round_up=True)
    out.available = upgrades_available(
        out.counts, policy.max_parallel_upgrades, out.max_unavailable
    )
    run.slots = out.available
    handlers = {
        c.UNKNOWN: run.unknown_or_done,
        c.DONE: run.unknown_or_done,
        c.REQUIRED: run.upgrade_required,
        c.CORDON_REQUIRED: run.cordon_required,
        c.WAIT_FOR_JOBS_REQUIRED: run.wait_for_jobs,
        c.POD_DELETION_REQUIRED: run.pod_deletion,
        c.DRAIN_REQUIRED: run.drain,
        c.POD_RESTART_REQUIRED: run.pod_restart,
        c.FAILED: run.failed,
        c.VALIDATION_REQUIRED: run.validation,
        c.UNCORDON_REQUIRED: run.uncordon,
    }
    for m in managed:
        out.states[m.name] = m.state
        out.counts_by_state[m.state] = out.counts_by_state.get(m.state, 0) + 1
    for state in c.ORDER:
        handler = handlers.get(state)
        for m in managed:
            if m.state != state:
                continue
            if handler is None:
                run.wait(m, f"state {state} needs an external maintenance operator")
                continue
            handler(m)
    for m in managed:
        if (
            out.states[m.name] not in c.FINAL_STATES
            and c.STATE_SINCE_ANNOTATION not in m.annotations
            and c.STATE_SINCE_ANNOTATION not in run.patch(m).annotations
        ):
            run.annotate(m, c.STATE_SINCE_ANNOTATION, str(int(now)))
    _stalls(managed, policy, now, out)
    return out


def _stalls(managed: list[ManagedNode], policy: UpgradePolicy, now: float, out: Plan) -> None:
    limit = policy.stall_after_seconds
    last_move: float | None = None
    for m in managed:
        since = _timer(m.annotations, c.STATE_SINCE_ANNOTATION)
        if since is not None:
            last_move = since if last_move is None else max(last_move, since)
        moved = m.name in {t[0] for t in out.transitions}
        if moved or since is None or m.state in c.IDLE_STATES or m.state == c.FAILED:
            continue
        if now - since >= limit:
            out.stalled[m.name] = now - since
    waiting = [m for m in managed if out.states.get(m.name) == c.REQUIRED]
    if waiting and not out.transitions and last_move is not None and now - last_move >= limit:
        out.rollout_stalled = now - last_move


def clear_states(nodes: Iterable[ObjView]) -> dict[str, NodePatch]:
    """Patches that remove the upgrade state from every node carrying one (upgrades off)."""
    out: dict[str, NodePatch] = {}
    for node in nodes:
        labels = dig(node, "metadata", "labels") or {}
        if c.STATE_LABEL in labels:
            out[name_of(node)] = NodePatch(labels={c.STATE_LABEL: None})
    return out


#: States in which the upgrade has cordoned the node (or is about to), unless it was
#: cordoned before the upgrade took it (``INITIAL_UNSCHEDULABLE_ANNOTATION``).
CORDONED_STATES: Final = frozenset(
    {
        c.CORDON_REQUIRED,
        c.WAIT_FOR_JOBS_REQUIRED,
        c.POD_DELETION_REQUIRED,
        c.DRAIN_REQUIRED,
        c.NODE_MAINTENANCE_REQUIRED,
        c.POST_MAINTENANCE_REQUIRED,
        c.POD_RESTART_REQUIRED,
        c.FAILED,
        c.VALIDATION_REQUIRED,
        c.UNCORDON_REQUIRED,
    }
)

#: What the upgrade writes on a node and takes back when no policy governs it any more.
#: Not the user's (``UPGRADE_REQUESTED``, the skip labels) nor the driver's (safe load).
UPGRADE_ANNOTATIONS: Final = (
    c.INITIAL_UNSCHEDULABLE_ANNOTATION,
    c.WAIT_FOR_JOBS_START_ANNOTATION,
    c.VALIDATION_START_ANNOTATION,
    c.POD_DELETION_START_ANNOTATION,
    c.DRAIN_START_ANNOTATION,
    c.STATE_SINCE_ANNOTATION,
    c.FAILED_REVISION_ANNOTATION,
)


def release_nodes(nodes: Iterable[ObjView]) -> dict[str, NodePatch]:
    """Patches that undo an upgrade no policy governs any more (its ClusterPolicy or
    NVIDIADriver deleted mid-upgrade): the state label and the upgrade's annotations go,
    and a node the upgrade cordoned is uncordoned (one cordoned before it stays so)."""
    out: dict[str, NodePatch] = {}
    for node in nodes:
        labels = dig(node, "metadata", "labels") or {}
        annotations = dig(node, "metadata", "annotations") or {}
        state = labels.get(c.STATE_LABEL)
        patch = NodePatch()
        if c.STATE_LABEL in labels:
            patch.labels[c.STATE_LABEL] = None
        for key in UPGRADE_ANNOTATIONS:
            if key in annotations:
                patch.annotations[key] = None
        ours = annotations.get(c.INITIAL_UNSCHEDULABLE_ANNOTATION) != "true"
        if state in CORDONED_STATES and ours and dig(node, "spec", "unschedulable"):
            patch.unschedulable = False
        if patch.body():
            out[name_of(node)] = patch
    return out
