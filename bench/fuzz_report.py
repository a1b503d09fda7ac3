"""Run the fuzz suite (tests/fuzz) with a large example count and report inputs tried and failures.

    .venv/bin/python bench/fuzz_report.py                      # 2000 examples per property
    .venv/bin/python bench/fuzz_report.py --examples 500 --jobs 2 --live
    TESSERA_FUZZ_EXAMPLES=5000 .venv/bin/python bench/fuzz_report.py --known exclude

Every fuzz test is one target. The table lists, per target, how many generated inputs its body ran
(explicit examples and shrinking runs included; counted by tests/fuzz/tally.py) and whether it
failed, with the first line of the failure. With `--known exclude` the broad properties do not
generate the triggers of the bugs this suite reported (`KNOWN_BUGS` in tests/fuzz/strategies.py), so
that while one is open a long run measures everything else instead of re-finding it. The dedicated
`test_F*` / `test_C*` regression tests always run, so the table also says whether those still reproduce.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = ("test_fuzz_objects.py", "test_fuzz_streams.py", "test_fuzz_config.py")
LIVE = "test_fuzz_live.py"


def _run(files: list[str], examples: int, known: str, tally: Path, extra: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TESSERA_FUZZ_EXAMPLES": str(examples), "TESSERA_FUZZ_KNOWN": known,
           "TESSERA_FUZZ_TALLY": str(tally), "NO_PROXY": "127.0.0.1,localhost"}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=0", "--tb=no", "-rN",
            *[f"tests/fuzz/{f}" for f in files], *extra]
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=int(os.environ.get("TESSERA_FUZZ_EXAMPLES", "0") or 2000),
                        help="examples per property (default: $TESSERA_FUZZ_EXAMPLES or 2000)")
    parser.add_argument("--known", choices=("include", "exclude"), default="include",
                        help="exclude: do not generate the triggers of reported bugs in the broad properties")
    parser.add_argument("--jobs", type=int, default=1, help="run the test files in this many processes")
    parser.add_argument("--live", action="store_true", help="also run the live fuzz on the local control plane")
    parser.add_argument("-k", dest="keyword", default="", help="pytest -k expression")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    files = list(FILES) + ([LIVE] if args.live else [])
    extra = ["-k", args.keyword] if args.keyword else []
    if not args.live:
        extra += ["-m", "not e2e"]
    groups = [files[i::args.jobs] for i in range(max(1, args.jobs))]
    started = time.monotonic()
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        running = []
        for i, group in enumerate(g for g in groups if g):
            tally = Path(tmp) / f"tally-{i}.json"
            running.append((group, tally, _run(group, args.examples, args.known, tally, extra)))
        print(f"fuzzing {', '.join(files)} with {args.examples} examples per property "
              f"(known bugs: {args.known}) in {len(running)} process(es) ...", file=sys.stderr)
        for group, tally, proc in running:
            proc.wait()
            if tally.exists():
                results.update(json.loads(tally.read_text()))
            else:
                print(f"no tally from {group} (pytest exit {proc.returncode})", file=sys.stderr)
    elapsed = time.monotonic() - started

    rows = [("target", "inputs", "result", "first failure line")]
    for target, entry in sorted(results.items(), key=lambda item: (item[0].startswith("test_F") or item[0].startswith("test_C"), item[0])):
        outcome = str(entry.get("outcome", ""))
        rows.append((target.removeprefix("test_"), str(entry.get("tried", 0)), outcome,
                     str(entry.get("message", ""))[:110] if outcome == "failed" else ""))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(row)).rstrip())
    broad = {t: e for t, e in results.items() if not (t.startswith("test_F") or t.startswith("test_C"))}
    total = sum(int(e.get("tried", 0)) for e in results.values())  # type: ignore[call-overload]
    failed = [t for t, e in broad.items() if e.get("outcome") == "failed"]
    reproducing = [t for t, e in results.items() if t not in broad and e.get("outcome") == "failed"]
    print()
    print(f"{total} generated inputs in {elapsed:.0f} s; {len(broad)} fuzz targets, {len(failed)} failing"
          f"{': ' + ', '.join(failed) if failed else ''}; reported bugs still reproducing: "
          f"{len(reproducing)} of {len(results) - len(broad)}")
    if args.json:
        args.json.write_text(json.dumps({"examples": args.examples, "known": args.known, "seconds": round(elapsed),
                                         "targets": results}, indent=1, sort_keys=True))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
