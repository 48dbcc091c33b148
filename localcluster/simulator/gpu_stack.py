"""The node side of NVIDIA's GPU stack, simulated: what the operand pods do to a GPU node.

A real GPU node turns from "bare" (NFD labels, no ``nvidia.com/gpu``) into a
node that advertises GPUs through the operands the GPU Operator deploys, each
waiting for the previous one through files under ``/run/nvidia/validations``
(gpu-operator.md §2.5, §5). Here the same chain runs on simulated nodes:

- the driver pod (``app.kubernetes.io/component=nvidia-driver``) gets ready
  ``DRIVER_INSTALL_SECONDS`` after it starts (the install), or never on a node
  annotated ``localcluster.nimctl.io/driver-install: fail``; a driver pod whose
  version is listed in the node's ``localcluster.nimctl.io/driver-fail-versions``
  (comma-separated) crash-loops, as a driver that cannot load ("driver is in
  use") does; a node annotated
  ``localcluster.nimctl.io/host-driver: "true"`` has a driver already;
- validation gates open in order and the pods behind a closed gate wait in
  ``Init``: ``driver-validation`` until the driver is ready, ``toolkit-validation``
  and ``cuda-validation`` until the container toolkit pod is ready (or no
  toolkit DaemonSet exists: a host toolkit), ``plugin-validation`` until the
  node advertises GPUs;
- a ready DRA kubelet plugin (GPUCluster's ``nvidia-dra-driver-kubelet-plugin``)
  marks the node ``localcluster.nimctl.io/dra-plugin=true``, so the node publishes
  its ResourceSlices (``localcluster.simulator.dra``); ``false`` once it is gone
  withdraws them;
- a ready device plugin makes the node advertise ``nvidia.com/gpu`` (capacity
  and allocatable, from the node's hardware annotations); GPU feature discovery
  adds ``nvidia.com/gpu.product``, ``gpu.count``, ``gpu.memory``,
  ``cuda.driver.*`` / ``cuda.driver-version.*`` and ``mig.capable``; the MIG
  manager applies ``nvidia.com/mig.config`` and reports
  ``nvidia.com/mig.config.state=success``.

The node's hardware is described by annotations (see the GPU profiles in
``localcluster/profiles``); a node without ``localcluster.nimctl.io/gpus`` is
left alone (the default profiles advertise GPUs from the start). Removing a
deploy label removes the operand's pod through the DaemonSet controller.

``GPUStack`` is driven by the engine: ``observe`` (storage events -> keys to
re-process), ``pod_view`` (the pod as kubelet should run it now) and ``sync``
(a node's labels and capacity from its operand pods).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from localcluster.catalog import ImageCatalog
from localcluster.simulator.kubelet import (
    READY_AFTER_ANNOTATION,
    SIMULATE_ANNOTATION,
    is_pod_ready,
)
from localcluster.simulator.objects import (
    Action,
    Context,
    ObjectLookup,
    Update,
    UpdateStatus,
    is_deleting,
    labels_of,
    name_of,
    namespace_of,
)
from nimctl_runtime.meta import Obj

NODE_KEY: Final = "GPUNode"
"""The engine key kind under which a node's GPU side is synced."""

PREFIX: Final = "localcluster.nimctl.io/"
GPUS_ANNOTATION: Final = PREFIX + "gpus"
PRODUCT_ANNOTATION: Final = PREFIX + "gpu-product"
MEMORY_ANNOTATION: Final = PREFIX + "gpu-memory"
MIG_CAPABLE_ANNOTATION: Final = PREFIX + "mig-capable"
HOST_DRIVER_ANNOTATION: Final = PREFIX + "host-driver"
HOST_DRIVER_VERSION_ANNOTATION: Final = PREFIX + "host-driver-version"
DRIVER_INSTALL_ANNOTATION: Final = PREFIX + "driver-install"
DRIVER_INSTALL_SECONDS_ANNOTATION: Final = PREFIX + "driver-install-seconds"
DRIVER_INSTALL_SECONDS: Final = 2.0
DRIVER_FAIL_VERSIONS_ANNOTATION: Final = PREFIX + "driver-fail-versions"
GATE_MARKER: Final = "localcluster.nimctl.io/validation-gate-closed"

COMPONENT_LABEL: Final = "app.kubernetes.io/component"
DRIVER_COMPONENT: Final = "nvidia-driver"
TOOLKIT_APP: Final = "nvidia-container-toolkit-daemonset"
DEVICE_PLUGIN_APP: Final = "nvidia-device-plugin-daemonset"
GFD_APP: Final = "gpu-feature-discovery"
MIG_MANAGER_APP: Final = "nvidia-mig-manager"
OPERAND_APPS: Final = frozenset(
    {
        "nvidia-driver-daemonset",
        TOOLKIT_APP,
        "nvidia-operator-validator",
        DEVICE_PLUGIN_APP,
        "nvidia-device-plugin-mps-control-daemon",
        "nvidia-dcgm",
        "nvidia-dcgm-exporter",
        GFD_APP,
        MIG_MANAGER_APP,
        "nvidia-node-status-exporter",
        "nvidia-dra-driver-kubelet-plugin",
        "nvidia-dcgm-dra",
        "nvidia-dcgm-exporter-dra",
    }
)
DRA_PLUGIN_APP: Final = "nvidia-dra-driver-kubelet-plugin"
DRA_PLUGIN_ANNOTATION: Final = PREFIX + "dra-plugin"
"""``"true"`` while the DRA driver's kubelet plugin runs ready on the node (the node's
ResourceSlices are published, ``localcluster.simulator.dra``); ``"false"`` once it went
(they are withdrawn)."""

