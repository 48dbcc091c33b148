"""Send mutants through the API, as ``kubectl create -f`` would, to a running ``nimctl local``.

In one process: a LocalCluster (simulator on) with the CRDs, the operator with
every controller, and the admission webhooks registered with the API server
(``failurePolicy: Fail``), exactly as ``nimctl local`` wires them. Each mutant
is POSTed to its kind's collection in a namespace of its own. Refused: the 4xx
must name a field (or be a whole-request 400/413). Accepted: the object must get a
clear status (Ready, Failed with a message, or waiting with a message) before the
deadline; objects of kinds no controller serves yet are counted apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from localcluster.cluster import LocalCluster
from nimctl.cli import build_parser
from nimctl.local import prepare_local_webhook, register_local_webhook
from nimctl.operator import compose_operator, install_crds
from nimctl_runtime.client import ApiError, Client, NotFound
from nimctl_runtime.client.errors import from_status
from nimctl_runtime.manager import Manager
from nimctl_runtime.webhook import WebhookServer
from tests.integration.fuzz.mutations import Mutant
from tests.integration.fuzz.outcomes import Tally, classify_status, crash_text, has_field_path
from tests.integration.fuzz.samples import CLUSTER_SCOPED, NAME, NAMESPACE

NO_CONTROLLER = "accepted (no controller serves this kind yet)"
OPERATOR_NAMESPACE = "nimctl-system"


@dataclass
class FuzzCluster:
    cluster: LocalCluster
    admin: Client
    manager: Manager

    def serves(self, kind: str) -> bool:
        return self.manager.has_controller(kind.lower())


@contextlib.asynccontextmanager
async def fuzz_cluster(workdir: Path) -> AsyncIterator[FuzzCluster]:
    """``nimctl local`` in this process: cluster, CRDs, operator, admission webhooks."""
    async with LocalCluster(workdir=workdir, profile="many-nodes") as cluster:
        kubeconfig = cluster.write_kubeconfig(workdir / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin, Client(str(kubeconfig)) as operator:
            await install_crds(admin)
            webhook = prepare_local_webhook(workdir / "webhook-certs")
            server = WebhookServer(cert_dir=webhook.cert_dir, host="127.0.0.1", port=webhook.port)
            args = build_parser().parse_args(["local"])
            await admin.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}}
            )
            # The GPU controllers put ClusterPolicy operands in the operator's namespace.
            saved = os.environ.get("OPERATOR_NAMESPACE")
            os.environ["OPERATOR_NAMESPACE"] = OPERATOR_NAMESPACE
            try:
                manager = await compose_operator(
                    operator, args, model_query=None, webhook_server=server, leader_election=False
                )
            finally:
                if saved is None:
                    os.environ.pop("OPERATOR_NAMESPACE", None)
                else:
                    os.environ["OPERATOR_NAMESPACE"] = saved
            stop = asyncio.Event()
            task = asyncio.create_task(manager.start(stop))
            try:
                await register_local_webhook(admin, webhook)
                yield FuzzCluster(cluster, admin, manager)
            finally:
                stop.set()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(task, 60)


def _prepared(mutant: Mutant, index: int) -> tuple[bytes, str]:
    """The mutant's JSON body, with a name and namespace of its own (unless those were
    mutated). Only the top level and metadata are copied: a mutant can hold millions of
    nodes, and the runner shares the event loop with the API server it tests."""
    obj = dict(mutant.obj)
    namespace = f"fz-{index}"
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta = obj["metadata"] = dict(meta)
        name = meta.get("name")
        if name == NAME:
            meta["name"] = f"m-{index}"
        elif isinstance(name, str) and mutant.kind in CLUSTER_SCOPED:
            meta["name"] = f"{name}-{index}"  # cluster-scoped: keep bad names unique
        if meta.get("namespace") == NAMESPACE:
            meta["namespace"] = namespace
    return json.dumps(obj).encode(), namespace


async def _collection(admin: Client, mutant: Mutant, namespace: str) -> tuple[str, bool]:
    mapping = await admin.mapper.rest_mapping(mutant.api_version, mutant.kind)
    prefix = f"/apis/{mutant.api_version}"
    if mapping.namespaced:
        return f"{prefix}/namespaces/{namespace}/{mapping.resource}", True
    return f"{prefix}/{mapping.resource}", False


def _refusal(exc: ApiError) -> tuple[str, str]:
    text = f"{exc.status} {exc.reason}: {exc.message}"
    if exc.status >= 500 or exc.status < 400 or crash_text(exc.message):
        return "other", text
    if has_field_path(exc.message, exc.causes):
        return "rejected with a field path", text
    if exc.status in (400, 413):
        return "rejected as a whole request (413/400)", text
    return "other", text


async def _post(env: FuzzCluster, path: str, body: bytes) -> dict[str, Any]:
    """POST *body* as kubectl would (its own connection); ApiError for an error Status."""
    cluster = env.cluster
    headers = {
        "Authorization": f"Bearer {cluster.token_for('admin')}",
        "Content-Type": "application/json",
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            cluster.url + path,
            data=body,
            headers=headers,
            ssl=cluster.client_ssl_context(),
            timeout=aiohttp.ClientTimeout(total=60),
        ) as r,
    ):
        payload = await r.read()
        status = r.status
    try:
        decoded = json.loads(payload) if payload else {}
    except ValueError:
        decoded = None
    if status >= 400:
        raise from_status(
            status,
            decoded if isinstance(decoded, dict) else None,
            fallback_message=payload[:300].decode(errors="replace"),
        )
    if not isinstance(decoded, dict):
        raise ApiError(status, "NotJSON", f"answer is not a JSON object: {payload[:200]!r}")
    return decoded


async def send(env: FuzzCluster, mutant: Mutant, index: int, tally: Tally, wait: float) -> None:
    body, namespace = await asyncio.to_thread(_prepared, mutant, index)
    admin = env.admin
    path, namespaced = await _collection(admin, mutant, namespace)
    if namespaced:
        with contextlib.suppress(ApiError):
            await admin.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
    try:
        created = await _post(env, path, body)
    except (aiohttp.ClientError, TimeoutError) as exc:
        tally.add("other", f"{mutant.describe()}: no answer ({type(exc).__name__}: {exc})")
        return
    except ApiError as exc:
        category, text = _refusal(exc)
        tally.add(category, f"{mutant.describe()}: {text[:300]}")
        return
    if not env.serves(mutant.kind):
        tally.add(NO_CONTROLLER)
        return
    name = str(created["metadata"]["name"])
    deadline = time.monotonic() + wait
    last: dict[str, Any] = created
    while True:
        status_category = classify_status(last)
        if status_category is not None and status_category != "accepted, waiting with a message":
            tally.add(status_category)
            return
        if time.monotonic() > deadline:
            if status_category is not None:
                tally.add(status_category)
            else:
                tally.add(
                    "other",
                    f"{mutant.describe()}: no status in {wait:.0f}s: "
                    f"{str(last.get('status'))[:200]}",
                )
            return
        await asyncio.sleep(1.0)
        try:
            last = await admin.get(
                mutant.api_version, mutant.kind, name, namespace if namespaced else None
            )
        except NotFound:
            tally.add("other", f"{mutant.describe()}: accepted, then gone")
            return


async def fuzz_api(
    env: FuzzCluster,
    mutants: list[Mutant],
    *,
    wait: float = 30.0,
    concurrency: int = 16,
    first_index: int = 0,
) -> Tally:
    """Every mutant through the API of *env*; the tally (NO_CONTROLLER counted apart)."""
    tally = Tally()
    tally.counts.setdefault(NO_CONTROLLER, 0)
    limit = asyncio.Semaphore(concurrency)

    async def one(i: int, mutant: Mutant) -> None:
        async with limit:
            try:
                await send(env, mutant, first_index + i, tally, wait)
            except Exception as exc:  # the runner itself must not hide a crash
                tally.add("other", f"{mutant.describe()}: runner error {type(exc).__name__}: {exc}")

    await asyncio.gather(*(one(i, m) for i, m in enumerate(mutants)))
    return tally
