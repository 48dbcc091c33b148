"""ClusterPolicies and cluster facts for the render tests, and lookups over renders."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from platforms.gpu import ClusterFacts, StateRender, render
from platforms.gpu.images import DEFAULT_OPERATOR_ENV
from tests.unit.platforms.helpers import deep_merge

NS = "gpu-operator"
UID = "4f1c7a52-policy-uid"
SAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "clusterpolicy-defaults.yaml"


def sample() -> dict[str, Any]:
    """NVIDIA's ClusterPolicy sample (the Helm chart's defaults), as a dict."""
    doc: dict[str, Any] = YAML(typ="safe").load(SAMPLE.read_text())
    doc["metadata"]["uid"] = UID
    return doc


def policy(spec: dict[str, Any] | None = None) -> ClusterPolicy:
    """The sample with ``spec`` merged over its spec."""
    doc = sample()
    if spec:
        doc["spec"] = deep_merge(doc["spec"], spec)
    return ClusterPolicy.model_validate(doc)


def node(
    name: str = "gpu-1",
    *,
    os_id: str = "ubuntu",
    version: str = "22.04",
    kernel: str = "5.15.0-1048-nvidia",
    runtime: str = "containerd://1.7.20",
    gpu: bool = True,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node as NFD (and node labelling, when ``gpu``) labelled it."""
    all_labels = {
        "feature.node.kubernetes.io/system-os_release.ID": os_id,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": version,
        "feature.node.kubernetes.io/kernel-version.full": kernel,
    }
    if gpu:
        all_labels["feature.node.kubernetes.io/pci-10de.present"] = "true"
        all_labels["nvidia.com/gpu.present"] = "true"
    all_labels.update(labels or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "status": {"nodeInfo": {"containerRuntimeVersion": runtime}},
    }


def facts(*nodes: dict[str, Any], **kwargs: Any) -> ClusterFacts:
    """Facts of a cluster with ``nodes`` (default: one Ubuntu 22.04 GPU node)."""
    kwargs.setdefault("operator_env", DEFAULT_OPERATOR_ENV)
    return ClusterFacts.from_nodes(
        list(nodes) if nodes else [node()], operator_namespace=NS, **kwargs
    )


def states(
    spec: dict[str, Any] | None = None, cluster: ClusterFacts | None = None
) -> dict[str, StateRender]:
    """The render of the sample (+ ``spec``), by state name."""
    return {s.name: s for s in render(policy(spec), cluster or facts())}


def objects(
    spec: dict[str, Any] | None = None, cluster: ClusterFacts | None = None
) -> list[dict[str, Any]]:
    """Every object of every state, in apply order."""
    return [o for s in states(spec, cluster).values() for o in s.objects]


def daemonset(
    name: str, spec: dict[str, Any] | None = None, cluster: ClusterFacts | None = None
) -> dict[str, Any]:
    """The DaemonSet ``name`` of the render."""
    for obj in objects(spec, cluster):
        if obj["kind"] == "DaemonSet" and obj["metadata"]["name"] == name:
            return copy.deepcopy(obj)
    raise AssertionError(f"no DaemonSet {name}")


def ctr(ds: dict[str, Any], name: str) -> dict[str, Any]:
    """The init or main container ``name``."""
    pod = ds["spec"]["template"]["spec"]
    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        if c["name"] == name:
            return dict(c)
    raise AssertionError(f"{ds['metadata']['name']} has no container {name}")


def env(c: dict[str, Any]) -> dict[str, Any]:
    """A container's env as name -> value (or valueFrom)."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def names(items: list[dict[str, Any]]) -> list[str]:
    """The ``name`` of each item."""
    return [i["name"] for i in items]


def volume(ds: dict[str, Any], name: str) -> dict[str, Any]:
    """The pod volume ``name``."""
    for v in ds["spec"]["template"]["spec"]["volumes"]:
        if v["name"] == name:
            return dict(v)
    raise AssertionError(f"no volume {name}")
