"""The localcluster audit log: one record per API request, for tests to read.

Each record says who (the user behind the bearer token), what (verb, API
group/version, resource, subresource, namespace, name) and the response code,
in the order requests arrived. Tests read it in process
(``AuditLog.records(user=...)``) or over HTTP at ``GET /debug/audit`` (when the
cluster's debug API is on). It is installed as the outermost request hook, so
faults injected further in show up with the code the client saw.
"""

from __future__ import annotations

import datetime
import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from localcluster.errors import StatusError
from localcluster.hooks import CREATED_NAME_KEY, INFO_KEY, Handler, RequestInfo
from localcluster.store import encode, loads

DEBUG_PREFIX = "/debug/"


@dataclass
class AuditRecord:
    """One request. ``code`` is ``None`` while the request (e.g. a watch) is still open."""

    seq: int
    # the request's time: seconds since the epoch until the record is first read, then
    # its RFC 3339 text (formatting it for every request cost more than the record);
    # read it as ``timestamp``
    time: str | float
    user: str
    groups: tuple[str, ...]
    verb: str
    api_group: str
    api_version: str
    resource: str
    subresource: str
    namespace: str
    name: str
    method: str
    path: str
    query: str
    code: int | None = None
    # Who the request was served as when the user impersonated someone
    # (kube-apiserver's ``impersonatedUser``); ``user`` stays the authenticated one.
    impersonated_user: str = ""
    # the record's JSON once the request is done (a done record never changes):
    # a poll of the audit log re-sends the same records many times
    _encoded: bytes | None = field(default=None, repr=False, compare=False)

    def encoded(self) -> bytes:
        """``to_json`` as compact JSON bytes, written once when the request is done."""
        if self._encoded is not None:
            return self._encoded
        data = encode(self.to_json())
        if self.code is not None:
            self._encoded = data
        return data

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON as ``/debug/audit`` serves it (read field by field: ``asdict``'s
        recursive copy was most of a poll of the audit log)."""
        out: dict[str, Any] = {
            "seq": self.seq,
            "timestamp": self.timestamp,
            "user": self.user,
            "groups": list(self.groups),
            "verb": self.verb,
            "apiGroup": self.api_group,
            "apiVersion": self.api_version,
            "resource": self.resource,
            "subresource": self.subresource,
            "namespace": self.namespace,
            "name": self.name,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "code": self.code,
        }
        if self.impersonated_user:
            out["impersonatedUser"] = self.impersonated_user
        return out

    @property
    def timestamp(self) -> str:
        """The request's time as served (``2026-11-28T10:27:23.123456+00:00``)."""
        if isinstance(self.time, float):
            moment = datetime.datetime.fromtimestamp(self.time, datetime.UTC)
            self.time = moment.isoformat(timespec="microseconds")
        return self.time

    @property
    def call(self) -> tuple[str, str, str, str, str]:
        """``(verb, resource, subresource, namespace, name)``: handy for exact comparisons."""
        return (self.verb, self.resource, self.subresource, self.namespace, self.name)


def _created_name(request: web.Request, response: web.StreamResponse) -> str:
    """The name of the object a create returned (kube-apiserver's audit objectRef.name)."""
    name: str | None = request.get(CREATED_NAME_KEY)
    if name is not None:
        return name
    body = getattr(response, "body", None)
    if not isinstance(body, bytes | bytearray):
        return ""
    try:
        obj = loads(bytes(body))
    except ValueError:
        return ""
    if not isinstance(obj, dict):
        return ""
    return str((obj.get("metadata") or {}).get("name", ""))


class AuditLog:
    """A bounded, ordered log of API requests (oldest dropped past *max_records*)."""

    def __init__(self, max_records: int = 200_000) -> None:
        self._records: deque[AuditRecord] = deque(maxlen=max_records)
        self._seq = itertools.count(1)
        # the same records by (user, verb, resource), oldest first: a poll for one
        # user's creates of one resource reads those, not the whole log
        self._by_call: dict[tuple[str, str, str], deque[AuditRecord]] = {}

    def clear(self) -> None:
        self._records.clear()
        self._by_call.clear()

    def _append(self, rec: AuditRecord) -> None:
        if len(self._records) == self._records.maxlen:
            dropped = self._records[0]  # the oldest overall: the oldest of its call too
            same = self._by_call[(dropped.user, dropped.verb, dropped.resource)]
            same.popleft()
            if not same:
                del self._by_call[(dropped.user, dropped.verb, dropped.resource)]
        self._records.append(rec)
        self._by_call.setdefault((rec.user, rec.verb, rec.resource), deque()).append(rec)

    def records(
        self,
        *,
        user: str | None = None,
        resource: str | None = None,
        verb: str | None = None,
        resource_requests_only: bool = True,
    ) -> list[AuditRecord]:
        """Records in arrival order, filtered by user, resource and verb."""
        if user is not None and resource and verb is not None:
            return list(self._by_call.get((user, verb, resource), ()))
        out = []
        for rec in list(self._records):
            if resource_requests_only and not rec.resource:
                continue
            if user is not None and rec.user != user:
                continue
            if resource is not None and rec.resource != resource:
                continue
            if verb is not None and rec.verb != verb:
                continue
            out.append(rec)
        return out

    def calls(self, user: str | None = None) -> list[tuple[str, str, str, str, str]]:
        """``record.call`` for every resource request of *user*."""
        return [r.call for r in self.records(user=user)]

    def _begin(self, request: web.Request, info: RequestInfo) -> AuditRecord:
        rec = AuditRecord(
            seq=next(self._seq),
            time=time.time(),
            user=info.user,
            groups=tuple(info.groups),
            verb=info.verb,
            api_group=info.api_group,
            api_version=info.api_version,
            resource=info.resource if info.is_resource_request else "",
            subresource=info.subresource,
            namespace=info.namespace,
            name=info.name,
            method=request.method,
            path=request.path,
            query=request.query_string,
        )
        self._append(rec)
        return rec

    @staticmethod
    def _impersonated(request: web.Request, rec: AuditRecord) -> None:
        served = request.get(INFO_KEY)
        if served is not None and served.impersonator:
            rec.impersonated_user = served.user

    async def hook(
        self, request: web.Request, info: RequestInfo, handler: Handler
    ) -> web.StreamResponse:
        """The request hook: record the request, then its response code."""
        if request.path.startswith(DEBUG_PREFIX):
            return await handler(request)
        rec = self._begin(request, info)
        try:
            response = await handler(request)
        except StatusError as err:
            self._impersonated(request, rec)
            rec.code = err.code
            raise
        except web.HTTPException as exc:
            rec.code = exc.status
            raise
        except ConnectionError:
            rec.code = 0  # the connection was dropped (e.g. the unreachable fault)
            raise
        except Exception:
            rec.code = 500
            raise
        rec.code = response.status
        self._impersonated(request, rec)
        if rec.verb == "create" and not rec.name and response.status < 300:
            rec.name = _created_name(request, response)
        return response
