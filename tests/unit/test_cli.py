"""The command line loads only the module of the command it runs, and says the same either way."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from scheduler.cli import _MOUNTED, build_parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return {choice.dest: choice.help for choice in action._choices_actions}  # noqa: SLF001


def test_help_lists_the_same_commands_and_summaries_with_or_without_the_modules() -> None:
    full = _subcommands(build_parser())
    light = _subcommands(build_parser("simulate"))
    assert full == light
    assert set(_MOUNTED) <= set(full)


def test_simulate_does_not_import_the_kubernetes_client_or_grpc() -> None:
    code = ("import sys; from scheduler.cli import main; "
            "main(['simulate', 'examples/tfjob-demo.jsonl', '--output', 'table']); "
            "print(sorted(m for m in ('kubernetes_asyncio', 'grpc', 'aiohttp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout
    assert out.strip().splitlines()[-1] == "[]"
