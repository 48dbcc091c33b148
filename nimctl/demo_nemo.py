"""``nimctl local --demo nemo``: apply NVIDIA's NeMo samples with their dependencies and watch.

The objects come from ``platforms.nemo.demo`` (the samples in docs/examples,
the Secrets and ConfigMaps they name, a Deployment + Service for every
external host they name); ``watch`` redraws a kubectl-style table until all
five NeMo services are Ready.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, TextIO

from api.serialize import dump
from nimctl_runtime.client import AlreadyExists, Client, NotFound
from nimctl_runtime.statustable import LiveTable, row_for
from platforms.nemo.demo import DEMO_NAMESPACE, dependency_objects, sample_crs

__all__ = ["USAGE", "apply", "watch"]

API_VERSION = "apps.nvidia.com/v1alpha1"
USAGE = [
    f"  kubectl -n {DEMO_NAMESPACE} get nemodatastores,nemoentitystores,nemoevaluators,"
    "nemoguardrails,nemocustomizers",
    f"  kubectl -n {DEMO_NAMESPACE} get deployments,services,pods",
]


async def apply(client: Client) -> list[tuple[str, str, str]]:
    """Create the dependencies, then the samples; returns (kind, namespace, name) of each CR."""
    crs = sample_crs()
    for obj in [*dependency_objects(crs), *(dump(cr) for cr in crs)]:
        with contextlib.suppress(AlreadyExists):
            await client.create(obj)
    return [(cr.kind, cr.metadata.namespace or "default", cr.metadata.name or "") for cr in crs]


async def watch(
    client: Client, out: TextIO, crs: list[tuple[str, str, str]], *, interval: float = 0.5
) -> None:
    """Redraw the NeMo services' states until every one is Ready."""
    table = LiveTable(out)
    while True:
        rows = []
        states = []
        for kind, namespace, name in crs:
            obj: dict[str, Any]
            try:
                obj = await client.get(API_VERSION, kind, name, namespace)
            except NotFound:
                obj = {"kind": kind, "metadata": {"name": name}}
            workload = None
            with contextlib.suppress(NotFound):
                workload = await client.get("apps/v1", "Deployment", name, namespace)
            rows.append(row_for(obj, workload))
            states.append((obj.get("status") or {}).get("state"))
        table.update(rows)
        if all(s == "Ready" for s in states):
            return
        await asyncio.sleep(interval)
