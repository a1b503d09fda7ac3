"""`tessera run --help` named /healthz, /readyz and /metrics only (a capacity planner's trial): the
probe port serves /livez, /configz and, with --gpu-map, the GPU map too."""

from __future__ import annotations

import re

import pytest

from scheduler.cli import build_parser


def test_run_help_lists_every_endpoint_it_serves(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser("run").parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--bind-address", "--port"):
        said = re.search(rf"{flag} [A-Z_]+ ([a-z].*?\(default[^)]*\))", text)
        assert said is not None, text
        for path in ("/healthz", "/livez", "/readyz", "/metrics", "/configz", "/gpu-map", "/gpu-map.json"):
            assert path in said.group(1), (flag, path, said.group(1))
