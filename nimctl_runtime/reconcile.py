"""The reconcile contract: ``Request`` in, ``Result`` (or an exception) out.

As in controller-runtime's ``pkg/reconcile``, a reconciler is told only *which*
object to look at, never what happened to it: it reads the current state from
the cache and drives the world towards it (level-triggered). What the
controller does with the outcome (runtime.md §1.6):

* ``Result()``: done, forget the key's backoff;
* ``Result(requeue_after=d)``: forget the backoff, look again in ``d`` seconds;
* ``Result(requeue=True)``: retry with the rate limiter's growing backoff;
* an exception: retry with backoff (``Result`` fields are ignored);
* ``TerminalError``: counted as an error, never retried until a new event comes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Reconciler",
    "ReconcilerFunc",
    "ReportedError",
    "Request",
    "Result",
    "TerminalError",
    "error_chain",
    "is_terminal",
    "request_for",
]


@dataclass(frozen=True, slots=True)
class Request:
    """The key of the object to reconcile (controller-runtime ``reconcile.Request``).

    ``namespace`` is ``None`` for cluster-scoped objects; an empty string is
    normalised to ``None`` so both spellings make the same queue key.
    """

    namespace: str | None
    name: str

    def __post_init__(self) -> None:
        if self.namespace == "":
            object.__setattr__(self, "namespace", None)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def request_for(obj: dict[str, Any]) -> Request:
    """The ``Request`` naming a Kubernetes object given as a dict."""
    meta = obj.get("metadata") or {}
    return Request(meta.get("namespace") or None, str(meta.get("name", "")))


@dataclass(frozen=True, slots=True)
class Result:
    """What to do with the key after a successful reconcile.

    ``requeue_after`` is in seconds; when set (> 0) it wins over ``requeue``.
    ``requeue=True`` is kept for parity with controller-runtime, which calls it
    deprecated: prefer ``requeue_after``.
    """

    requeue: bool = False
    requeue_after: float | None = None

    def __post_init__(self) -> None:
        if self.requeue_after is not None and self.requeue_after < 0:
            raise ValueError(f"requeue_after must be >= 0 seconds, got {self.requeue_after}")

    def is_zero(self) -> bool:
        return not self.requeue and not self.requeue_after


class TerminalError(Exception):
    """A reconcile error that retrying cannot fix (bad spec, missing prerequisite).

    The controller counts it in ``controller_runtime_reconcile_errors_total`` and
    ``controller_runtime_terminal_reconcile_errors_total`` but does not requeue
    the key: only a new event for the object brings it back.
    """


class ReportedError(Exception):
    """A failure the reconciler already reported where users look (status, an Event).

    The controller retries it with backoff like any error, but logs it as one
    line without a traceback: it is expected, not a bug. API errors are
    treated the same way; a traceback is kept for everything else.
    """


def error_chain(exc: BaseException) -> str:
    """``str(exc)`` followed by its causes, ``": "``-joined (the error without a traceback)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current) or type(current).__name__
        core = str(getattr(current, "message", "") or text)
        if not parts or core not in parts[-1]:  # a cause already quoted is not repeated
            parts.append(text)
        current = current.__cause__
    return ": ".join(parts)


def is_terminal(exc: BaseException) -> bool:
    """True when ``exc`` is, or was raised from, a ``TerminalError``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, TerminalError):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


@runtime_checkable
class Reconciler(Protocol):
    """Anything with ``async def reconcile(request) -> Result``."""

    async def reconcile(self, request: Request) -> Result: ...


class ReconcilerFunc:
    """Adapts a plain coroutine function to the ``Reconciler`` protocol."""

    def __init__(self, fn: Callable[[Request], Awaitable[Result]]) -> None:
        self._fn = fn

    async def reconcile(self, request: Request) -> Result:
        return await self._fn(request)
