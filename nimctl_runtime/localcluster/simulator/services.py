"""Service, Ingress, PersistentVolumeClaim and HorizontalPodAutoscaler logic.

* A ``LoadBalancer`` Service and every Ingress get ``status.loadBalancer.ingress``
  with an address from ``172.18.255.0/24`` (as MetalLB or a cloud would set).
* A Pending PVC whose StorageClass exists is provisioned: a PersistentVolume
  ``pvc-<uid>`` is created and both are Bound (``Immediate`` binding).
* An HPA reports the target's replicas, clamps them into
  ``[minReplicas, maxReplicas]`` (scaling the target when it is outside), and
  carries the ``AbleToScale``/``ScalingActive``/``ScalingLimited`` conditions.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from nimctl_runtime.localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    Delete,
    Emit,
    Obj,
    Update,
    UpdateStatus,
    annotations_of,
    generation_of,
    name_of,
    namespace_of,
    set_condition,
    status_changed,
    uid_of,
    with_status,
)

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
PROVISIONER = "localcluster.nimctl.io/hostpath"


def load_balancer_ip(obj: Obj) -> str:
    """A stable address for *obj* (derived from its uid)."""
    digest = hashlib.sha256(uid_of(obj).encode() or name_of(obj).encode()).digest()
    return f"172.18.255.{digest[0] % 250 + 2}"


def reconcile_service(svc: Obj, ctx: Context) -> list[Action]:
    """Give LoadBalancer Services an ingress address; drop it for other types."""
    del ctx
    spec = svc.get("spec") or {}
    status = copy.deepcopy(dict(svc.get("status") or {}))
    if spec.get("type") == "LoadBalancer":
        status["loadBalancer"] = {"ingress": [{"ip": load_balancer_ip(svc), "ipMode": "VIP"}]}
    else:
        status["loadBalancer"] = {}
    if status_changed(svc, status):
        return [UpdateStatus(with_status(svc, status))]
    return []


def reconcile_ingress(ing: Obj, ctx: Context) -> list[Action]:
    """Give every Ingress a load-balancer address, as an ingress controller would."""
    del ctx
    status = {"loadBalancer": {"ingress": [{"ip": load_balancer_ip(ing)}]}}
    if status_changed(ing, status):
        return [UpdateStatus(with_status(ing, status))]
    return []


def default_storage_class() -> Obj:
    """The StorageClass the simulator installs (default, provisions at once)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "standard", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True,
    }


def default_class_name(ctx: Context) -> str | None:
    """The default StorageClass's name, if there is one."""
    for sc in sorted(ctx.view.list("StorageClass"), key=name_of):
        if annotations_of(sc).get(DEFAULT_CLASS_ANNOTATION) == "true":
            return name_of(sc)
    return None


