"""`tessera simulate`'s report says what `kubectl tessera what-if` says of the same pods: why each
preemption victim went (a gang member that one fewer would leave below its minimum) and that a gang
with fewer pods than its minimum is never tried (`capacity.too_few_members`). Before, the report
listed victims bare ("evicted for default/hi") and only upstream's "cannot find enough sibling
pods" for the short gang, which reads like a wait that ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.kubectl import whatif
from scheduler.sim import builders as b
from scheduler.sim.report import run_simulation
from tests.helpers import BINPACK, TOO_FEW_WHY, config

GANG = "gang default/low: would fall below minMember 2"
HINT = ("Only 2 pods of PodGroup default/train exist and its minMember is 3: no member is tried until 1 more is "
        "created (" + TOO_FEW_WHY.format(field="minMember") + ").")


def _objects() -> list[dict[str, Any]]:
    gang = [b.pod(f"low-{i}", node_name="n1", phase="Running", limits={"nvidia.com/gpu": 2}, priority=0,
                  labels=b.gang_labels("low", 2)) for i in range(2)]
    short = [b.pod(f"job-{i}", limits={"nvidia.com/gpu": 1}, labels={"scheduling.x-k8s.io/pod-group": "train"})
             for i in range(2)]
    return [b.node("n1", gpus=4), *gang, b.podgroup("train", 3), *short,
            b.pod("hi", limits={"nvidia.com/gpu": 2}, priority=1000)]


def _report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps(b.event("ADDED", obj)) + b"\n" for obj in _objects()))
    assert run_simulation(str(path), config(BINPACK), explain=False, output="table", seed=0) == 0
    return capsys.readouterr().out


def test_the_report_names_why_each_victim_went(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _report(tmp_path, capsys)
    assert f"  evicted for default/hi: default/low-0, default/low-1 ({GANG})\n" in table, table
    # what-if says it in the same words (one home: victims.listed_all)
    assert f"Preemption would evict: default/low-0, default/low-1 ({GANG})" in whatif.render(
        whatif.what_if(_objects(), config(BINPACK), 0.0))


def test_the_report_says_a_gang_with_too_few_pods_is_never_tried(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    table = _report(tmp_path, capsys)
    waiting = [line for line in table.splitlines() if line.startswith("  default/job-")]
    assert len(waiting) == 2 and all(line.endswith(f" {HINT}") for line in waiting), table
    outcome = next(o for o in whatif.what_if(_objects(), config(BINPACK), 0.0).outcomes if o.pod == "default/job-0")
    assert waiting[0] == f"  default/job-0: {outcome.message}"  # what-if's words
