"""The async Client: Kubernetes REST verbs on plain dicts.

Objects go in and come out as ``dict`` in Kubernetes JSON shape; no generated models
(their per-object deserialisation is the throughput killer of runtime.md §3.2.6).
Unary requests go through :mod:`.http1`, a lean HTTP/1.1 keep-alive transport
(aiohttp's per-request machinery was a fifth of the operator's CPU, issue 30);
watches stream over one aiohttp session. Every unary request has a total timeout;
a watch has an idle (``sock_read``) timeout so a half-open connection cannot hang
it. Reads, and any request answered 429 or 5xx-with-Retry-After, are retried with
jittered backoff honouring ``Retry-After``. The connection pools are sized for
many concurrent watches (HTTP/1.1: each open watch holds a connection).
``rest_client_requests_total`` and ``rest_client_request_duration_seconds`` are
recorded per request.

Writes can be fenced: when ``Client.fence`` is set (the manager sets it under
leader election), every non-GET request calls it before each attempt and a last
time once the attempt holds its connection, immediately before the request's
bytes are handed to the socket's transport with no await in between (opening a
connection takes awaits, and a process paused anywhere before that last check
would otherwise send a write checked before the pause). A ``NotLeaderError`` it
raises stops the request unsent. The check is local (a clock comparison), never
an API call. Exempt: requests inside :func:`unfenced` (the Lease's own renewals)
and the review APIs (TokenReview, SubjectAccessReview: a POST that asks a question
and changes nothing).
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Any, Literal
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
from yarl import URL

from nimctl_runtime.client import codec, http1
from nimctl_runtime.client.config import RestConfig
from nimctl_runtime.client.connectivity import ConnectionHealth
from nimctl_runtime.client.errors import (
    ApiConnectionError,
    ApiError,
    Gone,
    ServerTimeout,
    from_status,
    is_retriable_status,
)
from nimctl_runtime.client.mapper import RESTMapper, RESTMapping
from nimctl_runtime.client.ratelimit import Backoff, TokenBucket
from nimctl_runtime.labels import Selector
from nimctl_runtime.logsetup import get_logger

PatchType = Literal["merge", "json", "strategic", "apply"]

PATCH_CONTENT_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "merge": "application/merge-patch+json",
        "json": "application/json-patch+json",
        "strategic": "application/strategic-merge-patch+json",
        "apply": "application/apply-patch+yaml",
    }
)

LARGE_BODY_BYTES = 1 << 20
READ_BUFSIZE = 1 << 21
MAX_REMEMBERED_WARNINGS = 1000

_log = get_logger("nimctl.client")

_UNFENCED: contextvars.ContextVar[bool] = contextvars.ContextVar("nimctl_unfenced", default=False)


@contextmanager
def unfenced() -> Iterator[None]:
    """Requests made inside this block skip ``Client.fence`` (the Lease renewals themselves)."""
    token = _UNFENCED.set(True)
    try:
        yield
    finally:
        _UNFENCED.reset(token)


def _is_review(path: str) -> bool:
    """TokenReview / SubjectAccessReview and friends: POSTs that change nothing."""
    return path.rstrip("/").endswith("reviews")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic GC around a synchronous burst of allocations (runtime.md §4.2)."""
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def decode_json(data: bytes) -> Any:
    """JSON via :mod:`.codec`, the GC paused for large bodies (a 10k-item list: ~4x faster)."""
    if len(data) >= LARGE_BODY_BYTES:
        with gc_paused():
            return codec.loads(data)
    return codec.loads(data)


def encode_json(obj: Any) -> bytes:
    return codec.dumps(obj)


def selector_text(selector: str | Mapping[str, str] | object | None) -> str | None:
    """A label selector as query text: strings pass through, mappings become ``k=v,...``,
    anything else (a parsed ``nimctl_runtime.labels.Selector``) is rendered with ``str``."""
    if selector is None:
        return None
    if isinstance(selector, str):
        return selector or None
    if isinstance(selector, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or None
    return str(selector) or None


@dataclass(slots=True)
class WatchEvent:
    """One watch notification: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: dict[str, Any]


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


_PLAIN_PATH = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/:")


def _target(prefix: str, path: str, params: Mapping[str, str] | None) -> str:
    """The request target: the server's path prefix, the path (percent-encoded where it
    is not plain, which no path built from Kubernetes names needs) and the query."""
    if not _PLAIN_PATH.issuperset(path):
        path = quote(path, safe="/:@%!$&'()*+,;=")
    if params:
        return f"{prefix}{path}?{urlencode(params, quote_via=quote)}"
    return prefix + path


def _url(host: str, path: str) -> URL | str:
    """The request URL. A path of plain characters (every API path built from Kubernetes
    names) needs no encoding, so yarl is told so and skips its parsing and host
    normalisation, a visible share of a request's client-side cost; anything else
    goes through aiohttp's usual parsing."""
    if _PLAIN_PATH.issuperset(path):
        return URL(host + path, encoded=True)
    return host + path


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ValueError("object has no metadata")
    return meta


