"""The driver upgrade reconciler (gpu-operator.md §4.4): one request for the whole cluster.

Each pass: resolve the active ClusterPolicy; with upgrades off (no
``upgradePolicy``, ``autoUpgrade: false``, sandbox workloads, driver disabled)
remove the state labels; with no ClusterPolicy or the drivers handed to
NVIDIADriver (``useNvidiaDriverCRD``) first release the nodes no NVIDIADriver
owns (a ClusterPolicy or NVIDIADriver deleted mid-upgrade: state label and
upgrade annotations removed, nodes the upgrade cordoned uncordoned), then run
one plan per NVIDIADriver over the nodes it owns (``partition``: its own
policy, slots and DaemonSets; node Events, and the ClusterPolicy's condition
over all of them when there is one); otherwise read the snapshot
(cache, plus the pods of the few nodes that wait for jobs, delete GPU pods or
drain, and the PodDisruptionBudgets while a node drains), ``plan`` one pass,
``execute`` it, report (node Events, the ClusterPolicy's ``DriverUpgrade``
condition, the §4.4 gauges) and requeue after 2 minutes, or sooner when a
timer or a retried eviction is due.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from controllers.gpu.clusterpolicy import active_policy
from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade import metrics
from controllers.gpu.upgrade.executor import Outcome, execute
from controllers.gpu.upgrade.partition import NVIDIADRIVER_API, NVIDIADRIVER_KIND, partitions
from controllers.gpu.upgrade.plan import NodePatch, Plan, clear_states, plan, release_nodes
from controllers.gpu.upgrade.policy import DEFAULT_STALL_SECONDS, UpgradePolicy
from controllers.gpu.upgrade.report import (
    NodeReport,
    combined,
    condition,
    merged_conditions,
    node_reports,
)
from nimctl_runtime.cache.cache import Cache
from nimctl_runtime.client.client import Client
from nimctl_runtime.client.errors import ApiError, Conflict, NotFound
from nimctl_runtime.events import EventRecorder
from nimctl_runtime.labels import Selector
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import Obj, dig, name_of, uid_of
from nimctl_runtime.reconcile import Request, Result

REQUEST: Final = Request(None, "driver-upgrade")
CP_API: Final = "nvidia.com/v1"
POD_LISTING_STATES: Final = frozenset(
    {c.WAIT_FOR_JOBS_REQUIRED, c.POD_DELETION_REQUIRED, c.DRAIN_REQUIRED}
)
GPU_DRA_DRIVER: Final = "gpu.nvidia.com"

__all__ = ["REQUEST", "UpgradeReconciler"]


@dataclass(frozen=True)
class _Snapshot:
    """The pods, revisions, PodDisruptionBudgets and GPU claims one pass reads."""

    pods: list[Obj]
    revisions: list[Obj]
    pdbs: list[Obj]
    claims: set[tuple[str, str]]


def _requeue(plans: Iterable[Plan]) -> float:
    """Two minutes, or sooner when a plan's timer or retry is due."""
    delays = [c.REQUEUE_SECONDS, *(p.requeue_after for p in plans if p.requeue_after is not None)]
    return min(delays)


def _upgrades_on(cp: ClusterPolicy) -> bool:
    spec = cp.spec
    policy = spec.driver.upgrade_policy
    sandbox = spec.sandbox_workloads is not None and bool(spec.sandbox_workloads.enabled)
    return bool(spec.driver.enabled) and policy is not None and policy.auto_upgrade and not sandbox


