"""`tessera simulate`: replay recorded watch events through the scheduler core."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from scheduler.api.config import load_config_or_report
from scheduler.closed_pipe import reader_gone
from scheduler.core.plugins.registry import gpu_scoring_notices
from scheduler.sim.report import run_simulation


def add_parser(subparsers: Any) -> None:
    """Register ``simulate`` on an ``argparse`` subparsers object."""
    sim: argparse.ArgumentParser = subparsers.add_parser(
        "simulate", help="replay recorded watch events through the scheduler core",
        description="Replay a JSONL file of watch events (as `tessera record` writes, or the shipped examples/) "
                    "through the same scheduler core the live scheduler runs, and show every decision: "
                    "one JSON line per attempt, a table of where each pod went, or the GPU map page.")
    sim.add_argument("events", help="JSONL file of watch events ('-' for stdin)")
    sim.add_argument("--config", help="scheduler configuration (default: the built-in GPU profile, fragmentation-aware packing)")
    sim.add_argument("--explain", action="store_true", help="add per-node scores and filter reasons (-o json)")
    sim.add_argument("-o", "--output", choices=("json", "table", "html"), default="json",
                     help="json: one line per attempt (default); table: where each pod went; "
                          "html: the GPU map page of the end state")
    sim.add_argument("--summary", action="store_true",
                     help='-o json: end with one more line, the end state\'s GPU figures: {"summary": {"gpus", '
                          '"used", "shared", "free", "free_on_partial", "largest_free", ...}} (the table and '
                          'the page always show them)')
    add_seed_option(sim)
    sim.set_defaults(func=_simulate)


def add_seed_option(parser: argparse.ArgumentParser) -> None:
    """`--seed`, the replay's tie-break among equally scored nodes: `tessera simulate`'s and
    `kubectl tessera what-if`'s (one option, one meaning: their summaries name it on a tie)."""
    parser.add_argument("--seed", type=int, default=0,
                        help="tie-break seed: which of equally scored nodes the replay picks (default 0); "
                             "the summary says how many placing decisions were such picks")


def _simulate(args: argparse.Namespace) -> int:
    if args.explain and args.output != "json":
        print(f"tessera: --explain adds per-node scores to the JSON lines of -o json; -o {args.output} does not "
              "show them", file=sys.stderr)
        return 2
    if args.summary and args.output != "json":
        print(f"tessera: --summary adds the GPU figures to the JSON lines of -o json; -o {args.output} shows them "
              "already", file=sys.stderr)
        return 2

    config = load_config_or_report(args.config)
    if config is None:
        return 2
    for clash in config.offline_clash_warnings():
        print(f"tessera: warning: {clash}", file=sys.stderr)
    for notice in gpu_scoring_notices(config).values():
        print(f"tessera: warning: {config.source}: {notice}", file=sys.stderr)
    try:
        return run_simulation(args.events, config, explain=args.explain, output=args.output, seed=args.seed,
                              summary=args.summary)
    except BrokenPipeError:  # the reader of stdout went away (`| head`): stop quietly
        return reader_gone()
    except OSError as err:
        print(f"tessera: cannot read {args.events}: {err.strerror}", file=sys.stderr)
        return 2
