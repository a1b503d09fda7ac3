"""TESSERA_LOG_LEVEL: debug adds the per-decision lines; the default (info) drops them."""

from __future__ import annotations

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
