"""`python -m bench.live --quick` end to end: its own control plane, Tessera, the real kube-scheduler
and the raw binder, one quick round each at both client settings.

Why its own control plane and not the session one: the benchmark deletes every pod of its namespace
between rounds and starts schedulers that would race the other tests' schedulers for any pod named
`tessera`; it also owns the node set. It runs as a subprocess, exactly as a person runs it, so the
CLI, the output files and the "every child process is stopped" promise are what is tested.

No timing is asserted (docs/design.md §7): only that every round bound every pod, without overcommitting
a node, and that the JSON, table and PNG have the documented shape.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.kube.controlplane import ControlPlaneBinaries

REPO = Path(__file__).resolve().parents[2]
SCHEDULERS = {"tessera", "kube-scheduler", "raw-binder"}
STATS = {"median", "min", "max"}


@pytest.mark.timeout(180)
def test_bench_live_quick(control_plane_binaries: ControlPlaneBinaries, tmp_path: Path) -> None:
    if control_plane_binaries.kube_scheduler is None:
        pytest.skip("kube-scheduler binary not available (KUBEBUILDER_ASSETS without it)")
    out, work = tmp_path / "out", tmp_path / "work"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.live", "--quick", "--out", str(out), "--workdir", str(work)],
        cwd=REPO, capture_output=True, text=True, timeout=170,
    )
    assert proc.returncode == 0, f"bench.live failed ({proc.returncode}):\n{proc.stderr[-4000:]}"

    results = json.loads((out / "results.json").read_text())
    assert results["benchmark"] == "live"
    config = results["config"]
    assert (config["nodes"], config["pods"], config["runs"]) == (50, 300, 1)
    assert set(config["settings"]) == {"default", "raised"}
    assert config["settings"]["default"] == {"qps": 50, "burst": 100}

    rounds = results["rounds"]
    assert {(r["scheduler"], r["settings"]) for r in rounds} == {
        ("tessera", "default"), ("kube-scheduler", "default"), ("tessera", "raised"),
        ("kube-scheduler", "raised"), ("raw-binder", "unlimited")}
    for r in rounds:
        where = f"{r['scheduler']}/{r['settings']}"
        assert r["outcome"] == "ok", where
        assert r["all_bound"] is True, where
        assert r["bound"] == r["bound_seen"] == r["pods"] == 300, where
        assert r["overcommitted_nodes"] == [], where
        assert r["pods_per_second"] > 0 and r["seconds"] > 0, where
        assert 0 <= r["start_to_bound_p50"] <= r["start_to_bound_p99"], where
        assert r["create_to_bound_p50"] <= r["create_to_bound_p99"], where
    # Both schedulers binpack (MostAllocated): 300 one-GPU pods fill 300 / 16 -> 19 nodes.
    # The raw binder spreads round-robin over all 50: the placements really come from the schedulers.
    for r in rounds:
        assert r["nodes_used"] == (50 if r["scheduler"] == "raw-binder" else 19), r["scheduler"]

    summary = results["summary"]
    assert set(summary) == {"default", "raised"}
    for group in summary.values():
        assert SCHEDULERS <= set(group)
        for name in SCHEDULERS:
            assert set(group[name]["pods_per_second"]) == STATS
            assert group[name]["all_bound"] is True
            assert group[name]["runs"] == 1
        assert set(group["ratios"]) == {"tessera_vs_kube_scheduler", "tessera_vs_ceiling", "kube_scheduler_vs_ceiling"}
        assert all(v is not None and v > 0 for v in group["ratios"].values())
        assert set(group["goals"]) == {"tessera_ge_kube_scheduler", "tessera_ge_80pct_ceiling"}

    png = out / "throughput.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| settings | scheduler | pods/s |" in proc.stdout
    assert "Tessera / kube-scheduler" in proc.stdout
