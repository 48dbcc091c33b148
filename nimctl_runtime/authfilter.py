"""Authentication and authorization for the metrics endpoint (TokenReview + SubjectAccessReview).

controller-runtime's ``filters.WithAuthenticationAndAuthorization``, which NVIDIA's
operator puts in front of ``/metrics``: the caller's bearer token is checked with
a ``TokenReview``, then the API server is asked with a ``SubjectAccessReview``
whether that user may ``get`` the non-resource URL (``/metrics``). Answers and
texts follow the Go filter:

* no token, or a token the API server does not accept: ``401 Unauthorized``;
* the TokenReview could not be made: ``401 Authentication failed``;
* denied: ``403 Authorization denied for user <name>``;
* the SubjectAccessReview could not be made: ``500 Authorization for user <name> failed``.

Decisions are cached like the Go delegating authenticator/authorizer (token
reviews 1 minute; allowed 5 minutes, denied 30 seconds), so a Prometheus scrape
every 15 s costs the API server nothing after the first one. Caches are bounded.
A Prometheus ServiceAccount needs a ClusterRole with
``nonResourceURLs: ["/metrics"], verbs: ["get"]``.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from nimctl_runtime.logsetup import get_logger

log = get_logger("metrics.auth")

TOKEN_REVIEW_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEW_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
AUTHN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
CACHE_SIZE = 1024

RequestHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ReviewClient(Protocol):
    """What the filter needs from :class:`nimctl_runtime.client.Client`."""

    async def request(self, method: str, path: str, *, body: Any = None) -> Any: ...


@dataclass(frozen=True)
class UserInfo:
    """The authenticated caller, as a TokenReview reports it."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class _TTLCache:
    """A small LRU whose entries expire (each entry carries its own time to live)."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._items: OrderedDict[Any, tuple[float, Any]] = OrderedDict()

    def get(self, key: Any) -> Any:
        item = self._items.get(key)
        if item is None:
            return None
        expires, value = item
        if time.monotonic() >= expires:
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return value

    def put(self, key: Any, value: Any, ttl: float) -> None:
        self._items[key] = (time.monotonic() + ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


def _bearer_token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def _text(status: int, message: str) -> web.Response:
    # Go's http.Error: text/plain, the message and a newline.
    return web.Response(status=status, text=message + "\n", content_type="text/plain")


class AuthenticationAndAuthorization:
    """The filter; :meth:`wrap` puts it in front of a handler."""

    def __init__(self, client: ReviewClient) -> None:
        self.client = client
        self._authn = _TTLCache()
        self._authz = _TTLCache()

    async def authenticate(self, token: str) -> UserInfo | None:
        """The user *token* belongs to, or None if the API server does not accept it."""
        key = hashlib.sha256(token.encode()).digest()
        cached = self._authn.get(key)
        if cached is not None:
            return cached if isinstance(cached, UserInfo) else None
        review = await self.client.request(
            "POST",
            TOKEN_REVIEW_PATH,
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = (review or {}).get("status") or {}
        user: UserInfo | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            extra = info.get("extra") or {}
            user = UserInfo(
                username=str(info.get("username", "")),
                uid=str(info.get("uid", "")),
                groups=tuple(str(g) for g in info.get("groups") or ()),
                extra=tuple(sorted((str(k), tuple(map(str, v))) for k, v in extra.items())),
            )
        self._authn.put(key, user if user is not None else False, AUTHN_TTL)
        return user

    async def authorize(self, user: UserInfo, verb: str, path: str) -> bool:
        """Whether *user* may *verb* the non-resource URL *path* (a SubjectAccessReview)."""
        key = (user, verb, path)
        cached = self._authz.get(key)
        if cached is not None:
            return bool(cached)
        spec: dict[str, Any] = {
            "user": user.username,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = await self.client.request(
            "POST",
            ACCESS_REVIEW_PATH,
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            },
        )
        allowed = bool(((review or {}).get("status") or {}).get("allowed"))
        self._authz.put(key, allowed, ALLOW_TTL if allowed else DENY_TTL)
        return allowed

    def wrap(self, handler: RequestHandler) -> RequestHandler:
        """*handler*, answered only for authenticated and authorized callers."""

        async def filtered(request: web.Request) -> web.StreamResponse:
            token = _bearer_token(request)
            if token is None:
                return _text(401, "Unauthorized")
            try:
                user = await self.authenticate(token)
            except Exception as exc:
                log.error("Authentication failed", error=str(exc), error_type=type(exc).__name__)
                return _text(401, "Authentication failed")
            if user is None:
                return _text(401, "Unauthorized")
            verb = request.method.lower()
            try:
                allowed = await self.authorize(user, verb, request.path)
            except Exception as exc:
                message = f"Authorization for user {user.username} failed"
                log.error(message, error=str(exc), error_type=type(exc).__name__)
                return _text(500, message)
            if not allowed:
                return _text(403, f"Authorization denied for user {user.username}")
            return await handler(request)

        return filtered
