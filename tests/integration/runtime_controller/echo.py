"""The "echo" controller used by the integration tests and the benchmark.

Each ConfigMap labelled ``echo=source`` gets a sibling ConfigMap
``<name>-echo`` (label ``echo=copy``, controller ownerReference) whose data
is a copy of the source's. The reconciler reads only from the cache and
writes only when the copy differs, so a converged cluster costs no writes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from nimctl_runtime.builder import Builder
from nimctl_runtime.client.errors import AlreadyExists, Conflict, NotFound
from nimctl_runtime.controller import Controller
from nimctl_runtime.manager import Manager
from nimctl_runtime.predicate import LabelSelectorPredicate
from nimctl_runtime.reconcile import Request, Result

SOURCE = "echo=source"
COPY = "echo=copy"


def source_cm(name: str, namespace: str = "default", data: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"echo": "source"}},
        "data": data or {"value": name},
    }


class EchoReconciler:
    def __init__(self, manager: Manager, identity: str = "", events: bool = False) -> None:
        self.manager = manager
        # with events: a Normal "Echoed" Event on the source for every write
        self.recorder = manager.event_recorder("echo") if events else None
        self.identity = identity
        self.writes = 0
        self.reconciles = 0
        self.active: set[Request] = set()
        self.overlaps = 0
        self.seen: dict[Request, dict[str, str]] = {}
        self.delay = 0.0

    async def reconcile(self, request: Request) -> Result:
        if request in self.active:
            self.overlaps += 1
        self.active.add(request)
        try:
            return await self._reconcile(request)
        finally:
            self.active.discard(request)

    async def _reconcile(self, request: Request) -> Result:
        self.reconciles += 1
        cache, client = self.manager.cache, self.manager.client
        try:
            src = await cache.get("v1", "ConfigMap", request.name, request.namespace)
        except NotFound:
            return Result()
        data = dict(src.get("data") or {})
        self.seen[request] = data
        if self.delay:
            await asyncio.sleep(self.delay)
        name = f"{request.name}-echo"
        desired = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": request.namespace,
                "labels": {"echo": "copy"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": request.name,
                        "uid": src["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "data": data,
        }
        try:
            current = await cache.get("v1", "ConfigMap", name, request.namespace)
        except NotFound:
            try:
                self.writes += 1
                await client.create(desired)
            except AlreadyExists:
                return Result(requeue=True)  # the cache is behind; look again
            self._event(src, "created")
            return Result()
        if (current.get("data") or {}) != data:
            current["data"] = data
            try:
                self.writes += 1
                await client.update(current)
            except Conflict:
                return Result(requeue=True)
            self._event(src, "updated")
        return Result()

    def _event(self, src: dict[str, Any], what: str) -> None:
        if self.recorder is not None:
            self.recorder.event(src, "Normal", "Echoed", f"copy {what}")


def add_echo_controller(
    manager: Manager,
    *,
    workers: int = 4,
    identity: str = "",
    name: str = "echo",
    events: bool = False,
) -> tuple[EchoReconciler, Controller]:
    rec = EchoReconciler(manager, identity, events)
    ctrl = (
        Builder(manager)
        .named(name)
        .for_("v1", "ConfigMap", predicates=[LabelSelectorPredicate(SOURCE)])
        .owns("v1", "ConfigMap", predicates=[LabelSelectorPredicate(COPY)])
        .with_options(max_concurrent_reconciles=workers)
        .complete(rec)
    )
    return rec, ctrl
