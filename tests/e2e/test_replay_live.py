"""`python -m bench.replay_live` end to end on a small trace: pods live, with kwok finishing them.

Its own control plane (with kwok), as a person runs it: a subprocess, the real kube-scheduler and
Tessera one round each. No timing is asserted; what is asserted would break if the replay did not
work: both schedulers got the same pods, placed most of them, and kwok finished pods at their
(compressed) lifetimes, so GPUs came back during the round; the outputs have the documented shape.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.replay_live import make_plan
from bench.trace_workload import read_nodes
from scheduler.kube.controlplane import ControlPlaneBinaries

REPO = Path(__file__).resolve().parents[2]


POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
              "scheduled_time\n")


def _trace(directory: Path) -> tuple[Path, Path]:
    """A small trace in the Alibaba CSV format: 6 nodes x 4 GPUs (T4 and A10), 150 pods — whole
    GPUs, GPU slices, an A10-only kind and CPU-only pods — arriving over 3 hours, living 10-60 min."""
    nodes = directory / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"n{i},64000,262144,4,{'A10' if i % 2 else 'T4'}\n" for i in range(6)))
    kinds = [(1, 1000, ""), (1, 500, ""), (2, 1000, ""), (1, 1000, "A10"), (0, 0, "")]
    rows = []
    for i in range(150):
        gpus, milli, spec = kinds[i % len(kinds)]
        created = 1000 + 72 * i
        rows.append(f"p{i:03d},4000,8192,{gpus},{milli},{spec},LS,Running,{created},"
                    f"{created + 600 + 600 * (i % 6)},{created}")
    pods = directory / "pods.csv"
    pods.write_text(POD_HEADER + "\n".join(rows) + "\n")
    return nodes, pods


@pytest.mark.timeout(240)
def test_replay_live_small_trace(control_plane_binaries: ControlPlaneBinaries, tmp_path: Path) -> None:
    assert control_plane_binaries.kwok is not None and control_plane_binaries.kube_scheduler is not None
    nodes, pods = _trace(tmp_path)
    out, work = tmp_path / "out", tmp_path / "work"
    # the plan's window at load 0.8, replayed in about 12 real seconds
    plan = make_plan(read_nodes(nodes), pods, 0.8, 1.0)
    speed = plan.window / 12
    proc = subprocess.run([sys.executable, "-m", "bench.replay_live", "--nodes", str(nodes), "--pods", str(pods),
                           "--node-step", "1", "--speed", str(speed), "--out", str(out), "--workdir", str(work)],
                          cwd=REPO, capture_output=True, text=True, timeout=230)
    assert proc.returncode == 0, f"bench.replay_live failed ({proc.returncode}):\n{proc.stderr[-4000:]}"

    results = json.loads((out / "results.json").read_text())
    assert results["benchmark"] == "replay_live"
    workload = results["workload"]
    assert (workload["nodes"], workload["gpus"], workload["pods"]) == (6, 24, len(plan.pods))
    rounds = {r["scheduler"]: r for r in results["rounds"]}
    assert set(rounds) == {"tessera", "kube-scheduler"}
    created = {r["created"] for r in rounds.values()}
    assert created == {workload["pods"]}, "both schedulers got every pod of the plan"
    for name, r in rounds.items():
        assert r["scheduler_alive_at_end"] is True, name
        assert r["placed"] >= 0.5 * r["created"], name
        assert r["finished"] > 0, f"{name}: kwok finished no pod within the window"
        assert 0 < r["gpu_allocation_pct"] <= 100, name
        assert r["scheduler_cpu_ms_per_placed_pod"] > 0, name
        assert r["pending_p50_s"] <= r["pending_p95_s"] <= r["pending_p99_s"], name
        assert r["timeline"] and all(0 <= a <= 100 and p >= 0 for _, a, p in r["timeline"]), name
    assert set(results["summary"]) == {"tessera", "kube-scheduler"}
    assert (out / "replay_live.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| scheduler | GPU allocation % (time-weighted) |" in proc.stdout