class Client:
    """An API client on plain dicts (see the module docstring).

    Use as ``async with Client(config) as client:`` or call :meth:`close`. *config*
    may be a :class:`RestConfig`, a kubeconfig path, or None (:func:`load_config`).
    """

    def __init__(
        self,
        config: RestConfig | str | None = None,
        *,
        max_retries: int = 10,
        connection_limit: int = 1024,
        mapper: RESTMapper | None = None,
    ) -> None:
        if config is None or isinstance(config, str):
            from nimctl_runtime.client.config import load_config

            config = load_config(config)
        self.config = config
        self.max_retries = max_retries
        self._connection_limit = connection_limit
        self._session: aiohttp.ClientSession | None = None  # watches
        self._pool: http1.Pool | None = None  # unary requests
        self._prefix = ""  # the server URL's path, before every request path
        self._fixed_head = b""  # Host, User-Agent, Accept and Accept-Encoding lines
        self._auth_line: tuple[str | None, bytes] = (None, b"")
        self._metric_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._session_lock = asyncio.Lock()
        self._limiter: TokenBucket | None = (
            TokenBucket(config.qps, config.burst) if config.qps and config.qps > 0 else None
        )
        self.mapper = mapper or RESTMapper(self._discovery_fetch)
        self._host_label = ""
        self._warnings_seen: set[str] = set()
        # Connection failures, logged with server and reason; the readyz check.
        self.connection = ConnectionHealth(config.host)
        # Called before every write attempt; raises NotLeaderError to stop it unsent.
        self.fence: Callable[[], None] | None = None
        self.fenced_writes = 0

    # -- lifecycle ---------------------------------------------------------------

    async def __aenter__(self) -> Client:
        await self._get_session()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool (open watches end)."""
        session, self._session = self._session, None
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        if session is not None:
            await session.close()

    async def _get_session(self) -> aiohttp.ClientSession:
        if self._session is not None and not self._session.closed:
            return self._session
        await self._connect()
        assert self._session is not None
        return self._session

    async def _get_pool(self) -> http1.Pool:
        if self._pool is not None and self._session is not None and not self._session.closed:
            return self._pool
        await self._connect()
        assert self._pool is not None
        return self._pool

    async def _connect(self) -> None:
        async with self._session_lock:
            if self._session is not None and not self._session.closed:
                return
            await self.config.resolve()
            if not self.config.host:
                raise ApiConnectionError(0, "ConnectionFailed", "no API server host configured")
            url = urlsplit(self.config.host)
            if url.scheme not in ("http", "https") or not url.hostname:
                raise ApiConnectionError(
                    0,
                    "ConnectionFailed",
                    f"API server URL {self.config.host!r}: want http(s)://host[:port][/path]",
                )
            ssl_ctx = await asyncio.to_thread(self.config.ssl_context)
            connector = aiohttp.TCPConnector(
                limit=self._connection_limit, limit_per_host=0, ssl=ssl_ctx
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                # The API server sets no cookies: skip the jar's work on every request.
                cookie_jar=aiohttp.DummyCookieJar(),
                read_bufsize=READ_BUFSIZE,
                timeout=aiohttp.ClientTimeout(total=self.config.timeout),
                headers={"User-Agent": self.config.user_agent},
            )
            secure = url.scheme == "https"
            self._pool = http1.Pool(
                url.hostname,
                url.port or (443 if secure else 80),
                ssl_context=ssl_ctx if isinstance(ssl_ctx, ssl.SSLContext) else None,
                server_hostname=self.config.tls_server_name or url.hostname,
                limit=self._connection_limit,
            )
            self._prefix = url.path.rstrip("/")
            host = url.netloc.rpartition("@")[2]
            self._fixed_head = (
                f"Host: {host}\r\nUser-Agent: {self.config.user_agent}\r\n"
                "Accept: application/json\r\nAccept-Encoding: gzip, deflate\r\n"
            ).encode("latin-1")
            self._host_label = url.netloc
            self.connection.server = self.config.host

    # -- transport ---------------------------------------------------------------

    async def _headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        auth = await self.config.authorization()
        if auth:
            headers["Authorization"] = auth
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def _head(
        self, method: str, target: str, content_type: str | None, length: int | None
    ) -> bytes:
        """The request line and headers: the fixed lines prebuilt, the Authorization
        line rebuilt only when the credential changes."""
        auth = await self.config.authorization()
        if auth != self._auth_line[0]:
            line = f"Authorization: {auth}\r\n".encode("latin-1") if auth else b""
            self._auth_line = (auth, line)
        head = f"{method} {target} HTTP/1.1\r\n".encode() + self._fixed_head + self._auth_line[1]
        if length is None:
            return head + b"\r\n"
        if content_type:
            head += f"Content-Type: {content_type}\r\n".encode("latin-1")
        return head + f"Content-Length: {length}\r\n\r\n".encode()

    def _observe(self, method: str, code: int | str, seconds: float) -> None:
        try:
            from nimctl_runtime import metrics
        except ImportError:
            return
        key = (method, str(code))
        children = self._metric_children.get(key)
        if children is None:
            children = (
                metrics.rest_client_requests_total.labels(
                    code=key[1], method=method, host=self._host_label
                ),
                metrics.rest_client_request_duration_seconds.labels(
                    verb=method, host=self._host_label
                ),
            )
            self._metric_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float | None = None,
        raw: bool = False,
        retries: int | None = None,
    ) -> Any:
        """Send one request and return the decoded JSON body; raises :class:`ApiError`.

        With ``raw=True`` the body is returned as bytes, undecoded (pod logs).
        ``retries`` overrides ``max_retries`` for this request (0: an eviction's 429
        is an answer to act on, not a throttle to wait out).

        Retries: GETs on connection errors, timeouts, 429 and 5xx; other verbs on 429
        and on 5xx that carry ``Retry-After`` (the server did not act on them).
        """
        pool = await self._get_pool()
        data = None if body is None else encode_json(body)
        is_read = method == "GET"
        backoff = Backoff(initial=0.1, cap=10.0, jitter=1.0, reset_after=None)
        timeout = request_timeout or self.config.timeout
        target = _target(self._prefix, path, params)
        if data is not None:
            length: int | None = len(data)
        else:
            length = None if method in ("GET", "HEAD", "OPTIONS") else 0
        attempt = 0
        refreshed = False
        max_retries = self.max_retries if retries is None else retries
        while True:
            attempt += 1
            if self._limiter is not None:
                await self._limiter.acquire()
            head = await self._head(
                method, target, content_type if data is not None else None, length
            )
            fenced = not is_read and self._fenced(path)
            if fenced:
                self._run_fence()
            started = time.monotonic()
            try:
                # The fence is asked a last time once the connection is held, right
                # before the bytes are written (no await in between).
                resp = await pool.request(
                    head,
                    data,
                    time_limit=timeout,
                    before_write=self._run_fence if fenced else None,
                    no_body=method == "HEAD",
                )
            except TimeoutError as err:
                self._observe(method, "<error>", time.monotonic() - started)
                error: ApiError = ServerTimeout(
                    504, "Timeout", f"{method} {path}: no answer within the client timeout"
                )
                if is_read and attempt <= max_retries:
                    await asyncio.sleep(backoff.next_delay())
                    continue
                raise error from err
            except http1.ConnectFailed as err:
                self._observe(method, "<error>", time.monotonic() - started)
                reason = self.connection.failed(err, request=f"{method} {path}")
                if attempt <= max_retries:
                    # Nothing was sent: safe to retry any verb.
                    await asyncio.sleep(backoff.next_delay())
                    continue
                raise ApiConnectionError(
                    0, "ConnectionFailed", f"{method} {self.config.host}{path}: {reason}"
                ) from err
            except OSError as err:  # http1.ConnectionLost: sent, no whole answer
                self._observe(method, "<error>", time.monotonic() - started)
                reason = self.connection.failed(err, request=f"{method} {path}")
                if is_read and attempt <= max_retries:
                    await asyncio.sleep(backoff.next_delay())
                    continue
                raise ApiConnectionError(
                    0, "ConnectionFailed", f"{method} {self.config.host}{path}: {reason}"
                ) from err
            status = resp.status
            payload = resp.body
            retry_after = _retry_after(resp.header("retry-after"))
            warnings = resp.header_all("warning")
            self.connection.succeeded()
            self._observe(method, status, time.monotonic() - started)
            for warning in warnings:
                self._warn(warning, method, path)
            if status < 400:
                if raw:
                    return payload
                if not payload:
                    return {}
                return decode_json(payload)
            if status == 401 and not refreshed and await self.config.refresh_credentials():
                # A rotated service-account token or an expired exec-plugin token.
                refreshed = True
                continue
            retriable = status == 429 or (
                is_retriable_status(status) and (is_read or retry_after is not None)
            )
            if retriable and attempt <= max_retries:
                delay = retry_after if retry_after is not None else backoff.next_delay()
                await asyncio.sleep(min(delay, 60.0))
                continue
            raise self._error(status, payload, retry_after, method, path)

    def _fenced(self, path: str) -> bool:
        """Whether a write to *path* goes through the fence now."""
        return self.fence is not None and not _UNFENCED.get() and not _is_review(path)

    def _run_fence(self) -> None:
        if self.fence is None:
            return
        try:
            self.fence()
        except Exception:
            self.fenced_writes += 1
            raise

    def _warn(self, warning: str, method: str, path: str) -> None:
        """Log a server ``Warning`` header once per distinct text (client-go's deduplication)."""
        if warning in self._warnings_seen:
            return
        if len(self._warnings_seen) < MAX_REMEMBERED_WARNINGS:
            self._warnings_seen.add(warning)
        _log.warning("api server warning", method=method, path=path, warning=warning)

    @staticmethod
    def _error(
        status: int, payload: bytes, retry_after: float | None, method: str, path: str
    ) -> ApiError:
        body: dict[str, Any] | None = None
        try:
            decoded = json.loads(payload) if payload else None
            if isinstance(decoded, dict):
                body = decoded
        except ValueError:
            body = None
        text = payload[:200].decode(errors="replace").strip()
        fallback = f"{method} {path}: HTTP {status}" + (f": {text}" if text else "")
        return from_status(status, body, retry_after=retry_after, fallback_message=fallback)

    async def _discovery_fetch(self, path: str) -> dict[str, Any]:
        result = await self.request("GET", path)
        return result if isinstance(result, dict) else {}

    # -- helpers -----------------------------------------------------------------

    async def rest_mapping(self, api_version: str, kind: str) -> RESTMapping:
        return await self.mapper.rest_mapping(api_version, kind)

    async def _path(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        mapping = await self.mapper.rest_mapping(api_version, kind)
        if mapping.namespaced and name is not None and not namespace:
            raise ValueError(f"{kind} {name!r} is namespaced: a namespace is required")
        return mapping.path(namespace, name, subresource)

    @staticmethod
    def _write_params(
        field_manager: str | None = None, dry_run: bool = False, force: bool | None = None
    ) -> dict[str, str]:
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if dry_run:
            params["dryRun"] = "All"
        if force is not None:
            params["force"] = "true" if force else "false"
        return params

    # -- verbs -------------------------------------------------------------------

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        """GET one object; raises :class:`~nimctl_runtime.client.errors.NotFound`."""
        result: dict[str, Any] = await self.request(
            "GET", await self._path(api_version, kind, namespace, name)
        )
        return result

    async def list_page(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | Mapping[str, str] | Selector | None = None,
        field_selector: str | None = None,
        limit: int | None = 500,
        continue_: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        request_timeout: float | None = None,
    ) -> dict[str, Any]:
        """One page of a LIST (the raw ``*List`` object, ``metadata.continue`` included)."""
        params: dict[str, str] = {}
        selector = selector_text(label_selector)
        if selector:
            params["labelSelector"] = selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if limit:
            params["limit"] = str(limit)
        if continue_:
            params["continue"] = continue_
        elif resource_version is not None:
            params["resourceVersion"] = resource_version
            if resource_version_match:
                params["resourceVersionMatch"] = resource_version_match
        path = await self._path(api_version, kind, namespace)
        result: dict[str, Any] = await self.request(
            "GET", path, params=params, request_timeout=request_timeout
        )
        return result

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | Mapping[str, str] | Selector | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """LIST, following ``continue`` tokens; returns ``{"items": [...], "metadata": {...}}``.

        If a continue token expires mid-way (410), the list restarts unpaginated, as
        client-go's pager does (``FullListIfExpired``).
        """
        items: list[dict[str, Any]] = []
        continue_: str | None = None
        metadata: dict[str, Any] = {}
        page_limit: int | None = limit
        while True:
            try:
                page = await self.list_page(
                    api_version,
                    kind,
                    namespace,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    limit=page_limit,
                    continue_=continue_,
                    resource_version=resource_version,
                )
            except Gone:
                if continue_ is None:
                    raise
                items, continue_, page_limit = [], None, None
                continue
            items.extend(page.get("items") or [])
            metadata = dict(page.get("metadata") or {})
            continue_ = metadata.get("continue") or None
            if not continue_:
                break
        metadata.pop("continue", None)
        metadata.pop("remainingItemCount", None)
        return {"items": items, "metadata": metadata}

    async def create(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """POST *obj* to its collection; ``metadata.generateName`` is honoured by the server."""
        meta = _metadata(obj)
        path = await self._path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
        result: dict[str, Any] = await self.request(
            "POST", path, params=self._write_params(field_manager, dry_run), body=obj
        )
        return result

    async def update(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PUT *obj*; a stale ``metadata.resourceVersion`` is answered 409 Conflict."""
        meta = _metadata(obj)
        path = await self._path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        result: dict[str, Any] = await self.request(
            "PUT", path, params=self._write_params(field_manager, dry_run), body=obj
        )
        return result

    async def update_status(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PUT *obj* to its ``status`` subresource."""
        meta = _metadata(obj)
        path = await self._path(
            obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"], "status"
        )
        result: dict[str, Any] = await self.request(
            "PUT", path, params=self._write_params(field_manager, dry_run), body=obj
        )
        return result

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        field_manager: str | None = None,
        force: bool | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PATCH with a merge, JSON (RFC 6902), strategic-merge or server-side-apply body."""
        if patch_type not in PATCH_CONTENT_TYPES:
            raise ValueError(
                f"unknown patch type {patch_type!r}: use merge, json, strategic or apply"
            )
        if patch_type == "apply" and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        path = await self._path(api_version, kind, namespace, name, subresource)
        result: dict[str, Any] = await self.request(
            "PATCH",
            path,
            params=self._write_params(field_manager, dry_run, force),
            body=body,
            content_type=PATCH_CONTENT_TYPES[patch_type],
        )
        return result

    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Server-side apply *obj* as *field_manager* (``force`` takes over conflicting fields)."""
        meta = _metadata(obj)
        return await self.patch(
            obj["apiVersion"],
            obj["kind"],
            meta["name"],
            obj,
            namespace=meta.get("namespace"),
            patch_type="apply",
            field_manager=field_manager,
            force=force,
            subresource=subresource,
            dry_run=dry_run,
        )

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, str] | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """DELETE; returns the object (when finalizers keep it) or a ``Status``."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            options["dryRun"] = ["All"]
        path = await self._path(api_version, kind, namespace, name)
        result: dict[str, Any] = await self.request("DELETE", path, body=options)
        return result

    async def delete_all_of(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | Mapping[str, str] | Selector | None = None,
        field_selector: str | None = None,
        propagation_policy: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """DELETE a collection (``deletecollection``), filtered by selectors."""
        params: dict[str, str] = {}
        selector = selector_text(label_selector)
        if selector:
            params["labelSelector"] = selector
        if field_selector:
            params["fieldSelector"] = field_selector
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if dry_run:
            options["dryRun"] = ["All"]
        path = await self._path(api_version, kind, namespace)
        result: dict[str, Any] = await self.request("DELETE", path, params=params, body=options)
        return result

    async def pod_logs(
        self,
        name: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
    ) -> str:
        """The log of a pod's container (``GET .../pods/<name>/log``), as text."""
        params: dict[str, str] = {}
        if container:
            params["container"] = container
        if tail_lines is not None:
            params["tailLines"] = str(tail_lines)
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/log"
        payload: bytes = await self.request("GET", path, params=params or None, raw=True)
        return payload.decode("utf-8", errors="replace")

    async def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | Mapping[str, str] | Selector | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
        send_initial_events: bool | None = None,
        resource_version_match: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Stream watch events until the server ends the stream or it goes idle.

        ``send_initial_events=True`` with ``resource_version_match="NotOlderThan"`` is a
        streaming list (KEP-3157 WatchList): the current objects arrive as ADDED events,
        then a BOOKMARK annotated ``k8s.io/initial-events-end: "true"``.

        A clean end (server ``timeoutSeconds``, a dropped connection, no bytes for
        ``config.watch_idle_timeout``) ends iteration: re-watch from the last seen
        resourceVersion. An ``ERROR`` event or a failed request raises the typed
        error (:class:`Gone` for an expired resourceVersion; 429 is
        :class:`TooManyRequests`; an unreachable server is :class:`ApiConnectionError`).
        """
        path = await self._path(api_version, kind, namespace)
        params: dict[str, str] = {"watch": "true"}
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        selector = selector_text(label_selector)
        if selector:
            params["labelSelector"] = selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if timeout_seconds:
            params["timeoutSeconds"] = str(int(timeout_seconds))
        if send_initial_events is not None:
            params["sendInitialEvents"] = "true" if send_initial_events else "false"
        if resource_version_match:
            params["resourceVersionMatch"] = resource_version_match
        async for event in self._watch_stream(path, params):
            yield event

    async def _watch_stream(
        self, path: str, params: Mapping[str, str]
    ) -> AsyncIterator[WatchEvent]:
        session = await self._get_session()
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=10.0, sock_read=self.config.watch_idle_timeout
        )
        attempt = 0
        while True:
            attempt += 1
            if self._limiter is not None:
                await self._limiter.acquire()
            headers = await self._headers()
            started = time.monotonic()
            retry_delay: float | None = None
            try:
                async with session.get(
                    _url(self.config.host, path),
                    params=dict(params),
                    headers=headers,
                    timeout=timeout,
                    server_hostname=self.config.tls_server_name,
                ) as resp:
                    self.connection.succeeded()
                    self._observe("GET", resp.status, time.monotonic() - started)
                    if resp.status != 200:
                        payload = await resp.read()
                        retry_after = _retry_after(resp.headers.get("Retry-After"))
                        # Like client-go's Request.Watch: a 429/5xx that carries
                        # Retry-After is retried here; anything else is the caller's.
                        if (
                            retry_after is not None
                            and is_retriable_status(resp.status)
                            and attempt <= self.max_retries
                        ):
                            retry_delay = retry_after
                        else:
                            raise self._error(resp.status, payload, retry_after, "WATCH", path)
                    else:
                        async for event in self._read_events(resp):
                            yield event
                        return
            except (TimeoutError, aiohttp.ServerTimeoutError) as err:
                self._observe("GET", "<error>", time.monotonic() - started)
                raise ServerTimeout(504, "Timeout", f"WATCH {path}: no response headers") from err
            except aiohttp.ClientConnectorError as err:
                self._observe("GET", "<error>", time.monotonic() - started)
                reason = self.connection.failed(err, request=f"WATCH {path}")
                raise ApiConnectionError(
                    0, "ConnectionFailed", f"WATCH {self.config.host}{path}: {reason}"
                ) from err
            except aiohttp.ClientError as err:
                raise ApiConnectionError(
                    0, "ConnectionFailed", f"WATCH {self.config.host}{path}: {err}"
                ) from err
            if retry_delay is None:
                return
            await asyncio.sleep(min(retry_delay, 60.0))

    @staticmethod
    async def _read_events(resp: aiohttp.ClientResponse) -> AsyncIterator[WatchEvent]:
        """Decode newline-delimited watch events until the stream ends or goes idle."""
        while True:
            try:
                line = await resp.content.readline()
            except (TimeoutError, aiohttp.ClientPayloadError, aiohttp.ClientOSError):
                return
            if not line:
                return
            line = line.strip()
            if not line:
                continue
            raw = codec.loads(line)
            event_type = str(raw.get("type", ""))
            obj = raw.get("object")
            if not isinstance(obj, dict):
                continue
            if event_type == "ERROR":
                raise from_status(int(obj.get("code") or 500), obj)
            yield WatchEvent(event_type, obj)
