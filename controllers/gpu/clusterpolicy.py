"""ClusterPolicy's binding to the reconciler skeleton: the singleton, the facts, NVIDIA's status.

``platforms.gpu.contract.ClusterPolicyContract`` decides what a ClusterPolicy
becomes and when it is ready; the skeleton creates, updates by hash
(``nvidia.com/last-applied-hash``) and prunes. This module adds:

- the singleton (gpu-operator.md §1): the oldest ClusterPolicy (lowest name on
  a tie) is active; any other is reported ``ignored``. NVIDIA only sets that in
  memory; we write it, with an Event naming the active one;
- facts from the GPU cache: ``ClusterFacts.from_nodes`` over the (trimmed)
  Nodes, OpenShift, its version and Proxy (``controllers.gpu.openshift``), the served
  optional CRDs, the operator env's image fallbacks, the keys
  of the driver's user ConfigMaps (read through the API: they carry no label of
  ours), and the driver pods and ControllerRevisions of the OnDelete check;
- status (§1.4): ``state``, ``namespace`` and exactly the two conditions
  ``Ready`` and ``Error`` as NVIDIA's ``SetConditionsReady`` /
  ``SetConditionsError`` write them, only when something changed;
- ServiceAccounts are created and never updated (§2.3); nothing is kept on
  prune: a disabled state's objects are deleted;
- a GPUCluster beside it blocks it: ``notReady`` / ``ReconcileFailed``
  "conflicting GPUCluster resource ... cannot co-exist", nothing deployed;
- with ``psa.enabled`` the operator namespace is labelled
  ``pod-security.kubernetes.io/{enforce,audit,warn}=privileged`` (§2.6),
  through ``namespace_labels``; on OpenShift only when it is NVIDIA's suggested
  ``nvidia-gpu-operator``, which also gets ``openshift.io/cluster-monitoring=true``
  unless the label is set;
- once the last ClusterPolicy is gone, ``gpu_operator_reconciliation_status``
  is -1 (``forget``).

It runs on ``KindReconciler`` itself: the orphaning delete of the driver
DaemonSets is its ``write_policy``, the namespace labels its ``namespace_labels``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.nvidia.v1.clusterpolicy import (
    CONDITION_ERROR,
    CONDITION_READY,
    REASON_IGNORED,
    REASON_RECONCILE_FAILED,
    STATE_IGNORED,
    STATE_NOT_READY,
    STATE_READY,
    ClusterPolicy,
)
from controllers.gpu import metrics
from controllers.gpu.cache import DRIVER_COMPONENT, DRIVER_COMPONENT_LABEL
from controllers.gpu.config import GPUConfig
from controllers.gpu.openshift import read_openshift
from controllers.plan import WritePolicy
from controllers.reconciler import Event, Kind, NamespaceLabels
from nimctl_runtime.client.errors import ApiError, NotFound
from nimctl_runtime.client.interfaces import KeyReader, Reader
from nimctl_runtime.meta import Obj, ObjView, dig, name_of, set_condition
from platforms.capabilities import Capabilities
from platforms.contract import Blocked, Observed, Readiness
from platforms.gpu import ORPHAN, ClusterFacts
from platforms.gpu.contract import (
    API_VERSION,
    KIND,
    ClusterPolicyContract,
    PolicyFacts,
    incomplete_driver_upgrades,
)
from platforms.gpu.facts import (
    GPU_PRESENT_LABEL,
    PROMETHEUS_RULE,
    SERVICE_MONITOR,
    is_gpu_node_by_nfd,
)
from platforms.gpu.gpucluster import API_VERSION as GC_API
from platforms.gpu.gpucluster import KIND as GC_KIND
from platforms.gpu.gpucluster import gpucluster_conflict_readiness
from platforms.parsing import parse_or_fail

RECORDER_NAME = "clusterpolicy-controller"
PSA_LABELS: Mapping[str, str] = {
    f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")
}
OCP_SUGGESTED_NAMESPACE = "nvidia-gpu-operator"
"""On OpenShift the namespace NVIDIA's operator trusts as its own (not shared with others)."""
OCP_MONITORING_LABEL = "openshift.io/cluster-monitoring"

__all__ = [
    "RECORDER_NAME",
    "ClusterPolicyKind",
    "active_policy",
    "policy_status",
]


