"""What ``nimctl local --demo`` applies and how it shows progress: a NIMCache and a NIMService."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nimctl_runtime.client import Client

DEMO_NAMESPACE = "nim-demo"
DEMO_NAME = "meta-llama-3-1-8b-instruct"
DEMO_IMAGE = "nvcr.io/nim/meta/llama-3.1-8b-instruct"
DEMO_TAG = "1.3.3"


def demo_objects(namespace: str = DEMO_NAMESPACE) -> list[dict[str, Any]]:
    """The Namespace, Secrets, NIMCache and NIMService ``nimctl local --demo`` applies."""
    import base64
    import json

    dockercfg = json.dumps({"auths": {"nvcr.io": {"username": "$oauthtoken", "password": "x"}}})
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ngc-secret", "namespace": namespace},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(dockercfg.encode()).decode()},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ngc-api-secret", "namespace": namespace},
            "stringData": {"NGC_API_KEY": "simulated"},
        },
        {
            "apiVersion": "apps.nvidia.com/v1alpha1",
            "kind": "NIMCache",
            "metadata": {"name": DEMO_NAME, "namespace": namespace},
            "spec": {
                "source": {
                    "ngc": {
                        "modelPuller": f"{DEMO_IMAGE}:{DEMO_TAG}",
                        "pullSecret": "ngc-secret",
                        "authSecret": "ngc-api-secret",
                        "model": {"engine": "tensorrt_llm", "tensorParallelism": "1"},
                    }
                },
                "storage": {
                    "pvc": {"create": True, "size": "50Gi", "volumeAccessMode": "ReadWriteOnce"}
                },
            },
        },
        {
            "apiVersion": "apps.nvidia.com/v1alpha1",
            "kind": "NIMService",
            "metadata": {"name": DEMO_NAME, "namespace": namespace},
            "spec": {
                "image": {
                    "repository": DEMO_IMAGE,
                    "tag": DEMO_TAG,
                    "pullPolicy": "IfNotPresent",
                    "pullSecrets": ["ngc-secret"],
                },
                "authSecret": "ngc-api-secret",
                "storage": {"nimCache": {"name": DEMO_NAME}},
                "replicas": 1,
                "resources": {"limits": {"nvidia.com/gpu": 1}},
                "expose": {"service": {"type": "ClusterIP", "port": 8000}},
            },
        },
    ]


async def apply_objects(client: Client, objects: Sequence[dict[str, Any]]) -> None:
    """Create each object; an existing one is left as it is."""
    from nimctl_runtime.client import AlreadyExists

    for obj in objects:
        with contextlib.suppress(AlreadyExists):
            await client.create(obj)


async def watch_demo(
    client: Client,
    out: Any,
    *,
    namespace: str = DEMO_NAMESPACE,
    name: str = DEMO_NAME,
    interval: float = 0.5,
) -> None:
    """Show the demo objects' progress until both are Ready.

    While the NIMService is blocked, the line ``nimctl why`` ends with (the
    blocker and what to do) is shown below the table.
    """
    from nimctl_runtime.client import NotFound
    from nimctl_runtime.statustable import LiveTable, row_for

    table = LiveTable(out)
    footer: list[str] = []
    while True:
        rows = []
        states = []
        for kind in ("NIMCache", "NIMService"):
            try:
                obj = await client.get("apps.nvidia.com/v1alpha1", kind, name, namespace)
            except NotFound:
                obj = {"kind": kind, "metadata": {"name": name}}
            workload = None
            if kind == "NIMService":
                with contextlib.suppress(NotFound):
                    workload = await client.get("apps/v1", "Deployment", name, namespace)
            rows.append(row_for(obj, workload))
            states.append((obj.get("status") or {}).get("state"))
        if states[1] != "Ready":
            footer = await why_lines(client, namespace, name)
        table.update(rows, footer if states[1] != "Ready" else [])
        if states == ["Ready", "Ready"]:
            return
        await asyncio.sleep(interval)


async def why_lines(client: Client, namespace: str, name: str) -> list[str]:
    """``nimctl why nimservice/NAME``'s blocker lines, or none while nothing blocks."""
    from nimctl.why import explain
    from nimctl_runtime.client.errors import ApiError

    try:
        report = await explain(client, "NIMService", name, namespace)
    except ApiError:  # a read that failed now is retried at the next refresh
        return []
    if report.blocker is None:
        return []
    return [f"nimctl why nimservice/{name} -n {namespace}:", *(f"  {x}" for x in report.ending())]
