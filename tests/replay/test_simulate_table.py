"""`tessera simulate --output table` lists every pod on a node, also those the input had bound
already: a new user replayed a recording of a settled cluster and saw `v100-node-000  2/8  0/64  -`
(GPUs in use, no pods) and "0 pods placed"."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from scheduler.sim import builders as b
from scheduler.sim.report import run_simulation
from tests.helpers import config


def test_bound_pods_are_listed_beside_the_ones_the_replay_placed(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    events = [b.node("n1", gpus=4),
              b.pod("running", limits={"nvidia.com/gpu": 2}, node_name="n1", phase="Running"),
              b.pod("new", limits={"nvidia.com/gpu": 1}),
              b.pod("too-big", limits={"nvidia.com/gpu": 4})]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"type": "ADDED", "object": obj}) + b"\n" for obj in events))
    assert run_simulation(str(path), config(), explain=False, output="table", seed=0) == 0
    table = capsys.readouterr().out
    node_row = next(line for line in table.splitlines() if line.startswith("n1"))
    assert node_row.split()[1] == "3/4" and node_row.endswith("new, running")
    assert "1 pod placed, 1 unschedulable, 1 bound in the input" in table


def test_counts_follow_the_end_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pod the replay placed and the input then deleted is not counted; a pod the replay could not
    place and the input then bound elsewhere counts as bound in the input (review)."""
    gone = b.pod("gone", limits={"nvidia.com/gpu": 1})
    late = b.pod("late", limits={"nvidia.com/gpu": 8})
    events = [("ADDED", b.node("n1", gpus=4)), ("ADDED", gone), ("DELETED", gone), ("ADDED", late),
              ("MODIFIED", {**late, "spec": {**late["spec"], "nodeName": "n2"}}), ("ADDED", b.node("n2", gpus=8))]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"type": t, "object": o}) + b"\n" for t, o in events))
    assert run_simulation(str(path), config(), explain=False, output="table", seed=0) == 0
    table = capsys.readouterr().out
    assert "0 pods placed, 0 unschedulable, 1 bound in the input" in table
    assert next(line for line in table.splitlines() if line.startswith("n2")).endswith("late")