GPU_RESOURCE: Final = "nvidia.com/gpu"
MIG_CONFIG_LABEL: Final = "nvidia.com/mig.config"
MIG_STATE_LABEL: Final = "nvidia.com/mig.config.state"
DEFAULT_DRIVER_VERSION: Final = "595.91.07"

# Which init container waits for which gate (the file it waits for).
GATES: Final[Mapping[str, str]] = {
    "driver-validation": "driver-ready",
    "toolkit-validation": "toolkit-ready",
    "cuda-validation": "toolkit-ready",
    "plugin-validation": "plugin-ready",
}

__all__ = ["NODE_KEY", "GPUStack", "driver_version"]


def _is_operand(pod: Mapping[str, Any]) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(COMPONENT_LABEL) == DRIVER_COMPONENT or labels.get("app") in OPERAND_APPS


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def driver_version(driver_pod: Mapping[str, Any] | None, node: Mapping[str, Any]) -> str:
    """The driver version a node runs: the driver image's tag, else the host driver's."""
    if driver_pod is not None:
        for c in (driver_pod.get("spec") or {}).get("containers") or []:
            image = str(c.get("image", ""))
            tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""
            version = tag.split("-", 1)[0]
            if version.count(".") >= 1 and version.replace(".", "").isdigit():
                return version
    return str(_annotations(node).get(HOST_DRIVER_VERSION_ANNOTATION) or DEFAULT_DRIVER_VERSION)


