"""Watch streams over HTTP: ``GET ...?watch=true`` as newline-delimited JSON events.

Semantics clients depend on (client-go's Reflector, kubernetes-asyncio's Watch):
replay from ``resourceVersion`` (ERROR 410 "too old resource version" once the
history is compacted), synthetic ADDED events for ``resourceVersion`` "" / "0",
``sendInitialEvents`` ending with a BOOKMARK annotated
``k8s.io/initial-events-end``, periodic BOOKMARKs when ``allowWatchBookmarks``,
``timeoutSeconds``, and Table-formatted events for ``kubectl get -w``.
"""

from __future__ import annotations

import contextlib
import random
import time
from typing import Any

from aiohttp import web

from . import conversion, errors, tables
from .codec import partial_metadata, wants_metadata_only, wants_table
from .errors import StatusError
from .handlers import RequestContext
from .host import APIServerHost
from .store import encode
from .watchcache import BOOKMARK, ERROR, StoredEvent, WatchClosed

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_DISCONNECT_CHECK = 2.0  # seconds between checks for a vanished client on an idle watch


def _bool(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


class WatchServer:
    """Serves watch requests for the cluster that hosts it."""

    def __init__(self, cluster: APIServerHost) -> None:
        self.cluster = cluster

    async def serve(
        self,
        ctx: RequestContext,
        selectors: tuple[Any, Any],
    ) -> web.StreamResponse:
        info = ctx.resource
        q = ctx.query
        storage = self.cluster.storage
        rv = q.get("resourceVersion")
        bookmarks = _bool(q.get("allowWatchBookmarks"))
        send_initial = _bool(q.get("sendInitialEvents")) if "sendInitialEvents" in q else None
        if send_initial is not None:
            if q.get("resourceVersionMatch") != "NotOlderThan":
                raise errors.invalid(
                    "meta.k8s.io",
                    "ListOptions",
                    "",
                    [
                        {
                            "reason": "FieldValueForbidden",
                            "message": "Forbidden: sendInitialEvents is forbidden for watch "
                            "unless resourceVersionMatch is set to NotOlderThan",
                            "field": "resourceVersionMatch",
                        }
                    ],
                )
            if send_initial and not bookmarks:
                raise errors.invalid(
                    "meta.k8s.io",
                    "ListOptions",
                    "",
                    [
                        {
                            "reason": "FieldValueForbidden",
                            "message": "Forbidden: sendInitialEvents requires setting "
                            "allowWatchBookmarks=true",
                            "field": "allowWatchBookmarks",
                        }
                    ],
                )
        timeout_s: float
        if q.get("timeoutSeconds"):
            try:
                timeout_s = float(q["timeoutSeconds"])
            except ValueError as exc:
                raise errors.bad_request("timeoutSeconds must be an integer") from exc
        else:
            timeout_s = random.uniform(1800, 3600)
        lsel, fsel = selectors
        as_table = wants_table(ctx.request)
        metadata_only = wants_metadata_only(ctx.request)
        columns = (
            tables.columns_for(info.group, info.resource, info.printer_columns, info.crd)
            if as_table
            else []
        )
        include_object = q.get("includeObject", "Metadata")

        resp = web.StreamResponse(status=200)
        resp.content_type = "application/json"
        resp.enable_chunked_encoding()
        try:
            watcher = storage.watch_resource(
                info,
                ctx.info.namespace or None,
                rv if not send_initial else (rv or None),
                lsel,
                fsel,
                send_initial_events=bool(send_initial),
            )
        except StatusError as exc:
            if exc.code != 410:
                raise
            await resp.prepare(ctx.request)
            await resp.write(_error_line(exc))
            await resp.write_eof()
            return resp
        await resp.prepare(ctx.request)
        first_table = [True]

        def line(ev: StoredEvent) -> bytes:
            data = ev.data
            if (
                as_table
                or metadata_only
                or ctx.convert
                or (info.crd and info.version != info.storage_version)
            ):
                obj = ev.object
                if info.group:
                    obj["apiVersion"] = info.api_version
                if as_table:
                    table = tables.build_table([obj], columns, include_object=include_object)
                    if not first_table[0]:
                        table["columnDefinitions"] = []
                    first_table[0] = False
                    table["metadata"]["resourceVersion"] = str(ev.rv)
                    obj = conversion.response_from_core(table) if ctx.convert else table
                elif metadata_only:
                    obj = partial_metadata(obj)
                elif ctx.convert:
                    obj = conversion.from_core(obj)
                data = encode(obj)
            return b'{"type":"' + ev.type.encode() + b'","object":' + data + b"}\n"

        def bookmark(rv_value: int, initial_end: bool = False) -> bytes:
            meta: dict[str, Any] = {"resourceVersion": str(rv_value)}
            if initial_end:
                meta["annotations"] = {INITIAL_EVENTS_END: "true"}
            api_version = "events.k8s.io/v1" if ctx.convert else info.api_version
            obj = {"kind": info.kind, "apiVersion": api_version, "metadata": meta}
            return encode({"type": BOOKMARK, "object": obj}) + b"\n"

        interval = self.cluster.bookmark_interval
        deadline = time.monotonic() + timeout_s
        try:
            if send_initial:
                initial = watcher.drain()
                initial_rv = storage.resource_version
                if initial:
                    await resp.write(b"".join(line(ev) for ev in initial))
                await resp.write(bookmark(initial_rv, True))
            last_bookmark = time.monotonic()
            while True:
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    break
                wait = min(remaining, interval if bookmarks else _DISCONNECT_CHECK)
                transport = ctx.request.transport
                if transport is None or transport.is_closing():
                    return resp  # the client went away while the stream was idle
                try:
                    batch = await watcher.next_batch(wait)
                except WatchClosed as closed:
                    await resp.write(_error_line(closed.error))
                    break
                if batch:
                    await resp.write(b"".join(line(ev) for ev in batch))
                elif watcher.closed:
                    break
                now = time.monotonic()
                if bookmarks and now - last_bookmark >= interval and watcher.pending() == 0:
                    await resp.write(bookmark(storage.resource_version))
                    last_bookmark = now
        except ConnectionResetError:
            return resp  # the client went away
        finally:
            watcher.close()
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp


def _error_line(exc: StatusError) -> bytes:
    return encode({"type": ERROR, "object": exc.to_status()}) + b"\n"
