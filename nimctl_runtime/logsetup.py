"""structlog configuration, done once per process.

JSON lines on stderr by default (what log collectors expect from an operator);
``--log-format console`` gives coloured key-value lines for people at a terminal.
Every logger is a structlog BoundLogger; callers bind ``namespace``/``name``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Literal

import structlog

LogFormat = Literal["json", "console"]

_NOISY_LIBRARIES = ("celpy", "lark")


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


def configure_logging(fmt: LogFormat = "json", level: str = "info") -> None:
    """Configure structlog and the stdlib root logger (idempotent per process)."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}: use debug, info, warning or error")
    renderer: structlog.typing.Processor
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
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
        logger_factory=_stderr_logger_factory,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(
        level=numeric, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s"
    )
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
