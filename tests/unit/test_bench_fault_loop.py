"""bench.fault_loop reads failures and the invariant violations their reports name."""

from __future__ import annotations

from pathlib import Path

from bench.fault_loop import LoopRun, parse_junit, table

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.e2e.test_faults" name="test_baseline_without_faults" time="12.0"/>
<testcase classname="tests.e2e.test_faults" name="test_watch_cuts" time="20.0">
<failure message="AssertionError: watch_cuts (seed 3): 40/41 pods bound in 20s, faults {}, 2 violation(s)
  node-allocatable: r-v100-000: nvidia.com/gpu: 5 used &gt; 4 allocatable
  device-capacity: r-v100-001.gpu-1: exclusively assigned to 2 pods (a-v100-1, c-v100-0)
  harness: kill9@4s">trace</failure></testcase>
<testcase classname="tests.e2e.test_faults" name="test_leader_kill" time="9.0">
<error message="fixture broke">trace</error></testcase>
</testsuite></testsuites>
"""


def test_failures_and_violations_are_read_from_junit(tmp_path: Path) -> None:
    path = tmp_path / "run.xml"
    path.write_text(JUNIT)
    tests, failed, violations = parse_junit(path)
    assert tests == 3
    assert failed == ["test_watch_cuts", "test_leader_kill"]
    assert violations == [
        "device-capacity: r-v100-001.gpu-1: exclusively assigned to 2 pods (a-v100-1, c-v100-0)",
        "node-allocatable: r-v100-000: nvidia.com/gpu: 5 used > 4 allocatable",
    ]


def test_the_table_totals_runs_and_violations() -> None:
    runs = [LoopRun(1, 180.0, 15), LoopRun(2, 190.0, 15, ["test_watch_cuts"], ["node-allocatable: n: 5 > 4"])]
    text = table(runs)
    assert "| 2 | 190 | 15 | test_watch_cuts | node-allocatable: n: 5 > 4 |" in text
    assert text.endswith("2 runs: 1 passed, 1 with failures, 1 violations {'node-allocatable': 1}")
