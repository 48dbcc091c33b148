"""Typed API errors, one class per Kubernetes ``Status.reason``.

The API server answers a failed request with a ``Status`` object (``code``,
``reason``, ``message``, ``details``). Callers branch on the kind of failure
(``except NotFound``), the way client-go callers use ``apierrors.IsNotFound``;
:func:`from_status` turns a status body (or a bare HTTP code) into the right class.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


class NotLeaderError(Exception):
    """A write refused before it was sent: this process does not hold a valid Lease.

    Raised by the client's fence (see ``Client.fence``) when leader election is
    on and the Lease is not held, or its validity on this process's monotonic
    clock has run out. Nothing reached the API server; the work is requeued by
    whoever holds it again.
    """


class ApiError(Exception):
    """An error answered by the API server (or synthesised by the client)."""

    default_reason = ""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.retry_after = retry_after

    @property
    def causes(self) -> list[dict[str, Any]]:
        """``details.causes`` (field-level problems), empty when the server gave none."""
        causes = self.details.get("causes") or []
        return [dict(c) for c in causes if isinstance(c, Mapping)]

    def to_status(self) -> dict[str, Any]:
        """The error as a ``meta/v1 Status`` object."""
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.status,
        }
        if self.details:
            status["details"] = self.details
        return status


class BadRequest(ApiError):
    default_reason = "BadRequest"


class Unauthorized(ApiError):
    default_reason = "Unauthorized"


class Forbidden(ApiError):
    default_reason = "Forbidden"


class NotFound(ApiError):
    default_reason = "NotFound"


class MethodNotAllowed(ApiError):
    default_reason = "MethodNotAllowed"


class AlreadyExists(ApiError):
    default_reason = "AlreadyExists"


class Conflict(ApiError):
    default_reason = "Conflict"


class Gone(ApiError):
    """410: the requested resourceVersion is older than the server keeps (``Expired``/``Gone``)."""

    default_reason = "Gone"


class UnsupportedMediaType(ApiError):
    default_reason = "UnsupportedMediaType"


class Invalid(ApiError):
    """422: the object failed validation; :attr:`causes` names the fields."""

    default_reason = "Invalid"


class TooManyRequests(ApiError):
    """429: throttled; :attr:`retry_after` is the server's Retry-After in seconds (or None)."""

    default_reason = "TooManyRequests"


class InternalError(ApiError):
    default_reason = "InternalError"


class ServiceUnavailable(ApiError):
    default_reason = "ServiceUnavailable"


class ServerTimeout(ApiError):
    """504, or a 500 with reason ``ServerTimeout``/``Timeout``; also a client-side timeout."""

    default_reason = "Timeout"


_BY_REASON: Mapping[str, type[ApiError]] = MappingProxyType(
    {
        "BadRequest": BadRequest,
        "Unauthorized": Unauthorized,
        "Forbidden": Forbidden,
        "NotFound": NotFound,
        "MethodNotAllowed": MethodNotAllowed,
        "AlreadyExists": AlreadyExists,
        "Conflict": Conflict,
        "Gone": Gone,
        "Expired": Gone,
        "Invalid": Invalid,
        "UnsupportedMediaType": UnsupportedMediaType,
        "TooManyRequests": TooManyRequests,
        "InternalError": InternalError,
        "ServiceUnavailable": ServiceUnavailable,
        "ServerTimeout": ServerTimeout,
        "Timeout": ServerTimeout,
    }
)

_BY_CODE: Mapping[int, type[ApiError]] = MappingProxyType(
    {
        400: BadRequest,
        401: Unauthorized,
        403: Forbidden,
        404: NotFound,
        405: MethodNotAllowed,
        409: Conflict,
        410: Gone,
        415: UnsupportedMediaType,
        422: Invalid,
        429: TooManyRequests,
        500: InternalError,
        503: ServiceUnavailable,
        504: ServerTimeout,
    }
)


def from_status(
    code: int,
    body: Mapping[str, Any] | None = None,
    *,
    retry_after: float | None = None,
    fallback_message: str = "",
) -> ApiError:
    """Build the typed error for an HTTP *code* and its (possibly missing) Status *body*."""
    reason = ""
    message = fallback_message
    details: Mapping[str, Any] | None = None
    if body is not None and body.get("kind") == "Status":
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or fallback_message)
        raw_details = body.get("details")
        details = raw_details if isinstance(raw_details, Mapping) else None
        code = int(body.get("code") or code)
        if retry_after is None and details is not None:
            seconds = details.get("retryAfterSeconds")
            if isinstance(seconds, int | float) and seconds > 0:
                retry_after = float(seconds)
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code, ApiError)
    if not reason:
        reason = cls.default_reason or "Unknown"
    if not message:
        message = f"the server responded with HTTP {code}"
    return cls(code, reason, message, details, retry_after=retry_after)


def is_retriable_status(code: int) -> bool:
    """429 and the 5xx family that a read or an idempotent retry may ride out."""
    return code == 429 or code in (500, 502, 503, 504)


class ApiConnectionError(ApiError):
    """The server could not be reached (connection refused/reset, DNS, TLS); ``status`` is 0."""

    default_reason = "ConnectionFailed"
