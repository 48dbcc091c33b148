"""Dynamic Resource Allocation in the simulator: NVIDIA's GPU DRA driver and the claim plumbing.

Pure logic over the simulator's view; the engine carries out what it returns.

- The driver (``gpu.nvidia.com``): ``device_classes()`` is what installing it
  creates (DeviceClasses ``gpu.nvidia.com`` and the ComputeDomain channel and
  daemon classes); ``reconcile_node_slices`` publishes, per GPU node, ResourceSlice
  ``<node>-gpu.nvidia.com`` with a device ``gpu-<i>`` per GPU carrying the
  driver's attributes (``productName``, ``architecture``, ``driverVersion``,
  ``cudaComputeCapability``, ``index``, ``uuid``, ``type``) and ``memory``
  capacity, and ``<node>-compute-domain.nvidia.com`` with the node's IMEX
  channel and daemon devices. The product comes from the node's ``nvidia.com/gpu.product`` label
  (GPU feature discovery), else the profiles' H100 80GB HBM3.
- The resourceclaim controller: ``pod_claims(pod, view)`` makes a ResourceClaim
  for each pod claim that names a template, named as kube-controller-manager
  names them (``generateName: <pod>-<pod claim>-``, both parts shortened to fit
  57 characters, annotation ``resource.kubernetes.io/pod-claim-name``, the pod
  as controller), and fills ``pod.status.resourceClaimStatuses``.
- The scheduler's DRA plugin: ``feasible_nodes`` says on which nodes all of a
  pod's claims can be allocated (devices of the request's DeviceClass driver
  matching every CEL selector, not allocated to another claim);
  ``allocate(pod, node, view)`` writes each claim's ``status.allocation``
  (results and node selector) and adds the pod to ``reservedFor``. A request
  with ``adminAccess`` gets devices whether or not they are allocated, and takes
  none (its results say ``adminAccess: true``), as Kubernetes' admin access.
- ``reconcile_resourceclaim`` drops reservations of pods that are gone and
  deallocates a claim nobody reserves any more.

Selectors are evaluated with the Kubernetes DRA CEL environment's ``device``
(``driver``, ``attributes``, ``capacity``) and its ``semver``/``quantity``
values with ``compareTo``; a selector that cannot be evaluated matches nothing.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

import celpy
import celpy.celtypes as ct

from localcluster.cel_library import raw_library, to_cel
from localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    Delete,
    ObjectLookup,
    Update,
    UpdateStatus,
    is_deleting,
    labels_of,
    name_of,
    namespace_of,
    owner_reference,
    uid_of,
    with_status,
)
from nimctl_runtime.meta import Obj
from nimctl_runtime.quantity import QuantityError, parse_quantity

API_VERSION = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
CHANNEL_DRIVER = "compute-domain.nvidia.com"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
PRODUCT_LABEL = "nvidia.com/gpu.product"
DEFAULT_PRODUCT = "NVIDIA-H100-80GB-HBM3"
DRIVER_VERSION = "580.82.07"
MAX_GENERATE_NAME = 57

# (product keyword, architecture, CUDA compute capability), first match wins.
_ARCHITECTURES = (
    ("GB200", "Blackwell", "10.0.0"),
    ("B200", "Blackwell", "10.0.0"),
    ("H200", "Hopper", "9.0.0"),
    ("H100", "Hopper", "9.0.0"),
    ("L40", "Ada Lovelace", "8.9.0"),
    ("L4", "Ada Lovelace", "8.9.0"),
    ("A100", "Ampere", "8.0.0"),
    ("A10", "Ampere", "8.6.0"),
    ("T4", "Turing", "7.5.0"),
)

__all__ = [
    "API_VERSION",
    "DRIVER",
    "POD_CLAIM_NAME_ANNOTATION",
    "allocate",
    "device_classes",
    "feasible_nodes",
    "generate_claim_name",
    "pod_claims",
    "reconcile_node_slices",
    "reconcile_resourceclaim",
    "resource_slices",
]


# ---------------------------------------------------------------------------- the driver


def device_classes() -> list[Obj]:
    """The DeviceClasses NVIDIA's DRA driver installs."""

    def device_class(name: str, expression: str) -> Obj:
        return {
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }

    return [
        device_class(DRIVER, f"device.driver == '{DRIVER}'"),
        device_class(
            "compute-domain-default-channel.nvidia.com",
            f"device.driver == '{CHANNEL_DRIVER}' && "
            f"device.attributes['{CHANNEL_DRIVER}'].type == 'channel'",
        ),
        device_class(
            "compute-domain-daemon.nvidia.com",
            f"device.driver == '{CHANNEL_DRIVER}' && "
            f"device.attributes['{CHANNEL_DRIVER}'].type == 'daemon'",
        ),
    ]


