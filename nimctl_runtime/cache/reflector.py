"""Reflector: keep a store in step with the server by LIST then WATCH, forever.

A faithful port of client-go's ``Reflector.ListAndWatch`` state machine
(runtime.md §1.1), because the relist/rewatch rules are what make a cache correct:

* the first list asks for RV "0" (any data, served from the watch cache), later lists
  for the last synced RV ("not older than"), and after a 410 for "" (a quorum read);
  pages of 500 (kept when an RV "0" list came back paginated; unpaginated for an
  exact RV, so the watch cache can serve it); a continue token that expires restarts
  the list unpaginated; a list that 410s is retried at once with RV "";
* a list replaces the store; keys that vanished get ``DeletedFinalStateUnknown``;
* watches carry ``allowWatchBookmarks`` and a random 300-600 s ``timeoutSeconds``;
  every event (and BOOKMARK) advances ``last_sync_resource_version``; a clean end
  re-watches from it without relisting;
* a watch refused with 429 or a connection error backs off and re-watches from the
  same RV; 500s likewise for up to ``max_internal_error_retry`` seconds; 410 Gone
  and other errors end ``list_and_watch`` so the outer loop relists;
* a watch that ends within 1 s having delivered nothing is a "very short watch": the
  outer loop backs off before relisting;
* the outer loop waits a jittered backoff 0.8 s -> 30 s (x[1, 2)) between runs, reset
  after 2 minutes without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from nimctl_runtime.client.client import Client, WatchEvent, gc_paused
from nimctl_runtime.client.errors import (
    ApiConnectionError,
    ApiError,
    BadRequest,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    MethodNotAllowed,
    ServerTimeout,
    ServiceUnavailable,
    TooManyRequests,
)
from nimctl_runtime.client.ratelimit import Backoff
from nimctl_runtime.labels import Selector
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import Obj

PAGE_SIZE = 500
MIN_WATCH_TIMEOUT = 300.0
VERY_SHORT_WATCH = 1.0
SLOW_LIST_SECONDS = 10.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"

_log = get_logger("nimctl.reflector")


class ListerWatcher(Protocol):
    """What a Reflector lists and watches (one resource, maybe one namespace/selector)."""

    async def list(
        self,
        *,
        resource_version: str | None,
        limit: int | None,
        continue_: str | None,
    ) -> Obj: ...

    def watch(
        self, *, resource_version: str, timeout_seconds: int, allow_bookmarks: bool
    ) -> AsyncIterator[WatchEvent]: ...


class ReflectorStore(Protocol):
    """Where a Reflector writes (a SharedInformer, or a bare store adapter).

    ``prepare`` turns each listed object into what ``replace`` takes (for the Store:
    encoded bytes), page by page, so a big list never lives as dicts all at once.
    """

    def prepare(self, obj: Obj) -> Any: ...

    def replace(self, items: list[Any], resource_version: str) -> None: ...

    def add(self, obj: Obj) -> None: ...

    def update(self, obj: Obj) -> None: ...

    def delete(self, obj: Obj) -> None: ...


class WatchLister(Protocol):
    """A ListerWatcher that can also stream the initial list as watch events (WatchList)."""

    def watch_list(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[WatchEvent]: ...


class ClientListerWatcher:
    """List and watch one kind through a :class:`Client` (optionally filtered)."""

    def __init__(
        self,
        client: Client,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | Selector | None = None,
        field_selector: str | None = None,
    ) -> None:
        self.client = client
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector

    async def list(
        self,
        *,
        resource_version: str | None,
        limit: int | None,
        continue_: str | None,
    ) -> Obj:
        return await self.client.list_page(
            self.api_version,
            self.kind,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=limit,
            continue_=continue_,
            resource_version=resource_version,
        )

    def watch(
        self, *, resource_version: str, timeout_seconds: int, allow_bookmarks: bool
    ) -> AsyncIterator[WatchEvent]:
        return self.client.watch(
            self.api_version,
            self.kind,
            self.namespace,
            resource_version=resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            allow_bookmarks=allow_bookmarks,
            timeout_seconds=timeout_seconds,
        )

    def watch_list(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[WatchEvent]:
        return self.client.watch(
            self.api_version,
            self.kind,
            self.namespace,
            resource_version=resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            allow_bookmarks=True,
            timeout_seconds=timeout_seconds,
            send_initial_events=True,
            resource_version_match="NotOlderThan",
        )


class WatchListUnsupportedError(Exception):
    """The server refused a streaming list; the reflector falls back to LIST."""


class VeryShortWatchError(Exception):
    """The watch closed within a second having delivered no event (server trouble)."""


class _WatchEnded(Exception):
    """list_and_watch must return so that the outer loop relists."""


class Reflector:
    """Run :meth:`run` (or :meth:`list_and_watch`) to keep *store* in step with the server."""

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        store: ReflectorStore,
        *,
        name: str = "reflector",
        api_version: str | None = None,
        kind: str | None = None,
        backoff: Backoff | None = None,
        watch_backoff: Backoff | None = None,
        min_watch_timeout: float = MIN_WATCH_TIMEOUT,
        max_internal_error_retry: float = 30.0,
        use_watch_list: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        self.lister_watcher = lister_watcher
        self.store = store
        self.name = name
        self.api_version = api_version
        self.kind = kind
        self.backoff = backoff or Backoff(0.8, cap=30.0, factor=2.0, jitter=1.0, reset_after=120.0)
        self.watch_backoff = watch_backoff or Backoff(
            0.8, cap=30.0, factor=2.0, jitter=1.0, reset_after=120.0
        )
        self.min_watch_timeout = max(min_watch_timeout, 0.0)
        self.max_internal_error_retry = max_internal_error_retry
        self.use_watch_list = use_watch_list and hasattr(lister_watcher, "watch_list")
        self._rng = rng or random.Random()
        self.last_sync_resource_version = ""
        self.is_last_sync_resource_version_unavailable = False
        self.paginated_result = False
        self.lists = 0
        self.watches = 0

    # -- outer loop ----------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """ListAndWatch until *stop* is set, backing off between runs."""
        loop_task = asyncio.get_running_loop().create_task(self._loop(stop))
        stop_task = asyncio.get_running_loop().create_task(stop.wait())
        try:
            await asyncio.wait({loop_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (loop_task, stop_task):
                task.cancel()
            for task in (loop_task, stop_task):
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.list_and_watch()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                self._watch_error_handler(err)
            if stop.is_set():
                return
            await asyncio.sleep(self.backoff.next_delay())

    def _watch_error_handler(self, err: BaseException) -> None:
        if isinstance(err, Gone):
            _log.debug(
                "watch closed: resource version expired", reflector=self.name, error=str(err)
            )
        elif isinstance(err, VeryShortWatchError):
            _log.info("very short watch: no events within a second", reflector=self.name)
        else:
            _log.warning("list and watch failed", reflector=self.name, error=str(err))

    # -- list ------------------------------------------------------------------------

    def relist_resource_version(self) -> str:
        """client-go's ``relistResourceVersion``: "" after an expiry, "0" first, else last RV."""
        if self.is_last_sync_resource_version_unavailable:
            return ""
        if not self.last_sync_resource_version:
            return "0"
        return self.last_sync_resource_version

    def _page_size(self, resource_version: str) -> int | None:
        if self.paginated_result:
            return PAGE_SIZE
        if resource_version not in ("", "0"):
            return None
        return PAGE_SIZE

    async def _list_all(self, resource_version: str) -> tuple[list[Any], str, bool]:
        limit = self._page_size(resource_version)
        items: list[Any] = []
        continue_: str | None = None
        paginated = False
        list_rv = ""
        while True:
            # The cyclic GC stays off from decoding a page until its dicts are freed:
            # they die by refcount, so the collector never has to walk them (§4.2).
            with gc_paused():
                try:
                    page = await self.lister_watcher.list(
                        resource_version=resource_version, limit=limit, continue_=continue_
                    )
                except Gone:
                    if continue_ is None:
                        raise
                    # The continue token expired: list again in one go (FullListIfExpired).
                    items, continue_, limit, paginated = [], None, None, False
                    continue
                meta = page.get("metadata") or {}
                for item in page.get("items") or []:
                    self._fill_type(item)
                    items.append(self.store.prepare(item))
                del page
            list_rv = str(meta.get("resourceVersion") or list_rv)
            continue_ = meta.get("continue") or None
            if not continue_:
                return items, list_rv, paginated
            paginated = True

    async def list(self) -> None:
        """One list phase: LIST (with the RV rules above) and replace the store."""
        resource_version = self.relist_resource_version()
        started = time.monotonic()
        try:
            items, list_rv, paginated = await self._list_all(resource_version)
        except Gone:
            self.is_last_sync_resource_version_unavailable = True
            items, list_rv, paginated = await self._list_all("")
            resource_version = ""
        self.lists += 1
        took = time.monotonic() - started
        if took > SLOW_LIST_SECONDS:
            _log.info("slow list", reflector=self.name, seconds=round(took, 1), items=len(items))
        if resource_version == "0" and paginated:
            self.paginated_result = True
        self.is_last_sync_resource_version_unavailable = False
        self.store.replace(items, list_rv)
        self.last_sync_resource_version = list_rv

    def _fill_type(self, obj: Obj) -> None:
        if self.api_version and "apiVersion" not in obj:
            obj["apiVersion"] = self.api_version
        if self.kind and "kind" not in obj:
            obj["kind"] = self.kind

    # -- watch -----------------------------------------------------------------------

    async def list_and_watch(self) -> None:
        """List, then watch until the watch must be abandoned (returns or raises).

        With ``use_watch_list`` the list is a streaming WatchList whose stream then
        carries on as the watch; a server that refuses it gets a LIST instead, from
        then on.
        """
        if self.use_watch_list:
            try:
                await self.watch_list()
            except WatchListUnsupportedError as err:
                _log.info(
                    "streaming list refused, falling back to LIST",
                    reflector=self.name,
                    error=str(err),
                )
                self.use_watch_list = False
            else:
                await self.watch_loop()
                return
        await self.list()
        await self.watch_loop()

    async def watch_list(self) -> None:
        """client-go's ``watchList``: collect the initial ADDED events until the
        ``k8s.io/initial-events-end`` bookmark, replace the store with them, then
        handle the rest of the same stream as an ordinary watch."""
        resource_version = (
            ""
            if self.is_last_sync_resource_version_unavailable
            else self.last_sync_resource_version
        )
        timeout = int(self.min_watch_timeout * (1.0 + self._rng.random()))
        self.watches += 1
        stream = self.lister_watcher.watch_list(  # type: ignore[attr-defined]
            resource_version=resource_version, timeout_seconds=timeout
        )
        initial: list[Any] = []
        synced = False
        try:
            async for event in stream:
                if synced:
                    self._handle(event)
                    continue
                obj = event.object
                meta = obj.get("metadata") or {}
                if event.type == "ADDED":
                    self._fill_type(obj)
                    with gc_paused():
                        initial.append(self.store.prepare(obj))
                elif event.type == "BOOKMARK":
                    annotations = meta.get("annotations") or {}
                    if annotations.get(INITIAL_EVENTS_END) == "true":
                        rv = str(meta.get("resourceVersion") or "")
                        self.store.replace(initial, rv)
                        self.last_sync_resource_version = rv
                        self.is_last_sync_resource_version_unavailable = False
                        self.lists += 1
                        initial = []
                        synced = True
                else:
                    raise _WatchEnded(
                        f"unexpected {event.type} event before the initial list ended"
                    )
        except Gone:
            if not synced:
                self.is_last_sync_resource_version_unavailable = True
            raise
        except (BadRequest, Invalid, Forbidden, MethodNotAllowed) as err:
            if synced:
                raise
            raise WatchListUnsupportedError(str(err)) from err
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        if not synced:
            raise _WatchEnded("the streaming list ended before its initial-events-end bookmark")

    async def watch_loop(self) -> None:
        internal_errors_since: float | None = None
        while True:
            timeout = int(self.min_watch_timeout * (1.0 + self._rng.random()))
            started = time.monotonic()
            events = 0
            try:
                events = await self._watch_once(timeout)
            except (TooManyRequests, ApiConnectionError, ServiceUnavailable) as err:
                delay = self.watch_backoff.next_delay()
                if isinstance(err, TooManyRequests) and err.retry_after:
                    delay = max(delay, err.retry_after)
                _log.info(
                    "watch refused, backing off and re-watching from the same resource version",
                    reflector=self.name,
                    error=str(err),
                    delay=round(delay, 3),
                )
                await asyncio.sleep(delay)
                continue
            except (InternalError, ServerTimeout) as err:
                now = time.monotonic()
                if internal_errors_since is None:
                    internal_errors_since = now
                if now - internal_errors_since < self.max_internal_error_retry:
                    await asyncio.sleep(self.watch_backoff.next_delay())
                    continue
                raise _WatchEnded(str(err)) from err
            except Gone:
                raise
            except ApiError as err:
                _log.warning("watch ended with error", reflector=self.name, error=str(err))
                return
            internal_errors_since = None
            if events == 0 and time.monotonic() - started < VERY_SHORT_WATCH:
                raise VeryShortWatchError(
                    f"{self.name}: watch closed within {VERY_SHORT_WATCH:g}s with no events"
                )

    async def _watch_once(self, timeout_seconds: int) -> int:
        self.watches += 1
        stream = self.lister_watcher.watch(
            resource_version=self.last_sync_resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=True,
        )
        events = 0
        try:
            async for event in stream:
                events += 1
                self._handle(event)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return events

    def _handle(self, event: WatchEvent) -> None:
        obj = event.object
        meta = obj.get("metadata") or {}
        rv = str(meta.get("resourceVersion") or "")
        if event.type == "BOOKMARK":
            if rv:
                self.last_sync_resource_version = rv
            return
        if self.kind and obj.get("kind") not in (None, self.kind):
            _log.warning(
                "watch event of unexpected kind skipped", reflector=self.name, got=obj.get("kind")
            )
            return
        self._fill_type(obj)
        if event.type == "ADDED":
            self.store.add(obj)
        elif event.type == "MODIFIED":
            self.store.update(obj)
        elif event.type == "DELETED":
            self.store.delete(obj)
        else:
            _log.warning("unknown watch event type", reflector=self.name, type=event.type)
            return
        if rv:
            self.last_sync_resource_version = rv
