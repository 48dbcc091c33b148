"""Cache: one shared informer per resource, read by reconcilers instead of the API server.

controller-runtime's informer cache (runtime.md §1.8). ``get``/``list`` are served
from memory and never touch the API server; an informer is started the first time a
kind is asked for (and waited on until synced). ``by_object`` gives a kind its own
label/field selector or namespace (the filtered cache): the selector goes into the
LIST/WATCH query, so objects without the label are neither cached nor delivered, and
an object that loses the label leaves the cache (the server sends DELETED) and reads
of it answer NotFound. Read such objects through :attr:`Cache.api_reader`.

``get_nowait``/``list_nowait`` read a kind whose informer has already synced
without awaiting, so event handlers and map functions can be plain functions
(they raise :class:`CacheNotSyncedError` rather than wait).

``watch_list=True`` makes informers fill themselves with a streaming list
(``sendInitialEvents``, client-go's WatchList) instead of paged LISTs, falling back
to LIST where the server refuses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from nimctl_runtime.cache.informer import SharedInformer
from nimctl_runtime.cache.reflector import ClientListerWatcher
from nimctl_runtime.cache.store import Transform, strip_managed_fields
from nimctl_runtime.client.client import Client, selector_text
from nimctl_runtime.client.errors import NotFound
from nimctl_runtime.client.mapper import RESTMapping
from nimctl_runtime.labels import Selector
from nimctl_runtime.meta import Obj

GVK = tuple[str, str]
IndexFn = Callable[[Obj], "Iterable[str] | str | None"]


@dataclass(frozen=True)
class ByObject:
    """Per-kind cache options (controller-runtime's ``cache.ByObject``)."""

    label_selector: str | Mapping[str, str] | Selector | None = None
    field_selector: str | None = None
    namespace: str | None = None
    transform: Transform | None = strip_managed_fields
    resync_period: float | None = None
    #: False: no label index for this kind (label selectors then scan; see Store).
    index_labels: bool = True
    #: False: no labels kept beside the stored object either (selectors decode
    #: each candidate; for kinds never read by label; implies no label index).
    keep_labels: bool = True


class CacheNotStartedError(RuntimeError):
    """The cache was stopped; start it (or the manager) before reading."""


class CacheNotSyncedError(RuntimeError):
    """A synchronous read of a kind whose informer does not exist or has not synced yet."""


class Cache:
    """Informer-backed reads (see the module docstring). A manager Runnable."""

    needs_leader_election = False

    def __init__(
        self,
        client: Client,
        *,
        by_object: Mapping[GVK, ByObject] | None = None,
        namespace: str | None = None,
        resync_period: float | None = None,
        watch_list: bool = False,
    ) -> None:
        self.client = client
        self.watch_list = watch_list
        self.by_object = dict(by_object or {})
        self.namespace = namespace
        self.resync_period = resync_period
        self._informers: dict[GVK, SharedInformer] = {}
        self._mappings: dict[GVK, RESTMapping] = {}
        self._indexers: dict[GVK, dict[str, IndexFn]] = {}
        self._lock = asyncio.Lock()
        self._started = False
        self._stopped = False

    @property
    def api_reader(self) -> Client:
        """The uncached reader: reads go straight to the API server."""
        return self.client

    # -- configuration ---------------------------------------------------------------

    def add_index(self, api_version: str, kind: str, name: str, fn: IndexFn) -> None:
        """Index *kind* by *fn* (returns a value, values, or None); query with ``index=``."""
        gvk = (api_version, kind)
        indexers = self._indexers.setdefault(gvk, {})
        if name in indexers:
            raise ValueError(f"index {name!r} already exists for {kind}")
        indexers[name] = fn
        informer = self._informers.get(gvk)
        if informer is not None:
            informer.add_indexers({name: fn})

    # -- informers -------------------------------------------------------------------

    async def get_informer(self, api_version: str, kind: str) -> SharedInformer:
        """The shared informer for a kind, created (and started, if the cache runs) on demand."""
        gvk = (api_version, kind)
        informer = self._informers.get(gvk)
        if informer is not None:
            return informer
        async with self._lock:
            informer = self._informers.get(gvk)
            if informer is not None:
                return informer
            mapping = await self.client.mapper.rest_mapping(api_version, kind)
            options = self.by_object.get(gvk, ByObject())
            lister_watcher = ClientListerWatcher(
                self.client,
                api_version,
                kind,
                namespace=options.namespace or self.namespace,
                label_selector=options.label_selector,
                field_selector=options.field_selector,
            )
            informer = SharedInformer(
                lister_watcher,
                name=f"{api_version}/{kind}",
                api_version=api_version,
                kind=kind,
                indexers=dict(self._indexers.get(gvk, {})),
                transform=options.transform,
                resync_period=options.resync_period or self.resync_period,
                use_watch_list=self.watch_list,
                index_labels=options.index_labels,
                keep_labels=options.keep_labels,
            )
            self._informers[gvk] = informer
            self._mappings[gvk] = mapping
            if self._started:
                informer.start()
            return informer

    async def _synced_informer(self, api_version: str, kind: str) -> SharedInformer:
        informer = self._informers.get((api_version, kind))
        if informer is not None and self._started and informer.has_synced():
            return informer  # the common case: no further awaits
        if self._stopped:
            raise CacheNotStartedError("the cache is stopped")
        informer = await self.get_informer(api_version, kind)
        if not self._started:
            await self.start()
        if not informer.has_synced():
            await informer.wait_for_sync()
        return informer

    # -- synchronous reads -----------------------------------------------------------

    def _informer_nowait(self, api_version: str, kind: str) -> tuple[SharedInformer, RESTMapping]:
        if self._stopped:
            raise CacheNotStartedError("the cache is stopped")
        gvk = (api_version, kind)
        informer = self._informers.get(gvk)
        if informer is None or not informer.has_synced():
            state = "has no informer yet" if informer is None else "has not synced yet"
            raise CacheNotSyncedError(
                f"the cache of {api_version}/{kind} {state}: read it with `await cache.get`/"
                "`await cache.list` (which start and wait), or watch the kind first"
            )
        return informer, self._mappings[gvk]

    def get_nowait(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj:
        """:meth:`get` without waiting, for a kind whose informer has synced.

        For plain-function event handlers and map functions (controller-runtime's
        reads are synchronous too). Raises :class:`CacheNotSyncedError` when the
        kind's informer does not exist or has not synced, NotFound as :meth:`get`.
        """
        informer, mapping = self._informer_nowait(api_version, kind)
        key = f"{namespace}/{name}" if namespace and mapping.namespaced else name
        obj = informer.store.get(key)
        if obj is None:
            group = mapping.group
            qualified = f"{mapping.resource}.{group}" if group else mapping.resource
            raise NotFound(
                404,
                "NotFound",
                f'{qualified} "{name}" not found',
                {"name": name, "group": group, "kind": mapping.resource},
            )
        return obj

    def list_nowait(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | Mapping[str, str] | Selector | None = None,
        index: tuple[str, str] | None = None,
    ) -> list[Obj]:
        """:meth:`list` without waiting, for a kind whose informer has synced.

        Raises :class:`CacheNotSyncedError` otherwise (see :meth:`get_nowait`).
        """
        informer, _ = self._informer_nowait(api_version, kind)
        # Namespace, index and labels are matched on the store's indexes; only the
        # objects returned are decoded (a big namespace never blocks the loop).
        items = informer.store.select(
            _selector(label_selector), namespace=namespace or None, index=index
        )
        items.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
        return items

    async def list_shared(self, api_version: str, kind: str) -> tuple[Obj, ...]:
        """Every cached object of a kind, decoded once per change of the kind and shared
        between callers (:meth:`Store.snapshot`): read-only, unlike :meth:`list`'s
        private copies. For whole-kind reads repeated while the kind is unchanged."""
        informer = await self._synced_informer(api_version, kind)
        return informer.store.snapshot()

    # -- reads -----------------------------------------------------------------------

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj:
        """The cached object (a private copy); NotFound if the cache does not hold it."""
        await self._synced_informer(api_version, kind)
        return self.get_nowait(api_version, kind, name, namespace)

    async def get_if_present(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj | None:
        """:meth:`get`, or None where the cache does not hold the object: no NotFound is
        built and raised (a reconcile asks for every object it is about to create)."""
        await self._synced_informer(api_version, kind)
        informer, mapping = self._informer_nowait(api_version, kind)
        return informer.store.get(
            f"{namespace}/{name}" if namespace and mapping.namespaced else name
        )

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | Mapping[str, str] | Selector | None = None,
        index: tuple[str, str] | None = None,
    ) -> list[Obj]:
        """Cached objects (private copies), by namespace, label selector and/or an index."""
        await self._synced_informer(api_version, kind)
        return self.list_nowait(
            api_version, kind, namespace, label_selector=label_selector, index=index
        )

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Start every informer known so far (later ones start as they are asked for)."""
        if self._started:
            return
        self._started = True
        self._stopped = False
        for informer in self._informers.values():
            informer.start()

    async def stop(self) -> None:
        self._started = False
        self._stopped = True
        for informer in list(self._informers.values()):
            await informer.stop()

    async def run(self, stop: asyncio.Event) -> None:
        """Runnable: start, serve until *stop* is set, then stop the informers."""
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    def has_synced(self) -> bool:
        return all(informer.has_synced() for informer in self._informers.values())

    async def wait_for_sync(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """True when every informer started so far has synced within *timeout* seconds."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    pending = [i for i in self._informers.values() if not i.has_synced()]
                    if not pending:
                        return True
                    await asyncio.gather(*(i.wait_for_sync() for i in pending))
        except TimeoutError:
            return False

    def informers(self) -> dict[GVK, SharedInformer]:
        return dict(self._informers)


def _selector(selector: str | Mapping[str, str] | Selector | None) -> Selector | None:
    if selector is None:
        return None
    if isinstance(selector, Selector):
        return None if selector.empty() else selector
    if isinstance(selector, Mapping):
        # key=value pairs: built directly, not written out as text and parsed back
        return Selector.from_labels(selector) if selector else None
    text = selector_text(selector)
    return Selector.parse(text) if text else None
