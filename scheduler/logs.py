"""Structured logging for the long-running processes, `tessera run` and `tessera agent`.

One place, so the scheduler and the node agent log alike (and the agent does not import the
scheduler's run command to get it): JSON lines in a cluster, where a log pipeline reads them, and
readable lines on a terminal. `TESSERA_LOG_FORMAT=json|console` overrides the guess;
`TESSERA_LOG_LEVEL=debug|info|warning|error` sets the level (default info; debug adds a line per
scheduling decision, as kube-scheduler's `-v=2`, free when off: filtered loggers drop them).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog


LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging() -> None:
    """JSON logs in a cluster (or TESSERA_LOG_FORMAT=json), readable ones on a terminal."""
    fmt = os.environ.get("TESSERA_LOG_FORMAT") or ("console" if sys.stderr.isatty() else "json")
    renderer: Any = structlog.dev.ConsoleRenderer() if fmt == "console" else structlog.processors.JSONRenderer()
    level = LEVELS.get(os.environ.get("TESSERA_LOG_LEVEL", "info").strip().lower(), logging.INFO)
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
