"""`tessera record` when things go wrong, against a fake HTTP layer (review findings, each a
failing test first): an output that cannot be written, a refused list, a recording stopped before
its initial lists were complete, and arguments that would crash later."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from scheduler.kube import record_cli
from scheduler.kube.http import KubeHttp
from scheduler.kube.informers import SCHEDULER_KINDS
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi


class _Failing(io.BytesIO):
    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, data: object) -> int:
        raise self.error

    def writelines(self, lines: object) -> None:
        raise self.error

    def fileno(self) -> int:
        return self._fileno

    _fileno = -1


def _api() -> FakeApi:
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(b.pod("p"))
    return api


def _args(output: str, duration: float | None = 5.0) -> argparse.Namespace:
    return argparse.Namespace(output=output, duration=duration, kinds=None, kubeconfig=None)


async def test_an_output_that_cannot_be_written_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (review): a full disk ended in an ExceptionGroup traceback."""
    out = _Failing(OSError(28, "No space left on device"))
    status = await record_cli._record_into(KubeHttp(_api()), SCHEDULER_KINDS, out, _args("/dev/full"))  # type: ignore[arg-type]
    assert status == 1
    assert capsys.readouterr().err.splitlines()[-1] == "tessera record: cannot write /dev/full: No space left on device"


async def test_a_reader_that_went_away_ends_the_recording_quietly(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = _Failing(BrokenPipeError(32, "Broken pipe"))
    with open(tmp_path / "stands-in-for-stdout", "wb") as target:
        out._fileno = target.fileno()
        status = await record_cli._record_into(KubeHttp(_api()), SCHEDULER_KINDS, out, _args("-"))  # type: ignore[arg-type]
    assert status == 0
    assert "cannot write" not in capsys.readouterr().err


async def test_a_refused_list_stops_the_recording_with_the_reason(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (review): a 403 on pods was retried for ever (or until --duration, exit 0) and
    the file had no pods, though docs/simulate.md says record stops with one line."""
    api = _api()
    for _ in range(50):
        api.fail_next("GET", "/api/v1/pods", status=403)
    with open(tmp_path / "o.jsonl", "wb") as out:
        status = await record_cli._record_into(KubeHttp(api), SCHEDULER_KINDS, out,  # type: ignore[arg-type]
                                             _args(str(tmp_path / "o.jsonl"), 30))
    assert status == 1
    assert "denied access to Pod (HTTP 403)" in capsys.readouterr().err.splitlines()[-1]


async def test_a_recording_stopped_before_its_initial_lists_says_it_is_incomplete(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api = _api()
    api.fail_next("GET", "/api/v1/pods", stall=True)  # the pod list never answers
    with open(tmp_path / "o.jsonl", "wb") as out:
        status = await record_cli._record_into(KubeHttp(api), SCHEDULER_KINDS, out,  # type: ignore[arg-type]
                                             _args(str(tmp_path / "o.jsonl"), 0.5))
    assert status == 1
    assert "incomplete snapshot" in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize("duration", ["nan", "0", "-1"])
def test_a_duration_that_is_not_positive_is_refused_before_connecting(
        duration: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(output=str(tmp_path / "o.jsonl"), duration=float(duration), kinds=None,
                              kubeconfig=str(tmp_path / "none"))
    assert record_cli.run(args) == 2
    assert capsys.readouterr().err.strip() == "tessera record: --duration must be positive"


@pytest.mark.parametrize("kinds", [[","], [""], [" , "]])
def test_kinds_that_name_nothing_are_refused(kinds: list[str]) -> None:
    with pytest.raises(ValueError, match="names no kind"):
        record_cli._parse_kinds(kinds)


def test_simulate_of_an_empty_input_says_so_and_fails(tmp_path: Path) -> None:
    """New-user trial: `tessera record ... 2>/dev/null | tessera simulate -` with a record that
    failed at once fed simulate nothing, and it printed an empty table and exited 0."""
    import subprocess
    import sys

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    done = subprocess.run([sys.executable, "-m", "scheduler", "simulate", str(empty), "--output", "table"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"tessera: {empty} contains no watch events (it is empty); expected one JSON watch event per line, "
        'as `tessera record` writes: {"type": "ADDED", "object": {...}}']
    assert done.stdout == ""
