"""`tessera simulate --output table` lists every pod on a node, also those the input had bound
already: a new user replayed a recording of a settled cluster and saw `v100-node-000  2/8  0/64  -`
(GPUs in use, no pods) and "0 pods placed"."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from scheduler.cli import main
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


def _sliced_cluster(tmp_path: Path) -> Path:
    """Node a: 4 GPUs (devices), 2 whole to one pod, one GPU sliced by another; node c: 2 idle GPUs."""
    events = [b.node("a", gpus=4, labels={"pool": "a"}), *(b.device("a", i, memory="32Gi") for i in range(4)),
              b.node("c", gpus=2), *(b.device("c", i, memory="32Gi") for i in range(2)),
              b.resource_class("slice", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
              b.pod("whole", limits={"nvidia.com/gpu": 2}, spec_extra={"nodeSelector": {"pool": "a"}}),
              b.pod("sliced", limits={"class.tessera.dev/slice": 8}, spec_extra={"nodeSelector": {"pool": "a"}})]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"type": "ADDED", "object": obj}) + b"\n" for obj in events))
    return path


SLICED_LINE = ("GPUs: 6 total, 3 in use (1 shared), 3 free, 0 unavailable; of the 3 free, 1 (33 %) sits on nodes "
               "with GPUs in use, 2 on nodes with none in use; most free on one node: 2, c")


def test_the_table_says_the_cluster_gpu_figures_and_which_gpus_are_shared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capacity planner's trial found no cluster-wide GPU figure outside `-o html`, and a GPU
    column that showed a GPU with one slice on it as used like a whole one. The table now ends
    with the GPU map's summary line and says how many of a node's used GPUs are shared."""
    assert run_simulation(str(_sliced_cluster(tmp_path)), config(), explain=False, output="table", seed=0) == 0
    table = capsys.readouterr().out
    rows = {line.split()[0]: line for line in table.splitlines() if line.startswith(("a ", "c "))}
    assert rows["a"].split()[1:4] == ["3/4", "(1", "shared)"], rows
    assert rows["c"].split()[1] == "0/2", rows
    assert SLICED_LINE in table.splitlines(), table


def test_json_output_ends_with_the_cluster_gpu_summary_when_asked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-o json --summary`: the last stdout line is the summary (the GPU map's `summary`, as
    `kubectl tessera nodes -o json` gives it): total, in use, shared, free, free on partly used
    nodes (stranded for a job that wants a whole node), the most free on one node. Unasked, every
    line stays an attempt (the trial's own script read `d["pod"]` of each)."""
    events = str(_sliced_cluster(tmp_path))
    assert run_simulation(events, config(), explain=False, output="json", seed=0) == 0
    assert all("pod" in orjson.loads(line) for line in capsys.readouterr().out.splitlines())
    assert main(["simulate", events, "--summary"]) == 0
    last = orjson.loads(capsys.readouterr().out.splitlines()[-1])
    assert last == {"summary": {"gpus": 6, "used": 3, "shared": 1, "free": 3, "unavailable": 0,
                                "free_on_partial": 1, "largest_free": 2, "largest_free_node": "c",
                                "conflicts": 0, "held_unavailable": 0, "fragmentation": 0.3333,
                                "line": SLICED_LINE}}


def test_summary_is_refused_beside_the_outputs_that_show_it_already(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(_sliced_cluster(tmp_path)), "--summary", "-o", "table"]) == 2
    assert "--summary adds the GPU figures to the JSON lines of -o json; -o table shows them already" in \
        capsys.readouterr().err
