"""`python -m bench.replay_live --quick` end to end: the Alibaba trace live, with kwok finishing pods.

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

from scheduler.kube.controlplane import ControlPlaneBinaries

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(240)
def test_replay_live_quick(control_plane_binaries: ControlPlaneBinaries, tmp_path: Path) -> None:
    assert control_plane_binaries.kwok is not None and control_plane_binaries.kube_scheduler is not None
    out, work = tmp_path / "out", tmp_path / "work"
    proc = subprocess.run([sys.executable, "-m", "bench.replay_live", "--quick", "--out", str(out),
                           "--workdir", str(work)], cwd=REPO, capture_output=True, text=True, timeout=230)
    assert proc.returncode == 0, f"bench.replay_live failed ({proc.returncode}):\n{proc.stderr[-4000:]}"

    results = json.loads((out / "results.json").read_text())
    assert results["benchmark"] == "replay_live"
    workload = results["workload"]
    assert (workload["node_step"], workload["pod_step"], workload["speed"]) == (40, 8, 600.0)
    rounds = {r["scheduler"]: r for r in results["rounds"]}
    assert set(rounds) == {"tessera", "kube-scheduler"}
    created = {r["created"] for r in rounds.values()}
    assert created == {workload["pods"]}, "both schedulers got every pod of the plan"
    for name, r in rounds.items():
        assert r["scheduler_alive_at_end"] is True, name
        assert r["placed"] + r["pending_at_end"] == r["created"], name
        assert r["placed"] >= 0.5 * r["created"], name
        assert r["finished"] > 0, f"{name}: kwok finished no pod within the window"
        assert 0 < r["gpu_allocation_pct"] <= 100, name
        assert r["scheduler_cpu_ms_per_pod"] > 0, name
        assert r["timeline"] and all(0 <= a <= 100 and p >= 0 for _, a, p in r["timeline"]), name
    assert set(results["summary"]) == {"tessera", "kube-scheduler"}
    assert (out / "replay_live.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| scheduler | GPU allocation % (time-weighted) |" in proc.stdout
