"""Fixtures several unit files share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import structlog


@pytest.fixture
def run_offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`tessera run`'s start-up after the configuration checks, without connecting: what it logs
    before the loop (as JSON lines, for the test to read from stderr)."""
    from scheduler.kube import run_cli

    async def main(args: Any, config: Any, tls: Any) -> int:
        return 0

    monkeypatch.setattr(run_cli, "_main", main)
    monkeypatch.setenv("TESSERA_LOG_FORMAT", "json")
    yield
    structlog.reset_defaults()
