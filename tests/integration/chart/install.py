"""``helm install`` of charts/nimctl into a LocalCluster, and the operator run as its pod.

``install`` creates what Helm would (CRDs from crds/, then the rendered objects
in Helm's install order), as the cluster admin. ``start_operator_pod`` runs the
operator in this process exactly as the chart's Deployment starts it: the
container's ``nimctl`` args, its env (fieldRefs resolved), the ServiceAccount's
token, CA and namespace files in a service-account directory, the Secret
volumes (the webhook certificates) written where they are mounted, and the
in-cluster configuration (``KUBERNETES_SERVICE_HOST``/``_PORT``). Paths are
re-rooted under a temporary directory; nothing else is changed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcluster.authz import service_account_user
from nimctl.cli import build_parser
from nimctl.operator import compose_operator
from nimctl_runtime.client import AlreadyExists, ApiError, Client
from nimctl_runtime.client.config import in_cluster_config
from nimctl_runtime.manager import Manager
from tests.integration.chart.helm import chart_crds, find


async def served_api_versions(client: Client) -> list[str]:
    """What Helm puts in ``.Capabilities.APIVersions``: "group/version" and "group/version/Kind"."""
    out: list[str] = []
    core = await client.request("GET", "/api/v1")
    out.append("v1")
    out.extend(f"v1/{r['kind']}" for r in core.get("resources", []) if "/" not in r["name"])
    groups = await client.request("GET", "/apis")
    for group in groups.get("groups", []):
        for version in group.get("versions", []):
            gv = version["groupVersion"]
            out.append(gv)
            listing = await client.request("GET", f"/apis/{gv}")
            out.extend(f"{gv}/{r['kind']}" for r in listing.get("resources", []) if "/" not in r["name"])
    return out


async def install(admin: Client, namespace: str, objects: list[dict[str, Any]], *, wait: float = 30) -> None:
    """Create the release namespace, the chart's CRDs (waiting until served) and its objects."""
    with contextlib.suppress(AlreadyExists):
        await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    crds = chart_crds()
    for crd in crds:
        with contextlib.suppress(AlreadyExists):
            await admin.create(crd)
    async with asyncio.timeout(wait):
        for crd in crds:
            spec = crd["spec"]
            version = next(v["name"] for v in spec["versions"] if v.get("served", True))
            while True:
                try:
                    await admin.mapper.rest_mapping(f"{spec['group']}/{version}", spec["names"]["kind"])
                    break
                except ApiError:
                    await asyncio.sleep(0.05)
    for obj in objects:
        if obj["metadata"].get("namespace") is None and await admin.mapper.is_namespaced(obj["apiVersion"], obj["kind"]):
            obj["metadata"]["namespace"] = namespace
        await admin.create(obj)


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set process environment variables for the operator's lifetime (the container's env)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class OperatorPod:
    """The operator running as one replica of the chart's Deployment."""

    user: str
    client: Client
    manager: Manager
    stop: asyncio.Event
    task: asyncio.Task[None]
    args: Any
    env: dict[str, str] = field(default_factory=dict)

    async def shutdown(self) -> None:
        self.stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.task, 30)
        await self.client.close()


def _resolve_env(container: dict[str, Any], namespace: str, pod_name: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
            continue
        ref = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        env[item["name"]] = {"metadata.namespace": namespace, "metadata.name": pod_name}[ref]
    return env


def _expand(arg: str, env: dict[str, str]) -> str:
    for name, value in env.items():
        arg = arg.replace(f"$({name})", value)
    return arg


async def start_operator_pod(
    cluster: Any,
    admin: Client,
    objects: list[dict[str, Any]],
    root: Path,
    *,
    model_query: Any = None,
    pod_name: str = "nimctl-0",
) -> OperatorPod:
    deployment = find(objects, "Deployment")
    namespace = deployment["metadata"]["namespace"]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["nimctl"], container["command"]
    user = service_account_user(namespace, pod["serviceAccountName"])
    sa_dir = root / "var/run/secrets/kubernetes.io/serviceaccount"
    sa_dir.mkdir(parents=True, exist_ok=True)
    (sa_dir / "token").write_text(cluster.token_for(user))
    (sa_dir / "ca.crt").write_bytes(cluster.ca_pem)
    (sa_dir / "namespace").write_text(namespace)
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        target = root / mount["mountPath"].lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        mounts[mount["mountPath"]] = target
        secret = volumes[mount["name"]].get("secret")
        if secret:
            live = await admin.get("v1", "Secret", secret["secretName"], namespace)
            for key, value in (live.get("data") or {}).items():
                (target / key).write_bytes(base64.b64decode(value))
    env = _resolve_env(container, namespace, pod_name)
    args = []
    for raw in container["args"]:
        arg = _expand(raw, env)
        for path, target in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            if f"={path}" in arg:
                arg = arg.replace(f"={path}", f"={target}")
                break
        args.append(arg)
    config = in_cluster_config(
        sa_dir, environ={"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(cluster.port)}
    )
    with environment(env):
        parsed = build_parser().parse_args(args)
        client = Client(config)
        manager = await compose_operator(client, parsed, model_query=model_query)
    stop = asyncio.Event()

    async def run() -> None:
        with environment(env):
            await manager.start(stop)

    task = asyncio.create_task(run(), name=f"operator-{pod_name}")
    return OperatorPod(user=user, client=client, manager=manager, stop=stop, task=task, args=parsed, env=env)
