"""`tessera simulate -o table` after the recording deletes Nodes (a capacity planner's trial): the
table listed only the nodes with a Node object while the summary line under it counted every GPU
the view shows, a deleted node's still held by its bound pods ("304 total" under 34 nodes of 272),
and the pods bound there vanished from the table without a note. Upstream a pod bound to a deleted
Node stays bound (the PodGC deletes it later), so the replay keeps it there: the table lists the
node as `NAME (Node deleted)` with its pods, as `kubectl tessera nodes` does, and says so."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from scheduler.sim import builders as b
from scheduler.sim.report import run_simulation
from tests.helpers import config


def _recording(delete_devices: bool) -> list[dict[str, object]]:
    events = []
    for name in ("keep", "gone"):
        events += [b.event("ADDED", b.node(name, gpus=4)), *(b.event("ADDED", b.device(name, i)) for i in range(4))]
    events += [b.event("ADDED", b.pod(f"on-{name}", limits={"nvidia.com/gpu": 2}, node_name=name, phase="Running"))
               for name in ("keep", "gone")]
    events.append(b.event("DELETED", b.node("gone", gpus=4)))
    if delete_devices:
        events += [b.event("DELETED", b.device("gone", i)) for i in range(4)]
    return events


def _table(tmp_path: Path, capsys: pytest.CaptureFixture[str], delete_devices: bool) -> list[str]:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in _recording(delete_devices)))
    assert run_simulation(str(path), config(), explain=False, output="table", seed=0) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("delete_devices", [False, True])
def test_the_table_lists_a_deleted_node_with_its_bound_pods_as_the_summary_counts_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], delete_devices: bool) -> None:
    lines = _table(tmp_path, capsys, delete_devices)
    rows = {line.split()[0]: line for line in lines[1:] if line and not line.startswith((" ", "GPUs:")) and
            "event" not in line}
    assert set(rows) == {"keep", "gone"}
    assert "gone (Node deleted)" in rows["gone"] and rows["gone"].endswith("on-gone")
    [summary] = [line for line in lines if line.startswith("GPUs:")]
    # the summary counts the GPUs the table lists: the deleted node's 4 while its devices are known,
    # else the 2 its pod still holds
    gpus = sum(int(row.split()[3 if name == "gone" else 1].split("/")[1]) for name, row in rows.items())
    assert gpus == (8 if not delete_devices else 6) and summary.startswith(f"GPUs: {gpus} total, ")
    assert ("  1 pod bound to a deleted Node (gone): the replay leaves it bound, holding what it "
            "holds, as the apiserver does until the PodGC (kube-controller-manager) marks it Failed and deletes it, "
            "40 s after the Node is gone at the earliest (DisruptionTarget DeletionByPodGC: PodGC: node no longer "
            "exists)") in lines
