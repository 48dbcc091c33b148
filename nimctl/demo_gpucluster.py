"""``nimctl local --gpu-cluster``: host-driver GPU nodes, NVIDIA's DRA stack, a NIM on DRA claims.

``apply`` creates the operator namespace and NVIDIA's sample GPUCluster
(docs/examples/gpucluster-sample.yaml); ``watch`` redraws a table of the
GPUCluster, its DaemonSets (ready/desired) and every GPU node with the GPUs its
ResourceSlice publishes, until the GPUCluster is ``ready`` and every GPU node
publishes its GPUs. Then the NIM demo runs on DRA: its NIMService asks for one
GPU through ``draResources`` (a ResourceClaimTemplate for ``gpu.nvidia.com``),
so its pod holds an allocated ResourceClaim instead of ``nvidia.com/gpu``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TextIO

from ruamel.yaml import YAML

from nimctl.demo import DEMO_NAME, DEMO_NAMESPACE, demo_objects
from nimctl_runtime.client import AlreadyExists, Client, NotFound
from nimctl_runtime.statustable import LiveTable, Row

NAMESPACE: Final = "gpu-operator"
PROFILE: Final = "gpu-host-driver"
SAMPLE: Final = Path(__file__).resolve().parents[1] / "docs" / "examples" / "gpucluster-sample.yaml"
API_VERSION: Final = "nvidia.com/v1alpha1"
NAME: Final = "gpu-cluster"
CLAIM_TEMPLATE: Final = "single-gpu"
DRIVER: Final = "gpu.nvidia.com"

__all__ = ["NAMESPACE", "PROFILE", "USAGE", "apply", "dra_demo_objects", "rows", "run", "watch"]

USAGE: Final = [
    "  kubectl get gpuclusters",
    f"  kubectl -n {NAMESPACE} get daemonsets,pods -o wide",
    "  kubectl get resourceslices",
    f"  kubectl -n {DEMO_NAMESPACE} get resourceclaims",
]


async def apply(client: Client) -> None:
    """Create the operator namespace and NVIDIA's sample GPUCluster."""
    if not SAMPLE.is_file():
        raise FileNotFoundError(f"{SAMPLE}: sample GPUCluster not found (docs/examples)")
    with contextlib.suppress(AlreadyExists):
        await client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
    with contextlib.suppress(AlreadyExists):
        await client.create(YAML(typ="safe").load(SAMPLE.read_text()))


def dra_demo_objects(namespace: str = DEMO_NAMESPACE) -> list[dict[str, Any]]:
    """The NIM demo asking for its GPU through DRA: a ResourceClaimTemplate for one
    ``gpu.nvidia.com`` device, and the NIMService's ``draResources`` naming it."""
    out = copy.deepcopy(demo_objects(namespace))
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": CLAIM_TEMPLATE, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 1}}
        ]}}},
    }  # fmt: skip
    for obj in out:
        if obj["kind"] == "NIMService":
            obj["spec"].pop("resources", None)
            obj["spec"]["draResources"] = [{"resourceClaimTemplateName": CLAIM_TEMPLATE}]
    return [out[0], template, *out[1:]]


def _published(slices: list[dict[str, Any]], node: str) -> int:
    return sum(
        len((s.get("spec") or {}).get("devices") or [])
        for s in slices
        if (s.get("spec") or {}).get("nodeName") == node
        and (s.get("spec") or {}).get("driver") == DRIVER
    )


def rows(
    cluster: dict[str, Any],
    daemonsets: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    slices: list[dict[str, Any]],
) -> list[Row]:
    """The table: the GPUCluster, its DaemonSets, then the GPU nodes and their slices."""
    status = cluster.get("status") or {}
    reason = next(
        (
            c.get("reason", "")
            for c in status.get("conditions") or []
            if c.get("status") == "True" and c.get("type") in ("Ready", "Error")
        ),
        "-",
    )
    out = [Row("GPUCluster", NAME, str(status.get("state") or "<none>"), str(reason), "-")]
    for ds in daemonsets:
        st = ds.get("status") or {}
        desired = int(st.get("desiredNumberScheduled") or 0)
        ready = int(st.get("numberReady") or 0)
        state = "ready" if desired == ready else "notReady"
        out.append(Row("DaemonSet", str(ds["metadata"]["name"]), state, "-", f"{ready}/{desired}"))
    for node in nodes:
        name = str(node["metadata"]["name"])
        count = _published(slices, name)
        state = "GPUs published" if count else "no ResourceSlice yet"
        out.append(Row("Node", name, state, DRIVER, f"devices={count}"))
    return out


async def watch(client: Client, out: TextIO, *, interval: float = 0.5) -> None:
    """Redraw the table until the GPUCluster is ready and every GPU node publishes GPUs."""
    table = LiveTable(out)
    while True:
        try:
            cluster = await client.get(API_VERSION, "GPUCluster", NAME)
        except NotFound:
            cluster = {"kind": "GPUCluster", "metadata": {"name": NAME}}
        daemonsets = (await client.list("apps/v1", "DaemonSet", NAMESPACE))["items"]
        nodes = [
            n
            for n in (await client.list("v1", "Node"))["items"]
            if ((n.get("metadata") or {}).get("labels") or {}).get("nvidia.com/gpu.present")
            == "true"
        ]
        slices = (await client.list("resource.k8s.io/v1", "ResourceSlice"))["items"]
        table.update(rows(cluster, daemonsets, nodes, slices))
        ready = (cluster.get("status") or {}).get("state") == "ready"
        if ready and nodes and all(_published(slices, n["metadata"]["name"]) for n in nodes):
            return
        await asyncio.sleep(interval)


async def claims_of(client: Client, namespace: str = DEMO_NAMESPACE) -> list[dict[str, Any]]:
    """The demo namespace's allocated ResourceClaims."""
    items = (await client.list("resource.k8s.io/v1", "ResourceClaim", namespace))["items"]
    return [c for c in items if (c.get("status") or {}).get("allocation")]


async def run(
    client: Client, out: TextIO, then: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Apply the sample, watch the DRA stack come up, then run ``then`` (the DRA NIM demo)."""
    await apply(client)
    await watch(client, out)
    out.write(f"\nGPUCluster {NAME} is ready and every GPU node publishes its GPUs.\n")
    out.flush()
    if then is not None:
        out.write(
            f"Applying the demo NIMCache and NIMService {DEMO_NAME}: its pod claims one GPU "
            f"through the ResourceClaimTemplate {CLAIM_TEMPLATE}.\n"
        )
        out.flush()
        await then()
