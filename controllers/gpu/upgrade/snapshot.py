"""The cluster as the upgrade plan sees it: one ``ManagedNode`` per node with a driver.

A node is managed when it runs a driver pod (NVIDIA's ``BuildState``), and
also, unlike NVIDIA, while it carries an in-progress upgrade state but its
driver pod is momentarily gone (deleted for the restart, not recreated yet):
NVIDIA drops such a node from the counts, which frees an upgrade slot it is
still using.

A driver pod is *in sync* when its ``controller-revision-hash`` is the hash
of its DaemonSet's newest ControllerRevision; an orphaned pod (no driver
DaemonSet owns it) is never in sync. ``None`` means undecidable (the
DaemonSet has no revision yet). A node with an orphaned driver pod and
a DaemonSet's pod is judged by the orphan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from controllers.gpu.upgrade.consts import (
    CONFIG_DIGEST_ENV,
    IDLE_STATES,
    REVISION_HASH_LABEL,
    STATE_LABEL,
)
from nimctl_runtime.labels import Selector
from nimctl_runtime.meta import ObjView, controller_of, dig, name_of, uid_of
from platforms.gpu.readiness import newest_revision_hash

__all__ = [
    "ManagedNode",
    "build_nodes",
    "config_digest",
    "node_ready",
    "pod_ready",
    "pods_by_node",
    "restart_count",
]


def node_ready(node: ObjView) -> bool:
    """The node's Ready condition is True."""
    for cond in dig(node, "status", "conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def pod_ready(pod: ObjView | None) -> bool:
    """Running, not terminating, every container ready."""
    if pod is None or dig(pod, "metadata", "deletionTimestamp"):
        return False
    if dig(pod, "status", "phase") != "Running":
        return False
    statuses = dig(pod, "status", "containerStatuses") or []
    return bool(statuses) and all(bool(s.get("ready")) for s in statuses)


def restart_count(pod: ObjView) -> int:
    """The highest restart count of the pod's containers (init containers included)."""
    counts = [
        int(s.get("restartCount") or 0)
        for key in ("initContainerStatuses", "containerStatuses")
        for s in dig(pod, "status", key) or []
    ]
    return max(counts, default=0)


def config_digest(template_or_pod: ObjView) -> str | None:
    """``DRIVER_CONFIG_DIGEST`` of the first container that sets it (pod or pod template)."""
    spec = dig(template_or_pod, "spec", "template", "spec") or dig(template_or_pod, "spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for env in container.get("env") or []:
            if env.get("name") == CONFIG_DIGEST_ENV and env.get("value"):
                return str(env["value"])
    return None


def pods_by_node(pods: Iterable[ObjView]) -> dict[str, list[ObjView]]:
    """Pods grouped by ``spec.nodeName`` (unscheduled pods left out)."""
    out: dict[str, list[ObjView]] = {}
    for pod in pods:
        node = dig(pod, "spec", "nodeName")
        if node:
            out.setdefault(str(node), []).append(pod)
    return out


@dataclass(frozen=True)
class ManagedNode:
    """One node under the upgrade controller."""

    node: ObjView
    state: str
    driver_pod: ObjView | None = None
    daemonset: ObjView | None = None
    in_sync: bool | None = None
    pods: Sequence[ObjView] = field(default_factory=tuple)
    current_revision: str | None = None
    """The hash of the driver DaemonSet's newest revision."""

    @property
    def name(self) -> str:
        return name_of(self.node)

    @property
    def labels(self) -> Mapping[str, str]:
        return dig(self.node, "metadata", "labels") or {}

    @property
    def annotations(self) -> Mapping[str, str]:
        return dig(self.node, "metadata", "annotations") or {}

    @property
    def unschedulable(self) -> bool:
        return bool(dig(self.node, "spec", "unschedulable"))

    @property
    def restart_only(self) -> bool:
        """NVIDIA's restart-only predicate: the driver's config digest did not change."""
        if self.driver_pod is None or self.daemonset is None:
            return False
        running = config_digest(self.driver_pod)
        return running is not None and running == config_digest(self.daemonset)


def _owned(pod: ObjView, daemonsets: Mapping[str, ObjView]) -> bool:
    owner = controller_of(pod)
    return owner is not None and str(owner.get("uid")) in daemonsets


def build_nodes(
    nodes: Iterable[ObjView],
    pods: Iterable[ObjView],
    daemonsets: Iterable[ObjView],
    revisions: Iterable[ObjView],
    driver_selector: Selector,
) -> list[ManagedNode]:
    """The managed nodes, sorted by name (see the module docstring)."""
    by_uid = {uid_of(ds): ds for ds in daemonsets}
    hashes = {uid: newest_revision_hash(ds, revisions) for uid, ds in by_uid.items()}
    grouped = pods_by_node(pods)
    out: list[ManagedNode] = []
    for node in sorted(nodes, key=name_of):
        name = name_of(node)
        on_node = grouped.get(name, [])
        drivers = [p for p in on_node if driver_selector.matches(dig(p, "metadata", "labels"))]
        live = [p for p in drivers if not dig(p, "metadata", "deletionTimestamp")]
        # An orphaned driver pod beside a DaemonSet's (after a handover to NVIDIADriver;
        # the new pod waits on the anti-affinity) decides: the node is not upgraded yet.
        live.sort(key=lambda p: _owned(p, by_uid))
        chosen = live or drivers
        driver: ObjView | None = chosen[0] if chosen else None
        state = str((dig(node, "metadata", "labels") or {}).get(STATE_LABEL, ""))
        if driver is None and state in IDLE_STATES:
            continue
        daemonset: ObjView | None = None
        in_sync: bool | None = None
        current: str | None = None
        if driver is not None:
            owner = controller_of(driver)
            daemonset = by_uid.get(str(owner.get("uid"))) if owner else None
            if daemonset is None:
                in_sync = False
            else:
                current = hashes.get(uid_of(daemonset))
                pod_hash = (dig(driver, "metadata", "labels") or {}).get(REVISION_HASH_LABEL)
                in_sync = None if current is None else pod_hash == current
        out.append(ManagedNode(node, state, driver, daemonset, in_sync, tuple(on_node), current))
    return out
