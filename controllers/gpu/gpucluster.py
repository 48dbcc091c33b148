"""GPUCluster's binding to the reconciler skeleton: facts, the ClusterPolicy conflict,
the namespace label, the claim-consumer drain and NVIDIA's status words.

``platforms.gpu.gpucluster.GPUClusterContract`` decides what the GPUCluster
becomes (the four states) and when it is ready; the skeleton creates, updates
by hash and prunes (a state switched off loses its objects). This module adds
(gpucluster.md §3):

- **prerequisite**: while any ClusterPolicy exists nothing is deployed; the
  status is ``notReady`` / ``PrerequisiteNotMet`` naming the ClusterPolicy,
  looked at again every minute (and at once when a ClusterPolicy goes);
- **DRA served**: the ``resource.k8s.io`` versions that serve DeviceClass are
  read from the API server's discovery (the contract picks v1 > v1beta2 >
  v1beta1 and fails the states when none is served);
- **namespace label**: the operator namespace is labelled
  ``resource.kubernetes.io/admin-access=true`` (never removed), without which
  the operands' admin-access claims are refused (``namespace_labels``: while a
  ClusterPolicy blocks it, not);
- **finalizer** ``gpucluster.nvidia.com/dra-resourceclaim``: on deletion every
  DaemonSet the GPUCluster controls whose pods hold ResourceClaims is deleted
  first (foreground), with the Event ``DrainingClaimConsumers``, looked at
  again every 5 s until none is left (the skeleton does it: those DaemonSets'
  write policy is ``drain_on_delete``); then the finalizer goes and the rest
  (the kubelet plugin among them) is removed by owner references, so the
  plugin outlives the claims it must unprepare;
- status as NVIDIA writes it: ``state`` (ready, notReady), ``namespace`` and
  the two conditions ``Ready`` and ``Error``, only on change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from api.nvidia.v1alpha1.gpucluster import STATE_NOT_READY, STATE_READY, GPUCluster
from controllers.gpu.config import GPUConfig
from controllers.plan import WritePolicy
from controllers.reconciler import Event, Kind, NamespaceLabels
from nimctl_runtime.client.interfaces import Reader
from nimctl_runtime.meta import Obj, ObjView, dig, name_of, set_condition
from platforms.capabilities import SERVICE_MONITOR, Capabilities
from platforms.contract import Blocked, Observed, Readiness
from platforms.gpu.gpucluster import (
    API_VERSION,
    KIND,
    REASON_PREREQUISITE_NOT_MET,
    REASON_RECONCILE_FAILED,
    GPUClusterContract,
    prerequisite_readiness,
)
from platforms.gpu.gpucluster_common import GPUClusterFacts
from platforms.parsing import parse_or_fail

RECORDER_NAME: Final = "gpucluster-controller"
FINALIZER: Final = "gpucluster.nvidia.com/dra-resourceclaim"
ADMIN_ACCESS_LABEL: Final = "resource.kubernetes.io/admin-access"
CP_API: Final = "nvidia.com/v1"
CP_KIND: Final = "ClusterPolicy"
REASON_DRAINING: Final = "DrainingClaimConsumers"
CONDITION_READY: Final = "Ready"
CONDITION_ERROR: Final = "Error"

__all__ = [
    "ADMIN_ACCESS_LABEL",
    "FINALIZER",
    "REASON_DRAINING",
    "RECORDER_NAME",
    "GPUClusterKind",
    "claim_consumers",
    "gpucluster_status",
]

DraVersions = Callable[[], Awaitable[frozenset[str]]]


def gpucluster_status(old: Mapping[str, Any], readiness: Readiness, namespace: str) -> Obj:
    """NVIDIA's GPUCluster status for ``readiness`` (pure)."""
    conditions = list(old.get("conditions") or [])
    if readiness.ready:
        state = STATE_READY
        conditions = set_condition(
            conditions, CONDITION_READY, "True", readiness.reason, readiness.message
        )
        conditions = set_condition(conditions, CONDITION_ERROR, "False", "Ready", "")
    else:
        state = STATE_NOT_READY
        conditions = set_condition(conditions, CONDITION_READY, "False", "Error", "")
        conditions = set_condition(
            conditions, CONDITION_ERROR, "True", readiness.reason, readiness.message
        )
    return {"state": state, "namespace": namespace, "conditions": conditions}


