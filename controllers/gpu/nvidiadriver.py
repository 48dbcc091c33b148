"""NVIDIADriver's binding to the reconciler skeleton: facts, the blocked states, NVIDIA's status.

``platforms.gpu.nvidiadriver.NVIDIADriverContract`` decides what an
NVIDIADriver becomes (one driver DaemonSet per node pool) and when it is
ready; the skeleton creates, updates by hash and prunes the DaemonSets of
pools that are gone (owner-UID index). This module adds (gpu-operator.md §6.1,
§3.2):

- **disabled**: while a ClusterPolicy exists without
  ``driver.useNvidiaDriverCRD: true`` nothing is rendered; the status is
  ``disabled`` with NVIDIA's message "useNvidiaDriverCRD is not enabled in
  ClusterPolicy" (its DaemonSets, if any, are left alone);
- **conflicts**: an NVIDIADriver whose nodeSelector picks a GPU node another
  non-default NVIDIADriver picks renders nothing and reports
  ``ConflictingNodeSelector`` (state ``notReady``); more than one default
  NVIDIADriver is ``ReconcileFailed``;
- **node owners**: the pools are rendered from ``assign_owners``; the node
  labelling reconciler (``controllers.gpu.nodelabeling.DriverOwnerLabeler``)
  writes the same decision as ``nvidia.com/gpu-operator.driver.owner=<name>``
  on the nodes, which the pools' DaemonSets select on. This module writes no
  Node;
- OpenShift (``controllers.gpu.openshift``): the version, the Driver Toolkit
  images and the cluster Proxy, read from the cache as NVIDIA's state reads
  them from the API server;
- status as NVIDIA writes it: ``state`` (ready, notReady, disabled),
  ``namespace`` and the two conditions ``Ready`` and ``Error``, only on change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from api.nvidia.v1.clusterpolicy import (
    CONDITION_ERROR,
    CONDITION_READY,
    REASON_CONFLICTING_NODE_SELECTOR,
    REASON_RECONCILE_FAILED,
    ClusterPolicy,
)
from api.nvidia.v1alpha1.nvidiadriver import (
    STATE_DISABLED,
    STATE_NOT_READY,
    STATE_READY,
    NVIDIADriver,
)
from controllers.gpu.clusterpolicy import active_policy
from controllers.gpu.config import GPUConfig
from controllers.gpu.openshift import read_openshift
from controllers.reconciler import Event, Kind
from nimctl_runtime.client.errors import ApiError, NotFound
from nimctl_runtime.client.interfaces import KeyReader, Reader
from nimctl_runtime.meta import Obj, dig, name_of, set_condition
from platforms.capabilities import Capabilities
from platforms.contract import Blocked, Observed, Readiness
from platforms.gpu.facts import ClusterFacts
from platforms.gpu.nvidiadriver import (
    API_VERSION,
    KIND,
    NVIDIADriverContract,
    conflict_readiness,
    disabled_readiness,
    multiple_defaults_readiness,
)
from platforms.gpu.nvidiadriver_pools import (
    OS_MAJOR_LABEL,
    OSTREE_LABEL,
    DriverSelector,
    assign_owners,
    conflicts,
)
from platforms.gpu.nvidiadriver_render import NVIDIADriverFacts, shared_owner
from platforms.parsing import parse_or_fail

RECORDER_NAME = "nvidia-driver-controller"
CP_API = "nvidia.com/v1"

__all__ = [
    "RECORDER_NAME",
    "NVIDIADriverKind",
    "driver_mode",
    "driver_selectors",
    "driver_status",
]


def driver_status(old: Mapping[str, Any], readiness: Readiness, namespace: str) -> Obj:
    """NVIDIA's NVIDIADriver status for ``readiness`` (pure)."""
    conditions = list(old.get("conditions") or [])
    if readiness.ready:
        state = STATE_READY
        conditions = set_condition(
            conditions, CONDITION_READY, "True", readiness.reason, readiness.message
        )
        conditions = set_condition(conditions, CONDITION_ERROR, "False", "Ready", "")
    else:
        state = STATE_DISABLED if readiness.state == STATE_DISABLED else STATE_NOT_READY
        conditions = set_condition(conditions, CONDITION_READY, "False", "Error", "")
        conditions = set_condition(
            conditions, CONDITION_ERROR, "True", readiness.reason, readiness.message
        )
    return {"state": state, "namespace": namespace, "conditions": conditions}


def driver_selectors(drivers: Sequence[Mapping[str, Any]]) -> list[DriverSelector]:
    """The ownership view of every NVIDIADriver not being deleted, by name."""
    out: list[DriverSelector] = []
    for d in sorted(drivers, key=name_of):
        if dig(d, "metadata", "deletionTimestamp"):
            continue
        selector = dig(d, "spec", "nodeSelector") or {}
        out.append(
            DriverSelector(
                name_of(d),
                {str(k): str(v) for k, v in selector.items()},
                bool(dig(d, "spec", "default")),
            )
        )
    return out


def driver_mode(policies: Sequence[Mapping[str, Any]]) -> tuple[bool, Obj | None]:
    """Whether NVIDIADrivers manage the drivers (no ClusterPolicy, or one with
    ``driver.useNvidiaDriverCRD: true``), and the active ClusterPolicy."""
    active = active_policy(policies)
    cp = next((dict(p) for p in policies if name_of(p) == active), None)
    if cp is None:
        return True, None
    return bool(dig(cp, "spec", "driver", "useNvidiaDriverCRD")), cp


