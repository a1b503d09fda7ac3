"""TESSERA_LOG_LEVEL: debug adds the per-decision lines; the default (info) drops them."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator

import pytest
import structlog

from scheduler.logs import configure_logging


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.mark.parametrize(("level", "shown"), [(None, False), ("debug", True), ("DEBUG ", True), ("warning", False)])
def test_the_level_decides_whether_decisions_are_logged(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str],
                                                         level: str | None, shown: bool) -> None:
    monkeypatch.setenv("TESSERA_LOG_FORMAT", "json")
    if level is None:
        monkeypatch.delenv("TESSERA_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TESSERA_LOG_LEVEL", level)
    configure_logging()
    structlog.get_logger("test").debug("cycle.scheduled", pod="default/p", node="n1")
    assert ('"cycle.scheduled"' in capsys.readouterr().err) is shown


@pytest.mark.parametrize(("fmt", "tty", "json_lines"), [(None, False, True), (None, True, False), ("json", True, True),
                                                       ("console", False, False)])
def test_record_logs_as_every_tessera_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                              fmt: str | None, tty: bool, json_lines: bool) -> None:
    """`tessera record` logs as `tessera run` and `agent` do (one setup, `configure_logging`): JSON
    lines when stderr is not a terminal (`2> rec.err`, as docs/running.md promises), readable lines on
    one, TESSERA_LOG_FORMAT and TESSERA_LOG_LEVEL deciding over both. It used to write readable
    `12:58:40 [info ] informer.synced` lines into a redirected stderr."""
    from scheduler.kube import record_cli

    if fmt is None:
        monkeypatch.delenv("TESSERA_LOG_FORMAT", raising=False)
    else:
        monkeypatch.setenv("TESSERA_LOG_FORMAT", fmt)
    monkeypatch.setenv("TESSERA_LOG_LEVEL", "warning")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    def recording(*_: object) -> int:  # what `tessera record` logs while it records
        log = structlog.get_logger("test")
        log.info("informer.synced", kind="Node")
        log.warning("informer.error", kind="Pod")
        return 0

    monkeypatch.setattr("scheduler.kube.record_cli.anyio.run", recording)
    assert record_cli.run(argparse.Namespace(kinds=None, duration=None, output="-")) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("{") is json_lines and "informer.error" in line
    if json_lines:  # a log pipeline needs the date and zone, not the terminal's clock time
        assert re.search(r'"timestamp": ?"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d', line), line
