"""Fuzz-suite plumbing: the e2e fixtures for the live fuzz, and per-target input counters.

The live fuzz (`test_fuzz_live.py`) lives here rather than in tests/e2e, so the control-plane
fixtures of tests/e2e/conftest.py are re-exported by name (only fixtures; its collection hooks stay
where they are). Run on their own, the fuzz tests start one control plane; in a whole-suite run the
e2e directory and this one each hold their own session fixture.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.e2e.conftest import (  # noqa: F401 - re-exported fixtures
    clean_cluster,
    control_plane,
    control_plane_binaries,
    kube,
    kubectl,
    namespace,
    tessera,
)
from tests.fuzz import tally

__all__ = ["clean_cluster", "control_plane", "control_plane_binaries", "kube", "kubectl", "namespace", "tessera"]


def _target(item: pytest.Item) -> str:
    return getattr(item, "originalname", None) or item.name


def pytest_runtest_setup(item: pytest.Item) -> None:
    tally.CURRENT[0] = _target(item)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.nodeid.startswith("tests/fuzz/") and "tests/fuzz/" not in report.nodeid:
        return
    name = report.nodeid.split("::")[-1].split("[")[0]
    entry = tally.OUTCOMES.setdefault(name, {"outcome": "passed", "message": ""})
    if report.failed:
        entry["outcome"] = "failed"
        crash: Any = getattr(report.longrepr, "reprcrash", None)
        entry["message"] = (getattr(crash, "message", "") or str(report.longrepr)[-300:]).splitlines()[0][:300]
    elif report.skipped and report.when in ("setup", "call") and entry["outcome"] != "failed":
        entry["outcome"] = "skipped"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("TESSERA_FUZZ_TALLY")
    if not path:
        return
    targets = sorted(set(tally.COUNTS) | set(tally.OUTCOMES))
    data = {t: {"tried": tally.COUNTS.get(t, 0), **tally.OUTCOMES.get(t, {"outcome": "not run", "message": ""})}
            for t in targets}
    with open(path, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1, sort_keys=True)
