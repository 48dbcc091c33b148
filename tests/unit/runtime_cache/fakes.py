"""An in-memory list/watch server for driving the Reflector state machine in unit tests."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

from nimctl_runtime.client.client import WatchEvent
from nimctl_runtime.client.errors import Gone
from nimctl_runtime.meta import Obj


def make_obj(name: str, namespace: str = "default", **labels: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "data": {"v": "0"},
    }


class FakeListerWatcher:
    """Objects with a global resourceVersion, an event history that can be compacted,
    scripted failures, and watches that can be dropped."""

    def __init__(self) -> None:
        self.rv = 100
        self.objects: dict[str, Obj] = {}
        self.history: list[tuple[int, str, Obj]] = []
        self.compacted = 0
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        self.watch_failures: list[BaseException] = []
        self.list_failures: list[BaseException] = []
        self.close_watch_immediately = False
        self._subscribers: list[asyncio.Queue[tuple[int, str, Obj] | None]] = []
        self.uid_counter = 0

    # -- mutations -------------------------------------------------------------------

    def watchers(self) -> int:
        """Watch streams open right now (subscribed to new events)."""
        return len(self._subscribers)

    def _key(self, obj: Obj) -> str:
        return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"

    def _emit(self, event_type: str, obj: Obj) -> None:
        entry = (self.rv, event_type, copy.deepcopy(obj))
        self.history.append(entry)
        for queue in self._subscribers:
            queue.put_nowait(entry)

    def create(self, obj: Obj) -> Obj:
        self.rv += 1
        self.uid_counter += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["metadata"]["uid"] = f"uid-{self.uid_counter}"
        self.objects[self._key(obj)] = obj
        self._emit("ADDED", obj)
        return obj

    def update(self, namespace: str, name: str, **data: str) -> Obj:
        self.rv += 1
        obj = self.objects[f"{namespace}/{name}"]
        obj["data"].update(data)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._emit("MODIFIED", obj)
        return copy.deepcopy(obj)

    def delete(self, namespace: str, name: str, *, silently: bool = False) -> None:
        self.rv += 1
        obj = self.objects.pop(f"{namespace}/{name}")
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if not silently:
            self._emit("DELETED", obj)

    def compact(self) -> None:
        """Forget history: watches from older resourceVersions get 410."""
        self.compacted = self.rv
        self.history.clear()

    def bookmark(self) -> None:
        self.rv += 1
        bookmark = {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(self.rv)},
        }
        for queue in self._subscribers:
            queue.put_nowait((self.rv, "BOOKMARK", bookmark))

    def drop_watches(self) -> None:
        for queue in self._subscribers:
            queue.put_nowait(None)

    # -- ListerWatcher ---------------------------------------------------------------

    async def list(
        self, *, resource_version: str | None, limit: int | None, continue_: str | None
    ) -> Obj:
        self.list_calls.append(
            {"resource_version": resource_version, "limit": limit, "continue": continue_}
        )
        if self.list_failures:
            raise self.list_failures.pop(0)
        if resource_version not in (None, "", "0") and int(resource_version) < self.compacted:
            raise Gone(410, "Expired", "too old resource version")
        items = [copy.deepcopy(o) for _, o in sorted(self.objects.items())]
        for item in items:
            item.pop("apiVersion", None)
            item.pop("kind", None)
        start = int(continue_ or 0)
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if limit:
            page = items[start : start + limit]
            if start + limit < len(items):
                meta["continue"] = str(start + limit)
        else:
            page = items
        await asyncio.sleep(0)
        return {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta, "items": page}

    async def _watch(self, resource_version: str) -> AsyncIterator[WatchEvent]:
        if self.watch_failures:
            raise self.watch_failures.pop(0)
        since = int(resource_version)
        if since < self.compacted:
            raise Gone(410, "Expired", f"too old resource version: {since} ({self.compacted})")
        if self.close_watch_immediately:
            return
        queue: asyncio.Queue[tuple[int, str, Obj] | None] = asyncio.Queue()
        self._subscribers.append(queue)
        try:
            for rv, event_type, obj in list(self.history):
                if rv > since:
                    yield WatchEvent(event_type, copy.deepcopy(obj))
                    since = rv
            while True:
                entry = await queue.get()
                if entry is None:
                    return
                rv, event_type, obj = entry
                if rv > since:
                    yield WatchEvent(event_type, copy.deepcopy(obj))
                    since = rv
        finally:
            self._subscribers.remove(queue)

    def watch(
        self, *, resource_version: str, timeout_seconds: int, allow_bookmarks: bool
    ) -> AsyncIterator[WatchEvent]:
        self.watch_calls.append(
            {
                "resource_version": resource_version,
                "timeout_seconds": timeout_seconds,
                "allow_bookmarks": allow_bookmarks,
            }
        )
        return self._watch(resource_version)