class GPUStack:
    """The simulated GPU node agents (see the module docstring)."""

    def __init__(self, view: ObjectLookup, catalog: ImageCatalog) -> None:
        self.view = view
        self.catalog = catalog
        self._pods_on: dict[str, set[tuple[str, str]]] = {}
        self._node_of: dict[tuple[str, str], str] = {}

    # -- events in ------------------------------------------------------------------

    def observe(
        self, kind: str, event_type: str, obj: Mapping[str, Any]
    ) -> list[tuple[str, str, str]]:
        """Keys the engine should process after this storage event."""
        if kind == "Node":
            node = name_of(obj)
            if event_type == "DELETED" or GPUS_ANNOTATION not in _annotations(obj):
                return []
            return [(NODE_KEY, "", node), *self._pod_keys(node)]
        if kind != "Pod" or not _is_operand(obj):
            return []
        key = (namespace_of(obj), name_of(obj))
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        previous = self._node_of.pop(key, None)
        if previous is not None:
            self._pods_on.get(previous, set()).discard(key)
        if event_type != "DELETED" and node:
            self._node_of[key] = node
            self._pods_on.setdefault(node, set()).add(key)
        node = node or previous or ""
        if not node:
            return []
        return [(NODE_KEY, "", node), *self._pod_keys(node)]

    def _pod_keys(self, node: str) -> list[tuple[str, str, str]]:
        return [("Pod", ns, name) for ns, name in sorted(self._pods_on.get(node, ()))]

    def _pods(self, node: str) -> list[Obj]:
        out = []
        for ns, name in sorted(self._pods_on.get(node, ())):
            pod = self.view.get("Pod", ns, name)
            if pod is not None and not is_deleting(pod):
                out.append(pod)
        return out

    # -- gates ------------------------------------------------------------------------

    def _ready(self, pods: list[Obj], app: str) -> bool:
        return any(labels_of(p).get("app") == app and is_pod_ready(p) for p in pods)

    def _driver_pod(self, pods: list[Obj]) -> Obj | None:
        for p in pods:
            if labels_of(p).get(COMPONENT_LABEL) == DRIVER_COMPONENT:
                return p
        return None

    def gates(self, node: Mapping[str, Any], namespace: str) -> set[str]:
        """The validation files present on ``node`` for operands in ``namespace``."""
        pods = self._pods(name_of(node))
        annotations = _annotations(node)
        driver = self._driver_pod(pods)
        open_: set[str] = set()
        if annotations.get(HOST_DRIVER_ANNOTATION) == "true" or (
            driver is not None and is_pod_ready(driver)
        ):
            open_.add("driver-ready")
        if "driver-ready" in open_ and (
            self._ready(pods, TOOLKIT_APP)
            or self.view.get("DaemonSet", namespace, TOOLKIT_APP) is None
        ):
            open_.add("toolkit-ready")
        allocatable = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
        if allocatable not in (None, "", "0"):
            open_.add("plugin-ready")
        return open_

    # -- kubelet's view of an operand pod ------------------------------------------

    def pod_view(self, pod: Obj, node: Mapping[str, Any] | None) -> Obj:
        """The pod as the simulated node runs it: closed gates hold init containers."""
        if node is None or GPUS_ANNOTATION not in _annotations(node) or not _is_operand(pod):
            return pod
        out = copy.deepcopy(pod)
        meta = out.setdefault("metadata", {})
        annotations = dict(meta.get("annotations") or {})
        node_annotations = _annotations(node)
        if labels_of(pod).get(COMPONENT_LABEL) == DRIVER_COMPONENT:
            failing = str(node_annotations.get(DRIVER_FAIL_VERSIONS_ANNOTATION) or "").split(",")
            if node_annotations.get(DRIVER_INSTALL_ANNOTATION) == "fail":
                annotations.setdefault(SIMULATE_ANNOTATION, "never-ready")
            elif driver_version(pod, node) in {v.strip() for v in failing if v.strip()}:
                annotations.setdefault(SIMULATE_ANNOTATION, "crash-loop")
            else:
                seconds = node_annotations.get(
                    DRIVER_INSTALL_SECONDS_ANNOTATION, str(DRIVER_INSTALL_SECONDS)
                )
                annotations.setdefault(READY_AFTER_ANNOTATION, seconds)
            meta["annotations"] = annotations
            return out
        open_ = self.gates(node, namespace_of(pod))
        closed = False
        for container in (out.get("spec") or {}).get("initContainers") or []:
            gate = GATES.get(str(container.get("name", "")))
            if gate is not None and gate not in open_:
                container["args"] = [*(container.get("args") or []), GATE_MARKER]
                closed = True
        if closed:
            self._ensure_gate_rule()
        return out

    def _ensure_gate_rule(self) -> None:
        if not any(r.command == GATE_MARKER for r in self.catalog.rules):
            self.catalog.set("*", command=GATE_MARKER, logs="waiting for validation\n")

    # -- the node's GPU side -----------------------------------------------------------

    def sync(self, node_name: str, ctx: Context) -> list[Action]:
        """Capacity and labels of ``node_name`` from the operand pods running on it."""
        node = self.view.get("Node", "", node_name)
        if node is None or is_deleting(node):
            return []
        annotations = _annotations(node)
        if GPUS_ANNOTATION not in annotations:
            return []
        pods = self._pods(node_name)
        actions: list[Action] = []
        gpus = str(annotations.get(GPUS_ANNOTATION) or "0")
        advertise = gpus if self._ready(pods, DEVICE_PLUGIN_APP) else "0"
        status = node.get("status") or {}
        current = (status.get("allocatable") or {}).get(GPU_RESOURCE)
        if current != advertise and not (current is None and advertise == "0"):
            updated = copy.deepcopy(node)
            st = updated.setdefault("status", {})
            st.setdefault("capacity", {})[GPU_RESOURCE] = advertise
            st.setdefault("allocatable", {})[GPU_RESOURCE] = advertise
            actions.append(UpdateStatus(updated))
        dra_ready = self._ready(pods, DRA_PLUGIN_APP)
        dra_now = annotations.get(DRA_PLUGIN_ANNOTATION)
        if dra_ready != (dra_now == "true") and (dra_ready or dra_now is not None):
            updated = copy.deepcopy(node)
            updated["metadata"]["annotations"] = {
                **annotations, DRA_PLUGIN_ANNOTATION: "true" if dra_ready else "false"
            }
            actions.append(Update(updated))
            return actions
        labels = labels_of(node)
        want: dict[str, str] = {}
        if self._ready(pods, GFD_APP):
            want.update(self._gfd_labels(node, self._driver_pod(pods)))
        if self._ready(pods, MIG_MANAGER_APP) and labels.get(MIG_CONFIG_LABEL):
            want[MIG_STATE_LABEL] = "success"
        if any(labels.get(k) != v for k, v in want.items()):
            updated = copy.deepcopy(node)
            updated["metadata"]["labels"] = {**labels, **want}
            actions.append(Update(updated))
        return actions

    def _gfd_labels(self, node: Mapping[str, Any], driver: Obj | None) -> dict[str, str]:
        annotations = _annotations(node)
        major, minor, rev = [*driver_version(driver, node).split("."), "0", "0"][:3]
        out = {
            "nvidia.com/gpu.product": str(annotations.get(PRODUCT_ANNOTATION) or "NVIDIA-GPU"),
            "nvidia.com/gpu.count": str(annotations.get(GPUS_ANNOTATION) or "0"),
            "nvidia.com/gpu.memory": str(annotations.get(MEMORY_ANNOTATION) or "0"),
            "nvidia.com/cuda.driver.major": major,
            "nvidia.com/cuda.driver.minor": minor,
            "nvidia.com/cuda.driver.rev": rev,
            "nvidia.com/cuda.driver-version.major": major,
            "nvidia.com/cuda.driver-version.minor": minor,
            "nvidia.com/cuda.driver-version.revision": rev,
            "nvidia.com/cuda.driver-version.full": f"{major}.{minor}.{rev}",
            "nvidia.com/mig.capable": (
                "true" if annotations.get(MIG_CAPABLE_ANNOTATION) == "true" else "false"
            ),
        }
        return out