def reconcile_pvc(pvc: Obj, ctx: Context) -> list[Action]:
    """Provision and bind a Pending claim whose StorageClass exists."""
    spec = pvc.get("spec") or {}
    phase = (pvc.get("status") or {}).get("phase")
    if phase == "Bound" or (pvc.get("metadata") or {}).get("deletionTimestamp"):
        return []
    actions: list[Action] = []
    class_name = spec.get("storageClassName")
    volume_name = spec.get("volumeName")
    if volume_name:
        pv = ctx.view.get("PersistentVolume", "", str(volume_name))
        if pv is None:
            return _pending(pvc)
    else:
        if class_name is None:
            class_name = default_class_name(ctx)
        if not class_name or ctx.view.get("StorageClass", "", str(class_name)) is None:
            pending = _pending(pvc)
            if pending and class_name:
                pending.append(
                    Emit(
                        pvc,
                        "Warning",
                        "ProvisioningFailed",
                        f'storageclass.storage.k8s.io "{class_name}" not found',
                    )
                )
            return pending
        volume_name = f"pvc-{uid_of(pvc)}"
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        if ctx.view.get("PersistentVolume", "", volume_name) is None:
            actions.append(
                Create(
                    {
                        "apiVersion": "v1",
                        "kind": "PersistentVolume",
                        "metadata": {
                            "name": volume_name,
                            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
                            "finalizers": ["kubernetes.io/pv-protection"],
                        },
                        "spec": {
                            "capacity": {"storage": storage},
                            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                            "persistentVolumeReclaimPolicy": "Delete",
                            "storageClassName": class_name,
                            "volumeMode": spec.get("volumeMode", "Filesystem"),
                            "hostPath": {"path": f"/var/lib/localcluster/volumes/{volume_name}"},
                            "claimRef": {
                                "apiVersion": "v1",
                                "kind": "PersistentVolumeClaim",
                                "namespace": namespace_of(pvc),
                                "name": name_of(pvc),
                                "uid": uid_of(pvc),
                            },
                        },
                        "status": {"phase": "Bound"},
                    }
                )
            )
            actions.append(
                Emit(
                    pvc,
                    "Normal",
                    "ProvisioningSucceeded",
                    f"Successfully provisioned volume {volume_name}",
                )
            )
    bound = copy.deepcopy(pvc)
    bound["spec"]["volumeName"] = volume_name
    if class_name and "storageClassName" not in bound["spec"]:
        bound["spec"]["storageClassName"] = class_name
    annotations = bound["metadata"].setdefault("annotations", {})
    annotations["pv.kubernetes.io/bind-completed"] = "yes"
    annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
    annotations["volume.kubernetes.io/storage-provisioner"] = PROVISIONER
    pv = ctx.view.get("PersistentVolume", "", str(volume_name))
    capacity = ((pv or {}).get("spec") or {}).get("capacity") or {
        "storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    }
    actions.append(Update(bound))
    status: Obj = {
        "phase": "Bound",
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "capacity": dict(capacity),
    }
    actions.append(UpdateStatus(with_status(bound, status)))
    return actions


def _pending(pvc: Obj) -> list[Action]:
    if (pvc.get("status") or {}).get("phase") == "Pending":
        return []
    return [UpdateStatus(with_status(pvc, {"phase": "Pending"}))]


def reconcile_pv(pv: Obj, ctx: Context) -> list[Action]:
    """Delete a provisioned volume once its claim is gone (reclaim policy Delete)."""
    spec = pv.get("spec") or {}
    claim = spec.get("claimRef") or {}
    actions: list[Action] = []
    if (pv.get("metadata") or {}).get("deletionTimestamp"):
        finalizers = (pv.get("metadata") or {}).get("finalizers") or []
        if "kubernetes.io/pv-protection" in finalizers:
            released = copy.deepcopy(pv)
            released["metadata"]["finalizers"] = [
                f for f in finalizers if f != "kubernetes.io/pv-protection"
            ]
            actions.append(Update(released))
        return actions
    if not claim:
        return actions
    pvc = ctx.view.get(
        "PersistentVolumeClaim", str(claim.get("namespace", "")), str(claim.get("name", ""))
    )
    if pvc is None or uid_of(pvc) != claim.get("uid"):
        if spec.get("persistentVolumeReclaimPolicy") == "Delete":
            actions.append(Delete("v1", "PersistentVolume", "", name_of(pv)))
        elif (pv.get("status") or {}).get("phase") != "Released":
            actions.append(UpdateStatus(with_status(pv, {"phase": "Released"})))
    elif (pv.get("status") or {}).get("phase") != "Bound":
        actions.append(UpdateStatus(with_status(pv, {"phase": "Bound"})))
    return actions


def _target(hpa: Obj, ctx: Context) -> Obj | None:
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    kind = str(ref.get("kind", ""))
    return ctx.view.get(kind, namespace_of(hpa), str(ref.get("name", "")))


def reconcile_hpa(hpa: Obj, ctx: Context) -> list[Action]:
    """Report the target's replicas and keep them within the HPA's bounds."""
    spec = hpa.get("spec") or {}
    stamp = ctx.stamp()
    previous: dict[str, Any] = dict(hpa.get("status") or {})
    conditions = list(previous.get("conditions") or [])
    target = _target(hpa, ctx)
    actions: list[Action] = []
    status: Obj = {"observedGeneration": generation_of(hpa)}
    ref = spec.get("scaleTargetRef") or {}
    if target is None:
        conditions = set_condition(
            conditions,
            "AbleToScale",
            "False",
            reason="FailedGetScale",
            message=(
                f"the HPA controller was unable to get the target's current scale: "
                f'{str(ref.get("kind", "")).lower()}s.apps "{ref.get("name", "")}" not found'
            ),
            stamp=stamp,
        )
        status.update(currentReplicas=0, desiredReplicas=0, conditions=conditions)
    else:
        current = int((target.get("spec") or {}).get("replicas", 1))
        low = int(spec.get("minReplicas", 1))
        high = int(spec.get("maxReplicas", current))
        desired = min(max(current, low), high)
        conditions = set_condition(
            conditions,
            "AbleToScale",
            "True",
            reason="ReadyForNewScale",
            message="recommended size matches current size",
            stamp=stamp,
        )
        conditions = set_condition(
            conditions,
            "ScalingActive",
            "True",
            reason="ValidMetricFound",
            message=(
                "the HPA was able to successfully calculate a replica count from cpu resource "
                "utilization (percentage of request)"
            ),
            stamp=stamp,
        )
        if current < low:
            limited = (
                "True",
                "TooFewReplicas",
                "the desired replica count is less than the minimum replica count",
            )
        elif current > high:
            limited = (
                "True",
                "TooManyReplicas",
                "the desired replica count is more than the maximum replica count",
            )
        else:
            limited = (
                "False",
                "DesiredWithinRange",
                "the desired count is within the acceptable range",
            )
        conditions = set_condition(
            conditions,
            "ScalingLimited",
            limited[0],
            reason=limited[1],
            message=limited[2],
            stamp=stamp,
        )
        status.update(
            currentReplicas=int((target.get("status") or {}).get("replicas") or 0),
            desiredReplicas=desired,
            conditions=conditions,
        )
        if previous.get("lastScaleTime"):
            status["lastScaleTime"] = previous["lastScaleTime"]
        if desired != current:
            scaled = copy.deepcopy(target)
            scaled["spec"]["replicas"] = desired
            actions.append(Update(scaled))
            status["lastScaleTime"] = stamp
            actions.append(
                Emit(
                    hpa,
                    "Normal",
                    "SuccessfulRescale",
                    f"New size: {desired}; reason: "
                    + (
                        "Current number of replicas below Spec.MinReplicas"
                        if desired > current
                        else "Current number of replicas above Spec.MaxReplicas"
                    ),
                )
            )
    if status_changed(hpa, status):
        actions.append(UpdateStatus(with_status(hpa, status)))
    return actions
