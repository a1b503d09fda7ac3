"""The `tessera` command line: `simulate`, `run`, `record`, `dev-cluster`, `agent`.

User-facing output is plain text (or JSON lines where a tool reads it); configuration and input
errors are one line on stderr and a non-zero exit, never a traceback. Each command lives in its own
module, and only the module of the command being run is imported.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from scheduler.build_info import add_version_option
from scheduler.paused_import import import_with_collector_paused


class CommandUnavailable(Exception):
    """A subcommand's module does not import (a missing dependency, a broken installation).

    Raised rather than leaving the command out: argparse would then answer "invalid choice" for a
    command `--help` still lists, which hides the real cause."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `command`, only that subcommand's module is loaded."""
    parser = argparse.ArgumentParser(prog="tessera", description="Kubernetes scheduler for GPU batch work.")
    add_version_option(parser, "tessera")
    sub = parser.add_subparsers(dest="command", required=True)

    for name, (module, summary) in _MOUNTED.items():
        if command is not None and name != command:
            # listed in --help, but its module (the Kubernetes client, gRPC, ...) is not imported:
            # that is most of the start-up time of the other commands
            sub.add_parser(name, help=summary)
            continue
        try:
            mounted = import_with_collector_paused(module)
        except Exception as err:  # whatever an import raises, the command cannot run: say so, once
            raise CommandUnavailable(f"cannot load the {name} command ({module}): {type(err).__name__}: {err}") from err
        mounted.add_parser(sub)
    return parser


# subcommands that live in their own modules: name -> (module, one-line help for `tessera --help`)
_MOUNTED = {
    "simulate": ("scheduler.sim.cli", "replay recorded watch events through the scheduler core"),
    "run": ("scheduler.kube.run_cli", "run the scheduler against a Kubernetes cluster"),
    "record": ("scheduler.kube.record_cli", "capture a live cluster's watch events as JSONL (the simulate input format)"),
    "dev-cluster": ("scheduler.kube.controlplane.cli", "run a local etcd + kube-apiserver with fake GPU nodes"),
    "agent": ("scheduler.agent.cli",
              "run the node agent: publish this node's GPUs and serve the kubelet device-plugin API"),
}


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((word for word in words if not word.startswith("-")), None)
    try:
        parser = build_parser(command if command in _MOUNTED else None)
    except CommandUnavailable as err:
        print(f"tessera: {err}", file=sys.stderr)
        return 1
    args = parser.parse_args(words)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