def _consumes_claims(obj: ObjView) -> bool:
    return obj.get("kind") == "DaemonSet" and bool(
        dig(obj, "spec", "template", "spec", "resourceClaims")
    )


def claim_consumers(daemonsets: list[Obj], owner_uid: str) -> list[Obj]:
    """The DaemonSets ``owner_uid`` controls whose pods hold ResourceClaims, by name."""
    out = []
    for ds in daemonsets:
        refs = dig(ds, "metadata", "ownerReferences") or []
        controlled = any(r.get("uid") == owner_uid and r.get("controller") for r in refs)
        if controlled and dig(ds, "spec", "template", "spec", "resourceClaims"):
            out.append(ds)
    return sorted(out, key=name_of)


class GPUClusterKind(Kind[GPUCluster, GPUClusterFacts]):
    """GPUCluster: the ClusterPolicy conflict, the cluster's DRA versions, NVIDIA's words."""

    api_version = API_VERSION
    kind = KIND
    finalizer = FINALIZER

    def __init__(
        self, *, config: GPUConfig, capabilities: Capabilities, dra_versions: DraVersions
    ) -> None:
        self.contract = GPUClusterContract()
        self.config = config
        self.capabilities = capabilities
        self.dra_versions = dra_versions

    def parse(self, obj: Obj) -> GPUCluster:
        return parse_or_fail(GPUCluster, obj, REASON_RECONCILE_FAILED)

    async def gather(self, cr: GPUCluster, obj: Obj, reader: Reader) -> GPUClusterFacts:
        policies = sorted(name_of(p) for p in await reader.list(CP_API, CP_KIND))
        if policies:
            raise Blocked(prerequisite_readiness(policies[0]))
        return GPUClusterFacts(
            operator_namespace=self.config.operator_namespace,
            operator_env=self.config.operator_env,
            dra_versions=await self.dra_versions(),
            service_monitor=self.capabilities.has(SERVICE_MONITOR),
        )

    def namespace_labels(self, cr: GPUCluster, facts: GPUClusterFacts) -> NamespaceLabels | None:
        """The operands' admin-access claims are refused without it (never removed)."""
        return NamespaceLabels(facts.operator_namespace, {ADMIN_ACCESS_LABEL: "true"})

    def write_policy(self, owner: ObjView, obj: ObjView) -> WritePolicy:
        """ServiceAccounts are created only, nothing is kept on prune, and on deletion the
        DaemonSets whose pods hold ResourceClaims go first (``claim_consumers``)."""
        return WritePolicy(
            create_only=obj.get("kind") == "ServiceAccount",
            drain_on_delete=_consumes_claims(obj),
        )

    def drain_event(self, obj: Obj, waiting: list[str]) -> Event | None:
        return (
            "Normal",
            REASON_DRAINING,
            "Waiting for ResourceClaim-consuming DaemonSet(s) to terminate: " + ", ".join(waiting),
        )

    def memo_key(self, cr: GPUCluster, obj: Obj, facts: GPUClusterFacts) -> tuple[Any, ...] | None:
        return (
            cr.metadata.uid,
            dig(obj, "metadata", "generation"),
            tuple(sorted(facts.dra_versions)),
            facts.service_monitor,
        )

    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        return gpucluster_status(old, readiness, self.config.operator_namespace)

    def event(self, obj: Obj, readiness: Readiness) -> Event | None:
        if readiness.reason == REASON_PREREQUISITE_NOT_MET:
            return ("Warning", readiness.reason, readiness.message)
        return None

    def failure_reason(self, kind: str) -> str:
        return REASON_RECONCILE_FAILED

    def failure_event(self, obj: Obj, message: str) -> Event | None:
        return ("Warning", REASON_RECONCILE_FAILED, message)
