"""Compare our NVIDIADriver render with NVIDIA's render goldens, leaf by leaf.

NVIDIA's goldens (``internal/state/testdata/golden/driver-*.yaml``) live as data
in ``../shared/nvidia-render-goldens/nvidiadriver/`` beside each case's input
(``inputs/<case>/nvidiadriver.yaml`` + ``nodes.yaml``). Objects are matched by
(kind, name); each object is flattened to leaf paths. List items are keyed by
their ``name`` (or ``mountPath``) when those are unique, so one inserted env
variable is one difference rather than a shifted list; the order of such a list
is a leaf of its own (``<path>.<order>``), because a reordered env list is a pod
template change on a cluster.

What NVIDIA adds at Sync time and its golden (a pre-Sync render) cannot show is
left out of ours before comparing: owner references, our hash annotation, the
``nvidia.com/gpu-operator.state`` label, the managed-by label.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver
from manifests.hashing import LAST_APPLIED_HASH_ANNOTATION
from manifests.labels import MANAGED_BY_LABEL
from platforms.gpu.cli import read_cluster
from platforms.gpu.nvidiadriver_cli import render_drivers

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared"
GOLDENS = SHARED / "nvidia-render-goldens" / "nvidiadriver"
NAMESPACE = "test-operator"
STATE_LABEL = "nvidia.com/gpu-operator.state"

Leaves = dict[str, Any]


def cases() -> list[str]:
    """The case names that have both an input and a golden (sorted)."""
    if not (GOLDENS / "inputs").is_dir():
        return []
    return sorted(
        d.name
        for d in (GOLDENS / "inputs").iterdir()
        if (d / "nvidiadriver.yaml").is_file() and (GOLDENS / f"{d.name}.yaml").is_file()
    )


def _load(path: Path) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all(path.read_text()) if isinstance(d, dict)]


def golden(case: str) -> list[dict[str, Any]]:
    """NVIDIA's golden objects of ``case``."""
    return _load(GOLDENS / f"{case}.yaml")


def ours(case: str) -> list[dict[str, Any]]:
    """Our render of ``case``'s input, as ``nimctl render -f nvidiadriver.yaml --nodes nodes.yaml``
    would print it, without what NVIDIA adds only at Sync time (module docstring)."""
    inputs = GOLDENS / "inputs" / case
    drivers = [NVIDIADriver.model_validate(d) for d in _load(inputs / "nvidiadriver.yaml")]
    cluster = read_cluster(str(inputs / "nodes.yaml"))
    objects = render_drivers(drivers, cluster, err=io.StringIO(), namespace=NAMESPACE)
    return [_strip_sync_fields(o) for o in objects]


def _strip_sync_fields(obj: dict[str, Any]) -> dict[str, Any]:
    meta = dict(obj.get("metadata") or {})
    meta.pop("ownerReferences", None)
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k != LAST_APPLIED_HASH_ANNOTATION
    }
    labels = {
        k: v
        for k, v in (meta.get("labels") or {}).items()
        if k not in (MANAGED_BY_LABEL, STATE_LABEL)
    }
    for key, value in (("annotations", annotations), ("labels", labels)):
        if value:
            meta[key] = value
        else:
            meta.pop(key, None)
    return {**obj, "metadata": meta}


def _key_of(items: list[Any]) -> str | None:
    """The field that names each item of a list uniquely, if any."""
    if not items or not all(isinstance(i, Mapping) for i in items):
        return None
    for key in ("name", "mountPath"):
        values = [i.get(key) for i in items]
        if all(isinstance(v, str) for v in values) and len(set(values)) == len(values):
            return key
    return None


def _flatten(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        if not value:
            yield path, {}
        for k, v in value.items():
            yield from _flatten(v, f"{path}.{k}")
    elif isinstance(value, list):
        key = _key_of(value)
        if key is None:
            if not value:
                yield path, []
            for i, v in enumerate(value):
                yield from _flatten(v, f"{path}[{i}]")
        else:
            yield f"{path}.<order>", tuple(i[key] for i in value)
            for item in value:
                yield from _flatten(item, f"{path}[{key}={item[key]}]")
    else:
        yield path, value


def leaves(objects: list[dict[str, Any]]) -> Leaves:
    """``<Kind>/<name><path>`` -> value, for every leaf of every object."""
    out: Leaves = {}
    for obj in objects:
        ident = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
        out.update(_flatten(obj, ident))
    return out


@dataclass
class Comparison:
    """The leaves of a golden and of our render, and where they differ."""

    total: int = 0
    equal: int = 0
    differences: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """leaf -> (NVIDIA's value, ours); ``MISSING`` for a leaf one side lacks."""

    @property
    def percent(self) -> float:
        return 100.0 * self.equal / self.total if self.total else 100.0


MISSING = "<missing>"


def compare(theirs: list[dict[str, Any]], mine: list[dict[str, Any]]) -> Comparison:
    """Leaf-by-leaf comparison (union of both sides' leaves)."""
    a, b = leaves(theirs), leaves(mine)
    result = Comparison()
    for path in sorted(set(a) | set(b)):
        result.total += 1
        left, right = a.get(path, MISSING), b.get(path, MISSING)
        if left == right:
            result.equal += 1
        else:
            result.differences[path] = (left, right)
    return result


def _daemonset(objects: list[dict[str, Any]]) -> dict[str, Any]:
    found = [o for o in objects if o.get("kind") == "DaemonSet"]
    return found[0] if found else {}


def injected_names(theirs: list[dict[str, Any]], mine: list[dict[str, Any]]) -> dict[str, str]:
    """NVIDIA's fixture-injected names -> the names a real controller (and we) give.

    NVIDIA's driver tests hand the template ``Driver.Name`` and ``Driver.AppName``
    directly (``nvidia-gpu-driver-ubuntu22.04``, ``...-7c6d7bd86b``) instead of
    computing them as ``getDriverName`` (``nvidia-<type>-driver-<cr>-<osTag>``) and
    ``getDriverAppName`` (``nvidia-<type>-driver-<osTag>-<hash of the CR uid>``) do;
    the OpenShift tests force the OS tag ``rhel8.0`` where the RHCOS 4.13 nodes
    give ``rhcos4.13`` (NOTES.md of each case). Those names are mapped before
    comparing, so each difference left is a real one.
    """
    ds_theirs, ds_mine = _daemonset(theirs), _daemonset(mine)
    if not ds_theirs or not ds_mine:
        return {}
    pod_theirs = ds_theirs["spec"]["template"]["spec"]
    pod_mine = ds_mine["spec"]["template"]["spec"]
    out = {
        ds_theirs["metadata"]["name"]: ds_mine["metadata"]["name"],
        pod_theirs["serviceAccountName"]: pod_mine["serviceAccountName"],
    }
    os_theirs = ds_theirs["metadata"]["labels"].get("nvidia.com/node.os-version")
    os_mine = ds_mine["metadata"]["labels"].get("nvidia.com/node.os-version")
    if os_theirs and os_mine and os_theirs != os_mine:
        out[f"-{os_theirs}"] = f"-{os_mine}"
        out[os_theirs] = os_mine
    return out


def renamed(value: Any, names: Mapping[str, str]) -> Any:
    """``value`` with every occurrence of a ``names`` key replaced (longest first, one pass)."""
    if not names:
        return value
    import re

    pattern = re.compile("|".join(re.escape(k) for k in sorted(names, key=len, reverse=True)))

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return pattern.sub(lambda m: names[m.group(0)], v)
        if isinstance(v, Mapping):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)
