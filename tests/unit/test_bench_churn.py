"""bench.churn: pods arrive, wait in the core's queue, run their lifetime and leave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import churn, trace
from bench.churn_run import ChurnPod, replay
from bench.trace_policies import config_for, select
from bench.trace_workload import TraceError, TraceNode, TracePod

POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
              "scheduled_time\n")
CONFIG = config_for(select("tessera-default")[0])


def one_gpu(name: str, gpus: int = 1) -> TracePod:
    return TracePod(name, 1000, 1024, gpus, 1000, ())


def test_a_pod_that_does_not_fit_waits_until_a_pod_leaves_then_runs() -> None:
    nodes = [TraceNode("n1", 32000, 65536, 1, "T4")]
    pods = [ChurnPod(one_gpu("first"), 0.0, 100.0), ChurnPod(one_gpu("second"), 10.0, 50.0)]
    result = replay("tessera-default", CONFIG, 42, nodes, pods)
    assert (result.placed, result.never_placed) == (2, 0)
    assert result.pending_seconds == [0.0, 90.0]  # second waits from t=10 until first leaves at t=100
    assert result.makespan == 150.0
    # arrival window [0, 10]: the single GPU is busy all of it
    assert result.gpu_allocation_pct == pytest.approx(100.0)


def test_a_pod_that_can_never_fit_is_counted_and_the_replay_ends() -> None:
    nodes = [TraceNode("n1", 32000, 65536, 1, "T4")]
    pods = [ChurnPod(one_gpu("too-big", gpus=2), 0.0, 10.0), ChurnPod(one_gpu("fits"), 5.0, 10.0)]
    result = replay("tessera-default", CONFIG, 42, nodes, pods)
    assert (result.placed, result.never_placed) == (1, 1)
    assert result.gpu_allocation_pct == pytest.approx(0.0)  # nothing ran inside [0, 5]


def test_arrivals_are_compressed_to_the_offered_load(tmp_path: Path) -> None:
    nodes_csv = tmp_path / "nodes.csv"
    nodes_csv.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"n{i},32000,65536,4,T4\n" for i in range(2)), encoding="utf-8")
    pods_csv = tmp_path / "pods.csv"
    # one pod alive since before the window (deleted first, at 1000), then one 1-GPU pod every 100 s for 400 s
    rows = ["old,1000,1024,1,1000,,LS,Running,0,1000,0"]
    rows += [f"p{i},1000,1024,1,1000,,LS,Running,{1000 + 100 * i},{1400 + 100 * i},{1000 + 100 * i}" for i in range(20)]
    pods_csv.write_text(POD_HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    nodes = [TraceNode(f"n{i}", 32000, 65536, 4, "T4") for i in range(2)]
    pods, factor = churn.churn_pods(pods_csv, nodes, load=0.5)
    by_name = {p.pod.name: p for p in pods}
    assert by_name["old"].arrival == 0.0 and by_name["old"].lifetime == 0.0  # already running, leaves at 0
    assert by_name["p0"].arrival == 0.0 and by_name["p1"].arrival == pytest.approx(100 / factor)
    assert all(p.lifetime == 400.0 for n, p in by_name.items() if n != "old")
    window = max(p.arrival for p in pods)
    demand = sum(min(p.lifetime, window - p.arrival) for p in pods)  # GPU-seconds inside the window
    assert demand / (8 * window) == pytest.approx(0.5, rel=1e-6)
    with pytest.raises(TraceError, match="cannot offer load 50.0"):
        churn.churn_pods(pods_csv, nodes, load=50.0)  # 20 GPUs of pods cannot keep 8 GPUs 50x busy


def test_quick_run_writes_table_json_and_png(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / trace.NODES_CSV).write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"n{i:03d},32000,65536,4,T4\n" for i in range(80)), encoding="utf-8")
    rows = [f"p{i:03d},2000,2048,{i % 3},{1000 if i % 3 else 0},,LS,Running,{50 * i},{50 * i + 900},{50 * i}"
            for i in range(200)]
    (tmp_path / trace.PODS_CSV).write_text(POD_HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setenv(trace.TRACE_DIR_ENV, str(tmp_path))
    out = tmp_path / "out"
    assert churn.main(["--quick", "--jobs", "1", "--load", "0.9", "--policies", "tessera-default,most-allocated",
                       "--out", str(out)]) == 0
    document = json.loads((out / "results.json").read_text())
    assert set(document["policies"]) == {"tessera-default", "most-allocated"}
    run = document["policies"]["tessera-default"]["runs"][0]
    assert run["placed"] + run["never_placed"] == 50 and run["seed"] == 42
    assert (out / "churn.png").read_bytes().startswith(b"\x89PNG")
    assert "| tessera-default |" in capsys.readouterr().out
    assert churn.main(["--node-step", "0", "--out", str(out)]) == 2
