"""TESSERA_LOG_LEVEL: debug adds the per-decision lines; the default (info) drops them."""

from __future__ import annotations

import re
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


@pytest.mark.parametrize(("fmt", "json_lines"), [(None, False), ("json", True), ("console", False)])
def test_record_logs_readable_lines_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str],
                                                          fmt: str | None, json_lines: bool) -> None:
    """`tessera record` is used from a terminal, so its default is readable lines even when stderr
    is redirected; TESSERA_LOG_FORMAT=json (what the README promises for every process) used to be
    ignored, as was TESSERA_LOG_LEVEL."""
    from scheduler.kube import record_cli

    if fmt is None:
        monkeypatch.delenv("TESSERA_LOG_FORMAT", raising=False)
    else:
        monkeypatch.setenv("TESSERA_LOG_FORMAT", fmt)
    monkeypatch.setenv("TESSERA_LOG_LEVEL", "warning")
    record_cli._configure_logging()
    log = structlog.get_logger("test")
    log.info("informer.synced", kind="Node")
    log.warning("informer.error", kind="Pod")
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("{") is json_lines and "informer.error" in line
    assert "\x1b[" not in line  # no colour codes in a redirected stream
    if json_lines:  # a log pipeline needs the date and zone, not the terminal's clock time
        assert re.search(r'"timestamp": ?"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d', line), line
