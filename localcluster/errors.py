"""The one error type of localcluster: a Kubernetes ``Status`` failure.

Handlers, the storage engine, schema/CEL validation and admission plugins raise
``StatusError``; the HTTP layer renders it as a ``v1 Status`` body with the same
HTTP code, reason and message wording a kube-apiserver would send, so clients
(kubectl, kubernetes-asyncio, our own client) map it to their usual errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nimctl_runtime import field


class StatusError(Exception):
    """A failed request: HTTP *code*, StatusReason *reason*, human *message*, *details*."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details: dict[str, Any] | None = dict(details) if details is not None else None
        self.retry_after = retry_after

    def to_status(self) -> dict[str, Any]:
        """The ``Status`` object for the response body."""
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        details = dict(self.details) if self.details else {}
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        if details:
            status["details"] = details
        return status

    def __repr__(self) -> str:
        return f"StatusError({self.code}, {self.reason!r}, {self.message!r})"


def _qualified(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource


def _details(group: str, resource: str, name: str | None) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": resource}
    if group:
        d["group"] = group
    if name:
        d["name"] = name
    return d


def not_found(group: str, resource: str, name: str) -> StatusError:
    return StatusError(
        404,
        "NotFound",
        f'{_qualified(group, resource)} "{name}" not found',
        _details(group, resource, name),
    )


def already_exists(group: str, resource: str, name: str) -> StatusError:
    return StatusError(
        409,
        "AlreadyExists",
        f'{_qualified(group, resource)} "{name}" already exists',
        _details(group, resource, name),
    )


def conflict(group: str, resource: str, name: str, why: str) -> StatusError:
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(group, resource)} "{name}": {why}',
        _details(group, resource, name),
    )


def invalid(group: str, kind: str, name: str, causes: Sequence[Mapping[str, Any]]) -> StatusError:
    """422 Invalid; each cause is ``{"reason", "message", "field"}`` (``FieldError.cause()``)."""
    details: dict[str, Any] = {"name": name, "kind": kind, "causes": [dict(c) for c in causes]}
    if group:
        details["group"] = group
    qualified = f"{kind}.{group}" if group else kind
    return StatusError(422, "Invalid", field.invalid_message(qualified, name, causes), details)


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def forbidden(message: str, group: str = "", resource: str = "", name: str = "") -> StatusError:
    return StatusError(
        403, "Forbidden", message, _details(group, resource, name) if resource else None
    )


def unauthorized() -> StatusError:
    return StatusError(401, "Unauthorized", "Unauthorized")


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> StatusError:
    return StatusError(405, "MethodNotAllowed", message)


def not_acceptable(message: str) -> StatusError:
    return StatusError(406, "NotAcceptable", message)


def gone(message: str = "too old resource version") -> StatusError:
    return StatusError(410, "Expired", message)


def request_entity_too_large(
    message: str = "Request entity too large: limit is 3145728",
) -> StatusError:
    return StatusError(413, "RequestEntityTooLarge", message)


def unsupported_media_type(
    accepted: Sequence[str] = ("application/json", "application/yaml"),
) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def too_many_requests(message: str, retry_after: int = 1) -> StatusError:
    return StatusError(429, "TooManyRequests", message, retry_after=retry_after)


def internal(message: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {message}")


def timeout(message: str) -> StatusError:
    return StatusError(504, "Timeout", message)
