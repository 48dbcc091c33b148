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

from localcluster.simulator.kubelet import is_pod_ready
from localcluster.simulator.objects import (
    SAFE_ALPHABET,
    Action,
    Context,
    Create,
    Delete,
    Emit,
    Update,
    UpdateStatus,
    annotations_of,
    generation_of,
    json_copy,
    name_of,
    namespace_of,
    owner_reference,
    set_condition,
    status_changed,
    uid_of,
    with_status,
)
from nimctl_runtime.meta import Obj

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
    status = json_copy(dict(svc.get("status") or {}))
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


PVC_PROTECTION = "kubernetes.io/pvc-protection"


def claim_in_use(pvc: Obj, ctx: Context) -> bool:
    """A pod that has not finished mounts the claim (the pvc-protection controller's test)."""
    name = name_of(pvc)
    for pod in ctx.view.list("Pod", namespace_of(pvc)):
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            if (volume.get("persistentVolumeClaim") or {}).get("claimName") == name:
                return True
    return False


def reconcile_pvc(pvc: Obj, ctx: Context) -> list[Action]:
    """Provision and bind a Pending claim whose StorageClass exists; release a deleted
    claim's ``kubernetes.io/pvc-protection`` finalizer once no pod uses it."""
    spec = pvc.get("spec") or {}
    phase = (pvc.get("status") or {}).get("phase")
    meta = pvc.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        finalizers = meta.get("finalizers") or []
        if PVC_PROTECTION in finalizers and not claim_in_use(pvc, ctx):
            released = copy.deepcopy(pvc)
            released["metadata"]["finalizers"] = [f for f in finalizers if f != PVC_PROTECTION]
            return [Update(released)]
        return []
    if phase == "Bound":
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


ENDPOINTS_MANAGED_BY = "endpoints.kubernetes.io/managed-by"
SLICE_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def _target_port(port: Obj, pod: Obj) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for cport in container.get("ports") or []:
            if cport.get("name") == target:
                return int(cport.get("containerPort", 0)) or None
    return None


def _selected_pods(svc: Obj, ctx: Context) -> list[Obj]:
    selector = (svc.get("spec") or {}).get("selector") or {}
    out = []
    for pod in ctx.view.labelled("Pod", namespace_of(svc), selector):
        status = pod.get("status") or {}
        if (pod.get("metadata") or {}).get("deletionTimestamp") or not status.get("podIP"):
            continue
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        out.append(pod)
    return sorted(out, key=name_of)


def endpoints_for(svc: Obj, ctx: Context) -> tuple[Obj, Obj]:
    """The Endpoints and EndpointSlice the endpoint controllers would keep for *svc*."""
    ports = (svc.get("spec") or {}).get("ports") or []
    pods = _selected_pods(svc, ctx)
    ready: list[Obj] = []
    not_ready: list[Obj] = []
    slice_endpoints: list[Obj] = []
    resolved: dict[str, int] = {}
    for pod in pods:
        status = pod.get("status") or {}
        ip = str(status["podIP"])
        node = (pod.get("spec") or {}).get("nodeName")
        ref = {
            "kind": "Pod",
            "name": name_of(pod),
            "namespace": namespace_of(pod),
            "uid": uid_of(pod),
        }
        address: Obj = {"ip": ip, "targetRef": ref}
        if node:
            address["nodeName"] = node
        ok = is_pod_ready(pod)
        (ready if ok else not_ready).append(address)
        endpoint: Obj = {
            "addresses": [ip],
            "conditions": {"ready": ok, "serving": ok, "terminating": False},
            "targetRef": ref,
        }
        if node:
            endpoint["nodeName"] = node
        slice_endpoints.append(endpoint)
        for port in ports:
            key = str(port.get("name", ""))
            if key not in resolved:
                target = _target_port(port, pod)
                if target:
                    resolved[key] = target
    port_list = [
        {
            **({"name": port["name"]} if port.get("name") else {}),
            "port": resolved.get(
                str(port.get("name", "")), _target_port(port, {}) or port.get("port")
            ),
            "protocol": port.get("protocol", "TCP"),
        }
        for port in ports
    ]
    labels = dict((svc.get("metadata") or {}).get("labels") or {})
    endpoints: Obj = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": name_of(svc),
            "namespace": namespace_of(svc),
            "labels": {**labels, ENDPOINTS_MANAGED_BY: "endpoint-controller"},
        },
    }
    if pods:
        subset: Obj = {"ports": port_list}
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        endpoints["subsets"] = [subset]
    digest = hashlib.sha256(uid_of(svc).encode()).hexdigest()
    suffix = "".join(SAFE_ALPHABET[int(c, 16) % len(SAFE_ALPHABET)] for c in digest[:5])
    endpoint_slice: Obj = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name_of(svc)}-{suffix}",
            "namespace": namespace_of(svc),
            "labels": {
                **labels,
                SERVICE_NAME_LABEL: name_of(svc),
                SLICE_MANAGED_BY: "endpointslice-controller.k8s.io",
            },
            "ownerReferences": [owner_reference(svc)],
        },
        "addressType": "IPv4",
        "endpoints": slice_endpoints,
        "ports": port_list,
    }
    return endpoints, endpoint_slice


def _differs(current: Obj | None, desired: Obj, keys: tuple[str, ...]) -> bool:
    if current is None:
        return True
    meta, want = current.get("metadata") or {}, desired["metadata"]
    if (meta.get("labels") or {}) != want.get("labels", {}):
        return True
    return any(current.get(k) != desired.get(k) for k in keys)


def reconcile_endpoints(svc: Obj, ctx: Context) -> list[Action]:
    """Keep a selector Service's Endpoints and EndpointSlice in line with its ready pods."""
    spec = svc.get("spec") or {}
    namespace, name = namespace_of(svc), name_of(svc)
    current_ep = ctx.view.get("Endpoints", namespace, name)
    if not spec.get("selector") or spec.get("type") == "ExternalName":
        managed = current_ep is not None and (
            ((current_ep.get("metadata") or {}).get("labels") or {}).get(ENDPOINTS_MANAGED_BY)
        )
        return [Delete("v1", "Endpoints", namespace, name)] if managed else []
    endpoints, endpoint_slice = endpoints_for(svc, ctx)
    actions: list[Action] = []
    if current_ep is None:
        actions.append(Create(endpoints))
    elif _differs(current_ep, endpoints, ("subsets",)):
        updated = json_copy(current_ep)
        updated["metadata"]["labels"] = endpoints["metadata"]["labels"]
        updated.pop("subsets", None)
        if "subsets" in endpoints:
            updated["subsets"] = endpoints["subsets"]
        actions.append(Update(updated))
    current_slice = ctx.view.get("EndpointSlice", namespace, name_of(endpoint_slice))
    if current_slice is None:
        actions.append(Create(endpoint_slice))
    elif _differs(current_slice, endpoint_slice, ("endpoints", "ports")):
        updated = json_copy(current_slice)
        updated["metadata"]["labels"] = endpoint_slice["metadata"]["labels"]
        updated["endpoints"] = endpoint_slice["endpoints"]
        updated["ports"] = endpoint_slice["ports"]
        actions.append(Update(updated))
    return actions


def reconcile_service_and_endpoints(svc: Obj, ctx: Context) -> list[Action]:
    """Load-balancer status plus endpoints: everything the simulator does for a Service."""
    return reconcile_service(svc, ctx) + reconcile_endpoints(svc, ctx)