def _gpu_claims(claims: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for claim in claims:
        results = dig(claim, "status", "allocation", "devices", "results") or []
        if any(r.get("driver") == GPU_DRA_DRIVER for r in results):
            out.add((str(dig(claim, "metadata", "namespace") or ""), name_of(claim)))
    return out


class UpgradeReconciler:
    """See the module docstring."""

    def __init__(
        self,
        *,
        cache: Cache,
        client: Client,
        recorder: EventRecorder,
        operator_namespace: str,
        clock: Callable[[], float] = time.time,
        stall_after_seconds: float = DEFAULT_STALL_SECONDS,
    ) -> None:
        self.cache = cache
        self.client = client
        self.recorder = recorder
        self.namespace = operator_namespace
        self.clock = clock
        self.stall_after_seconds = stall_after_seconds
        self._said: dict[str, NodeReport] = {}
        self.log = get_logger("controllers.gpu.upgrade")

    async def reconcile(self, request: Request) -> Result:
        policies = await self.cache.list(CP_API, "ClusterPolicy")
        active = active_policy(policies)
        cp_obj = next((p for p in policies if name_of(p) == active), None)
        nodes = await self.cache.list("v1", "Node")
        if cp_obj is None:
            return await self._driver_pass(nodes, None)
        try:
            cp = ClusterPolicy.model_validate(cp_obj)
        except ValueError:
            return Result()  # the ClusterPolicy controller reports the invalid spec
        if cp.spec.driver.use_nvidia_driver_crd:
            return await self._driver_pass(nodes, cp_obj)
        if not _upgrades_on(cp) or cp.spec.driver.upgrade_policy is None:
            await self._write_patches(clear_states(nodes))
            metrics.observe_disabled()
            self._said.clear()
            return Result()
        try:
            policy = UpgradePolicy.from_spec(
                cp.spec.driver.upgrade_policy, stall_after_seconds=self.stall_after_seconds
            )
            result = await self._pass(cp_obj, nodes, policy)
        except ValueError as err:
            self.recorder.event(cp_obj, "Warning", "DriverUpgradeInvalid", str(err))
            await self._set_condition(
                cp_obj,
                {"type": "DriverUpgrade", "status": "False", "reason": "InvalidUpgradePolicy",
                 "message": str(err)},
            )  # fmt: skip
            return Result(requeue_after=c.REQUEUE_SECONDS)
        return result

    async def _snapshot(self, nodes: list[Obj]) -> _Snapshot:
        """What every plan of a pass reads besides the nodes and the DaemonSets."""
        revisions = await self.cache.list("apps/v1", "ControllerRevision", self.namespace)
        pods = await self.cache.list("v1", "Pod", self.namespace)
        states = {
            name_of(n): (dig(n, "metadata", "labels") or {}).get(c.STATE_LABEL) for n in nodes
        }
        known = {uid_of(p) for p in pods}
        for node, state in sorted(states.items()):
            if state in POD_LISTING_STATES:
                listed = await self.client.list("v1", "Pod", field_selector=f"spec.nodeName={node}")
                pods.extend(p for p in listed["items"] if uid_of(p) not in known)
        pdbs: list[Obj] = []
        if c.DRAIN_REQUIRED in states.values():
            pdbs = (await self.client.list("policy/v1", "PodDisruptionBudget"))["items"]
        claims: set[tuple[str, str]] = set()
        if c.POD_DELETION_REQUIRED in states.values():
            try:
                listed = await self.client.list("resource.k8s.io/v1", "ResourceClaim")
                claims = _gpu_claims(listed["items"])
            except ApiError:
                claims = set()  # no DRA on this cluster
        return _Snapshot(pods, revisions, pdbs, claims)

    async def _pass(self, cp_obj: Obj, nodes: list[Obj], policy: UpgradePolicy) -> Result:
        driver_selector = Selector.parse(policy.driver_pod_selector)
        daemonsets = [
            ds
            for ds in await self.cache.list("apps/v1", "DaemonSet", self.namespace)
            if driver_selector.matches(dig(ds, "metadata", "labels") or {})
        ]
        snap = await self._snapshot(nodes)
        decided, reports = await self._run(nodes, daemonsets, policy, snap)
        metrics.observe_plan(decided)
        await self._set_condition(cp_obj, condition(decided, reports))
        return Result(requeue_after=_requeue([decided]))

    async def _driver_pass(self, nodes: list[Obj], cp_obj: Obj | None) -> Result:
        """NVIDIADriver's path: one plan per NVIDIADriver over the nodes it owns (and, with
        a ClusterPolicy, its ``DriverUpgrade`` condition over all of them)."""
        try:
            drivers = await self.cache.list(NVIDIADRIVER_API, NVIDIADRIVER_KIND)
        except ApiError:
            drivers = []  # the NVIDIADriver CRD is not installed
        daemonsets = await self.cache.list("apps/v1", "DaemonSet", self.namespace)
        parts = partitions(drivers, nodes, daemonsets, stall_after_seconds=self.stall_after_seconds)
        # Nodes no NVIDIADriver owns (and, here, no ClusterPolicy upgrades): an upgrade
        # left on them by a deleted ClusterPolicy or NVIDIADriver is undone.
        owned = {name_of(n) for p in parts for n in p.nodes}
        await self._write_patches(release_nodes(n for n in nodes if name_of(n) not in owned))
        if not any(p.policy is not None for p in parts):
            await self._write_patches(
                clear_states(n for p in parts if not p.error for n in p.nodes)
            )
            metrics.observe_disabled()
            self._said.clear()
            return Result()
        snap = await self._snapshot(nodes)
        plans: list[Plan] = []
        reports: dict[str, NodeReport] = {}
        for part in parts:
            if part.error:
                self.log.warning("driver upgrade policy invalid", error=part.error)
                continue
            if part.policy is None:
                await self._write_patches(clear_states(part.nodes))
                continue
            decided, said = await self._run(
                [dict(n) for n in part.nodes], [dict(d) for d in part.daemonsets], part.policy, snap
            )
            plans.append(decided)
            reports.update(said)
        metrics.observe_plans(plans)
        if cp_obj is not None:
            await self._set_condition(cp_obj, condition(combined(plans), reports))
        return Result(requeue_after=_requeue(plans))

    async def _run(
        self, nodes: list[Obj], daemonsets: list[Obj], policy: UpgradePolicy, snap: _Snapshot
    ) -> tuple[Plan, dict[str, NodeReport]]:
        """Plan one partition of the cluster, write it and report it on its nodes."""
        decided = plan(
            nodes, snap.pods, daemonsets, policy, self.clock(),
            revisions=snap.revisions, pdbs=snap.pdbs, gpu_claims=snap.claims,
        )  # fmt: skip
        outcome = await execute(self.client, decided)
        for error in outcome.errors:
            self.log.warning("driver upgrade write failed", error=error)
        return decided, self._report(nodes, decided, outcome)

    async def _write_patches(self, patches: Mapping[str, NodePatch]) -> None:
        for node, patch in sorted(patches.items()):
            try:
                await self.client.patch("v1", "Node", node, patch.body())
            except NotFound:
                continue

    def _report(self, nodes: list[Obj], decided: Plan, outcome: Outcome) -> dict[str, NodeReport]:
        """Node Events: each state change, and what a waiting node waits for when it changes."""
        by_name = {name_of(n): n for n in nodes}
        for node, old, new in decided.transitions:
            obj = by_name.get(node)
            if obj is not None:
                self.recorder.event(
                    obj, "Normal", "DriverUpgradeState",
                    f"driver upgrade state {old or 'unknown'} -> {new}",
                )  # fmt: skip
        reports = node_reports(decided, outcome)
        for node, report in reports.items():
            obj = by_name.get(node)
            if obj is not None and self._said.get(node) != report:
                self.recorder.event(obj, report.type, report.reason, report.message)
        for node in by_name:
            self._said.pop(node, None)
        self._said.update(reports)
        return reports

    async def _set_condition(self, cp_obj: Obj, wanted: dict[str, Any]) -> None:
        if not dig(cp_obj, "status", "state"):
            return  # the ClusterPolicy controller writes the first status (state is required)
        current = list(dig(cp_obj, "status", "conditions") or [])
        merged = merged_conditions(current, wanted)
        if merged is None:
            return
        body = {
            "metadata": {"resourceVersion": dig(cp_obj, "metadata", "resourceVersion")},
            "status": {"conditions": merged},
        }
        try:
            await self.client.patch(CP_API, "ClusterPolicy", name_of(cp_obj), body,
                                    subresource="status")  # fmt: skip
        except (Conflict, NotFound):
            return  # the next pass (soon: the status change is an event) writes it again
