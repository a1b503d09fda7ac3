"""Structured logging for the long-running processes: `tessera run`, `tessera agent`, `tessera record`.

One place, so the scheduler and the node agent log alike (and the agent does not import the
scheduler's run command to get it): JSON lines in a cluster, where a log pipeline reads them, and
readable lines on a terminal. `TESSERA_LOG_FORMAT=json|console` overrides the guess;
`TESSERA_LOG_LEVEL=debug|info|warning|error` sets the level (default info; debug adds a line per
scheduling decision, as kube-scheduler's `-v=2`, free when off: filtered loggers drop them).
Any other value is refused (`LogSettingsError`), as kube-scheduler refuses a log format or
verbosity it does not know, rather than logging in a way nobody asked for.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog


LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
FORMATS = ("json", "console")


class LogSettingsError(ValueError):
    """TESSERA_LOG_LEVEL or TESSERA_LOG_FORMAT names no level or format: one line for the user,
    before the command starts (a typo would otherwise log at info, or in JSON, without a word)."""


def configure_logging() -> None:
    """JSON logs in a cluster (or TESSERA_LOG_FORMAT=json), readable ones on a terminal: every
    Tessera process (`run`, `agent`, `record`) logs through this one setup, so `2> file` always
    keeps JSON lines. An unknown level or format raises `LogSettingsError` (empty counts as unset)."""
    tty = sys.stderr.isatty()
    fmt = _setting("TESSERA_LOG_FORMAT", FORMATS, "json or console") or ("console" if tty else "json")
    renderer: Any = (structlog.dev.ConsoleRenderer(colors=tty) if fmt == "console"
                     else structlog.processors.JSONRenderer())
    level = LEVELS[_setting("TESSERA_LOG_LEVEL", tuple(LEVELS), "debug, info, warning or error") or "info"]
    structlog.configure(
        processors=[structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso"), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def describe_error(err: BaseException) -> str:
    """An error as a log line reads it: `Type: message` (a repr spells out every field of an
    aiohttp connection key; the message already says what failed). A task group's error group is
    described by the errors it holds (`A: a; B: b`): its own text, "unhandled errors in a
    TaskGroup (1 sub-exception)", hides the cause."""
    if isinstance(err, BaseExceptionGroup):
        return "; ".join(describe_error(inner) for inner in err.exceptions)
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _setting(name: str, choices: tuple[str, ...], wording: str) -> str:
    """The environment variable `name`, trimmed and lower-cased ("" when unset or empty); one of
    `choices` or `LogSettingsError`."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value and value not in choices:
        raise LogSettingsError(f"{name}={raw!r} is not one of {wording}")
    return value