DRA_PLUGIN_ANNOTATION = "localcluster.nimctl.io/dra-plugin"
GPUS_ANNOTATION = "localcluster.nimctl.io/gpus"


def _gpu_count(node: Mapping[str, Any]) -> int:
    """The GPUs the node's slices list: its hardware's while the DRA kubelet plugin
    runs on it, else the ones the device plugin advertises."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    capacity = (node.get("status") or {}).get("capacity") or {}
    value = capacity.get("nvidia.com/gpu")
    if annotations.get(DRA_PLUGIN_ANNOTATION) == "true":
        value = annotations.get(GPUS_ANNOTATION)
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _product(node: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(productName, architecture, compute capability, memory) of the node's GPUs."""
    label = labels_of(node).get(PRODUCT_LABEL) or DEFAULT_PRODUCT
    product = label.replace("-", " ")
    arch, cc = "Unknown", "0.0.0"
    for keyword, architecture, capability in _ARCHITECTURES:
        if keyword in label:
            arch, cc = architecture, capability
            break
    gb = re.search(r"(\d+)GB", label)
    memory = f"{gb.group(1)}Gi" if gb else "24Gi"
    return product, arch, cc, memory


def _uuid(node: str, index: int) -> str:
    digest = hashlib.sha256(f"{node}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _slice(node: Mapping[str, Any], driver: str, devices: list[Obj]) -> Obj:
    node_name = name_of(node)
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {
            "name": f"{node_name}-{driver}",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node_name,
                    "uid": uid_of(node),
                    "controller": True,
                }
            ],
        },
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def resource_slices(node: Mapping[str, Any]) -> list[Obj]:
    """The ResourceSlices the driver publishes for ``node`` (none without GPUs).

    ``<node>-gpu.nvidia.com`` lists the GPUs; ``<node>-compute-domain.nvidia.com``
    the node's IMEX channel and daemon devices (ComputeDomains).
    """
    count = _gpu_count(node)
    if not count:
        return []
    node_name = name_of(node)
    product, arch, cc, memory = _product(node)
    gpus = [
        {
            "name": f"gpu-{index}",
            "attributes": {
                "type": {"string": "gpu"},
                "index": {"int": index},
                "uuid": {"string": _uuid(node_name, index)},
                "productName": {"string": product},
                "architecture": {"string": arch},
                "brand": {"string": "Nvidia"},
                "driverVersion": {"version": DRIVER_VERSION},
                "cudaComputeCapability": {"version": cc},
            },
            "capacity": {"memory": {"value": memory}},
        }
        for index in range(count)
    ]
    imex = [
        {"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}},
        {"name": "daemon-0", "attributes": {"type": {"string": "daemon"}, "id": {"int": 0}}},
    ]
    return [_slice(node, DRIVER, gpus), _slice(node, CHANNEL_DRIVER, imex)]


def reconcile_node_slices(node: Obj, ctx: Context) -> list[Action]:
    """Publish (or correct) the node's ResourceSlices (and the driver's DeviceClasses)."""
    if is_deleting(node):
        return []
    actions: list[Action] = []
    slices = resource_slices(node)
    if slices:
        # The driver is installed with its DeviceClasses.
        actions += [
            Create(cls)
            for cls in device_classes()
            if ctx.view.get("DeviceClass", "", name_of(cls)) is None
        ]
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    if not slices and annotations.get(DRA_PLUGIN_ANNOTATION) == "false":
        # The DRA kubelet plugin went: its slices are withdrawn.
        for driver in (DRIVER, CHANNEL_DRIVER):
            live = ctx.view.get("ResourceSlice", "", f"{name_of(node)}-{driver}")
            if live is not None:
                actions.append(Delete(API_VERSION, "ResourceSlice", "", name_of(live)))
    for desired in slices:
        live = ctx.view.get("ResourceSlice", "", name_of(desired))
        if live is None:
            actions.append(Create(desired))
        elif live.get("spec") != desired["spec"]:
            updated = copy.deepcopy(live)
            updated["spec"] = desired["spec"]
            actions.append(Update(updated))
    return actions


# ---------------------------------------------------------------------------- claims of pods


def generate_claim_name(pod_name: str, claim_name: str) -> str:
    """``generateName`` of a claim made for a pod, as the resourceclaim controller makes it."""
    base = f"{pod_name}-{claim_name}"
    if len(base) + 1 > MAX_GENERATE_NAME:
        total = len(base) + 1
        base = (
            pod_name[: len(pod_name) * MAX_GENERATE_NAME // total]
            + "-"
            + claim_name[: len(claim_name) * MAX_GENERATE_NAME // total]
        )
    return base + "-"


def _generated_claims(pod: Mapping[str, Any], view: ObjectLookup) -> dict[str, Obj]:
    """Claims made for ``pod``, by pod claim name."""
    out: dict[str, Obj] = {}
    for claim in view.list("ResourceClaim", namespace_of(pod)):
        refs = (claim.get("metadata") or {}).get("ownerReferences") or []
        if any(r.get("uid") == uid_of(pod) and r.get("controller") for r in refs):
            name = ((claim.get("metadata") or {}).get("annotations") or {}).get(
                POD_CLAIM_NAME_ANNOTATION
            )
            if name:
                out[str(name)] = claim
    return out


def missing_templates(pod: Obj, view: ObjectLookup) -> list[tuple[str, str]]:
    """``(pod claim, template)`` of the pod's claims whose ResourceClaimTemplate does not
    exist and whose claim was not made yet: kube-controller-manager's resourceclaim
    controller cannot create them (a ``FailedResourceClaimCreation`` Warning Event on the
    pod) and the scheduler keeps the pod waiting without a ``PodScheduled`` condition."""
    namespace = namespace_of(pod)
    generated = _generated_claims(pod, view)
    out: list[tuple[str, str]] = []
    for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
        template = pc.get("resourceClaimTemplateName")
        pc_name = str(pc.get("name", ""))
        if not template or pc_name in generated:
            continue
        if view.get("ResourceClaimTemplate", namespace, str(template)) is None:
            out.append((pc_name, str(template)))
    return out


def template_missing_message(pod_claim: str, template: str) -> str:
    """The resourceclaim controller's Event text for a template that does not exist."""
    return (
        f'PodResourceClaim {pod_claim}: resource claim template "{template}": '
        f'resourceclaimtemplate.resource.k8s.io "{template}" not found'
    )


def pod_claims(pod: Obj, view: ObjectLookup) -> tuple[list[Action], dict[str, Obj], str]:
    """(claims to create or pod status to write, the pod's claims by pod claim name, problem).

    ``problem`` says why the pod cannot be scheduled yet ("" when every claim exists).
    """
    namespace = namespace_of(pod)
    spec_claims = (pod.get("spec") or {}).get("resourceClaims") or []
    generated = _generated_claims(pod, view)
    actions: list[Action] = []
    claims: dict[str, Obj] = {}
    problems: list[str] = []
    statuses: list[Obj] = []
    for pc in spec_claims:
        pc_name = str(pc.get("name", ""))
        if pc.get("resourceClaimName"):
            claim = view.get("ResourceClaim", namespace, str(pc["resourceClaimName"]))
            if claim is None:
                problems.append(f'resourceclaim "{pc["resourceClaimName"]}" not found')
            else:
                claims[pc_name] = claim
            continue
        template_name = pc.get("resourceClaimTemplateName")
        if not template_name:
            continue
        claim = generated.get(pc_name)
        if claim is not None:
            claims[pc_name] = claim
            statuses.append({"name": pc_name, "resourceClaimName": name_of(claim)})
            continue
        template = view.get("ResourceClaimTemplate", namespace, str(template_name))
        if template is None:
            problems.append(f'resourceclaimtemplate "{template_name}" not found')
            continue
        tmeta = (template.get("spec") or {}).get("metadata") or {}
        actions.append(
            Create(
                {
                    "apiVersion": API_VERSION,
                    "kind": "ResourceClaim",
                    "metadata": {
                        "generateName": generate_claim_name(name_of(pod), pc_name),
                        "namespace": namespace,
                        "labels": dict(tmeta.get("labels") or {}),
                        "annotations": {
                            **dict(tmeta.get("annotations") or {}),
                            POD_CLAIM_NAME_ANNOTATION: pc_name,
                        },
                        "ownerReferences": [owner_reference(pod)],
                    },
                    "spec": copy.deepcopy((template.get("spec") or {}).get("spec") or {}),
                }
            )
        )
        problems.append(f'waiting for resourceclaim of pod claim "{pc_name}"')
    current = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    if statuses and statuses != current and not actions:
        status = dict(pod.get("status") or {})
        status["resourceClaimStatuses"] = statuses
        actions.append(UpdateStatus(with_status(pod, status)))
    return actions, claims, "; ".join(problems)


# ---------------------------------------------------------------------------- allocation


def _semver(value: Any) -> ct.StringType:
    return ct.StringType(str(value))


def _quantity(value: Any) -> ct.StringType:
    return ct.StringType(str(value))


def _compare_to(left: Any, right: Any) -> ct.IntType:
    a, b = str(left), str(right)
    version = re.compile(r"^\d+(\.\d+)*$")
    pa: Any
    pb: Any
    if version.match(a) and version.match(b):
        pa = tuple(int(x) for x in a.split("."))
        pb = tuple(int(x) for x in b.split("."))
        width = max(len(pa), len(pb))
        pa, pb = pa + (0,) * (width - len(pa)), pb + (0,) * (width - len(pb))
    else:
        pa, pb = parse_quantity(a), parse_quantity(b)
    return ct.IntType((pa > pb) - (pa < pb))


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> celpy.Runner:
    env = celpy.Environment()
    functions: dict[str, Any] = {
        **raw_library(),
        "semver": _semver,
        "quantity": _quantity,
        "compareTo": _compare_to,
    }
    return env.program(env.compile(expression), functions=functions)


def _device_value(driver: str, device: Mapping[str, Any]) -> Any:
    attributes = {
        key: next(iter(value.values())) if isinstance(value, Mapping) and value else value
        for key, value in (device.get("attributes") or {}).items()
    }
    capacity = {
        key: (value or {}).get("value") for key, value in (device.get("capacity") or {}).items()
    }
    return to_cel(
        {"driver": driver, "attributes": {driver: attributes}, "capacity": {driver: capacity}}
    )


def selector_matches(expression: str, driver: str, device: Mapping[str, Any]) -> bool:
    """Whether one CEL selector accepts the device (an evaluation error: it does not)."""
    try:
        result = _program(expression).evaluate({"device": _device_value(driver, device)})
    except (QuantityError, TypeError, ValueError, KeyError):
        return False
    except Exception:  # celpy's parse and evaluation errors (no common base it exports)
        return False
    return isinstance(result, ct.BoolType) and bool(result)


def _expressions(selectors: Iterable[Mapping[str, Any]]) -> list[str]:
    return [
        str((s.get("cel") or {}).get("expression"))
        for s in selectors
        if (s.get("cel") or {}).get("expression")
    ]


Device = tuple[str, str, str]  # (driver, pool, device)


def _allocated(view: ObjectLookup) -> set[Device]:
    out: set[Device] = set()
    for claim in view.list("ResourceClaim"):
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        ) or []
        for r in results:
            if r.get("adminAccess"):
                continue  # admin access never takes a device
            out.add((str(r.get("driver")), str(r.get("pool")), str(r.get("device"))))
    return out


def _node_devices(view: ObjectLookup, node: str) -> list[tuple[str, str, Obj]]:
    """(driver, pool, device) of every device the node's slices publish."""
    out = []
    for rs in view.list("ResourceSlice"):
        spec = rs.get("spec") or {}
        if spec.get("nodeName") != node:
            continue
        pool = str((spec.get("pool") or {}).get("name", node))
        for device in spec.get("devices") or []:
            out.append((str(spec.get("driver")), pool, device))
    return out


def _claim_node(claim: Mapping[str, Any]) -> str | None:
    selector = (((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")) or {}
    for term in selector.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return None


def _allocate_on(
    claims: Iterable[Obj], node: str, view: ObjectLookup, taken: set[Device]
) -> dict[str, list[Obj]] | None:
    """Results per claim name for the unallocated ``claims`` on ``node`` (None: no fit)."""
    devices = _node_devices(view, node)
    used = set(taken)
    out: dict[str, list[Obj]] = {}
    for claim in claims:
        results: list[Obj] = []
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            exactly = request.get("exactly") or request
            class_name = str(exactly.get("deviceClassName", ""))
            device_class = view.get("DeviceClass", "", class_name)
            if device_class is None:
                return None
            selectors = _expressions((device_class.get("spec") or {}).get("selectors") or [])
            selectors += _expressions(exactly.get("selectors") or [])
            count = int(exactly.get("count", 1))
            mode = exactly.get("allocationMode", "ExactCount")
            admin = bool(exactly.get("adminAccess"))
            picked = [
                (driver, pool, device)
                for driver, pool, device in devices
                if (admin or (driver, pool, str(device.get("name"))) not in used)
                and all(selector_matches(e, driver, device) for e in selectors)
            ]
            if mode != "All":
                if len(picked) < count:
                    return None
                picked = picked[:count]
            elif not picked:
                return None
            for driver, pool, device in picked:
                result: Obj = {
                    "request": request.get("name"),
                    "driver": driver,
                    "pool": pool,
                    "device": device.get("name"),
                }
                if admin:
                    result["adminAccess"] = True
                else:
                    used.add((driver, pool, str(device.get("name"))))
                results.append(result)
        out[name_of(claim)] = results
    return out


def feasible_nodes(
    claims: Mapping[str, Obj], nodes: Iterable[str], view: ObjectLookup
) -> list[str]:
    """Nodes where every claim of a pod is (or can be) allocated."""
    allocated_on = {n for n in (_claim_node(c) for c in claims.values()) if n}
    if len(allocated_on) > 1:
        return []
    candidates = sorted(allocated_on) if allocated_on else sorted(nodes)
    pending = [c for c in claims.values() if _claim_node(c) is None]
    if not pending:
        return candidates
    taken = _allocated(view)
    return [n for n in candidates if _allocate_on(pending, n, view, taken) is not None]


def allocate(pod: Obj, node: str, claims: Mapping[str, Obj], view: ObjectLookup) -> list[Action]:
    """Allocate the pod's pending claims on ``node`` and reserve every claim for the pod."""
    pending = [c for c in claims.values() if _claim_node(c) is None]
    results = _allocate_on(pending, node, view, _allocated(view)) or {}
    consumer = {"resource": "pods", "name": name_of(pod), "uid": uid_of(pod)}
    actions: list[Action] = []
    for claim in claims.values():
        status = copy.deepcopy(claim.get("status") or {})
        if name_of(claim) in results:
            status["allocation"] = {
                "devices": {"results": results[name_of(claim)]},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
            }
        reserved = list(status.get("reservedFor") or [])
        if not any(r.get("uid") == uid_of(pod) for r in reserved):
            reserved.append(consumer)
        status["reservedFor"] = reserved
        actions.append(UpdateStatus(with_status(claim, status)))
    return actions


def reconcile_resourceclaim(claim: Obj, ctx: Context) -> list[Action]:
    """Drop reservations of pods that are gone; deallocate a claim nobody reserves."""
    status = claim.get("status") or {}
    reserved = status.get("reservedFor") or []
    if not reserved:
        return []
    namespace = namespace_of(claim)
    kept = []
    for ref in reserved:
        pod = ctx.view.get("Pod", namespace, str(ref.get("name", "")))
        if pod is not None and uid_of(pod) == ref.get("uid") and not is_deleting(pod):
            kept.append(ref)
    if kept == reserved:
        return []
    new_status = dict(status)
    if kept:
        new_status["reservedFor"] = kept
    else:
        new_status.pop("reservedFor", None)
        new_status.pop("allocation", None)
    return [UpdateStatus(with_status(claim, new_status))]
