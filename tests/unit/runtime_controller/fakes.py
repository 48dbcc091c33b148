"""Small in-memory stand-ins for the cache, used by the controller unit tests."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from nimctl_runtime.meta import Obj


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


Handlers = tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]


class FakeInformer:
    """Calls handlers synchronously; an awaitable a handler returns is awaited in order."""

    def __init__(self) -> None:
        self.handlers: list[Handlers] = []
        self._pending: list[asyncio.Future[Any]] = []

    def add_event_handler(
        self,
        on_add: Callable[..., Any],
        on_update: Callable[..., Any],
        on_delete: Callable[..., Any],
    ) -> Handlers:
        registration = (on_add, on_update, on_delete)
        self.handlers.append(registration)
        return registration

    async def remove_event_handler(self, registration: Handlers) -> None:
        if registration in self.handlers:
            self.handlers.remove(registration)

    def has_synced(self) -> bool:
        return True

    def _deliver(self, result: Any) -> None:
        if inspect.isawaitable(result):
            previous = self._pending[-1] if self._pending else None

            async def in_order() -> None:
                if previous is not None:
                    await previous
                await result

            self._pending.append(asyncio.ensure_future(in_order()))

    def add(self, o: Obj) -> None:
        for h in list(self.handlers):
            self._deliver(h[0](o))

    def update(self, old: Obj, new: Obj) -> None:
        for h in list(self.handlers):
            self._deliver(h[1](old, new))

    def delete(self, o: Obj) -> None:
        for h in list(self.handlers):
            self._deliver(h[2](o))


class FakeCache:
    def __init__(self, *, synced: bool = True) -> None:
        self.informers: dict[tuple[str, str], FakeInformer] = {}
        self.synced = synced
        self.sync_waits = 0  # calls of wait_for_sync

    async def get_informer(self, api_version: str, kind: str) -> FakeInformer:
        return self.informers.setdefault((api_version, kind), FakeInformer())

    async def wait_for_sync(self, timeout: float) -> bool:
        self.sync_waits += 1
        if self.synced:
            return True
        await asyncio.sleep(timeout)
        return False

    def informer(self, api_version: str, kind: str) -> FakeInformer:
        return self.informers.setdefault((api_version, kind), FakeInformer())


class FakeObjectClient:
    """An in-memory API for a few objects: get/create/update/patch with resourceVersions.

    ``fail`` makes every call raise that exception; ``hang`` makes calls block
    (to simulate a partitioned leader). ``writes`` records (identity-of-writer, verb, obj).
    """

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], Obj] = {}
        self.rv = 0
        self.fail: Exception | None = None
        self.hang = False
        self.delay = 0.0  # seconds every call takes (a slow API server)
        self.calls: list[tuple[str, str]] = []

    def _key(self, kind: str, namespace: str | None, name: str) -> tuple[str, str | None, str]:
        return (kind, namespace, name)

    async def _gate(self, verb: str, name: str) -> None:
        self.calls.append((verb, name))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.hang:
            await asyncio.Event().wait()
        if self.fail is not None:
            raise self.fail

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj:
        from nimctl_runtime.client.errors import NotFound

        await self._gate("get", name)
        o = self.objects.get(self._key(kind, namespace, name))
        if o is None:
            raise NotFound(404, "NotFound", f'{kind} "{name}" not found')
        import copy

        return copy.deepcopy(o)

    async def create(self, obj: Obj, *, field_manager: str | None = None, dry_run: bool = False) -> Obj:
        import copy

        from nimctl_runtime.client.errors import AlreadyExists

        meta = obj["metadata"]
        await self._gate("create", meta["name"])
        key = self._key(obj["kind"], meta.get("namespace"), meta["name"])
        if key in self.objects:
            raise AlreadyExists(409, "AlreadyExists", "exists")
        self.rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[key] = stored
        return copy.deepcopy(stored)

    async def update(self, obj: Obj) -> Obj:
        import copy

        from nimctl_runtime.client.errors import Conflict, NotFound

        meta = obj["metadata"]
        await self._gate("update", meta["name"])
        key = self._key(obj["kind"], meta.get("namespace"), meta["name"])
        cur = self.objects.get(key)
        if cur is None:
            raise NotFound(404, "NotFound", "gone")
        if meta.get("resourceVersion") not in (None, cur["metadata"]["resourceVersion"]):
            raise Conflict(409, "Conflict", "the object has been modified")
        self.rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[key] = stored
        return copy.deepcopy(stored)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        field_manager: str | None = None,
        force: bool | None = None,
        subresource: str | None = None,
    ) -> Obj:
        import copy

        from nimctl_runtime.client.errors import NotFound

        await self._gate("patch", name)
        key = self._key(kind, namespace, name)
        cur = self.objects.get(key)
        if cur is None:
            raise NotFound(404, "NotFound", "gone")
        cur.update(copy.deepcopy(body))
        self.rv += 1
        cur["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(cur)
