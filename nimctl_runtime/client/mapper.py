"""Discovery-backed REST mapping: (apiVersion, kind) <-> resource, scope and verbs.

Like client-go's deferred discovery RESTMapper: a group-version's resource list is
fetched from ``/api/v1`` or ``/apis/<group>/<version>`` on first use and cached; a
lookup that misses re-reads that group-version once, so kinds from CRDs installed
after start are found without a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from nimctl_runtime.client.errors import NotFound


@dataclass(frozen=True, slots=True)
class RESTMapping:
    """Where a kind lives on the server."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def base_path(self) -> str:
        """``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The URL path for a collection (no *name*) or one object."""
        parts = [self.base_path()]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.resource)
        if name:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


class NoKindMatchError(NotFound):
    """The server does not serve this kind (yet): no CRD, or the wrong apiVersion."""


def split_api_version(api_version: str) -> tuple[str, str]:
    """``"apps/v1"`` -> ``("apps", "v1")``; ``"v1"`` -> ``("", "v1")``."""
    if "/" in api_version:
        group, _, version = api_version.partition("/")
        return group, version
    return "", api_version


Fetch = Callable[[str], Awaitable[dict[str, Any]]]


class RESTMapper:
    """Lazily discovered mapping, refreshed per group-version on a miss."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self._by_kind: dict[tuple[str, str], dict[str, RESTMapping]] = {}
        self._by_resource: dict[tuple[str, str], dict[str, RESTMapping]] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def add(self, mapping: RESTMapping) -> None:
        """Register a mapping by hand (tests, or kinds known without discovery)."""
        gv = (mapping.group, mapping.version)
        self._by_kind.setdefault(gv, {})[mapping.kind] = mapping
        self._by_resource.setdefault(gv, {})[mapping.resource] = mapping

    def reset(self) -> None:
        """Forget everything discovered (next lookups re-read discovery)."""
        self._by_kind.clear()
        self._by_resource.clear()

    async def _refresh(self, gv: tuple[str, str]) -> None:
        lock = self._locks.setdefault(gv, asyncio.Lock())
        async with lock:
            group, version = gv
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                body = await self._fetch(path)
            except NotFound:
                self._by_kind[gv] = {}
                self._by_resource[gv] = {}
                return
            kinds: dict[str, RESTMapping] = {}
            resources: dict[str, RESTMapping] = {}
            for res in body.get("resources") or []:
                name = str(res.get("name", ""))
                if not name or "/" in name:
                    continue
                mapping = RESTMapping(
                    group=group,
                    version=version,
                    resource=name,
                    kind=str(res.get("kind", "")),
                    namespaced=bool(res.get("namespaced", False)),
                    verbs=tuple(res.get("verbs") or ()),
                )
                kinds.setdefault(mapping.kind, mapping)
                resources[name] = mapping
            self._by_kind[gv] = kinds
            self._by_resource[gv] = resources

    async def rest_mapping(self, api_version: str, kind: str) -> RESTMapping:
        """The mapping for *kind* in *api_version*; raises :class:`NoKindMatchError`."""
        gv = split_api_version(api_version)
        known = self._by_kind.get(gv)
        if known is not None and kind in known:
            return known[kind]
        await self._refresh(gv)
        found = self._by_kind.get(gv, {}).get(kind)
        if found is None:
            raise NoKindMatchError(
                404,
                "NotFound",
                f'no matches for kind "{kind}" in version "{api_version}"',
                {"group": gv[0], "kind": kind},
            )
        return found

    async def kind_for(self, api_version: str, resource: str) -> RESTMapping:
        """The mapping for a plural *resource* name in *api_version*."""
        gv = split_api_version(api_version)
        known = self._by_resource.get(gv)
        if known is not None and resource in known:
            return known[resource]
        await self._refresh(gv)
        found = self._by_resource.get(gv, {}).get(resource)
        if found is None:
            raise NoKindMatchError(
                404,
                "NotFound",
                f'the server does not serve resource "{resource}" in version "{api_version}"',
                {"group": gv[0]},
            )
        return found

    async def is_namespaced(self, api_version: str, kind: str) -> bool:
        return (await self.rest_mapping(api_version, kind)).namespaced


__all__ = ["NoKindMatchError", "RESTMapper", "RESTMapping", "split_api_version"]