def active_policy(policies: Sequence[Mapping[str, Any]]) -> str | None:
    """The name of the active ClusterPolicy: the oldest not being deleted, lowest name on a tie."""
    live = [p for p in policies if not dig(p, "metadata", "deletionTimestamp")]
    if not live:
        return None
    oldest = min(
        live, key=lambda p: (str(dig(p, "metadata", "creationTimestamp") or ""), name_of(p))
    )
    return name_of(oldest)


def policy_status(old: Mapping[str, Any], readiness: Readiness, namespace: str) -> Obj:
    """NVIDIA's ClusterPolicy status for ``readiness`` (pure)."""
    status: Obj = {"namespace": namespace}
    conditions = list(old.get("conditions") or [])
    if readiness.state == STATE_IGNORED:
        status["state"] = STATE_IGNORED
        if conditions:
            status["conditions"] = conditions
        return status
    if readiness.ready:
        status["state"] = STATE_READY
        conditions = set_condition(
            conditions, CONDITION_READY, "True", readiness.reason, readiness.message
        )
        conditions = set_condition(conditions, CONDITION_ERROR, "False", "Ready", "")
    else:
        status["state"] = STATE_NOT_READY
        conditions = set_condition(conditions, CONDITION_READY, "False", "Error", "")
        conditions = set_condition(
            conditions, CONDITION_ERROR, "True", readiness.reason, readiness.message
        )
    status["conditions"] = conditions
    return status


@dataclass(frozen=True)
class _MemoNode:
    name: str
    kernel: str
    os_id: str
    os_version: str
    runtime: str


