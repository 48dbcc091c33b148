"""A LocalCluster with the CRDs installed and the operator running in-process.

The operator talks to the cluster through ``CountingClient``, which records
every write it sends, so tests can assert "this reconcile wrote nothing".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nimctl.cli import build_parser
from nimctl.operator import compose_operator, install_crds
from nimctl_runtime import metrics
from nimctl_runtime.client import Client, NotFound
from nimctl_runtime.manager import Manager

API = "apps.nvidia.com/v1alpha1"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class CountingClient(Client):
    """A Client that remembers the writes it sent: (method, path)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writes: list[tuple[str, str]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method in WRITE_METHODS:
            self.writes.append((method, path))
        return await super().request(method, path, **kwargs)

    def object_writes(self) -> list[tuple[str, str]]:
        """Writes other than Events (the recorder's, which are best-effort)."""
        return [w for w in self.writes if "/events" not in w[1]]


@dataclass
class Operator:
    client: CountingClient
    manager: Manager
    stop: asyncio.Event
    task: asyncio.Task[None]
    controllers: dict[str, Any] = field(default_factory=dict)

    async def shutdown(self) -> None:
        self.stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.task, 30)
        await self.client.close()


async def _fixed_model(nimservice: dict[str, Any], endpoint: str) -> str:
    return "meta/llama-3.1-8b-instruct"


async def start_operator(
    kubeconfig: Path,
    *,
    model_query: Any = _fixed_model,
    max_concurrent_reconciles: int = 4,
) -> Operator:
    client = CountingClient(str(kubeconfig))
    args = build_parser().parse_args(["local", "--disable-webhooks"])
    manager = await compose_operator(
        client,
        args,
        model_query=model_query,
        leader_election=False,
        max_concurrent_reconciles=max_concurrent_reconciles,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(manager.start(stop))
    return Operator(client=client, manager=manager, stop=stop, task=task)


async def wait_for(
    fn: Callable[[], Awaitable[Any]], *, timeout: float = 30.0, interval: float = 0.1
) -> Any:
    """Poll ``fn`` until it returns something truthy (NotFound counts as falsy)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = await fn()
        except NotFound:
            last = None
        if last:
            return last
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout}s; last value: {last!r}")
        await asyncio.sleep(interval)


async def get_state(client: Client, kind: str, name: str, namespace: str) -> str:
    obj = await client.get(API, kind, name, namespace)
    return str((obj.get("status") or {}).get("state", ""))


def reconciles(controller: str) -> float:
    """Reconciles the named controller has finished in this process (controller-runtime's metric)."""
    return sum(
        metrics.REGISTRY.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": controller, "result": result}
        )
        or 0.0
        for result in metrics.RECONCILE_RESULTS
    )


async def settle(operator: Operator, *, timeout: float = 30.0) -> None:
    """Wait until no controller of ``operator`` has work queued or in flight.

    Checked three times, a tick apart, so work a finished reconcile hands on
    (an owned object's watch event) is seen too. Delayed requeues are not work.
    """
    controllers = [r for r in operator.manager.runnables() if hasattr(r, "queue")]

    def idle() -> bool:
        return all(len(c.queue) == 0 and c.in_flight() == 0 for c in controllers)

    deadline = time.monotonic() + timeout
    streak = 0
    while streak < 3:
        streak = streak + 1 if idle() else 0
        if time.monotonic() > deadline:
            raise TimeoutError(f"the operator was still busy after {timeout}s")
        await asyncio.sleep(0.05)


async def reconciled_and_settled(
    operator: Operator, controller: str, before: float, *, timeout: float = 30.0
) -> None:
    """Wait for ``controller`` to finish a reconcile after the count ``before``, then to settle."""

    async def reconciled() -> bool:
        return reconciles(controller) > before

    await wait_for(reconciled, timeout=timeout, interval=0.02)
    await settle(operator, timeout=timeout)


async def writes_of_reconcile(
    operator: Operator,
    controller: str,
    poke: Callable[[], Awaitable[Any]],
    *,
    timeout: float = 30.0,
) -> list[tuple[str, str]]:
    """The object writes of the reconcile ``poke`` wakes in ``controller``, and of what follows.

    Settles first (so earlier work does not count), pokes, waits for ``controller`` to
    finish a reconcile and for the operator to settle again.
    """
    await settle(operator, timeout=timeout)
    before_writes = len(operator.client.writes)
    before = reconciles(controller)
    await poke()
    await reconciled_and_settled(operator, controller, before, timeout=timeout)
    return [w for w in operator.client.writes[before_writes:] if "/events" not in w[1]]


async def quiet(client: CountingClient, seconds: float = 1.0) -> list[tuple[str, str]]:
    """The object writes the operator sends during ``seconds``."""
    before = len(client.writes)
    await asyncio.sleep(seconds)
    return [w for w in client.writes[before:] if "/events" not in w[1]]


@contextlib.asynccontextmanager
async def cluster_with_crds(tmp_path: Path, **kwargs: Any) -> AsyncIterator[tuple[Any, Client]]:
    from localcluster import LocalCluster

    async with LocalCluster(workdir=tmp_path, **kwargs) as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            await install_crds(admin)
            yield cluster, admin


def names(objs: Mapping[str, Any]) -> list[str]:
    return [o["metadata"]["name"] for o in objs.get("items", [])]


def optional_crd(group: str, version: str, plural: str, kind: str) -> dict[str, Any]:
    """A CRD that serves ``kind`` with any content (its real schema does not matter here)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
