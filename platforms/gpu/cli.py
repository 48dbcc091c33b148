"""``nimctl render`` for a ClusterPolicy: its states' objects on the cluster a
``--nodes`` file describes, offline (NVIDIADrivers: ``nvidiadriver_cli``, on
the same file).

The nodes file is what ``kubectl get nodes -o yaml`` prints (a List, or a YAML
stream of Nodes). It may also hold the ConfigMaps the driver mounts file by
file (``kernelModuleConfig``, ``repoConfig``, ``certConfig``), the
CustomResourceDefinitions the cluster serves and an OpenShift ClusterVersion
(``version``; its first Completed update gives the OpenShift version, as the
controllers read it: ``platforms.gpu.openshift_cluster``) with the ``cluster``
Proxy.
A file that lists no CRDs is taken as a cluster with the Prometheus Operator,
so the render shows the ServiceMonitors the operator would create there (as the
offline NeMo render assumes every optional API installed); list the CRDs the
cluster serves to render exactly for it. Nodes NFD found a GPU on are
treated as already labelled ``nvidia.com/gpu.present=true``, as the node
labelling controller would label them. Images a ClusterPolicy does not name
come from ``DEFAULT_OPERATOR_ENV``, overridden by ``*_IMAGE`` variables of the
calling environment (the operator pod's image variables).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from ruamel.yaml import YAML

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from platforms.gpu.errors import RenderError
from platforms.gpu.facts import (
    GPU_PRESENT_LABEL,
    SERVICE_MONITOR,
    ClusterFacts,
    is_gpu_node_by_nfd,
)
from platforms.gpu.images import DEFAULT_OPERATOR_ENV
from platforms.gpu.openshift_cluster import (
    CLUSTER_VERSION_NAME,
    PROXY_NAME,
    openshift_version,
    proxy_spec,
)
from platforms.gpu.states import render

DEFAULT_NAMESPACE = "gpu-operator"


def read_cluster(path: str | None) -> list[dict[str, Any]]:
    """The objects of the ``--nodes`` file (Lists flattened); [] without one."""
    if path is None:
        return []
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise RenderError(f"{path}: {err.strerror or err}") from None
    try:
        docs = [d for d in YAML(typ="safe").load_all(text) if d is not None]
    except Exception as err:  # YAML syntax errors carry their own line/column
        raise RenderError(f"{path}: not valid YAML: {err}") from None
    out: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            raise RenderError(f"{path}: expected Kubernetes objects, found {type(doc).__name__}")
        if str(doc.get("kind", "")).endswith("List"):
            out.extend(i for i in doc.get("items") or [] if isinstance(i, dict))
        else:
            out.append(doc)
    return out


def facts_from(
    objects: Iterable[Mapping[str, Any]],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    environ: Mapping[str, str] | None = None,
    err: TextIO | None = None,
    default_crds: Iterable[tuple[str, str]] = (),
) -> ClusterFacts:
    """ClusterFacts from the ``--nodes`` file's objects (see the module docstring);
    ``default_crds`` are taken as served when the objects list no CRD."""
    err = err or sys.stderr
    nodes: list[dict[str, Any]] = []
    config_maps: dict[str, list[str]] = {}
    crds: set[tuple[str, str]] = set()
    openshift: str | None = None
    proxy: dict[str, Any] | None = None
    for obj in objects:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        if kind == "Node":
            nodes.append(assume_labelled(obj, err))
        elif kind == "ConfigMap":
            keys = [*(obj.get("data") or {}), *(obj.get("binaryData") or {})]
            config_maps[str(meta.get("name", ""))] = keys
        elif kind == "CustomResourceDefinition":
            spec = obj.get("spec") or {}
            group = spec.get("group", "")
            crd_kind = (spec.get("names") or {}).get("kind", "")
            for version in spec.get("versions") or []:
                if version.get("served", True):
                    crds.add((f"{group}/{version.get('name')}", crd_kind))
        elif kind == "ClusterVersion" and meta.get("name") == CLUSTER_VERSION_NAME:
            openshift = _file_openshift_version(obj, err)
        elif kind == "Proxy" and meta.get("name") == PROXY_NAME:
            proxy = proxy_spec(obj)
    if not crds:
        crds.update(default_crds)
    env = {**DEFAULT_OPERATOR_ENV}
    env.update({k: v for k, v in (environ or {}).items() if k.endswith("_IMAGE") and v})
    return ClusterFacts.from_nodes(
        nodes,
        operator_namespace=namespace,
        openshift=openshift,
        openshift_proxy=proxy,
        crds=crds,
        operator_env=env,
        config_map_keys=config_maps,
    )


def _file_openshift_version(cluster_version: Mapping[str, Any], err: TextIO) -> str:
    """The OpenShift version as the controllers read it; a hand-written ClusterVersion
    with only ``status.desired.version`` gives that one's ``major.minor`` (with a note)."""
    try:
        return openshift_version(cluster_version)
    except RenderError:
        desired = str(
            ((cluster_version.get("status") or {}).get("desired") or {}).get("version") or ""
        )
        if not desired:
            raise
    version = ".".join(desired.split(".")[:2])
    print(
        f"note: ClusterVersion version has no Completed update in status.history; using "
        f"status.desired.version ({version}), where the operator would wait for one",
        file=err,
    )
    return version


def assume_labelled(node: Mapping[str, Any], err: TextIO) -> dict[str, Any]:
    """The node as node labelling would leave it: NFD-found GPU nodes get ``gpu.present``."""
    labels = dict((node.get("metadata") or {}).get("labels") or {})
    if GPU_PRESENT_LABEL in labels or not is_gpu_node_by_nfd(labels):
        return dict(node)
    name = (node.get("metadata") or {}).get("name", "<unnamed>")
    print(
        f"note: node {name} has NFD's NVIDIA PCI label; treating it as labelled "
        f"{GPU_PRESENT_LABEL}=true, as nimctl's node labelling would",
        file=err,
    )
    return {
        **node,
        "metadata": {**node.get("metadata", {}), "labels": {**labels, GPU_PRESENT_LABEL: "true"}},
    }


def render_policy(
    policy: ClusterPolicy,
    cluster: list[dict[str, Any]],
    *,
    err: TextIO | None = None,
) -> list[dict[str, Any]]:
    """The objects of every enabled state of the ClusterPolicy ``policy`` (its model, as
    ``nimctl render`` loaded it), in apply order; one line per state on ``err`` (enabled
    or not, how many objects)."""
    err = err or sys.stderr
    listed_crds = any(o.get("kind") == "CustomResourceDefinition" for o in cluster)
    facts = facts_from(cluster, environ=os.environ, err=err, default_crds=[SERVICE_MONITOR])
    if not listed_crds:
        print(
            "note: no CustomResourceDefinitions given; assuming the Prometheus Operator's "
            "ServiceMonitor is served, as on a cluster with Prometheus (list the cluster's "
            "CRDs in --nodes to render for it exactly)",
            file=err,
        )
    if not facts.nodes:
        print(
            "note: no GPU node (give --nodes with your Nodes); DaemonSets are left out, as the "
            "GPU Operator creates none until a node is labelled nvidia.com/gpu.present=true",
            file=err,
        )
    out: list[dict[str, Any]] = []
    for state in render(policy, facts):
        detail = f"{len(state.objects)} objects" if state.enabled else "disabled"
        print(f"# {state.name}: {detail}", file=err)
        out.extend(state.objects)
    return out
