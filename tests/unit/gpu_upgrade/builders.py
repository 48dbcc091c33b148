"""Objects for the upgrade plan tests: GPU nodes, the driver DaemonSet and its revisions, pods."""

from __future__ import annotations

from controllers.gpu.upgrade import consts as c
from nimctl_runtime.meta import Obj

NS = "gpu-operator"
DS_UID = "ds-uid"
OLD, NEW = "oldhash", "newhash"


def node(
    name: str,
    state: str | None = None,
    *,
    cordoned: bool = False,
    ready: bool = True,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    all_labels = {"nvidia.com/gpu.present": "true", **(labels or {})}
    if state is not None:
        all_labels[c.STATE_LABEL] = state
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels, "annotations": dict(annotations or {})},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def daemonset(digest: str = "d1") -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-driver-daemonset", "namespace": NS, "uid": DS_UID},
        "spec": {
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "nvidia-driver-ctr",
                            "env": [{"name": c.CONFIG_DIGEST_ENV, "value": digest}],
                        }
                    ]
                }
            },
        },
    }


def revisions(current: str = NEW) -> list[Obj]:
    out = []
    for number, h in enumerate((OLD, NEW) if current == NEW else (OLD,), start=1):
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": {
                    "name": f"nvidia-driver-daemonset-{h}",
                    "namespace": NS,
                    "ownerReferences": [{"uid": DS_UID, "controller": True}],
                },
                "revision": number,
            }
        )
    return out


def driver_pod(
    node_name: str,
    revision: str = OLD,
    *,
    ready: bool = True,
    restarts: int = 0,
    digest: str = "d0",
    deleting: bool = False,
) -> Obj:
    meta: Obj = {
        "name": f"nvidia-driver-daemonset-{node_name}",
        "namespace": NS,
        "labels": {"app": "nvidia-driver-daemonset", c.REVISION_HASH_LABEL: revision},
        "ownerReferences": [
            {"kind": "DaemonSet", "name": "nvidia-driver-daemonset", "uid": DS_UID,
             "controller": True}
        ],
    }  # fmt: skip
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "nvidia-driver-ctr",
                    "env": [{"name": c.CONFIG_DIGEST_ENV, "value": digest}],
                }
            ],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "nvidia-driver-ctr", "ready": ready, "restartCount": restarts}
            ],
        },
    }


def validator_pod(node_name: str, *, ready: bool = True) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"nvidia-operator-validator-{node_name}",
            "namespace": NS,
            "labels": {"app": "nvidia-operator-validator"},
            "ownerReferences": [{"kind": "DaemonSet", "name": "v", "uid": "v", "controller": True}],
        },
        "spec": {"nodeName": node_name},
        "status": {"phase": "Running", "containerStatuses": [{"name": "v", "ready": ready}]},
    }


def workload(
    name: str,
    node_name: str,
    *,
    gpus: int = 1,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    controller: bool = True,
    empty_dir: bool = False,
    phase: str = "Running",
    resource: str = "nvidia.com/gpu",
) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {"app": name})}
    if controller:
        meta["ownerReferences"] = [
            {"kind": "ReplicaSet", "name": f"{name}-rs", "uid": f"{name}-rs", "controller": True}
        ]
    container: Obj = {"name": "main"}
    if gpus:
        container["resources"] = {"limits": {resource: str(gpus)}}
    spec: Obj = {"nodeName": node_name, "containers": [container]}
    if empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": phase}}  # fmt: skip


def pdb(name: str, selector: dict[str, str], allowed: int, namespace: str = "default") -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": selector}},
        "status": {"disruptionsAllowed": allowed},
    }
