"""Node profiles (plain YAML data) and the Node objects built from them.

A profile is a list of pools; each pool makes ``count`` nodes named
``<namePrefix>-<i>`` with the given cpu, memory, GPUs, labels and taints.
GPU nodes carry the labels Node Feature Discovery writes
(``feature.node.kubernetes.io/pci-10de.present=true``, kernel and OS release
labels) and advertise ``nvidia.com/gpu`` in capacity and allocatable, as the
device plugin would. Built-in profiles live in ``localcluster/profiles/``:
``default`` (2 GPU + 1 CPU), ``gpu-operator`` (the same with GPU feature
discovery's labels), ``gpu-rdma`` (the same with an RDMA device), ``no-gpu``,
``mig``, ``many-nodes``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

PROFILE_PACKAGE = "localcluster.profiles"
KUBELET_VERSION = "v1.32.0"


GPU_PRODUCT_ANNOTATION = "localcluster.nimctl.io/gpu-product"


@dataclass(frozen=True)
class NodePool:
    """``count`` identical nodes."""

    name_prefix: str
    count: int = 1
    cpu: str = "16"
    memory: str = "64Gi"
    pods: str = "110"
    ephemeral_storage: str = "500Gi"
    gpus: int = 0
    gpu_product: str = ""
    kernel_version: str = "5.15.0-122-generic"
    os_id: str = "ubuntu"
    os_version_id: str = "22.04"
    os_image: str = "Ubuntu 22.04.5 LTS"
    container_runtime_version: str = "containerd://1.7.24"
    architecture: str = "amd64"
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    unschedulable: bool = False
    extended_resources: Mapping[str, str] = field(default_factory=dict)
    """Other device plugins' resources (``rdma/rdma_shared_device_a: "1000"``), in
    capacity and allocatable."""


@dataclass(frozen=True)
class NodeProfile:
    """A named cluster shape."""

    name: str
    pools: tuple[NodePool, ...]
    description: str = ""


def builtin_profiles() -> list[str]:
    """Names of the profiles shipped with localcluster."""
    root = resources.files(PROFILE_PACKAGE)
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def _pool(data: Mapping[str, Any]) -> NodePool:
    known = {
        "namePrefix": "name_prefix",
        "count": "count",
        "cpu": "cpu",
        "memory": "memory",
        "pods": "pods",
        "ephemeralStorage": "ephemeral_storage",
        "gpus": "gpus",
        "gpuProduct": "gpu_product",
        "kernelVersion": "kernel_version",
        "osID": "os_id",
        "osVersionID": "os_version_id",
        "osImage": "os_image",
        "containerRuntimeVersion": "container_runtime_version",
        "architecture": "architecture",
        "unschedulable": "unschedulable",
    }
    unknown = set(data) - set(known) - {"labels", "annotations", "taints", "extendedResources"}
    if unknown:
        raise ValueError(f"node profile pool: unknown field(s) {sorted(unknown)}")
    if "namePrefix" not in data:
        raise ValueError("node profile pool: namePrefix is required")
    kwargs: dict[str, Any] = {known[k]: v for k, v in data.items() if k in known}
    for key in ("cpu", "memory", "pods", "ephemeral_storage"):
        if key in kwargs:
            kwargs[key] = str(kwargs[key])
    return NodePool(
        **kwargs,
        labels={str(k): str(v) for k, v in (data.get("labels") or {}).items()},
        annotations={str(k): str(v) for k, v in (data.get("annotations") or {}).items()},
        taints=tuple(dict(t) for t in data.get("taints") or []),
        extended_resources=_extended_resources(data.get("extendedResources") or {}),
    )


def _extended_resources(data: Any) -> dict[str, str]:
    """``extendedResources``: domain-prefixed names (``vendor/device``) to quantities."""
    if not isinstance(data, Mapping):
        raise ValueError(f"node profile pool: extendedResources must be a mapping, got {data!r}")
    out = {str(k): str(v) for k, v in data.items()}
    for name in out:
        if "/" not in name or name.startswith("kubernetes.io/"):
            raise ValueError(
                f"node profile pool: extendedResources: {name!r} is not an extended resource "
                "name (domain/name, e.g. rdma/rdma_shared_device_a)"
            )
    return out


def profile_from_data(name: str, data: Mapping[str, Any]) -> NodeProfile:
    """Build a profile from its YAML shape (``{description, pools: [...]}``)."""
    pools = data.get("pools")
    if not isinstance(pools, list):
        raise ValueError(f"node profile {name!r}: pools must be a list")
    return NodeProfile(
        name=name,
        pools=tuple(_pool(p) for p in pools),
        description=str(data.get("description", "")),
    )


def load_profile(profile: str | Path | Mapping[str, Any] | NodeProfile | None) -> NodeProfile:
    """A profile by built-in name, YAML file path, parsed mapping, or ``None`` for ``default``."""
    if isinstance(profile, NodeProfile):
        return profile
    if isinstance(profile, Mapping):
        return profile_from_data(str(profile.get("name", "custom")), profile)
    yaml = YAML(typ="safe")
    if profile is None or (isinstance(profile, str) and profile in builtin_profiles()):
        name = profile or "default"
        text = resources.files(PROFILE_PACKAGE).joinpath(f"{name}.yaml").read_text()
        return profile_from_data(name, yaml.load(text))
    path = Path(profile)
    if not path.is_file():
        raise ValueError(
            f"unknown node profile {str(profile)!r}: use one of {builtin_profiles()} "
            "or the path of a YAML file"
        )
    try:
        data = yaml.load(path.read_text())
    except (OSError, YAMLError) as exc:
        raise ValueError(f"node profile {path}: cannot read it as YAML: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ValueError(f"node profile {path}: expected a mapping with 'pools', got {data!r}")
    try:
        return profile_from_data(path.stem, data)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"node profile {path}: malformed pool: {exc!r}") from exc


def _uuid_like(seed: str) -> str:
    h = hashlib.sha256(seed.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def build_node(pool: NodePool, index: int, ordinal: int) -> dict[str, Any]:
    """The Node object for the *index*-th node of *pool* (*ordinal* is its cluster-wide number)."""
    name = f"{pool.name_prefix}-{index}"
    major, minor, *rest = [*pool.kernel_version.split("-")[0].split("."), "0", "0"][:3]
    version_major, _, version_minor = pool.os_version_id.partition(".")
    labels: dict[str, str] = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": pool.architecture,
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": pool.architecture,
        "feature.node.kubernetes.io/kernel-version.full": pool.kernel_version,
        "feature.node.kubernetes.io/kernel-version.major": major,
        "feature.node.kubernetes.io/kernel-version.minor": minor,
        "feature.node.kubernetes.io/kernel-version.revision": rest[0] if rest else "0",
        "feature.node.kubernetes.io/system-os_release.ID": pool.os_id,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": pool.os_version_id,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": version_major,
    }
    if version_minor:
        labels["feature.node.kubernetes.io/system-os_release.VERSION_ID.minor"] = version_minor
    capacity: dict[str, str] = {
        "cpu": pool.cpu,
        "memory": pool.memory,
        "pods": pool.pods,
        "ephemeral-storage": pool.ephemeral_storage,
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    if pool.gpus:
        labels["feature.node.kubernetes.io/pci-10de.present"] = "true"
        capacity["nvidia.com/gpu"] = str(pool.gpus)
    capacity.update(pool.extended_resources)
    labels.update(pool.labels)
    spec: dict[str, Any] = {
        "podCIDR": f"10.244.{ordinal}.0/24",
        "podCIDRs": [f"10.244.{ordinal}.0/24"],
        "providerID": f"localcluster://{name}",
    }
    if pool.taints:
        spec["taints"] = [dict(t) for t in pool.taints]
    if pool.unschedulable:
        spec["unschedulable"] = True
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{ordinal // 250}.{ordinal % 250 + 2}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": _uuid_like(name + "machine").replace("-", ""),
                "systemUUID": _uuid_like(name + "system"),
                "bootID": _uuid_like(name + "boot"),
                "kernelVersion": pool.kernel_version,
                "osImage": pool.os_image,
                "containerRuntimeVersion": pool.container_runtime_version,
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": pool.architecture,
            },
        },
    }
    annotations = dict(pool.annotations)
    if pool.gpu_product:
        # What the node's GPUs are (nvidia-smi in `kubectl exec` prints it); GPU Feature
        # Discovery, when it runs, publishes the same as nvidia.com/gpu.product.
        annotations.setdefault(GPU_PRODUCT_ANNOTATION, pool.gpu_product)
    if annotations:
        node["metadata"]["annotations"] = annotations
    return node


def node_conditions(now: str) -> list[dict[str, Any]]:
    """The conditions a healthy kubelet reports, stamped *now*."""

    def cond(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    return [
        cond(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]


def build_nodes(profile: NodeProfile) -> list[dict[str, Any]]:
    """Every Node of *profile*, in pool order."""
    nodes: list[dict[str, Any]] = []
    for pool in profile.pools:
        for index in range(pool.count):
            nodes.append(build_node(pool, index, len(nodes)))
    return nodes
