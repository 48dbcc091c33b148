"""Nodes, NVIDIADrivers and facts for the NVIDIADriver unit tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver
from platforms.gpu.facts import ClusterFacts
from platforms.gpu.images import DEFAULT_OPERATOR_ENV
from platforms.gpu.nvidiadriver_pools import DriverSelector, assign_owners
from platforms.gpu.nvidiadriver_render import NVIDIADriverFacts

NS = "gpu-operator"
SAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "nvidiadriver-sample.yaml"


def node(
    name: str,
    *,
    os_id: str = "ubuntu",
    version: str = "22.04",
    kernel: str = "5.15.0-122-generic",
    gpu: bool = True,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    all_labels = {
        "feature.node.kubernetes.io/system-os_release.ID": os_id,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": version,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": version.split(
            ".", maxsplit=1
        )[0],
        "feature.node.kubernetes.io/kernel-version.full": kernel,
        **(labels or {}),
    }
    if gpu:
        all_labels["nvidia.com/gpu.present"] = "true"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": all_labels}}


def driver(
    name: str,
    *,
    selector: Mapping[str, str] | None = None,
    default: bool = False,
    uid: str | None = None,
    **spec: Any,
) -> NVIDIADriver:
    body: dict[str, Any] = {
        "repository": "nvcr.io/nvidia",
        "image": "driver",
        "version": "570.148.08",
        **spec,
    }
    if selector is not None:
        body["nodeSelector"] = dict(selector)
    if default:
        body["default"] = True
    return NVIDIADriver.model_validate(
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "NVIDIADriver",
            "metadata": {"name": name, "uid": uid or f"uid-{name}"},
            "spec": body,
        }
    )


def sample() -> NVIDIADriver:
    obj: dict[str, Any] = YAML(typ="safe").load(SAMPLE.read_text())
    obj["metadata"]["uid"] = "uid-sample"
    return NVIDIADriver.model_validate(obj)


def selector_of(cr: NVIDIADriver) -> DriverSelector:
    return DriverSelector(
        cr.metadata.name or "", dict(cr.spec.node_selector or {}), bool(cr.spec.default)
    )


def facts(nodes: list[dict[str, Any]], drivers: list[NVIDIADriver]) -> NVIDIADriverFacts:
    owners = assign_owners([selector_of(d) for d in drivers], nodes)
    cluster = ClusterFacts.from_nodes(
        nodes, operator_namespace=NS, operator_env=DEFAULT_OPERATOR_ENV
    )
    return NVIDIADriverFacts(cluster=cluster, nodes=tuple(nodes), owners=owners)
