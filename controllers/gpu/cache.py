"""The GPU controllers' own cache: operator namespace only, Nodes and driver pods trimmed.

NVIDIA caches every Node in full and every namespaced object of the operator
namespace (gpu-operator.md §7). This cache holds only what the ClusterPolicy
and node-labelling controllers read:

- namespaced objects in ``OPERATOR_NAMESPACE`` only;
- the kinds a ClusterPolicy owns, filtered by nimctl's managed-by label (an
  NFD or user DaemonSet in the same namespace is never cached);
- Nodes through ``trim_node``: name, identity, the labels the controllers read
  (the deploy labels, GPU presence, workload config, MIG and product labels,
  the few NFD labels renders use; not GFD's dozen others), one annotation, the
  container runtime and the ``nvidia.com/*`` capacity. Memory per node does
  not grow with the size of the Node (images, conditions, NFD's hundreds of
  labels);
- on OpenShift the ClusterVersion ``version`` (its update history only) and the
  ``cluster`` Proxy (its spec);
- Pods: only driver pods (``app.kubernetes.io/component=nvidia-driver``),
  trimmed to what the OnDelete readiness check reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from nimctl_runtime.cache.cache import ByObject, Cache
from nimctl_runtime.client.client import Client
from nimctl_runtime.meta import Obj, dig
from platforms.gpu.facts import (
    KERNEL_LABEL,
    NFD_GPU_LABELS,
    NFD_LABEL_PREFIX,
    OS_ID_LABEL,
    OS_VERSION_LABEL,
)

DRIVER_COMPONENT_LABEL: Final = "app.kubernetes.io/component"
DRIVER_COMPONENT: Final = "nvidia-driver"
KEPT_NFD_LABELS: Final = frozenset(
    (
        *NFD_GPU_LABELS,
        KERNEL_LABEL,
        OS_ID_LABEL,
        OS_VERSION_LABEL,
        OS_VERSION_LABEL + ".major",
        "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION",
        "feature.node.kubernetes.io/pci-15b3.present",
    )
)
KEPT_ANNOTATIONS: Final = frozenset({"nvidia.com/gpu-driver-upgrade-enabled"})
KEPT_POD_LABELS: Final = frozenset({"app", DRIVER_COMPONENT_LABEL, "controller-revision-hash"})
KEPT_LABEL_PREFIX: Final = "nvidia.com/gpu.deploy."
KEPT_NVIDIA_LABELS: Final = frozenset(
    {
        "nvidia.com/gpu.present",
        "nvidia.com/gpu.workload.config",
        "nvidia.com/gpu.product",
        "nvidia.com/mig.capable",
        "nvidia.com/mig.config",
        "nvidia.com/vgpu.host-driver-version",
        "nvidia.com/gpu-driver-upgrade-state",
        "nvidia.com/gpu-driver-upgrade.skip",
        "nvidia.com/gpu-operator.driver.owner",
    }
)

__all__ = ["gpu_cache", "trim_driver_pod", "trim_node"]


def trim_node(node: Obj) -> Obj:
    """The part of a Node the GPU controllers read (see the module docstring).

    Of the other NFD labels one is kept, so "the cluster has NFD labels" keeps
    its answer.
    """
    meta = node.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    kept: dict[str, str] = {}
    other_nfd: str | None = None
    for key, value in labels.items():
        if key.startswith(KEPT_LABEL_PREFIX) or key in KEPT_NVIDIA_LABELS or key in KEPT_NFD_LABELS:
            kept[key] = value
        elif key.startswith(NFD_LABEL_PREFIX) and (other_nfd is None or key < other_nfd):
            other_nfd = key
    if other_nfd is not None and not any(k.startswith(NFD_LABEL_PREFIX) for k in kept):
        kept[other_nfd] = labels[other_nfd]
    out_meta: Obj = {
        k: meta[k] for k in ("name", "resourceVersion", "deletionTimestamp") if k in meta
    }
    out_meta["labels"] = kept
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k in KEPT_ANNOTATIONS
    }
    if annotations:
        out_meta["annotations"] = annotations
    status = node.get("status") or {}
    runtime = (status.get("nodeInfo") or {}).get("containerRuntimeVersion")
    out_status: Obj = {}
    if runtime:
        out_status["nodeInfo"] = {"containerRuntimeVersion": runtime}
    for field in ("capacity", "allocatable"):
        gpus = {k: v for k, v in (status.get(field) or {}).items() if k.startswith("nvidia.com/")}
        if gpus:
            out_status[field] = gpus
    return {"apiVersion": "v1", "kind": "Node", "metadata": out_meta, "status": out_status}


def _trim_container_status(status: Obj) -> Obj:
    """What readiness and the blocker finder read of a container status."""
    out: Obj = {k: status[k] for k in ("name", "restartCount") if k in status}
    out["ready"] = bool(status.get("ready"))
    waiting = dig(status, "state", "waiting")
    if waiting:
        out["state"] = {"waiting": {k: waiting[k] for k in ("reason", "message") if k in waiting}}
    elif dig(status, "state", "terminated"):
        term = status["state"]["terminated"]
        out["state"] = {"terminated": {k: term[k] for k in _TERMINATED if k in term}}
    last = dig(status, "lastState", "terminated")
    if last:
        out["lastState"] = {"terminated": {k: last[k] for k in _TERMINATED if k in last}}
    return out


_TERMINATED = ("exitCode", "reason")
_POD_CONDITIONS = ("PodScheduled", "Ready")


def trim_driver_pod(pod: Obj) -> Obj:
    """What the OnDelete readiness check and the blocker finder read of an operand pod:
    its DaemonSet's selector labels (``app``, the component) and revision hash, its
    controller, node, phase, container states (waiting reason, last exit) and the
    scheduling and ready conditions."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in KEPT_POD_LABELS}
    owners = [
        {k: ref[k] for k in ("kind", "name", "uid", "controller") if k in ref}
        for ref in meta.get("ownerReferences") or []
        if ref.get("controller")
    ]
    out_meta: Obj = {
        k: meta[k]
        for k in (
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
        )
        if k in meta
    }
    out_meta["labels"] = labels
    out_meta["ownerReferences"] = owners
    out_status: Obj = {
        "phase": status.get("phase"),
        "containerStatuses": [
            _trim_container_status(s) for s in status.get("containerStatuses") or []
        ],
    }
    if status.get("initContainerStatuses"):
        out_status["initContainerStatuses"] = [
            _trim_container_status(s) for s in status["initContainerStatuses"]
        ]
    conditions = [
        {k: c[k] for k in ("type", "status", "reason", "message") if k in c}
        for c in status.get("conditions") or []
        if c.get("type") in _POD_CONDITIONS
    ]
    if conditions:
        out_status["conditions"] = conditions
    out: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": out_meta, "status": out_status}
    node = dig(pod, "spec", "nodeName")
    if node:
        out["spec"] = {"nodeName": node}
    return out


def gpu_cache(
    client: Client,
    operator_namespace: str,
    owned_kinds: Iterable[tuple[str, str]],
    extra: Mapping[tuple[str, str], ByObject] | None = None,
) -> Cache:
    """The cache the ClusterPolicy and node-labelling controllers read from; ``extra``:
    more kinds' options (OpenShift's ClusterVersion and Proxy, ``controllers.gpu.openshift``)."""
    managed = ByObject(label_selector={MANAGED_BY_LABEL: MANAGED_BY_VALUE})
    by_object: dict[tuple[str, str], ByObject] = {gvk: managed for gvk in owned_kinds}
    by_object.update(extra or {})
    # Nodes are read whole, never by label selector: no label index (its sets cost
    # more per node than the trimmed node itself), no label pairs beside the node.
    by_object[("v1", "Node")] = ByObject(transform=trim_node, index_labels=False, keep_labels=False)
    # Every operand pod (they all carry their DaemonSet's ``app`` label), trimmed: the
    # driver's OnDelete readiness and the blocker a not-ready operand names (issue 25).
    by_object[("v1", "Pod")] = ByObject(label_selector="app", transform=trim_driver_pod)
    return Cache(client, by_object=by_object, namespace=operator_namespace)
