"""`python -m bench.fault_loop --runs 20`: the fault scenarios of CI, many times in a row.

Why: a fault scenario that passes once proves little — the interleavings that break the promise
(never a GPU to two pods) are rare. CI runs `tests/e2e/test_faults.py` once; this runs the whole
file N times, each time in a fresh pytest process (its own control plane), and counts per run
which tests failed and which invariant violations their reports named.

Output: one progress line per run on stderr, a Markdown table on stdout, and
`bench/out/fault_loop/results.json` (per run: seconds, passed, failed tests, violations); the
junit XML of each run under `bench/out/fault_loop/junit/`. Exit status 1 if any run had a
violation or a failure.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tessera_testing.invariants import INVARIANTS

REPO = Path(__file__).resolve().parents[1]
FAULT_FILE = "tests/e2e/test_faults.py"
# RunReport.summary() prints one "  <invariant>: <subject>: <detail>" line per violation; in junit
# the lines arrive prefixed ("E   ") in the traceback, or joined by spaces in the message attribute
_NEXT = "|".join(INVARIANTS + ("harness", "log"))
_VIOLATION = re.compile(rf"\b({'|'.join(INVARIANTS)}): (.+?)(?=\s+(?:{_NEXT}): |\n|$)")


@dataclass
class LoopRun:
    index: int
    seconds: float
    tests: int
    failed: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.fault_loop", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20, help="how many times to run the fault file (default 20)")
    p.add_argument("--file", default=FAULT_FILE, help=f"the pytest file to repeat (default {FAULT_FILE})")
    p.add_argument("-k", default="", help="pytest -k expression to run only some scenarios")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "fault_loop", help="output directory")
    return p


def parse_junit(path: Path) -> tuple[int, list[str], list[str]]:
    """(tests, failed test names, violation lines) of one pytest run."""
    root = ET.parse(path).getroot()
    tests = 0
    failed: list[str] = []
    violations: list[str] = []
    for case in root.iter("testcase"):
        tests += 1
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None:
            continue
        failed.append(str(case.get("name")))
        text = (problem.get("message") or "") + "\n" + (problem.text or "")
        violations += sorted({f"{m.group(1)}: {m.group(2).strip()}" for m in _VIOLATION.finditer(text)})
    return tests, failed, violations


def run_once(index: int, args: argparse.Namespace) -> LoopRun:
    junit = args.out / "junit" / f"run-{index:02d}.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", args.file, f"--junitxml={junit}"]
    if args.k:
        command += ["-k", args.k]
    start = time.monotonic()
    subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    seconds = time.monotonic() - start
    if not junit.exists():
        return LoopRun(index, seconds, 0, ["<pytest did not run>"])
    tests, failed, violations = parse_junit(junit)
    return LoopRun(index, seconds, tests, failed, violations)


def table(runs: Sequence[LoopRun]) -> str:
    lines = ["| run | seconds | tests | failed | violations |", "|---|---|---|---|---|"]
    for run in runs:
        lines.append(f"| {run.index} | {run.seconds:.0f} | {run.tests} | {', '.join(run.failed) or '-'} "
                     f"| {'; '.join(run.violations) or '-'} |")
    kinds = Counter(v.split(":")[0] for run in runs for v in run.violations)
    failures = sum(1 for run in runs if run.failed)
    lines.append("")
    lines.append(f"{len(runs)} runs: {len(runs) - failures} passed, {failures} with failures, "
                 f"{sum(len(r.violations) for r in runs)} violations {dict(kinds) or ''}".rstrip())
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.runs < 1:
        print("bench.fault_loop: --runs must be at least 1", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    runs: list[LoopRun] = []
    began = time.monotonic()
    for index in range(1, args.runs + 1):
        run = run_once(index, args)
        runs.append(run)
        elapsed = time.monotonic() - began
        print(f"[{index}/{args.runs}] {run.tests} tests in {run.seconds:.0f} s, failed: {run.failed or '-'}, "
              f"violations: {len(run.violations)}; elapsed {elapsed:.0f} s, "
              f"~{elapsed / index * (args.runs - index):.0f} s left", file=sys.stderr, flush=True)
    (args.out / "results.json").write_text(json.dumps({"file": args.file, "k": args.k,
                                                       "runs": [asdict(r) for r in runs]}, indent=2) + "\n")
    print(table(runs))
    return 1 if any(r.failed or r.violations for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