class ClusterPolicyKind(Kind[ClusterPolicy, PolicyFacts]):
    """ClusterPolicy: singleton, facts from the GPU cache, NVIDIA's status words."""

    api_version = API_VERSION
    kind = KIND
    finalizer = None
    shared_status = True  # the driver upgrade controller sets the DriverUpgrade condition

    def __init__(
        self, *, config: GPUConfig, capabilities: Capabilities, api_reader: KeyReader
    ) -> None:
        self.contract = ClusterPolicyContract()
        #: the ClusterPolicies reconciled and not gone: none left is the -1 metric
        self.known: set[str] = set()
        self.config = config
        self.capabilities = capabilities
        self.api_reader = api_reader

    def parse(self, obj: Obj) -> ClusterPolicy:
        self.known.add(name_of(obj))
        return parse_or_fail(ClusterPolicy, obj, REASON_RECONCILE_FAILED, stored=True)

    async def gather(self, cr: ClusterPolicy, obj: Obj, reader: Reader) -> PolicyFacts:
        policies = await reader.list(API_VERSION, KIND)
        active = active_policy(policies)
        if active is not None and active != name_of(obj):
            raise Blocked(
                Readiness(
                    state=STATE_IGNORED,
                    reason=REASON_IGNORED,
                    message=(
                        f"ClusterPolicy {active} is the active one (the oldest); "
                        f"{name_of(obj)} is ignored until it is deleted"
                    ),
                )
            )
        # GPUCluster coexistence (gpucluster.md §3): either stack, never both.
        clusters = sorted(name_of(c) for c in await reader.list(GC_API, GC_KIND))
        if clusters:
            raise Blocked(gpucluster_conflict_readiness(clusters[0]))
        namespace = self.config.operator_namespace
        nodes = await reader.list("v1", "Node")
        crds = [g for g in (SERVICE_MONITOR, PROMETHEUS_RULE) if self.capabilities.has(g)]
        openshift = await read_openshift(reader, self.capabilities)
        cluster = ClusterFacts.from_nodes(
            nodes,
            operator_namespace=namespace,
            openshift=openshift.version,
            openshift_proxy=openshift.proxy,
            crds=crds,
            operator_env=self.config.operator_env,
            config_map_keys=await self._config_map_keys(cr),
        )
        metrics.gpu_nodes_total.set(cluster.gpu_node_count)
        metrics.reconciliation_has_nfd_labels.set(1 if cluster.has_nfd_labels else 0)
        pods = await reader.list("v1", "Pod", namespace)
        revisions = await reader.list("apps/v1", "ControllerRevision", namespace)
        unlabelled = sum(
            1
            for n in nodes
            if is_gpu_node_by_nfd(labels := dig(n, "metadata", "labels") or {})
            and labels.get(GPU_PRESENT_LABEL) != "true"
        )
        return PolicyFacts(
            cluster=cluster,
            driver_pods=tuple(pods),
            revisions=tuple(revisions),
            unlabelled_gpu_nodes=unlabelled,
            upgrading_nodes=incomplete_driver_upgrades(nodes),
        )

    async def _config_map_keys(self, cr: ClusterPolicy) -> dict[str, list[str]]:
        """Keys of the user ConfigMaps the driver mounts file by file (read through the
        API: they carry no label of ours, so the GPU cache does not hold them)."""
        spec = cr.spec.model_dump(by_alias=True)
        names = {
            dig(spec, *path)
            for path in (
                ("driver", "kernelModuleConfig", "name"),
                ("driver", "repoConfig", "configMapName"),
                ("driver", "certConfig", "name"),
                ("vgpuManager", "kernelModuleConfig", "name"),
            )
        }
        out: dict[str, list[str]] = {}
        for name in sorted(n for n in names if n):
            try:
                cm = await self.api_reader.get(
                    "v1", "ConfigMap", str(name), self.config.operator_namespace
                )
            except NotFound:
                continue
            except ApiError:
                continue
            out[str(name)] = sorted({*(cm.get("data") or {}), *(cm.get("binaryData") or {})})
        return out

    def namespace_labels(self, cr: ClusterPolicy, facts: PolicyFacts) -> NamespaceLabels | None:
        """``psa.enabled``: the operator namespace admits privileged pods (the operands are)."""
        # On OpenShift NVIDIA labels only its suggested namespace, which no other
        # operator shares: PSA labels there, and cluster monitoring unless the user
        # set the label (to "false", say).
        namespace = self.config.operator_namespace
        own_namespace = namespace == OCP_SUGGESTED_NAMESPACE
        openshift = facts.cluster.openshift is not None
        labels = (
            PSA_LABELS
            if cr.spec.psa.is_enabled() and (own_namespace or not openshift)
            else {}
        )
        defaults = {OCP_MONITORING_LABEL: "true"} if openshift and own_namespace else {}
        if not labels and not defaults:
            return None
        return NamespaceLabels(namespace, labels, defaults)

    def write_policy(self, owner: ObjView, obj: ObjView) -> WritePolicy:
        """ServiceAccounts are created only; once NVIDIADriver objects own the drivers
        (``driver.useNvidiaDriverCRD``), the driver DaemonSets are deleted orphaning
        their pods, as NVIDIA does: the drivers keep running on the nodes until the
        NVIDIADrivers' replace them."""
        orphan = _is_driver_daemonset(obj) and bool(
            dig(owner, "spec", "driver", "useNvidiaDriverCRD")
        )
        return WritePolicy(
            create_only=obj.get("kind") == "ServiceAccount",
            propagation=ORPHAN if orphan else None,
        )

    def memo_key(self, cr: ClusterPolicy, obj: Obj, facts: PolicyFacts) -> tuple[Any, ...] | None:
        c = facts.cluster
        nodes = tuple(
            _MemoNode(n.name, n.kernel, n.os_id, n.os_version, n.container_runtime) for n in c.nodes
        )
        return (
            cr.metadata.uid,
            dig(obj, "metadata", "generation"),
            nodes,
            c.container_runtime,
            c.openshift,
            json.dumps(c.openshift_proxy, sort_keys=True),
            c.has_nfd_labels,
            c.crds,
            tuple(sorted(c.config_map_keys.items())),
        )

    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        if readiness.failed:
            metrics.observe_result(metrics.STATUS_ERROR)
        elif readiness.state == STATE_IGNORED:
            pass
        elif readiness.ready:
            metrics.observe_result(metrics.STATUS_READY)
        else:
            metrics.observe_result(metrics.STATUS_NOT_READY)
        return policy_status(old, readiness, self.config.operator_namespace)

    def event(self, obj: Obj, readiness: Readiness) -> Event | None:
        if readiness.state == STATE_IGNORED:
            return ("Warning", REASON_IGNORED, readiness.message)
        return None

    def failure_reason(self, kind: str) -> str:
        return REASON_RECONCILE_FAILED

    def failure_event(self, obj: Obj, message: str) -> Event | None:
        return ("Warning", REASON_RECONCILE_FAILED, message)

    def forget(self, namespace: str, name: str) -> None:
        """A ClusterPolicy is gone: with none left the status metric says so (-1)."""
        self.known.discard(name)
        if not self.known:
            metrics.reconciliation_status.set(metrics.STATUS_NO_POLICY)


def _is_driver_daemonset(obj: Mapping[str, Any]) -> bool:
    labels = dig(obj, "metadata", "labels") or {}
    return obj.get("kind") == "DaemonSet" and labels.get(DRIVER_COMPONENT_LABEL) == DRIVER_COMPONENT
