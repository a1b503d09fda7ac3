"""Counters of generated inputs per fuzz target (read by `bench/fuzz_report.py`).

Each fuzz test is one target; its body calls `tried()` once per generated input it runs
(explicit `@example`s and Hypothesis' shrinking runs included). `conftest.py` sets the current
target around every test and, when `TESSERA_FUZZ_TALLY` names a file, writes the counts and each
test's outcome there as JSON at the end of the session.
"""

from __future__ import annotations

from collections import Counter

COUNTS: Counter[str] = Counter()
OUTCOMES: dict[str, dict[str, str]] = {}
CURRENT = [""]


def tried(n: int = 1) -> None:
    COUNTS[CURRENT[0]] += n
