"""A recording replayed contradicted itself (a docs-as-contract trial): the replay placed pod g3
on one node of a three-way tie, the live scheduler's recorded Binding then put it on another, and
`tessera simulate` printed the replay's node as g3's last JSON line, the recorded one in the end
table ("1 bound in the input"), and no warning. The recorded Binding is what happened: the
replay must say that its own decision was overruled, and where."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.api.config import load_config
from scheduler.sim import builders as b
from scheduler.sim import report
from tests.helpers import BINPACK


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"\n".join(orjson.dumps(event) for event in events) + b"\n")
    return path


def _replay(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[dict[str, Any]], str]:
    assert report.run_simulation(str(path), load_config(BINPACK), explain=False, output="json", seed=0) == 0
    captured = capsys.readouterr()
    return [orjson.loads(line) for line in captured.out.splitlines()], captured.err


def _nodes() -> list[dict[str, Any]]:
    return [b.event("ADDED", b.node(name, gpus=4)) for name in ("n1", "n2", "n3")]


def test_a_recorded_binding_elsewhere_than_the_replays_choice_is_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # first learn where the replay puts g3 on its own (a three-way tie: its seeded pick)
    alone = _write(tmp_path / "alone.jsonl", _nodes() + [b.event("ADDED", b.pod("g3", limits={"nvidia.com/gpu": 1}))])
    [line], _ = _replay(alone, capsys)
    ours = line["node"]
    theirs = next(node for node in ("n1", "n2", "n3") if node != ours)
    recorded = _write(tmp_path / "recorded.jsonl", _nodes() + [
        b.event("ADDED", b.pod("g3", limits={"nvidia.com/gpu": 1})),
        b.event("MODIFIED", b.pod("g3", node_name=theirs, limits={"nvidia.com/gpu": 1}))])
    lines, err = _replay(recorded, capsys)
    assert [line["node"] for line in lines] == [ours]  # the replay's own decision, as it made it
    assert (f"tessera: warning: pod default/g3: the recording binds it to {theirs}, where this replay had "
            f"placed it on {ours} (the live scheduler decided otherwise: the table shows the recorded "
            "Binding, the JSON lines this replay's own decisions)") in err.splitlines()
    *_, summary, ties, _ = err.splitlines()  # the last is the GPU figures
    assert ties.startswith("Ties: 1 of 1 placing decision picked among equally scored nodes")  # g3's own pick
    assert summary.endswith("0 pods placed, 0 unschedulable, 1 bound in the input (1 of them against this "
                            "replay's own decision: see the warnings)")


def test_a_recorded_binding_where_the_replay_placed_it_too_is_no_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    alone = _write(tmp_path / "alone.jsonl", _nodes() + [b.event("ADDED", b.pod("g3", limits={"nvidia.com/gpu": 1}))])
    [line], _ = _replay(alone, capsys)
    same = _write(tmp_path / "same.jsonl", _nodes() + [
        b.event("ADDED", b.pod("g3", limits={"nvidia.com/gpu": 1})),
        b.event("MODIFIED", b.pod("g3", node_name=line["node"], limits={"nvidia.com/gpu": 1}))])
    _, err = _replay(same, capsys)
    assert "warning" not in err
