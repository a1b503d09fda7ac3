"""The code standards CI holds the tree to, run as tests so `make test` (and so CI) enforces them:
mypy strict over the product, the test harness, the benchmarks and the tests (pyproject's [tool.mypy]), and
pyflakes' rules through ruff over everything (pyproject's [tool.ruff]): no unused imports or
variables, no undefined names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_mypy_strict_is_clean() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_finds_nothing_dead_or_undefined() -> None:
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr
