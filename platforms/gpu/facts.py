"""The cluster facts a ClusterPolicy is rendered against, derived from Node objects.

The GPU Operator's output depends on more than the ClusterPolicy: the GPU nodes
(``nvidia.com/gpu.present=true``), their OS and kernel (NFD labels), the
container runtime, OpenShift or not, the Kubernetes version and which optional
CRDs are served. ``ClusterFacts.from_nodes`` reads all of that from Node dicts
the same way for the reconciler (from its cache) and for ``nimctl render
--nodes`` (from a file), so both render the same objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
"""Written by node labelling on every node NFD found an NVIDIA GPU on."""
NFD_LABEL_PREFIX = "feature.node.kubernetes.io/"
NFD_GPU_LABELS = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
"""NFD labels (value ``"true"``) that make a node a GPU node."""
KERNEL_LABEL = "feature.node.kubernetes.io/kernel-version.full"
OS_ID_LABEL = "feature.node.kubernetes.io/system-os_release.ID"
OS_VERSION_LABEL = "feature.node.kubernetes.io/system-os_release.VERSION_ID"

RUNTIME_CONTAINERD = "containerd"
RUNTIME_DOCKER = "docker"
RUNTIME_CRIO = "crio"

SERVICE_MONITOR = ("monitoring.coreos.com/v1", "ServiceMonitor")
PROMETHEUS_RULE = ("monitoring.coreos.com/v1", "PrometheusRule")
NODE_FEATURE_RULE = ("nfd.k8s-sigs.io/v1alpha1", "NodeFeatureRule")

_MAJOR_ONLY_OS = ("ol", "rocky", "rhel")


def _version(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) of ``v1.32.0`` / ``1.32.0-gke.1``; unparsable parts count as 0."""
    core = text.strip().lstrip("v").split("-")[0].split("+")[0]
    parts = [int(p) if p.isdigit() else 0 for p in core.split(".")[:3]]
    while len(parts) < 3:
        parts.append(0)
    return (parts[0], parts[1], parts[2])


def is_gpu_node_by_nfd(labels: Mapping[str, str]) -> bool:
    """Whether NFD found an NVIDIA GPU on the node (one of ``NFD_GPU_LABELS`` is "true")."""
    return any(labels.get(key) == "true" for key in NFD_GPU_LABELS)


def has_nfd_labels(labels: Mapping[str, str]) -> bool:
    """Whether the node carries any NFD label (NVIDIA's ``hasNFDLabels``)."""
    return any(key.startswith(NFD_LABEL_PREFIX) for key in labels)


def runtime_of(container_runtime_version: str) -> str:
    """``containerd``, ``docker``, ``crio`` or "" from ``nodeInfo.containerRuntimeVersion``."""
    for prefix, runtime in (
        ("containerd", RUNTIME_CONTAINERD),
        ("docker", RUNTIME_DOCKER),
        ("cri-o", RUNTIME_CRIO),
    ):
        if container_runtime_version.startswith(prefix):
            return runtime
    return ""


