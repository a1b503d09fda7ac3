"""FGD replayed (bench/trace_fgd.py): its fragmentation measure, typical pods, score and placement,
checked on hand-computed cases, and its place in `bench.trace`'s suite table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import trace
from bench.trace_fgd import FgdCluster, FragmentModel, run_fgd, typical_shapes
from bench.trace_workload import MILLI, TraceNode, arrival_sequence
from tests.unit.trace_rows import NODE_HEADER, POD_HEADER, pod, write


def test_fragment_counts_what_each_typical_shape_cannot_use() -> None:
    typical = [((4000, 500, 1, ()), 0.5), ((8000, 1000, 2, ()), 0.3), ((1000, 0, 0, ()), 0.2)]
    model = FragmentModel.build(typical, ["A", "B"])
    gpu = np.array([[1000, 1000, 0, 0], [1000, 300, 0, 0], [1000, 1000, 0, 0], [400, 400, 0, 0]])
    cpu = np.array([16000, 16000, 6000, 16000])
    frag = model.fragment(gpu, cpu, np.array([0, 0, 0, 1]))
    # 0: every GPU shape runs, the CPU-only shape counts all 2000 milli: 0.2 × 2000
    # 1: the slice shape runs but the 300 left is below its 500 (0.5 × 300); the 2-GPU shape
    #    finds one free GPU (0.3 × 1300); CPU-only 0.2 × 1300
    # 2: 6 cores: the 2-GPU shape (8 cores) cannot run (0.3 × 2000) + 0.2 × 2000
    # 3: no GPU has 500 left (0.5 × 800), nor two free (0.3 × 800), CPU-only (0.2 × 800)
    assert frag.tolist() == pytest.approx([400, 800, 1000, 800])


def test_a_shape_bound_to_another_model_counts_every_gpu_left() -> None:
    model = FragmentModel.build([((1000, 1000, 1, ("T4",)), 1.0)], ["P100", "T4"])
    frag = model.fragment(np.array([[1000, 1000], [1000, 1000]]), np.array([8000, 8000]), np.array([0, 1]))
    assert frag.tolist() == pytest.approx([2000, 0])


def test_typical_shapes_keep_every_shape_by_default_most_frequent_first() -> None:
    pods = [pod(f"a{i}") for i in range(6)] + [pod(f"b{i}", gpu_milli=500) for i in range(3)] + [pod("c", num_gpu=8)]
    shapes = typical_shapes(pods)
    assert [s[0] for s in shapes] == [(1000, 1000, 1, ()), (1000, 500, 1, ()), (1000, 1000, 8, ())]
    assert [w for _, w in shapes] == pytest.approx([0.6, 0.3, 0.1])
    # FGD's cut: shapes until they cover the threshold, the one crossing it included, renormalised
    cut = typical_shapes(pods, popularity=0.7)
    assert [s[0][1] for s in cut] == [1000, 500] and [w for _, w in cut] == pytest.approx([6 / 9, 3 / 9])


def test_a_cpu_request_of_zero_counts_as_kube_schedulers_non_zero_default() -> None:
    (shape, _), = typical_shapes([pod("p", num_gpu=0, cpu=0)])
    assert shape == (100, 0, 0, ())


def test_a_slice_fills_the_gpu_whose_remainder_no_other_shape_could_use() -> None:
    nodes = [TraceNode("a", 16000, 65536, 2, "T4"), TraceNode("b", 16000, 65536, 2, "T4")]
    cluster = FgdCluster(nodes, FragmentModel.build([((1000, 300, 1, ()), 0.5), ((1000, 1000, 1, ()), 0.5)], ["T4"]))
    rng = np.random.default_rng(1)
    assert cluster.place(pod("first", gpu_milli=700), rng)
    used = int(np.flatnonzero((cluster.gpu < MILLI).any(axis=1))[0])
    assert cluster.place(pod("second", gpu_milli=300), rng)
    # the 300 left beside the 700 is the only placement that leaves no fragment: same node, same GPU
    assert sorted(cluster.gpu[used].tolist()) == [0, 1000] and cluster.gpu[1 - used].tolist() == [1000, 1000]


def test_an_eight_gpu_shape_keeps_a_whole_node_free_for_it() -> None:
    nodes = [TraceNode(f"n{i}", 96000, 393216, 8, "G2") for i in range(2)]
    typical = [((8000, 1000, 1, ()), 0.5), ((64000, 1000, 8, ()), 0.5)]
    for seed in range(5):
        cluster = FgdCluster(nodes, FragmentModel.build(typical, ["G2"]))
        rng = np.random.default_rng(seed)
        for i in range(3):
            assert cluster.place(pod(f"p{i}", cpu=8000), rng)
        free = (cluster.gpu == MILLI).sum(axis=1).tolist()
        assert sorted(free) == [5, 8]  # all three on one node, whatever the tie-breaks


def test_the_filter_respects_model_cpu_memory_and_whole_gpus() -> None:
    nodes = [TraceNode("p100", 8000, 8192, 2, "P100"), TraceNode("t4", 8000, 8192, 2, "T4")]
    cluster = FgdCluster(nodes, FragmentModel.build([((1000, 1000, 1, ()), 1.0)], ["P100", "T4"]))
    assert cluster.feasible(pod("spec", spec=("T4",))).tolist() == [1]
    assert cluster.feasible(pod("cpu", cpu=9000)).tolist() == []
    assert cluster.feasible(pod("memory", memory=9000)).tolist() == []
    assert cluster.feasible(pod("three", num_gpu=3)).tolist() == []
    rng = np.random.default_rng(0)
    assert cluster.place(pod("half", gpu_milli=500, spec=("P100",)), rng)
    assert cluster.feasible(pod("two", num_gpu=2)).tolist() == [1]  # a shared GPU is not a free one


def test_a_replay_tallies_what_its_gpus_hold_and_drops_what_does_not_fit() -> None:
    nodes = [TraceNode(f"n{i}", 16000, 65536, 4, "T4" if i % 2 else "P100") for i in range(4)]
    pods = [pod(f"p{i}", num_gpu=(0, 1, 1, 2)[i % 4], gpu_milli=(1000, 300, 1000, 1000)[i % 4],
                spec=("T4",) if i % 7 == 0 else ()) for i in range(30)]
    sequence = arrival_sequence(pods, 16, seed=42)
    result = run_fgd("fgd", 42, nodes, sequence, pods)  # raises when the GPUs and the tally disagree
    assert result.pods == len(sequence) and 0 < result.failed < len(sequence)
    assert result.metrics.unallocated_gpu_pct_at_100 is not None


def test_the_suite_table_gives_each_policy_its_difference_to_fgd_replayed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = "".join(f"node-{i:02d},32000,131072,{(4, 8)[i % 2]},{'T4' if i % 2 else 'G2'}\n" for i in range(6))
    rows = "".join(f"pod-{i:03d},2000,4096,{i % 3},{(1000, 450, 1000)[i % 3] if i % 3 else 0},,LS,Running,0,1,0\n"
                   for i in range(60))
    write(tmp_path / trace.NODES_CSV, NODE_HEADER + nodes)
    write(tmp_path / trace.PODS_CSV, POD_HEADER + rows)
    (tmp_path / "variants").mkdir()
    write(tmp_path / "variants" / "openb_pod_list_cpu050.csv", POD_HEADER + rows)
    monkeypatch.setenv(trace.TRACE_DIR_ENV, str(tmp_path))
    out = tmp_path / "out"
    assert trace.main(["--suite", "variants", "--policies", "first-fit,fgd", "--seeds", "42,43",
                       "--jobs", "1", "--out", str(out)]) == 0
    document = json.loads((out / "results.json").read_text())
    medians = {name: entry["unallocated_gpu_pct_at_100"]["median"] for name, entry in document["traces"]["cpu050"].items()}
    table = capsys.readouterr().out
    assert "| vs FGD replayed |" in table.splitlines()[0]
    assert "| cpu050 | first-fit | " in table and f"| {medians['first-fit'] - medians['fgd']:+.2f} |" in table
    assert "| cpu050 | fgd | " in table and "| +0.00 |" in table
