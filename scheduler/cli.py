"""The `tessera` command line: `simulate`, `run`, `record`, `dev-cluster`.

User-facing output is plain text (or JSON lines where a tool reads it); configuration and input
errors are one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from scheduler import __version__
from scheduler.api.config import ConfigError, load_config


def _simulate(args: argparse.Namespace) -> int:
    from scheduler.sim.report import run_simulation

    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"tessera: invalid configuration: {err}", file=sys.stderr)
        return 2
    try:
        return run_simulation(args.events, config, explain=args.explain, output=args.output, seed=args.seed)
    except OSError as err:
        print(f"tessera: cannot read {args.events}: {err.strerror}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tessera", description="Kubernetes scheduler for GPU batch work.")
    parser.add_argument("--version", action="version", version=f"tessera {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("simulate", help="replay recorded watch events through the scheduler core")
    sim.add_argument("events", help="JSONL file of watch events ('-' for stdin)")
    sim.add_argument("--config", help="scheduler configuration (default: the built-in GPU profile, fragmentation-aware packing)")
    sim.add_argument("--explain", action="store_true", help="add per-node scores and filter reasons")
    sim.add_argument("-o", "--output", choices=("json", "table"), default="json",
                     help="json: one line per attempt (default); table: where each pod went")
    sim.add_argument("--seed", type=int, default=0, help="tie-break seed (default 0)")
    sim.set_defaults(func=_simulate)

    for module in ("scheduler.kube.run_cli", "scheduler.kube.record_cli", "scheduler.kube.devcluster_cli",
                   "scheduler.kube.agent_cli"):
        try:
            mounted = __import__(module, fromlist=["add_parser"])
        except ImportError:
            continue
        mounted.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
