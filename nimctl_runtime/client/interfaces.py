"""The client interfaces every reconciler is written against, as controller-runtime's ``client``.

``KeyReader`` is what the cache and the uncached API reader both offer,
``Reader`` adds the cache's indexed lists, ``APIReader`` the API server's own
(uncached) lists and raw paths;
``Writer`` and ``StatusWriter`` are the writing halves of ``Client``;
``EventRecorder`` is what ``nimctl_runtime.events.EventRecorder`` offers. A
reconciler names these protocols, never a concrete class, so a unit test can
hand it an in-memory fake and the composition root can hand it the cache and
the real client. There is no other declaration of these shapes in the tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from nimctl_runtime.meta import Obj

PatchType = Literal["merge", "json", "strategic", "apply"]

__all__ = [
    "APIReader",
    "EventRecorder",
    "KeyReader",
    "Obj",
    "PatchType",
    "Reader",
    "StatusWriter",
    "Writer",
    "get_or_none",
]


class KeyReader(Protocol):
    """Reads one object by key (the cache, and the uncached API reader ``Client``)."""

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj: ...


class Reader(KeyReader, Protocol):
    """Reads by key or by list with selectors and cache indexes (``Cache``)."""

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: Any = None,
        index: tuple[str, str] | None = None,
    ) -> list[Obj]: ...


class APIReader(KeyReader, Protocol):
    """Uncached reads straight from the API server (``Client``): lists return the List object."""

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: Any = None,
    ) -> Obj: ...

    async def request(self, method: str, path: str) -> Any: ...


class Writer(Protocol):
    """Create, update, patch and delete (``Client``)."""

    async def create(self, obj: Obj) -> Obj: ...

    async def update(self, obj: Obj) -> Obj: ...

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> Obj: ...

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
    ) -> Any: ...


class StatusWriter(Protocol):
    """Writes the status subresource (``Client.patch(..., subresource="status")``)."""

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> Obj: ...


class EventRecorder(Protocol):
    """Records an Event about an object (``nimctl_runtime.events.EventRecorder``)."""

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None: ...


async def get_or_none(
    reader: KeyReader, api_version: str, kind: str, name: str, namespace: str | None = None
) -> Obj | None:
    """``reader.get`` with NotFound as None (controller-runtime's ``client.IgnoreNotFound``).

    A reader with ``get_if_present`` (the ``Cache``) answers without raising."""
    from nimctl_runtime.client.errors import NotFound

    present = getattr(reader, "get_if_present", None)
    if present is not None:
        found: Obj | None = await present(api_version, kind, name, namespace or None)
        return found

    try:
        return await reader.get(api_version, kind, name, namespace or None)
    except NotFound:
        return None
