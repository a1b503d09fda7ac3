"""Property tests: a pytest-timeout above Hypothesis' own limit on shrinking.

The suite's timeout (pyproject: 300 s) equals Hypothesis' limit on shrinking a failure (it stops
after 300 s and then reports the smallest case found, with its reproduction blob). A failure a
random run found late, or one slow to shrink, was killed first as a bare "Timeout (>300.0s)":
no falsifying example, no blob, nothing to replay (seen with --hypothesis-seed=18 at 1,000
examples of test_corrupted_input_never_crashes_nor_overallocates: generation ~1 min, shrinking
stopped at 5 min, then reported). So each Hypothesis test here gets that limit on top of its
generation time, which grows with TESSERA_HYPOTHESIS_EXAMPLES.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SHRINK_LIMIT = 300  # Hypothesis' MAX_SHRINKING_SECONDS
_SCALE = int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0)
TIMEOUT = 2 * SHRINK_LIMIT + 300 + _SCALE // 2  # generation (~0.1 s an example on a loaded machine), explain


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE not in Path(str(item.path)).resolve().parents or item.get_closest_marker("timeout") is not None:
            continue
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.timeout(TIMEOUT))
