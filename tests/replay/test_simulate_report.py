"""`tessera simulate` on large inputs (review findings, each a failing test first): a long replay
says how far it got, and thousands of unschedulable pods are grouped by reason, not listed."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from scheduler.api.config import load_config
from scheduler.sim import builders as b
from scheduler.sim import report

REASON = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
          "1 Preemption is not helpful for scheduling.")

def _events(path: Path, pods: int) -> Path:
    lines = [orjson.dumps(b.event("ADDED", b.node("n", gpus=1)))]
    lines += [orjson.dumps(b.event("ADDED", b.pod(f"p{i:03}", limits={"nvidia.com/gpu": 2}))) for i in range(pods)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_many_unschedulable_pods_are_grouped_by_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report.run_simulation(str(_events(tmp_path / "e.jsonl", 25)), load_config(None), explain=False,
                                 output="table", seed=0) == 0
    out = capsys.readouterr().out.splitlines()
    reasons = [line for line in out if line.startswith("  ")]
    assert reasons == ["  25 pods (default/p000, default/p001, default/p002, ... 22 more): "
                       f"{REASON}"]


def test_a_few_unschedulable_pods_are_listed_one_by_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report.run_simulation(str(_events(tmp_path / "e.jsonl", 2)), load_config(None), explain=False, output="table",
                          seed=0)
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")] == [
        f"  default/p000: {REASON}", f"  default/p001: {REASON}"]


def test_a_long_replay_says_how_far_it_got(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "PROGRESS_EVERY", 0.0)  # as if every look at the clock came 5 s later
    monkeypatch.setattr(report, "PROGRESS_CHECK", 10)
    report.run_simulation(str(_events(tmp_path / "e.jsonl", 25)), load_config(None), explain=False, output="json",
                          seed=0)
    progress = [line for line in capsys.readouterr().err.splitlines() if "replayed" in line]
    assert progress[0].startswith(f"tessera: {tmp_path / 'e.jsonl'}: 10 events replayed, ")
    assert progress[0].endswith("scheduling attempts so far")


def test_pods_no_profile_schedules_are_counted_with_the_profiles(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (review): a --config whose profiles the pods do not name gave '0 scheduling
    attempts' and no hint why."""
    events = tmp_path / "e.jsonl"
    events.write_bytes(orjson.dumps(b.event("ADDED", b.node("n", gpus=1))) + b"\n"
                       + orjson.dumps(b.event("ADDED", b.pod("p", scheduler="gpu-batch"))) + b"\n")
    report.run_simulation(str(events), load_config(None), explain=False, output="table", seed=0)
    assert capsys.readouterr().out.splitlines()[-1] == \
        "1 pod without a node left to other schedulers: gpu-batch (1); this configuration's profiles: tessera"
