"""The driver upgrade reconciler (gpu-operator.md §4.4): one request for the whole cluster.

Each pass: resolve the active ClusterPolicy; with upgrades off (no
``upgradePolicy``, ``autoUpgrade: false``, sandbox workloads, driver disabled)
remove the state labels; with the drivers handed to NVIDIADriver
(``useNvidiaDriverCRD``) leave them to NVIDIADriver's per-CR path (not
implemented yet: nothing is touched); otherwise read the snapshot
(cache, plus the pods of the few nodes that wait for jobs, delete GPU pods or
drain, and the PodDisruptionBudgets while a node drains), ``plan`` one pass,
``execute`` it, report (node Events, the ClusterPolicy's ``DriverUpgrade``
condition, the §4.4 gauges) and requeue after 2 minutes, or sooner when a
timer or a retried eviction is due.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from controllers.gpu.clusterpolicy import active_policy
from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade import metrics
from controllers.gpu.upgrade.executor import Outcome, execute
from controllers.gpu.upgrade.plan import NodePatch, Plan, clear_states, plan
from controllers.gpu.upgrade.policy import DEFAULT_STALL_SECONDS, UpgradePolicy
from controllers.gpu.upgrade.report import NodeReport, condition, merged_conditions, node_reports
from nimctl_runtime.cache.cache import Cache
from nimctl_runtime.client.client import Client
from nimctl_runtime.client.errors import ApiError, Conflict, NotFound
from nimctl_runtime.events import EventRecorder
from nimctl_runtime.labels import Selector
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import dig, name_of, uid_of
from nimctl_runtime.reconcile import Request, Result

Obj = dict[str, Any]

REQUEST: Final = Request(None, "driver-upgrade")
CP_API: Final = "nvidia.com/v1"
POD_LISTING_STATES: Final = frozenset(
    {c.WAIT_FOR_JOBS_REQUIRED, c.POD_DELETION_REQUIRED, c.DRAIN_REQUIRED}
)
GPU_DRA_DRIVER: Final = "gpu.nvidia.com"

__all__ = ["REQUEST", "UpgradeReconciler"]


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
            # No ClusterPolicy: NVIDIADriver's nodes (per-CR policies) are not handled here yet.
            metrics.observe_disabled()
            return Result()
        try:
            cp = ClusterPolicy.model_validate(cp_obj)
        except ValueError:
            return Result()  # the ClusterPolicy controller reports the invalid spec
        if cp.spec.driver.use_nvidia_driver_crd:
            metrics.observe_disabled()
            return Result()
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

    async def _pass(self, cp_obj: Obj, nodes: list[Obj], policy: UpgradePolicy) -> Result:
        driver_selector = Selector.parse(policy.driver_pod_selector)
        daemonsets = [
            ds
            for ds in await self.cache.list("apps/v1", "DaemonSet", self.namespace)
            if driver_selector.matches(dig(ds, "metadata", "labels") or {})
        ]
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
        decided = plan(
            nodes, pods, daemonsets, policy, self.clock(),
            revisions=revisions, pdbs=pdbs, gpu_claims=claims,
        )  # fmt: skip
        metrics.observe_plan(decided)
        outcome = await execute(self.client, decided)
        for error in outcome.errors:
            self.log.warning("driver upgrade write failed", error=error)
        await self._report(cp_obj, nodes, decided, outcome)
        requeue = c.REQUEUE_SECONDS
        if decided.requeue_after is not None:
            requeue = min(requeue, decided.requeue_after)
        return Result(requeue_after=requeue)

    async def _write_patches(self, patches: Mapping[str, NodePatch]) -> None:
        for node, patch in sorted(patches.items()):
            try:
                await self.client.patch("v1", "Node", node, patch.body())
            except NotFound:
                continue

    async def _report(self, cp_obj: Obj, nodes: list[Obj], decided: Plan, outcome: Outcome) -> None:
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
        self._said = dict(reports)
        await self._set_condition(cp_obj, condition(decided, reports))

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
