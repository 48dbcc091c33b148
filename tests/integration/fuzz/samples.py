"""The seeds of the fuzz suite: NVIDIA-shaped samples of every kind nimctl serves.

Read from ``docs/examples`` (the manifests users copy), one sample per document
of a served kind, plus a NIMBuild (no example ships one). Each sample is renamed
``fuzz-target`` in namespace ``fuzz-ns``; the runners give every mutant its own
name and namespace when they send it.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
NAME = "fuzz-target"
NAMESPACE = "fuzz-ns"

SERVED = {
    ("apps.nvidia.com/v1alpha1", "NIMService"),
    ("apps.nvidia.com/v1alpha1", "NIMCache"),
    ("apps.nvidia.com/v1alpha1", "NIMPipeline"),
    ("apps.nvidia.com/v1alpha1", "NIMBuild"),
    ("apps.nvidia.com/v1alpha1", "NemoCustomizer"),
    ("apps.nvidia.com/v1alpha1", "NemoDatastore"),
    ("apps.nvidia.com/v1alpha1", "NemoEntitystore"),
    ("apps.nvidia.com/v1alpha1", "NemoEvaluator"),
    ("apps.nvidia.com/v1alpha1", "NemoGuardrail"),
    ("nvidia.com/v1", "ClusterPolicy"),
    ("nvidia.com/v1alpha1", "NVIDIADriver"),
}
CLUSTER_SCOPED = {"ClusterPolicy", "NVIDIADriver"}

NIMBUILD: dict[str, Any] = {
    "apiVersion": "apps.nvidia.com/v1alpha1",
    "kind": "NIMBuild",
    "metadata": {"name": NAME, "namespace": NAMESPACE},
    "spec": {
        "nimCache": {"name": "meta-llama-3-2-1b-instruct"},
        "image": {"repository": "nvcr.io/nim/meta/llama-3.2-1b-instruct", "tag": "1.12.0"},
    },
}


@dataclass(frozen=True)
class Sample:
    """One document to mutate, and where it came from (``file#index``)."""

    origin: str
    obj: dict[str, Any]

    @property
    def api_version(self) -> str:
        return str(self.obj["apiVersion"])

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])


def _normalised(doc: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(doc)
    meta = obj.setdefault("metadata", {})
    meta["name"] = NAME
    if obj.get("kind") in CLUSTER_SCOPED:
        meta.pop("namespace", None)
    else:
        meta["namespace"] = NAMESPACE
    return obj


@functools.cache
def samples() -> tuple[Sample, ...]:
    """Every served-kind document of ``docs/examples`` (and the NIMBuild), in file order."""
    yaml = YAML(typ="safe", pure=True)
    out: list[Sample] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for i, doc in enumerate(yaml.load_all(path.read_text())):
            if isinstance(doc, dict) and (doc.get("apiVersion"), doc.get("kind")) in SERVED:
                out.append(Sample(f"{path.name}#{i}", _normalised(doc)))
    out.append(Sample("nimbuild (built in)", _normalised(NIMBUILD)))
    return tuple(out)


def kinds() -> list[str]:
    return sorted({s.kind for s in samples()})
