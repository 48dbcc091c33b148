"""Small in-memory stand-ins for the cache, used by the controller unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]


def obj(
    name: str,
    namespace: str | None = "default",
    *,
    kind: str = "Widget",
    api_version: str = "example.com/v1",
    generation: int = 1,
    rv: str = "1",
    labels: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
) -> Obj:
    meta: dict[str, Any] = {"name": name, "generation": generation, "resourceVersion": rv}
    if namespace:
        meta["namespace"] = namespace
    if labels is not None:
        meta["labels"] = labels
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


class FakeInformer:
    def __init__(self) -> None:
        self.handlers: list[tuple[Callable[..., None], Callable[..., None], Callable[..., None]]] = []

    def add_event_handler(
        self,
        on_add: Callable[..., None],
        on_update: Callable[..., None],
        on_delete: Callable[..., None],
    ) -> None:
        self.handlers.append((on_add, on_update, on_delete))

    def has_synced(self) -> bool:
        return True

    def add(self, o: Obj) -> None:
        for h in self.handlers:
            h[0](o)

    def update(self, old: Obj, new: Obj) -> None:
        for h in self.handlers:
            h[1](old, new)

    def delete(self, o: Obj) -> None:
        for h in self.handlers:
            h[2](o)


class FakeCache:
    def __init__(self, *, synced: bool = True) -> None:
        self.informers: dict[tuple[str, str], FakeInformer] = {}
        self.synced = synced

    async def get_informer(self, api_version: str, kind: str) -> FakeInformer:
        return self.informers.setdefault((api_version, kind), FakeInformer())

    async def wait_for_sync(self, timeout: float) -> bool:
        if self.synced:
            return True
        await asyncio.sleep(timeout)
        return False

    def informer(self, api_version: str, kind: str) -> FakeInformer:
        return self.informers.setdefault((api_version, kind), FakeInformer())
