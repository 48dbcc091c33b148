"""A failure is logged once per change of its error; repeats go to debug, with a count.

Expected failures (API errors, errors already reported in status) are one
line with the error chain and no traceback; a bug keeps its traceback.
"""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from nimctl_runtime.client.errors import ApiError
from nimctl_runtime.reconcile import ReportedError, Request, Result, error_chain

from .fakes import FakeCache, obj
from .test_controller import AV, KIND, Recorder, Running, make


def _errors(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e.get("log_level") == "error" and e["event"].startswith("reconciler")]


async def test_the_tenth_retry_of_the_same_failure_logs_nothing_at_error_level() -> None:
    async def fail(req: Request, attempt: int) -> Result:
        raise ApiError(500, "InternalError", "etcd is unhappy")

    cache, rec = FakeCache(), Recorder(fail)
    ctrl = make(rec, cache)
    with capture_logs() as logs:
        async with Running(ctrl):
            cache.informer(AV, KIND).add(obj("flaky"))
            await rec.wait_calls(12)
            error, repeats = ctrl._failures[Request("default", "flaky")]
    errors = _errors(logs)
    assert len(errors) == 1, errors
    assert errors[0]["error"] == "500 InternalError: etcd is unhappy"
    assert "exc_info" not in errors[0]
    assert error == errors[0]["error"] and repeats >= 11, "repeats are counted (logged at debug)"
    # At debug level (when enabled) each repeat is one line with its count.
    repeated = [e for e in logs if e["event"] == "reconciler error (repeated)"]
    assert all(e["log_level"] == "debug" for e in repeated)


async def test_a_changed_error_is_logged_again_and_a_bug_keeps_its_traceback() -> None:
    async def fail(req: Request, attempt: int) -> Result:
        if attempt == 1:
            raise ReportedError("Service llm: range is full")
        if attempt == 2:
            raise KeyError("spec")
        return Result()

    cache, rec = FakeCache(), Recorder(fail)
    ctrl = make(rec, cache)
    with capture_logs() as logs:
        async with Running(ctrl):
            cache.informer(AV, KIND).add(obj("x"))
            await rec.wait_calls(3)
    errors = _errors(logs)
    assert [e["error"] for e in errors] == ["Service llm: range is full", "'spec'"]
    assert "exc_info" not in errors[0] and "exc_info" in errors[1]


def test_error_chain_joins_causes_once() -> None:
    try:
        try:
            raise ApiError(403, "Forbidden", "services is forbidden")
        except ApiError as inner:
            raise ReportedError("Service llm: services is forbidden") from inner
    except ReportedError as outer:
        assert error_chain(outer) == "Service llm: services is forbidden"
    try:
        try:
            raise OSError("connection reset")
        except OSError as inner:
            raise RuntimeError("watch failed") from inner
    except RuntimeError as outer:
        assert error_chain(outer) == "watch failed: connection reset"
