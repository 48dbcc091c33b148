"""structlog configuration, done once per process.

JSON lines on stderr by default (what log collectors expect from an operator);
``--log-format console`` gives coloured key-value lines for people at a terminal.
``file=`` sends the lines to a file instead (``nimctl local`` keeps its terminal
for the demo's tables and writes the operator's log beside its kubeconfig).
Every logger is a structlog BoundLogger; callers bind ``namespace``/``name``.

Libraries log through the standard ``logging`` module (aiohttp, asyncio); their
records are routed into structlog too, so the log stays one format, one line per
record. A record about a request a client got wrong (aiohttp's HTTP parser
errors) keeps only the error type and status: never a traceback and never the
client's bytes, so garbage sent to a port cannot pollute or forge the log.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TextIO

import structlog

LogFormat = Literal["json", "console"]

_NOISY_LIBRARIES = ("celpy", "lark")
_MAX_LIBRARY_TEXT = 500


def _client_error(exc: BaseException) -> bool:
    """True for errors caused by what a client sent (their text quotes its bytes)."""
    try:
        from aiohttp.http_exceptions import HttpProcessingError
    except ImportError:  # pragma: no cover - aiohttp is a dependency
        return False
    return isinstance(exc, HttpProcessingError | UnicodeDecodeError)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_LIBRARY_TEXT else text[:_MAX_LIBRARY_TEXT] + "..."


class StructlogHandler(logging.Handler):
    """Routes stdlib ``logging`` records (libraries') into structlog as one line each."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {"logger": record.name}
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                fields["error_type"] = type(exc).__name__
                if _client_error(exc):
                    code = getattr(exc, "code", None)
                    if isinstance(code, int):
                        fields["status"] = code
                else:
                    fields["error"] = _clip(str(exc))
                    fields["traceback"] = "".join(
                        traceback.format_exception(type(exc), exc, exc.__traceback__)
                    )
            event = _clip(record.getMessage())
            logger = structlog.get_logger(component=record.name)
            logger.log(record.levelno, event, **fields)
        except Exception:  # a log line must never break its caller
            self.handleError(record)


class _StderrLogger:
    """Writes each line to the *current* ``sys.stderr``.

    structlog's PrintLogger keeps the stream it was given; when that stream is
    replaced and closed (test capture, daemonised processes) every later log
    call would raise. Looking it up per line avoids that; a closed stream drops
    the line instead of failing the caller.
    """

    def msg(self, message: str) -> None:
        with contextlib.suppress(ValueError, OSError):
            print(message, file=sys.stderr, flush=True)

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


def _stderr_logger_factory(*_args: object) -> _StderrLogger:
    return _StderrLogger()


class _FileLogger:
    """Appends each line to an open text file, flushed per line (``tail -f`` works)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def msg(self, message: str) -> None:
        with contextlib.suppress(ValueError, OSError):
            self.stream.write(message + "\n")
            self.stream.flush()

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg

    def __call__(self, *_args: object) -> _FileLogger:
        """structlog's logger factory: every logger writes to this one file."""
        return self


_log_file: TextIO | None = None


def configure_logging(
    fmt: LogFormat = "json", level: str = "info", *, file: Path | None = None
) -> None:
    """Configure structlog and the stdlib root logger (idempotent per process).

    With ``file``, log lines go to that file (created, truncated) instead of stderr.
    """
    global _log_file  # noqa: PLW0603 - one log destination per process
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}: use debug, info, warning or error")
    factory: Callable[..., Any] = _stderr_logger_factory
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        stream = file.open("w", encoding="utf-8")
        if _log_file is not None:
            _log_file.close()
        _log_file = stream
        factory = _FileLogger(stream)

    renderer: structlog.typing.Processor
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=file is None and sys.stderr.isatty())
    elif fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        raise ValueError(f"unknown log format {fmt!r}: use json or console")
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        renderer,
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, StructlogHandler) or type(handler) is logging.StreamHandler:
            root.removeHandler(handler)
    root.addHandler(StructlogHandler())
    root.setLevel(numeric)
    # Libraries that log every evaluation step at DEBUG would drown our own
    # debug output; they speak up from WARNING on.
    for noisy in _NOISY_LIBRARIES:
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """Return a logger bound to a component name (``component=<name>``)."""
    # Initial values keep the proxy lazy: a module-level logger made at import
    # time still follows the configuration done later in main().
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(component=name)
    return logger