@dataclass(frozen=True)
class GPUNode:
    """A node with ``nvidia.com/gpu.present=true``: what the renders read of it."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    kernel: str = ""
    """``feature.node.kubernetes.io/kernel-version.full`` ("" when NFD has not set it)."""
    os_id: str = ""
    """``feature.node.kubernetes.io/system-os_release.ID`` (``ubuntu``, ``rhel``, ...)."""
    os_version: str = ""
    """``feature.node.kubernetes.io/system-os_release.VERSION_ID`` (``22.04``, ``9.4``)."""
    container_runtime: str = ""
    """``containerd``, ``docker``, ``crio`` or "" (from ``nodeInfo.containerRuntimeVersion``)."""

    @property
    def os_tag(self) -> str:
        """``<ID><VERSION_ID>`` as in driver image tags; major version only for ol/rocky/rhel."""
        version = self.os_version
        if self.os_id in _MAJOR_ONLY_OS:
            version = version.split(".")[0]
        return f"{self.os_id}{version}"

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> GPUNode:
        """Read a Node dict (Kubernetes JSON shape)."""
        meta = node.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        info = (node.get("status") or {}).get("nodeInfo") or {}
        return cls(
            name=str(meta.get("name") or ""),
            labels=MappingProxyType(labels),
            kernel=labels.get(KERNEL_LABEL, ""),
            os_id=labels.get(OS_ID_LABEL, ""),
            os_version=labels.get(OS_VERSION_LABEL, ""),
            container_runtime=runtime_of(str(info.get("containerRuntimeVersion") or "")),
        )


@dataclass(frozen=True)
class ClusterFacts:
    """Everything besides the ClusterPolicy that decides what it renders to."""

    operator_namespace: str
    nodes: tuple[GPUNode, ...] = ()
    """GPU nodes (``nvidia.com/gpu.present=true``), sorted by name."""
    container_runtime: str = RUNTIME_CONTAINERD
    """The runtime the toolkit configures (cri-o on OpenShift; containerd wins otherwise)."""
    openshift: str | None = None
    """OpenShift version, or None when not on OpenShift."""
    openshift_proxy: Mapping[str, Any] | None = None
    """OpenShift: the spec of the ``cluster`` Proxy (None: none, or not OpenShift)."""
    kubernetes_version: str = "v1.32.0"
    """Server version (``v1.32.0``): RuntimeClasses are ``node.k8s.io/v1beta1`` up to v1.20.0."""
    crds: frozenset[tuple[str, str]] = frozenset()
    """Optional (apiVersion, kind) served: ``SERVICE_MONITOR``, ``PROMETHEUS_RULE``..."""
    has_nfd_labels: bool = False
    """Whether any node carries a ``feature.node.kubernetes.io/`` label."""
    operator_env: Mapping[str, str] = field(default_factory=dict)
    """The operator pod's image fallbacks (``VALIDATOR_IMAGE``, ``DRIVER_MANAGER_IMAGE``...)."""
    config_map_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Keys of ConfigMaps in the operator namespace that the driver mounts file by file
    (``kernelModuleConfig``, ``repoConfig``, ``certConfig``), by ConfigMap name."""

    @property
    def gpu_node_count(self) -> int:
        """Number of GPU nodes (the ``gpu_operator_gpu_nodes_total`` gauge)."""
        return len(self.nodes)

    @property
    def os_tag(self) -> str:
        """The OS tag of the first GPU node ("" when there is none), as NVIDIA picks it."""
        return self.nodes[0].os_tag if self.nodes else ""

    @property
    def runtime_class_api_version(self) -> str:
        """``node.k8s.io/v1``, or ``node.k8s.io/v1beta1`` on Kubernetes up to v1.20.0."""
        return (
            "node.k8s.io/v1beta1"
            if _version(self.kubernetes_version) <= (1, 20, 0)
            else ("node.k8s.io/v1")
        )

    def serves(self, kind: tuple[str, str]) -> bool:
        """Whether the optional (apiVersion, kind) is served by the cluster."""
        return kind in self.crds

    def kernels(self) -> dict[str, GPUNode]:
        """Each distinct kernel of the GPU nodes, with the first node running it (sorted)."""
        out: dict[str, GPUNode] = {}
        for node in self.nodes:
            if node.kernel and node.kernel not in out:
                out[node.kernel] = node
        return dict(sorted(out.items()))

    @classmethod
    def from_nodes(
        cls,
        node_dicts: Iterable[Mapping[str, Any]],
        *,
        operator_namespace: str,
        openshift: str | None = None,
        openshift_proxy: Mapping[str, Any] | None = None,
        kubernetes_version: str = "v1.32.0",
        crds: Iterable[tuple[str, str]] = (),
        operator_env: Mapping[str, str] | None = None,
        config_map_keys: Mapping[str, Iterable[str]] | None = None,
    ) -> ClusterFacts:
        """Facts from Node dicts: GPU nodes, NFD presence and the container runtime.

        The runtime is cri-o on OpenShift; otherwise containerd when any GPU node
        runs it, else the runtime of the first GPU node that reports one, else
        containerd (NVIDIA's ``getRuntime``).
        """
        gpu_nodes: list[GPUNode] = []
        nfd = False
        for node in node_dicts:
            labels = (node.get("metadata") or {}).get("labels") or {}
            nfd = nfd or has_nfd_labels(labels)
            if labels.get(GPU_PRESENT_LABEL) == "true":
                gpu_nodes.append(GPUNode.from_node(node))
        gpu_nodes.sort(key=lambda n: n.name)
        runtimes = [n.container_runtime for n in gpu_nodes if n.container_runtime]
        if openshift is not None:
            runtime = RUNTIME_CRIO
        elif RUNTIME_CONTAINERD in runtimes or not runtimes:
            runtime = RUNTIME_CONTAINERD
        else:
            runtime = runtimes[0]
        return cls(
            operator_namespace=operator_namespace,
            nodes=tuple(gpu_nodes),
            container_runtime=runtime,
            openshift=openshift,
            openshift_proxy=openshift_proxy if openshift is not None else None,
            kubernetes_version=kubernetes_version,
            crds=frozenset(crds),
            has_nfd_labels=nfd,
            operator_env=MappingProxyType(dict(operator_env or {})),
            config_map_keys={k: tuple(sorted(v)) for k, v in (config_map_keys or {}).items()},
        )
