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


def _churn_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, times: str = "{0},{1},{0}") -> None:
    (tmp_path / trace.NODES_CSV).write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"n{i:03d},32000,65536,4,T4\n" for i in range(20)), encoding="utf-8")
    rows = [f"p{i:03d},2000,2048,{i % 3},{1000 if i % 3 else 0},,LS,Running,"
            + times.format(50 * i, 50 * i + 900) for i in range(60)]
    (tmp_path / trace.PODS_CSV).write_text(POD_HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setenv(trace.TRACE_DIR_ENV, str(tmp_path))


def test_a_config_file_runs_as_a_policy_as_in_bench_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A capacity planner's trial: bench.churn had no --config, so a candidate configuration could
    not be replayed with lifetimes as bench.trace replays it without."""
    _churn_trace(tmp_path, monkeypatch)
    unscored = tmp_path / "unscored.yaml"
    unscored.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                        "- schedulerName: tessera\n  plugins:\n    score:\n      disabled:\n      - name: '*'\n",
                        encoding="utf-8")
    out = tmp_path / "out"
    assert churn.main(["--node-step", "2", "--seeds", "42", "--jobs", "2", "--policies", "first-fit",
                       "--config", str(unscored), "--out", str(out)]) == 0
    policies = json.loads((out / "results.json").read_text())["policies"]
    assert list(policies) == ["first-fit", "unscored"]
    # the file is first-fit's configuration: the worker ran the file, with the same placements
    same = ("seed", "placed", "never_placed", "gpu_allocation_pct", "pending_p95_s", "makespan_s")
    assert [{key: run[key] for key in same} for run in policies["unscored"]["runs"]] == \
        [{key: run[key] for key in same} for run in policies["first-fit"]["runs"]]
    assert "| unscored |" in capsys.readouterr().out
    # without --policies only the file runs, as in bench.trace; the same option text in both
    assert churn.main(["--node-step", "2", "--seeds", "42", "--jobs", "1", "--config", str(unscored),
                       "--out", str(out)]) == 0
    assert list(json.loads((out / "results.json").read_text())["policies"]) == ["unscored"]
    help_of = {action.dest: action.help for parser in (churn.build_parser(), trace.build_parser())
               for action in parser._actions if action.dest == "config"}
    assert len(help_of) == 1 and "without --policies only the files run" in str(help_of["config"])
    assert churn.main(["--config", str(tmp_path / "missing.yaml"), "--out", str(out)]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_all_zero_times_are_an_error_naming_the_time_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A capacity planner's trial: a CSV whose creation_time and deletion_time are all 0 got "no GPU
    work spread over time", which does not say which columns to look at."""
    _churn_trace(tmp_path, monkeypatch, times="0,0,0")
    assert churn.main(["--node-step", "2", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert (f"bench.churn: {tmp_path / trace.PODS_CSV}: the pods' creation_time and deletion_time columns give no "
            "time to spread the arrivals over: no pod is created after the earliest deletion_time (0)") in err, err
