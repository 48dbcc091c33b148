"""``nimctl local --gpu-operator``: bare GPU nodes turned into GPU nodes, then a NIM on them.

``apply`` creates the operator namespace and NVIDIA's sample ClusterPolicy
(docs/examples/clusterpolicy-defaults.yaml, unchanged); ``watch`` redraws a
table of the ClusterPolicy, every operand DaemonSet (ready/desired) and every
GPU node (GPUs advertised, GPU product) until the policy is ``ready`` and
every GPU node advertises ``nvidia.com/gpu``. The CLI then applies the NIM
demo, which schedules only now that GPUs exist: one operator for both halves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TextIO

from ruamel.yaml import YAML

from nimctl_runtime.client import AlreadyExists, Client, NotFound
from nimctl_runtime.statustable import LiveTable, Row

NAMESPACE: Final = "gpu-operator"
PROFILE: Final = "gpu-bare"
SAMPLE: Final = (
    Path(__file__).resolve().parents[1] / "docs" / "examples" / ("clusterpolicy-defaults.yaml")
)
API_VERSION: Final = "nvidia.com/v1"

__all__ = ["NAMESPACE", "PROFILE", "USAGE", "apply", "rows", "run", "sample_policy", "watch"]

USAGE: Final = [
    "  kubectl get clusterpolicy",
    f"  kubectl -n {NAMESPACE} get daemonsets,pods -o wide",
    "  kubectl get nodes -L nvidia.com/gpu.present,nvidia.com/gpu.product",
]


def sample_policy(path: Path = SAMPLE) -> dict[str, Any]:
    """NVIDIA's sample ClusterPolicy, as shipped in docs/examples."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: sample ClusterPolicy not found (docs/examples)")
    obj: dict[str, Any] = YAML(typ="safe").load(path.read_text())
    return obj


async def apply(client: Client) -> str:
    """Create the operator namespace and the sample ClusterPolicy; returns its name."""
    with contextlib.suppress(AlreadyExists):
        await client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
    policy = sample_policy()
    with contextlib.suppress(AlreadyExists):
        await client.create(policy)
    return str(policy["metadata"]["name"])


def _gpus(node: dict[str, Any]) -> str:
    return str(((node.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu") or "0")


def rows(
    policy: dict[str, Any], daemonsets: list[dict[str, Any]], nodes: list[dict[str, Any]]
) -> list[Row]:
    """The table: the ClusterPolicy, its DaemonSets, then the GPU nodes."""
    status = policy.get("status") or {}
    conditions = status.get("conditions") or []
    reason = next(
        (
            c.get("reason", "")
            for c in conditions
            if c.get("status") == "True" and c.get("type") in ("Ready", "Error")
        ),
        "-",
    )
    out = [
        Row(
            "ClusterPolicy",
            str((policy.get("metadata") or {}).get("name", "")),
            str(status.get("state") or "<none>"),
            str(reason),
            "-",
        )
    ]
    for ds in daemonsets:
        st = ds.get("status") or {}
        desired = int(st.get("desiredNumberScheduled") or 0)
        ready = int(st.get("numberReady") or 0)
        out.append(
            Row(
                "DaemonSet",
                str(ds["metadata"]["name"]),
                "ready" if desired == ready else "notReady",
                "-",
                f"{ready}/{desired}",
            )
        )
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        gpus = _gpus(node)
        out.append(
            Row(
                "Node",
                str(node["metadata"]["name"]),
                "GPUs advertised" if gpus != "0" else "no GPUs yet",
                str(labels.get("nvidia.com/gpu.product", "-")),
                f"nvidia.com/gpu={gpus}",
            )
        )
    return out


async def watch(client: Client, out: TextIO, name: str, *, interval: float = 0.5) -> None:
    """Redraw the table until the policy is ready and every GPU node advertises GPUs."""
    table = LiveTable(out)
    while True:
        try:
            policy = await client.get(API_VERSION, "ClusterPolicy", name)
        except NotFound:
            policy = {"kind": "ClusterPolicy", "metadata": {"name": name}}
        daemonsets = (await client.list("apps/v1", "DaemonSet", NAMESPACE))["items"]
        nodes = [
            n
            for n in (await client.list("v1", "Node"))["items"]
            if ((n.get("metadata") or {}).get("labels") or {}).get("nvidia.com/gpu.present")
            == "true"
        ]
        table.update(rows(policy, daemonsets, nodes))
        ready = (policy.get("status") or {}).get("state") == "ready"
        if ready and nodes and all(_gpus(n) != "0" for n in nodes):
            return
        await asyncio.sleep(interval)


async def run(
    client: Client, out: TextIO, then: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Apply the sample, watch the GPU stack come up, then run ``then`` (the NIM demo)."""
    name = await apply(client)
    await watch(client, out, name)
    out.write(f"\nClusterPolicy {name} is ready and every GPU node advertises nvidia.com/gpu.\n")
    out.flush()
    if then is not None:
        out.write("Applying the demo NIMCache and NIMService: they schedule on the GPUs now.\n")
        out.flush()
        await then()