@dataclass(frozen=True)
class _MemoNode:
    name: str
    os_id: str
    os_version: str
    kernel: str
    os_major: str
    ostree: str


class NVIDIADriverKind(Kind[NVIDIADriver, NVIDIADriverFacts]):
    """NVIDIADriver: facts from the cache, the blocked states, NVIDIA's status words."""

    api_version = API_VERSION
    kind = KIND
    finalizer = None
    create_only = frozenset({"ServiceAccount"})
    keep_on_prune: frozenset[str] = frozenset()

    def __init__(
        self,
        *,
        config: GPUConfig,
        api_reader: KeyReader,
        capabilities: Capabilities | None = None,
    ) -> None:
        self.contract = NVIDIADriverContract()
        self.config = config
        self.api_reader = api_reader
        self.capabilities = capabilities or Capabilities.nothing()

    def parse(self, obj: Obj) -> NVIDIADriver:
        return parse_or_fail(NVIDIADriver, obj, REASON_RECONCILE_FAILED, stored=True)

    async def gather(self, cr: NVIDIADriver, obj: Obj, reader: Reader) -> NVIDIADriverFacts:
        enabled, cp_obj = driver_mode(await reader.list(CP_API, "ClusterPolicy"))
        if not enabled:
            raise Blocked(disabled_readiness())
        name = name_of(obj)
        selectors = driver_selectors(await reader.list(API_VERSION, KIND))
        defaults = [s.name for s in selectors if s.default]
        if cr.spec.default and len(defaults) > 1:
            raise Blocked(multiple_defaults_readiness(defaults))
        nodes = await reader.list("v1", "Node")
        conflict = conflicts(selectors, nodes).get(name)
        if conflict is not None:
            raise Blocked(conflict_readiness(conflict))
        host_paths = None
        if cp_obj is not None:
            try:
                host_paths = ClusterPolicy.model_validate(cp_obj).spec.host_paths
            except ValidationError:
                host_paths = None  # the ClusterPolicy controller reports its spec
        ocp = await read_openshift(reader, self.capabilities, driver=True)
        cluster = ClusterFacts.from_nodes(
            nodes,
            operator_namespace=self.config.operator_namespace,
            openshift=ocp.version,
            openshift_proxy=ocp.proxy,
            operator_env=self.config.operator_env,
            config_map_keys=await self._config_map_keys(cr),
        )
        owners = assign_owners(selectors, nodes)
        pods = await reader.list("v1", "Pod", self.config.operator_namespace)
        return NVIDIADriverFacts(
            cluster=cluster,
            nodes=tuple(nodes),
            owners=owners,
            host_paths=host_paths,
            dtk_images=ocp.dtk_images,
            proxy=ocp.proxy,
            shared_owner=shared_owner(owners, conflicts(selectors, nodes)),
            pods=tuple(pods),
        )

    async def _config_map_keys(self, cr: NVIDIADriver) -> dict[str, list[str]]:
        """Keys of the user ConfigMaps the driver mounts file by file (read through the API)."""
        spec = cr.spec
        names = {
            ref.name
            for ref in (spec.kernel_module_config, spec.repo_config, spec.cert_config)
            if ref is not None and ref.name
        }
        out: dict[str, list[str]] = {}
        for name in sorted(names):
            try:
                cm = await self.api_reader.get(
                    "v1", "ConfigMap", name, self.config.operator_namespace
                )
            except (NotFound, ApiError):
                continue
            out[name] = sorted({*(cm.get("data") or {}), *(cm.get("binaryData") or {})})
        return out

    def memo_key(
        self, cr: NVIDIADriver, obj: Obj, facts: NVIDIADriverFacts
    ) -> tuple[Any, ...] | None:
        name = name_of(obj)
        owned = tuple(
            _MemoNode(
                n.name,
                n.os_id,
                n.os_version,
                n.kernel,
                n.labels.get(OS_MAJOR_LABEL, ""),
                n.labels.get(OSTREE_LABEL, ""),
            )
            for n in ClusterFacts.from_nodes(
                [x for x in facts.nodes if facts.owners.get(name_of(x)) == name],
                operator_namespace="",
            ).nodes
        )
        host_paths = facts.host_paths.model_dump_json() if facts.host_paths else ""
        return (
            cr.metadata.uid,
            dig(obj, "metadata", "generation"),
            owned,
            tuple(sorted(facts.cluster.config_map_keys.items())),
            host_paths,
            facts.shared_owner,
            facts.cluster.openshift,
            tuple(sorted(facts.dtk_images.items())),
            json.dumps(facts.proxy, sort_keys=True),
        )

    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        return driver_status(old, readiness, self.config.operator_namespace)

    def event(self, obj: Obj, readiness: Readiness) -> Event | None:
        if readiness.reason in (REASON_CONFLICTING_NODE_SELECTOR, REASON_RECONCILE_FAILED):
            return ("Warning", readiness.reason, readiness.message)
        return None

    def failure_reason(self, kind: str) -> str:
        return REASON_RECONCILE_FAILED

    def failure_event(self, obj: Obj, message: str) -> Event | None:
        return ("Warning", REASON_RECONCILE_FAILED, message)
