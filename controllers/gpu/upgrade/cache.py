"""The upgrade controller's cache: what the plan reads, trimmed to what it reads.

- Nodes (cluster-wide): labels, the upgrade annotations, ``spec.unschedulable``
  and the Ready condition; NFD's hundreds of labels and the node status are
  dropped.
- In ``OPERATOR_NAMESPACE`` only: Pods (the operands: driver and validator pods;
  phase, readiness, restarts, ``DRIVER_CONFIG_DIGEST``), DaemonSets and
  ControllerRevisions (name, owner, revision number; not the template copy
  each one carries).
- ClusterPolicies, in full.

Workload pods and PodDisruptionBudgets are not cached: only nodes that wait
for jobs, delete GPU pods or drain need them, and the reconciler lists them
for those nodes alone (with a field selector), as NVIDIA's pod manager does.
"""

from __future__ import annotations

from controllers.gpu.upgrade import consts as c
from nimctl_runtime.cache.cache import ByObject, Cache
from nimctl_runtime.client.client import Client
from nimctl_runtime.meta import Obj

KEPT_LABEL_PREFIXES = ("nvidia.com/",)
KEPT_ANNOTATION_PREFIXES = ("nvidia.com/gpu-driver-upgrade", "nimctl.io/gpu-driver-upgrade")
META_KEYS = ("name", "namespace", "uid", "resourceVersion", "generation", "deletionTimestamp",
             "creationTimestamp", "ownerReferences")  # fmt: skip

__all__ = ["trim_node", "trim_pod", "trim_revision", "upgrade_cache"]


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {k: meta[k] for k in META_KEYS if k in meta}


def trim_node(node: Obj) -> Obj:
    """Name, ``nvidia.com/`` labels, upgrade annotations, cordon, Ready."""
    meta = node.get("metadata") or {}
    out = _meta(node)
    out["labels"] = {
        k: v for k, v in (meta.get("labels") or {}).items() if k.startswith(KEPT_LABEL_PREFIXES)
    }
    out["annotations"] = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k.startswith(KEPT_ANNOTATION_PREFIXES)
    }
    conditions = [
        {"type": "Ready", "status": cond.get("status")}
        for cond in (node.get("status") or {}).get("conditions") or []
        if cond.get("type") == "Ready"
    ]
    spec = {"unschedulable": True} if (node.get("spec") or {}).get("unschedulable") else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": out, "spec": spec,
            "status": {"conditions": conditions}}  # fmt: skip


def _digest_env(container: Obj) -> list[Obj]:
    return [e for e in container.get("env") or [] if e.get("name") == c.CONFIG_DIGEST_ENV]


def trim_pod(pod: Obj) -> Obj:
    """What the plan reads of an operand pod."""
    out = _meta(pod)
    out["labels"] = (pod.get("metadata") or {}).get("labels") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": out,
        "spec": {
            "nodeName": spec.get("nodeName"),
            "containers": [
                {"name": x.get("name"), "env": _digest_env(x)} for x in spec.get("containers") or []
            ],
        },
        "status": {
            "phase": status.get("phase"),
            **{
                key: [
                    {
                        "name": s.get("name"),
                        "ready": bool(s.get("ready")),
                        "restartCount": int(s.get("restartCount") or 0),
                    }
                    for s in status.get(key) or []
                ]
                for key in ("containerStatuses", "initContainerStatuses")
            },
        },
    }


def trim_revision(revision: Obj) -> Obj:
    """Name, owner and number of a ControllerRevision (not its data)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": _meta(revision),
        "revision": revision.get("revision"),
    }


def upgrade_cache(client: Client, operator_namespace: str) -> Cache:
    """The cache the upgrade controller reads from (see the module docstring)."""
    by_object = {
        ("v1", "Node"): ByObject(transform=trim_node),
        ("v1", "Pod"): ByObject(transform=trim_pod),
        ("apps/v1", "ControllerRevision"): ByObject(transform=trim_revision),
    }
    return Cache(client, by_object=by_object, namespace=operator_namespace)
