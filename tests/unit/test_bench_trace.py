"""bench.trace: the FGD-style workload, its Kubernetes objects, the metrics, and a --quick smoke run."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from bench import trace
from bench.trace_metrics import Series, fgd_curve, median_curve, run_metrics, summarize
from bench.trace_policies import POLICIES, Policy, config_for, duplicates, select
from bench.trace_run import run_once
from scheduler.core.plugins.fit.args import ScoringStrategy
from scheduler.core.plugins.registry import args_of
from bench.trace_workload import (
    GPU_RESOURCE,
    TraceError,
    TraceNode,
    TracePod,
    arrival_sequence,
    cluster_objects,
    device_objects,
    pod_object,
    pod_requests,
    read_nodes,
    read_pods,
    resource_classes,
)
from tests.unit.trace_rows import NODE_HEADER, POD_HEADER, pod, write

def run_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: str, pods: str, variants: dict[str, str],
              *args: str) -> tuple[Path, dict[str, Any]]:
    """A trace dir of `nodes` and `pods` rows plus `variants/openb_pod_list_<name>.csv` files (full
    text), `bench.trace` run on it with `args`; the output dir and its results.json."""
    write(tmp_path / trace.NODES_CSV, NODE_HEADER + nodes)
    write(tmp_path / trace.PODS_CSV, POD_HEADER + pods)
    (tmp_path / "variants").mkdir()
    for name, text in variants.items():
        write(tmp_path / "variants" / f"openb_pod_list_{name}.csv", text)
    monkeypatch.setenv(trace.TRACE_DIR_ENV, str(tmp_path))
    out = tmp_path / "out"
    assert trace.main([*args, "--jobs", "1", "--out", str(out)]) == 0
    return out, json.loads((out / "results.json").read_text())


# --- CSV -------------------------------------------------------------------------------------


def test_csv_rows_become_name_ordered_nodes_and_pods(tmp_path: Path) -> None:
    nodes = read_nodes(write(tmp_path / "n.csv", NODE_HEADER + "node-b,8000,32768,2,T4\nnode-a,64000,262144,8,G2\n"))
    assert nodes == [TraceNode("node-a", 64000, 262144, 8, "G2"), TraceNode("node-b", 8000, 32768, 2, "T4")]
    pods = read_pods(write(tmp_path / "p.csv", POD_HEADER
                           + "pod-2,6000,12288,1,460,,LS,Running,1,2,1\n"
                           + "pod-1,12000,16384,2,1000,V100M32|V100M16,LS,Running,0,2,0\n"
                           + "pod-3,4000,8192,0,0,,BE,Running,3,4,3\n"))
    assert [p.name for p in pods] == ["pod-1", "pod-2", "pod-3"]
    assert pods[0].gpu_spec == ("V100M16", "V100M32") and pods[0].total_gpu_milli == 2000
    assert pods[1].shared and pods[1].total_gpu_milli == 460
    assert not pods[2].num_gpu and pods[2].total_gpu_milli == 0


def test_bad_rows_name_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", POD_HEADER + "pod-1,1000,1024,2,500,,LS,Running,0,1,0\n")
    with pytest.raises(TraceError, match=r"p\.csv:2: gpu_milli=500 < 1000 is only valid with num_gpu == 1"):
        read_pods(path)
    with pytest.raises(TraceError, match="missing column"):
        read_nodes(write(tmp_path / "n.csv", "sn,cpu_milli\nx,1\n"))


def test_a_duplicate_pod_name_is_refused_with_both_lines(tmp_path: Path) -> None:
    """A capacity planner's trial: a second `p-0000` row crashed the run with the core's
    LedgerMismatch traceback (the two pods are one object to the core, two to the ledger)."""
    path = write(tmp_path / "p.csv", POD_HEADER + "p-0000,1000,1024,1,1000,,LS,Running,0,1,0\n"
                 + "p-0001,1000,1024,1,1000,,LS,Running,0,1,0\n" + "p-0000,1000,1024,1,1000,,LS,Running,0,1,0\n")
    with pytest.raises(TraceError, match=r"p\.csv:4: column name: p-0000 is already on line 2; pod names must be "
                                         r"unique"):
        read_pods(path)


def test_a_duplicate_node_name_is_refused_with_both_lines(tmp_path: Path) -> None:
    """A second row of one `sn` was taken as a second node by the GPU total and as the same Node
    by the core, so every percentage was off without a word (the planner's trial, read_pods'
    twin)."""
    path = write(tmp_path / "n.csv", NODE_HEADER + "node-a,8000,32768,2,T4\nnode-b,8000,32768,2,T4\nnode-a,8000,32768,2,T4\n")
    with pytest.raises(TraceError, match=r"n\.csv:4: column sn: node-a is already on line 2; node names must be unique"):
        read_nodes(path)


@pytest.mark.parametrize(("row", "error"), [
    ("bad-short,4000,16384", r"p\.csv:3: 3 fields, the header has 11"),
    ("bad-long,4000,16384,1,1000,,LS,Running,0,0,0,extra", r"p\.csv:3: 12 fields, the header has 11"),
    (",4000,16384,1,1000,,LS,Running,0,0,0", r"p\.csv:3: column name: empty pod name"),
    ("bad-empty,4000,,1,1000,,LS,Running,0,0,0", r"p\.csv:3: column memory_mib: empty \(an integer is required\)"),
    ("bad-frac,4000.5,16384,1,1000,,LS,Running,0,0,0", r"p\.csv:3: column cpu_milli: '4000\.5' is not an integer"),
    ("bad-milli,4000,16384,1,1500,,LS,Running,0,0,0",
     r"p\.csv:3: column gpu_milli: 1500 is above 1000 \(thousandths of one GPU: 1000 is a whole GPU\)"),
    ("bad-cpu-milli,4000,16384,0,x,,LS,Running,0,0,0", r"p\.csv:3: column gpu_milli: 'x' is not an integer"),
])
def test_malformed_pod_rows_are_refused_at_their_line(tmp_path: Path, row: str, error: str) -> None:
    """A capacity planner's trial: each of these rows was accepted without a word — a short row
    became a CPU-only pod, empty fields read as 0, an empty name passed, 4000.5 was cut to 4000,
    1500 milli-GPU was clamped to 1000 (the trace's README: gpu_milli is per GPU, at most 1000)."""
    path = write(tmp_path / "p.csv", POD_HEADER + "p-0000,1000,1024,1,1000,,LS,Running,0,1,0\n" + row + "\n")
    with pytest.raises(TraceError, match=error):
        read_pods(path)


def test_pods_no_node_can_hold_are_warned_about_once_per_file_with_their_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capacity planner's trial: a 9-GPU pod on 8-GPU nodes and a 999-core pod ran silently and
    simply never fit. One warning per file, with the count and the first rows' file:line."""
    nodes = write(tmp_path / "nodes.csv", NODE_HEADER + "".join(f"n-{i},64000,262144,8,A100\n" for i in range(4)))
    rows = "".join(f"job-{i:02d},4000,8192,1,1000,,LS,Running,0,1,0\n" for i in range(10))
    pods = write(tmp_path / "pods.csv", POD_HEADER + rows + "bad-nine,4000,16384,9,1000,,LS,Running,0,0,0\n"
                 + "bad-huge,999000,16384,1,1000,,LS,Running,0,0,0\n"
                 + "bad-model,4000,16384,2,1000,A100,LS,Running,0,0,0\n"
                 + "bad-mem,4000,999999,0,0,,LS,Running,0,0,0\n" + "bad-typo,4000,16384,1,1000,A1OO,LS,Running,0,0,0\n")
    assert trace.main(["--nodes", str(nodes), "--pods", str(pods), "--seeds", "42", "--policies", "first-fit",
                       "--jobs", "1", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert (f"bench.trace: warning: {pods}: 3 pods no node can ever hold (no node has enough GPUs of their "
            f"models, CPU and memory at once): {pods}:13 bad-huge (1 GPU, 999000m CPU, 16384Mi), "
            f"{pods}:15 bad-mem (0 GPUs, 4000m CPU, 999999Mi), {pods}:12 bad-nine (9 GPUs, 4000m CPU, 16384Mi); "
            "the nodes hold at most 8 GPUs, 64000m CPU, 262144Mi\n") in err, err
    assert err.count("no node can ever hold") == 1 and "A1OO (1 pod)" in err  # the typo has its own warning
    rows += "".join(f"big-{i},999000,16384,0,0,,LS,Running,0,0,0\n" for i in range(5))
    pods = write(tmp_path / "pods.csv", POD_HEADER + rows)
    assert trace.main(["--nodes", str(nodes), "--pods", str(pods), "--seeds", "42", "--policies", "first-fit",
                       "--jobs", "1", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert (f"warning: {pods}: 5 pods no node can ever hold (no node has enough GPUs of their models, CPU and "
            f"memory at once): {pods}:12 big-0 (0 GPUs, 999000m CPU, 16384Mi), {pods}:13 big-1 (0 GPUs, 999000m CPU, "
            f"16384Mi), {pods}:14 big-2 (0 GPUs, 999000m CPU, 16384Mi) and 2 more;") in err, err


# --- arrival order: shuffle and inflation ----------------------------------------------------


def test_shuffle_is_a_seeded_permutation_of_name_order() -> None:
    pods = [pod(f"p{i}", num_gpu=0) for i in range(20)]  # CPU-only: no inflation to a GPU target
    first = arrival_sequence(list(reversed(pods)), total_gpus=4, seed=42, ratio=0)
    assert sorted(p.name for p in first) == sorted(p.name for p in pods)
    assert first == arrival_sequence(pods, total_gpus=4, seed=42, ratio=0)  # input order is irrelevant
    assert first != arrival_sequence(pods, total_gpus=4, seed=43, ratio=0)


def test_inflation_appends_clones_until_the_next_would_pass_the_target() -> None:
    pods = [pod("a"), pod("b", gpu_milli=500), pod("c", gpu_milli=250), pod("d", num_gpu=0)]
    seq = arrival_sequence(pods, total_gpus=10, seed=7, ratio=1.3)
    originals, clones = seq[:4], seq[4:]
    assert sorted(p.name for p in originals) == ["a", "b", "c", "d"]
    assert clones, "1,750 of 13,000 target milli: clones must be appended"
    by_name = {p.name: p for p in pods}
    for i, clone in enumerate(clones):
        source, _, index = clone.name.rpartition("-tuned-")
        assert int(index) == i
        assert clone == by_name[source].clone(clone.name)
    total = sum(p.total_gpu_milli for p in seq)
    assert 13_000 - 1000 < total <= 13_000  # stops only when the next clone (≤ 1000 milli) would overshoot


def test_inflation_checks_per_gpu_milli_like_fgd_so_multi_gpu_clones_overshoot() -> None:
    # One 8-GPU pod on 8 GPUs, target 1.3 × 8,000: FGD compares total + 1000 (per-GPU milli), so a
    # second 8-GPU clone is appended (16,000 milli) and only the third is refused.
    seq = arrival_sequence([pod("big", num_gpu=8)], total_gpus=8, seed=1, ratio=1.3)
    assert [p.name for p in seq] == ["big", "big-tuned-0"]


def test_a_workload_above_the_target_is_trimmed() -> None:
    pods = [pod(f"p{i}") for i in range(10)]
    seq = arrival_sequence(pods, total_gpus=4, seed=3, ratio=1.3)
    assert sum(p.total_gpu_milli for p in seq) <= 5200 and len(seq) == 5


# --- Kubernetes objects ----------------------------------------------------------------------


def test_classes_from_gpu_spec_and_sharing() -> None:
    pods = [pod("whole-any", num_gpu=2), pod("whole-v100", num_gpu=4, spec=("V100M16", "V100M32")),
            pod("share-any", gpu_milli=300), pod("share-t4", gpu_milli=500, spec=("T4",)),
            pod("share-any-2", gpu_milli=700), pod("cpu", num_gpu=0)]
    classes = {c["metadata"]["name"]: c["spec"] for c in resource_classes(pods)}
    assert classes == {
        "trace-gpu-v100m16-v100m32": {"selector": {"matchExpressions": [
            {"key": "model", "operator": "In", "values": ["V100M16", "V100M32"]}]}},
        "trace-share-any": {"selector": {"matchExpressions": [{"key": "model", "operator": "Exists"}]},
                            "sharing": {"dimension": "gpu-milli", "unit": "1"}},
        "trace-share-t4": {"selector": {"matchExpressions": [{"key": "model", "operator": "In", "values": ["T4"]}]},
                           "sharing": {"dimension": "gpu-milli", "unit": "1"}},
    }
    assert pod_requests(pods[0]) == {"cpu": "1000m", "memory": "1024Mi", GPU_RESOURCE: 2}
    assert pod_requests(pods[1])["class.tessera.dev/trace-gpu-v100m16-v100m32"] == 4
    assert pod_requests(pods[2])["class.tessera.dev/trace-share-any"] == 300
    assert pod_requests(pods[3])["class.tessera.dev/trace-share-t4"] == 500
    assert pod_requests(pods[5]) == {"cpu": "1000m", "memory": "1024Mi"}
    obj = pod_object(pods[2])
    assert obj["spec"]["schedulerName"] == "tessera"
    assert obj["spec"]["containers"][0]["resources"]["limits"]["class.tessera.dev/trace-share-any"] == "300"


def test_each_gpu_is_a_device_with_a_gpu_milli_capacity() -> None:
    devices = device_objects(TraceNode("n1", 8000, 32768, 2, "T4"))
    assert len(devices) == 2
    assert {d["spec"]["attributes"]["model"] for d in devices} == {"T4"}
    assert all(d["spec"]["capacity"]["gpu-milli"] == "1000" for d in devices)
    assert all(d["spec"]["resourceName"] == GPU_RESOURCE for d in devices)


# --- through the core ------------------------------------------------------------------------


def test_slices_pack_onto_devices_and_failed_pods_are_dropped() -> None:
    nodes = [TraceNode("n1", 32000, 65536, 2, "T4")]
    sequence = [pod("s600", gpu_milli=600), pod("s500", gpu_milli=500), pod("s400", gpu_milli=400),
                pod("whole"),  # both devices hold slices: no free GPU
                pod("v100", spec=("V100M32",)),  # no such model here
                pod("s500b", gpu_milli=500)]  # fits beside s500
    config = config_for(select("tessera-default")[0])
    result = run_once("tessera-default", config, 42, nodes, sequence)
    assert result.failed == 2
    assert result.metrics.final_allocation_pct == pytest.approx(100.0)
    assert result.metrics.allocation_pct_at_first_failure == pytest.approx(75.0)


def test_every_policy_runs_and_leaves_the_core_ledger_consistent() -> None:
    nodes = [TraceNode(f"n{i}", 16000, 65536, 4, "T4" if i % 2 else "P100") for i in range(4)]
    pods = [pod(f"p{i}", num_gpu=(0, 1, 1, 2)[i % 4], gpu_milli=(1000, 300, 1000, 1000)[i % 4],
                spec=("T4",) if i % 7 == 0 else ()) for i in range(30)]
    sequence = arrival_sequence(pods, 16, seed=42)
    for policy in (p for p in POLICIES if p.build is not None):  # fgd is not a configuration: test_bench_trace_fgd
        result = run_once(policy.name, config_for(policy), 42, nodes, sequence)  # raises on a ledger mismatch
        assert result.pods == len(sequence)


def test_cluster_objects_are_accepted_by_the_core() -> None:
    from scheduler.core.scheduler import Scheduler

    scheduler = Scheduler(config_for(POLICIES[0]))
    objects = cluster_objects([TraceNode("n1", 8000, 1024, 2, "T4")], [pod("x", gpu_milli=100, spec=("T4",))])
    for obj in objects:
        assert scheduler.apply("ADDED", obj, 0.0) == []
    assert scheduler.state.class_status("trace-share-t4") == (True, "selector and resourceName are valid", 2, "Valid")


# --- metrics ---------------------------------------------------------------------------------


def test_fgd_curve_buckets_by_rounded_arrival_and_averages_allocation() -> None:
    # 10 GPUs = 10,000 milli; 1 % = 100 milli.
    series = Series(10, arrived_milli=[4_960, 5_040, 5_100, 5_300, 10_000, 10_020],
                    used_milli=[4_960, 5_000, 5_000, 5_000, 9_000, 9_020])
    curve = fgd_curve(series, max_pct=101)
    assert curve[50] == pytest.approx((49.6 + 50.0) / 2)  # 49.6 % and 50.4 % both round to 50
    assert curve[51] == 50.0
    assert curve[52] == pytest.approx((50.0 + 50.0) / 2)  # no row at 52: rows at 51 and 53 (±1)
    assert 55 not in curve  # nothing within ±1
    assert curve[100] == pytest.approx(90.1)  # (90.0 + 90.2) / 2
    series.first_failure = 2
    metrics = run_metrics(series)
    assert metrics.unallocated_gpu_pct_at_100 == pytest.approx(9.9)
    assert metrics.allocation_pct_at_first_failure == pytest.approx(50.0)
    assert metrics.final_allocation_pct == pytest.approx(90.2)


def test_no_failure_and_short_arrival_give_none() -> None:
    metrics = run_metrics(Series(10, [1000, 2000], [1000, 2000]))
    assert metrics.allocation_pct_at_first_failure is None
    assert metrics.unallocated_gpu_pct_at_100 is None
    assert metrics.final_allocation_pct == pytest.approx(20.0)


def test_summaries_over_seeds() -> None:
    assert summarize([3.0, None, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert summarize([None]) == {"median": None, "min": None, "max": None}
    assert median_curve([{0: 0.0, 1: 1.0}, {0: 0.0, 1: 3.0}, {1: 2.0}]) == {0: 0.0, 1: 2.0}


# --- policies and CLI ------------------------------------------------------------------------


def test_policies_score_all_nodes_unless_sampling() -> None:
    names = [p.name for p in POLICIES if p.default]
    assert names == ["tessera-default", "least-allocated", "most-allocated", "rtcr-binpack", "first-fit"]
    for policy in POLICIES:
        if policy.build is None:  # FGD replayed: no configuration to score with
            with pytest.raises(ValueError, match="fgd is not a Tessera configuration"):
                config_for(policy)
            continue
        assert config_for(policy).percentage_of_nodes_to_score == 100
    least, most = (args_of(config_for(p).profiles[0], ScoringStrategy) for p in select("least-allocated,most-allocated"))
    assert (least.type, most.type) == ("LeastAllocated", "MostAllocated")
    assert [r.weight for r in args_of(config_for(select("rtcr-binpack")[0]).profiles[0], ScoringStrategy).resources] == [1, 1, 3]
    assert len(config_for(select("first-fit")[0]).profiles[0].score_weights) == 0
    assert dict(config_for(select("fragmentation-only")[0]).profiles[0].score_weights) == {"TesseraFragmentation": 1}
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        select("nope")


def test_duplicate_scoring_is_detected() -> None:
    same = POLICIES[1].build
    assert duplicates([Policy("x", "", same), Policy("y", "", same), POLICIES[2], *select("fgd")], True) == [("x", "y")]


def test_seed_lists() -> None:
    assert trace.parse_seeds("42-51") == list(range(42, 52))
    assert trace.parse_seeds("42") == [42]
    assert trace.parse_seeds("42,45,50-51,42") == [42, 45, 50, 51]


def test_trace_dir_is_relative_to_the_repo_and_overridable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "data" / "alibaba-gpu-v2023"
    shared.mkdir(parents=True)
    monkeypatch.setattr(trace, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.delenv(trace.TRACE_DIR_ENV, raising=False)
    assert trace.trace_dir() == shared.resolve()
    monkeypatch.setenv(trace.TRACE_DIR_ENV, str(tmp_path))
    assert trace.trace_dir() == tmp_path
    # a new user's trial: a missing folder said only "No such file or directory: …csv"
    monkeypatch.setenv(trace.TRACE_DIR_ENV, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=r"set \$TESSERA_TRACE_DIR to the folder holding "
                                                r"openb_node_list_gpu_node.csv and openb_pod_list_default.csv"):
        trace.trace_dir()


def test_quick_smoke_run_writes_json_png_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = write(tmp_path / "nodes.csv", NODE_HEADER + "".join(
        f"node-{i:02d},{32000 if i % 3 else 96000},131072,{(2, 4, 8)[i % 3]},{'T4' if i % 2 else 'G2'}\n"
        for i in range(30)))
    rows = []
    for i in range(200):
        num_gpu, milli = [(1, 1000), (1, 450), (0, 0), (2, 1000), (1, 250)][i % 5]
        rows.append(f"pod-{i:03d},{2000 + 100 * (i % 4)},{4096},{num_gpu},{milli},"
                    f"{'T4' if i % 11 == 0 else ''},LS,Running,0,1,0\n")
    pods = write(tmp_path / "pods.csv", POD_HEADER + "".join(rows))
    out = tmp_path / "out"
    code = trace.main(["--nodes", str(nodes), "--pods", str(pods), "--quick", "--out", str(out), "--jobs", "2"])
    assert code == 0
    document = json.loads((out / "results.json").read_text())
    assert list(document["policies"]) == [p.name for p in POLICIES if p.default]
    for entry in document["policies"].values():
        assert set(entry["unallocated_gpu_pct_at_100"]) == {"median", "min", "max"}
        assert entry["pods_per_second"]["median"] > 0
        assert len(entry["runs"]) == 1 and entry["runs"][0]["seed"] == 42
    assert document["workload"]["nodes"] == 3 and document["workload"]["trace_pods"] == 20
    # the table does not show the paper's rows for a custom (or --quick) trace: nor does results.json
    assert document["reference"] is None
    assert (out / "allocation.png").read_bytes().startswith(b"\x89PNG")
    table = capsys.readouterr().out
    assert "| tessera-default |" in table and "| first-fit |" in table


def test_unknown_policy_and_missing_file_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert trace.main(["--policies", "bogus", "--out", str(tmp_path)]) == 2
    assert trace.main(["--nodes", str(tmp_path / "none.csv"), "--pods", str(tmp_path / "none.csv"),
                       "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "unknown policy 'bogus'" in err and "none.csv" in err


def test_the_variants_suite_runs_every_trace_into_one_table_json_and_png(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = "".join(f"node-{i:02d},32000,131072,{(4, 8)[i % 2]},{'T4' if i % 2 else 'G2'}\n" for i in range(6))
    rows = "".join(f"pod-{i:03d},2000,4096,{i % 3},{1000 if i % 3 else 0},,LS,Running,0,1,0\n" for i in range(40))
    multigpu = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + "".join(  # multigpu files have five columns only
        f"m-{i:03d},1000,2048,{(1, 2, 4)[i % 3]},1000\n" for i in range(30))
    out, document = run_suite(tmp_path, monkeypatch, nodes, rows, {"multigpu20": multigpu, "cpu037": POD_HEADER + rows},
                              "--suite", "variants", "--policies", "tessera-default,first-fit", "--seeds", "42")
    assert list(document["traces"]) == ["default", "cpu037", "multigpu20"]
    assert set(document["traces"]["multigpu20"]) == {"tessera-default", "first-fit"}
    assert document["reference"]["multigpu20"] == {"FGD": 4.47, "BestFit": 6.27}
    assert (out / "suite.png").read_bytes().startswith(b"\x89PNG")
    table = capsys.readouterr().out
    assert "| multigpu20 | tessera-default |" in table and "| 4.47 | 6.27 |" in table
    assert "| cpu037 | first-fit |" in table  # no published figure: dashes


def test_a_quick_suite_does_not_compare_its_sample_with_the_published_full_trace_figures(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A capacity planner's trial: `--suite variants --quick` printed "vs FGD" differences of a
    one-tenth sample against the paper's full-trace figures, while plain `--quick` says the
    paper's rows are not shown."""
    nodes = "".join(f"node-{i:02d},32000,131072,{(4, 8)[i % 2]},{'T4' if i % 2 else 'G2'}\n" for i in range(60))
    rows = "".join(f"pod-{i:03d},2000,4096,{i % 3},{1000 if i % 3 else 0},,LS,Running,0,1,0\n" for i in range(400))
    out, document = run_suite(tmp_path, monkeypatch, nodes, rows, {"multigpu20": POD_HEADER + rows},
                              "--suite", "variants", "--policies", "first-fit", "--quick")
    assert document["reference"] is None
    table = capsys.readouterr().out
    assert "| multigpu20 | first-fit |" in table and "4.47" not in table and "+" not in table, table
    assert ("(The FGD artifact's published figures are for the full traces and are not shown: --quick runs "
            "every 10th node and pod.)") in table
def test_a_config_file_runs_as_a_policy_on_the_chosen_traces_of_a_suite(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = "".join(f"node-{i:02d},32000,131072,{(4, 8)[i % 2]},{'T4' if i % 2 else 'G2'}\n" for i in range(6))
    rows = "".join(f"pod-{i:03d},2000,4096,{i % 3},{1000 if i % 3 else 0},,LS,Running,0,1,0\n" for i in range(40))
    unscored = write(tmp_path / "unscored.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\n"
                     "kind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: tessera\n"
                     "  plugins:\n    score:\n      disabled:\n      - name: '*'\n")
    variants = {"cpu037": POD_HEADER + rows, "cpu050": POD_HEADER + rows}
    _, document = run_suite(tmp_path, monkeypatch, nodes, rows, variants,
                            "--suite", "variants", "--traces", "cpu050,default", "--policies", "first-fit",
                            "--config", str(unscored), "--seeds", "42,43")
    assert list(document["traces"]) == ["default", "cpu050"]  # the suite's order, cpu037 left out
    for policies in document["traces"].values():
        assert list(policies) == ["first-fit", "unscored"]
        # the file is first-fit's configuration: the workers ran it, run for run the same placements
        assert [run["unallocated_gpu_pct_at_100"] for run in policies["unscored"]["runs"]] == \
            [run["unallocated_gpu_pct_at_100"] for run in policies["first-fit"]["runs"]]
    assert document["run"]["policies"]["unscored"] == f"configuration file {unscored}"
    captured = capsys.readouterr()
    assert "unscored resolves to the same scoring as first-fit" in captured.err
    assert "| cpu050 | unscored |" in captured.out


def test_bad_config_files_and_trace_names_are_clear_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path / "bad.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                "profiles:\n- schedulerName: tessera\n  plugins:\n    score:\n      enabled:\n"
                "      - name: NoSuchPlugin\n")
    clash = write(tmp_path / "first-fit.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\n"
                  "kind: KubeSchedulerConfiguration\n")
    assert trace.main(["--config", str(tmp_path / "missing.yaml"), "--out", str(tmp_path)]) == 2
    assert trace.main(["--config", str(bad), "--out", str(tmp_path)]) == 2
    assert trace.main(["--config", str(clash), "--out", str(tmp_path)]) == 2
    (tmp_path / "other").mkdir()
    twin = write(tmp_path / "other" / "bad.yaml", clash.read_text())
    assert trace.main(["--config", str(twin), "--config", str(twin), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "missing.yaml" in err and "NoSuchPlugin" in err
    assert "a built-in policy has the name 'first-fit'" in err and "another --config file has the name 'bad'" in err
    monkeypatch.setenv(trace.TRACE_DIR_ENV, str(tmp_path))
    write(tmp_path / trace.NODES_CSV, NODE_HEADER + "node-00,32000,131072,4,T4\n")
    one_pod = POD_HEADER + "pod-000,2000,4096,1,1000,,LS,Running,0,1,0\n"
    write(tmp_path / trace.PODS_CSV, one_pod)
    (tmp_path / "variants").mkdir()
    write(tmp_path / "variants" / "openb_pod_list_cpu037.csv", one_pod)
    assert trace.main(["--suite", "variants", "--traces", "gpuspec99", "--out", str(tmp_path / "o")]) == 1
    assert trace.main(["--traces", "default", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "unknown trace(s) gpuspec99; this suite has default, cpu037" in err
    assert "--traces selects traces of a --suite" in err


# --- the offline reference -------------------------------------------------------------------


def test_offline_order_is_the_arrived_prefix_largest_first() -> None:
    from bench.trace_workload import offline_order

    sequence = [pod("a", gpu_milli=500), pod("b", num_gpu=2), pod("cpu", num_gpu=0), pod("c"), pod("late", num_gpu=4)]
    # two GPUs of capacity: the prefix ends once 2000 milli have arrived (a, b), the rest never counts
    assert [p.name for p in offline_order(sequence, total_gpus=2)] == ["b", "a"]
    assert [p.name for p in offline_order(sequence, total_gpus=3)] == ["b", "c", "a", "cpu"]


def test_the_offline_reference_sees_every_pod_first_and_places_largest_first() -> None:
    from bench.trace_run import run_offline

    nodes = [TraceNode("n1", 32000, 65536, 2, "T4"), TraceNode("n2", 32000, 65536, 2, "T4")]
    # online, in this order, spreading would split the 1-GPU pods and refuse the 2-GPU one; largest first
    # the 2-GPU pod takes a whole node and the rest fill the other
    pods = [pod("one-a"), pod("one-b"), pod("two", num_gpu=2)]
    config = config_for(_offline_policy())
    result = run_offline("offline", config, 42, nodes, sorted(pods, key=lambda p: -p.total_gpu_milli))
    assert result.failed == 0
    assert result.metrics.final_allocation_pct == pytest.approx(100.0)


def _offline_policy() -> Policy:
    from bench.trace_policies import BY_NAME

    policy = BY_NAME["offline"]
    assert policy.offline and not policy.default
    return policy


# --- the slice-packing reference -------------------------------------------------------------


def test_best_fit_packs_each_slice_onto_the_fullest_device_that_holds_it() -> None:
    from bench.trace_slices import best_fit_waste

    # online: 320 opens a device (680 left), 470 joins it (210), 650 and 530 open their own
    assert best_fit_waste([320, 470, 650, 530]) == 210 + 350 + 470
    # decreasing: 650 (350 left), 530 (470), 470 fills the 470 exactly, 320 joins the 650 (30)
    assert best_fit_waste([650, 530, 470, 320]) == 30
    assert best_fit_waste([810, 160, 810]) == 30 + 190  # the 160 only helps one 810
    assert best_fit_waste([]) == 0
    with pytest.raises(ValueError, match="does not fit"):
        best_fit_waste([1200])


def test_slice_reference_counts_only_the_shared_pods_that_arrived_by_100_percent() -> None:
    from bench.trace_slices import slice_reference

    sequence = [pod("s1", gpu_milli=810), pod("whole", num_gpu=1), pod("s2", gpu_milli=650),
                pod("s3", gpu_milli=320), pod("whole-2", num_gpu=1), pod("late", gpu_milli=500)]
    reference = slice_reference(sequence, total_gpus=3)  # demand reaches 3,000 with whole-2: late is not counted
    # 810 (190 left), 650 (350), 320 joins the 650 (30): 220 of 3,000 milli
    assert reference["online_best_fit"] == pytest.approx(100 * 220 / 3000)
    assert reference["offline_best_fit_decreasing"] == pytest.approx(100 * 220 / 3000)
    assert slice_reference([pod("s", gpu_milli=320), pod("t", gpu_milli=650)], total_gpus=1) == {
        "online_best_fit": pytest.approx(3.0), "offline_best_fit_decreasing": pytest.approx(3.0)}
    # where the order matters: online 320 + 470 share a device (210 left), 650 and 530 open their own;
    # decreasing, 470 fills the 530's remainder and 320 the 650's (30 left)
    ordered = [pod("a", gpu_milli=320), pod("b", gpu_milli=470), pod("c", gpu_milli=650), pod("d", gpu_milli=530)]
    assert slice_reference(ordered, total_gpus=4) == {
        "online_best_fit": pytest.approx(100 * 1030 / 4000), "offline_best_fit_decreasing": pytest.approx(100 * 30 / 4000)}


def test_the_suite_reports_the_slice_reference_per_trace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = "".join(f"node-{i},32000,131072,4,G2\n" for i in range(2))
    rows = "".join(f"pod-{i:03d},1000,2048,1,{(320, 470, 650)[i % 3]},,LS,Running,0,1,0\n" for i in range(30))
    _, document = run_suite(tmp_path, monkeypatch, nodes, rows, {"gpushare40": POD_HEADER + rows},
                            "--suite", "variants", "--policies", "first-fit", "--seeds", "1,2")
    total_gpus = 8
    expected = [slice_reference_of(read_pods(tmp_path / trace.PODS_CSV), total_gpus, seed) for seed in (1, 2)]
    reference = document["slice_reference"]["gpushare40"]
    assert reference["online_best_fit"]["min"] == pytest.approx(min(e["online_best_fit"] for e in expected))
    assert reference["offline_best_fit_decreasing"]["max"] == pytest.approx(
        max(e["offline_best_fit_decreasing"] for e in expected))
    table = capsys.readouterr().out
    assert "slices alone: online best fit | slices alone: offline BFD |" in table
    assert table.count("| gpushare40 | first-fit |") == 1


def slice_reference_of(pods: list[TracePod], total_gpus: int, seed: int) -> dict[str, float]:
    from bench.trace_slices import slice_reference

    return slice_reference(arrival_sequence(pods, total_gpus, seed), total_gpus)


# --- analogues of the artifact's variants we lack ---------------------------------------------


def _mix() -> list[TracePod]:
    """A small default-like mix: CPU-only, whole 1-GPU, sharing and multi-GPU pods."""
    return ([pod(f"c{i}", num_gpu=0, cpu=4000 + i) for i in range(10)]
            + [pod(f"g{i}") for i in range(40)]
            + [pod(f"s{i}", gpu_milli=(320, 470, 810)[i % 3]) for i in range(30)]
            + [pod(f"m{i}", num_gpu=(2, 4, 8)[i % 3]) for i in range(3)])


def test_cpu_analogue_keeps_the_gpu_pods_and_draws_cpu_only_pods_to_the_share() -> None:
    import random

    from bench.trace_analogues import cpu_variant

    base = _mix()
    pods = cpu_variant(base, 25.0, random.Random(1))
    gpu_pods = [p for p in pods if p.num_gpu]
    cpu_pods = [p for p in pods if not p.num_gpu]
    assert sorted((p.num_gpu, p.gpu_milli) for p in gpu_pods) == sorted((p.num_gpu, p.gpu_milli) for p in base if p.num_gpu)
    assert len(cpu_pods) == round(73 * 25 / 75)  # 24 of 97 pods
    assert {p.cpu_milli for p in cpu_pods} <= {p.cpu_milli for p in base if not p.num_gpu}
    assert len({p.name for p in pods}) == len(pods)


def test_multigpu_and_gpushare_analogues_reach_their_share_of_gpu_demand() -> None:
    import random

    from bench.trace_analogues import gpushare_variant, multigpu_variant

    def share(pods: list[TracePod], keep: Any) -> float:
        return sum(p.total_gpu_milli for p in pods if keep(p)) / sum(p.total_gpu_milli for p in pods)

    base = _mix()
    multi = multigpu_variant(base, 40.0, random.Random(1))
    added = [p.total_gpu_milli for p in multi[len(base):]]
    assert sum(added) >= 3_000_000 > sum(added[:-1])  # 1,000 GPUs per 10 points above 10, then stop
    assert all(p.num_gpu in (2, 4, 8) for p in multi[len(base):])
    assert [(p.num_gpu, p.cpu_milli) for p in multi[:len(base)]] == [(p.num_gpu, p.cpu_milli) for p in base]
    shared = gpushare_variant(base, 60.0, random.Random(1))
    assert len(shared) == len(base) and share(shared, lambda p: p.shared) >= 0.60
    assert sum(1 for p in shared if not p.num_gpu) == 10  # CPU-only pods untouched
    everything = gpushare_variant(base, 100.0, random.Random(1))
    assert all(p.shared for p in everything if p.num_gpu)


def test_gpuspec_analogue_gives_more_gpu_pods_a_spec_drawn_from_the_existing_ones() -> None:
    import random
    from dataclasses import replace

    from bench.trace_analogues import gpuspec_variant

    base = [replace(p, gpu_spec=("T4",) if p.name in ("g0", "g1") else ("G2", "V100M16") if p.name == "s0" else ())
            for p in _mix()]
    pods = gpuspec_variant(base, 33.0, random.Random(1))
    gpu_pods = [p for p in pods if p.num_gpu]
    with_spec = [p for p in gpu_pods if p.gpu_spec]
    assert len(with_spec) == math.ceil(0.33 * len(gpu_pods))
    assert {p.gpu_spec for p in with_spec} == {("T4",), ("G2", "V100M16")}
    assert [(p.cpu_milli, p.num_gpu, p.gpu_milli) for p in pods] == [(p.cpu_milli, p.num_gpu, p.gpu_milli) for p in base]


def test_the_analogues_suite_builds_eight_traces_with_their_published_figures(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = "".join(f"node-{i},64000,262144,8,G2\n" for i in range(3))
    rows = "".join(f"pod-{i:03d},2000,4096,{(0, 1, 1, 2)[i % 4]},{(0, 470, 1000, 1000)[i % 4]},,LS,Running,0,1,0\n"
                   for i in range(24))
    spec_rows = rows.replace("pod-001,2000,4096,1,470,,", "pod-001,2000,4096,1,470,G2,")
    _, document = run_suite(tmp_path, monkeypatch, nodes, rows, {"gpuspec20": POD_HEADER + spec_rows},
                            "--suite", "analogues", "--policies", "first-fit", "--seeds", "1")
    assert list(document["traces"]) == ["cpu200x", "cpu250x", "gpushare60x", "gpushare100x", "gpuspec25x",
                                        "gpuspec33x", "multigpu40x", "multigpu50x"]
    assert document["reference"]["multigpu50x"] == {"FGD": 2.905, "BestFit": 4.425}
    assert "built by bench/trace_analogues.py" in document["workload"]["pods_csv"]["cpu250x"]
    assert "| cpu250x | first-fit |" in capsys.readouterr().out


def test_a_series_records_arrived_and_placed_demand_cumulatively_and_the_first_failure() -> None:
    series = Series(4, [], [])
    for demand, placed in ((1000, True), (500, False), (2000, True), (1000, False)):
        series.record(demand, placed)
    assert series.arrived_milli == [1000, 1500, 3500, 4500]
    assert series.used_milli == [1000, 1000, 3000, 3000]
    assert series.first_failure == 1


def _planner_files(tmp_path: Path, header: str, spec: str) -> tuple[Path, Path]:
    """A capacity planner's custom trace: A100 and V100 nodes, pods whose 4th column on is `spec`."""
    nodes = write(tmp_path / "nodes.csv", NODE_HEADER + "".join(
        f"n-{i},32000,131072,8,{'A100' if i % 2 else 'V100'}\n" for i in range(4)))
    rows = "".join(f"job-{i:02d},4000,8192,1,1000,{spec if i < 3 else 'A100'}\n" for i in range(10))
    return nodes, write(tmp_path / "pods.csv", header + rows)


def test_a_model_no_node_has_and_an_unknown_column_are_warned_about(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capacity planner's trial: a `gpu_spec` typo (V1OO, zeros for O's) and a column named
    `model` instead of `gpu_spec` both ran silently — the pods of the typo never fit, the spec
    column was never read."""
    nodes, pods = _planner_files(tmp_path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n", "V1OO|A1OO")
    args = ["--nodes", str(nodes), "--pods", str(pods), "--seeds", "42", "--policies", "first-fit", "--jobs", "1"]
    assert trace.main([*args, "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert (f"bench.trace: warning: {pods}: gpu_spec names GPU models no node has: A1OO (3 pods), V1OO (3 pods); "
            "the nodes have A100, V100 (a pod none of whose models a node has never fits)") in err, err
    model_column = write(tmp_path / "model.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,model\n"
                         + "".join(f"job-{i:02d},4000,8192,1,1000,V100\n" for i in range(10)))
    assert trace.main(["--nodes", str(nodes), "--pods", str(model_column), "--seeds", "42", "--policies",
                       "first-fit", "--jobs", "1", "--out", str(tmp_path / "out2")]) == 0
    err = capsys.readouterr().err
    assert (f"bench.trace: warning: {model_column}: column(s) not read: model; the columns read are name, "
            "cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec (the trace's qos, pod_phase, creation_time, "
            "deletion_time, scheduled_time are known and not needed)") in err, err
    # the Alibaba files' own columns are not warned about, nor a model every node has
    nodes, pods = _planner_files(tmp_path, POD_HEADER.replace(",qos,pod_phase,creation_time,deletion_time,scheduled_time",
                                                              ""), "V100")
    assert trace.main(["--nodes", str(nodes), "--pods", str(pods), "--seeds", "42", "--policies", "first-fit",
                       "--jobs", "1", "--out", str(tmp_path / "out3")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_the_inflate_option_says_zero_means_no_top_up() -> None:
    assert "0: no top-up" in re.sub(r"\s+", " ", trace.build_parser().format_help())


def test_one_seed_is_said_not_comparable_and_the_outputs_carry_the_data_attribution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A capacity planner's trial read a one-seed table beside the paper's ten-seed medians with
    nothing saying they do not compare; results.json and the PNG made from the Alibaba trace did
    not carry its terms (research use, cite), which bench/README.md gives."""
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"  # the rows' six columns
    nodes, pods = _planner_files(tmp_path, header, "V100")
    nodes.rename(tmp_path / trace.NODES_CSV)
    pods.rename(tmp_path / trace.PODS_CSV)
    monkeypatch.setenv(trace.TRACE_DIR_ENV, str(tmp_path))
    out = tmp_path / "out"
    assert trace.main(["--seeds", "42", "--policies", "first-fit", "--jobs", "1", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert ("One seed: not comparable with the paper's figures, a median over ten seeds (42-51); a single "
            "seed's order is not FGD's (bench/README.md, Known differences from FGD's runs).") in table, table
    document = json.loads((out / "results.json").read_text())
    assert document["data"] == trace.DATA_ATTRIBUTION
    assert all(words in trace.DATA_ATTRIBUTION for words in ("cluster-trace-gpu-v2023", "research", "Weng",
                                                             "USENIX ATC 2023"))
    assert trace.DATA_ATTRIBUTION.encode() in (out / "allocation.png").read_bytes()  # the PNG's Description
    assert trace.main(["--seeds", "42,43", "--policies", "first-fit", "--jobs", "1", "--out", str(out)]) == 0
    assert "One seed" not in capsys.readouterr().out
    # a custom CSV is not Alibaba's data: no attribution
    custom_nodes, custom_pods = _planner_files(tmp_path, header, "V100")
    assert trace.main(["--nodes", str(custom_nodes), "--pods", str(custom_pods), "--seeds", "42", "--policies",
                       "first-fit", "--jobs", "1", "--out", str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["data"] is None
    assert trace.DATA_ATTRIBUTION.encode() not in (out / "allocation.png").read_bytes()


# --- figures ---------------------------------------------------------------------------------


def _curve_entry(scale: float) -> dict[str, Any]:
    arrived = [float(x) for x in range(0, 131)]
    return {"allocation_curve": {"arrived_gpu_pct": arrived,
                                 "allocated_gpu_pct_median": [min(100.0, x * scale) for x in arrived]}}


def _inside_figure(fig: Any, artist: Any) -> bool:
    box = artist.get_window_extent(fig.canvas.get_renderer())
    return bool(box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height)


def test_the_allocation_figure_shows_identical_curves_and_keeps_inset_and_footer_clear() -> None:
    """A capacity planner's trial: in allocation.png tessera-default and least-allocated were
    hidden under identical later curves of the same line style, the inset covered the main curve
    around 45-58 % arrived, and the `Data:` footer was cut at both edges."""
    from bench.trace_report import allocation_figure

    policies = {name: _curve_entry(scale) for name, scale in (
        ("tessera-default", 0.97), ("least-allocated", 0.8), ("most-allocated", 0.99), ("rtcr-binpack", 0.98),
        ("first-fit", 0.9), ("whole-nodes", 0.97), ("spread", 0.8))}
    fig = allocation_figure(policies, "a title", trace.DATA_ATTRIBUTION)
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "whole-nodes (= tessera-default)" in labels and "spread (= least-allocated)" in labels, labels
    lines = {line.get_label(): line for line in ax.get_lines()}
    for copy, first in (("whole-nodes (= tessera-default)", "tessera-default"),
                        ("spread (= least-allocated)", "least-allocated")):
        # the copy is drawn as markers over the first's line, which stays visible
        assert lines[copy].get_linestyle() == "None" and lines[copy].get_marker() not in ("None", None, "")
        assert lines[first].get_linestyle() != "None"
    inset, = ax.child_axes
    covered = inset.get_tightbbox(fig.canvas.get_renderer())
    for line in ax.get_lines():
        points = ax.transData.transform(line.get_xydata())
        assert not any(covered.contains(x, y) for x, y in points), line.get_label()
    footer, = fig.texts
    assert footer.get_text().replace("\n", " ") == trace.DATA_ATTRIBUTION and _inside_figure(fig, footer)


def test_the_suite_figure_keeps_its_legend_off_the_bars_and_its_footer_inside() -> None:
    """A capacity planner's trial: suite.png's legend covered the default trace's most-allocated
    bar, and the `Data:` footer was cut at both edges."""
    from bench.trace_report import SUITE_REFERENCE, suite_figure

    def entry(value: float) -> dict[str, Any]:
        return {"unallocated_gpu_pct_at_100": {"median": value, "min": value, "max": value}}

    by_trace = {"default": {"tessera-default": entry(4.65), "most-allocated": entry(9.13)},
                "gpuspec20": {"tessera-default": entry(8.15), "most-allocated": entry(10.23)},
                "multigpu30": {"tessera-default": entry(3.73), "most-allocated": entry(8.17)}}
    slices = {name: {"online_best_fit": {"median": 4.5}, "offline_best_fit_decreasing": {"median": 4.1}}
              for name in by_trace}
    fig = suite_figure(by_trace, slices, SUITE_REFERENCE, "a title", trace.DATA_ATTRIBUTION)
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
    bars = [patch for patch in ax.patches if patch.get_height() > 0]
    assert bars and not any(legend.overlaps(bar.get_window_extent()) for bar in bars)
    assert _inside_figure(fig, ax.get_legend())
    footer, = fig.texts
    assert _inside_figure(fig, footer)
