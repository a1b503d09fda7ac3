"""`tessera record`'s snapshot order: a recording replays from the bound state (issue 10, part 3.4).

A cluster with every GPU in use and pods pending, listed in name order, put a pending pod before
the bound pods after it; the replay placed it on GPUs those bound pods hold and showed `6/4`.
"""

from __future__ import annotations

import io
from typing import Any

import orjson

from scheduler.kube.record_cli import _Writer
from scheduler.sim import builders as b
from scheduler.sim.replay import read_events
from tests.helpers import Run, config


def _cluster() -> list[dict[str, Any]]:
    """Two full 4-GPU nodes and two pending pods, in the order the apiserver lists them: pods by name."""
    objects: list[dict[str, Any]] = [b.node("n1", gpus=4), b.node("n2", gpus=4)]
    pods = [b.pod(f"bound-{node}-{i}", limits={"nvidia.com/gpu": 1}, node_name=node, phase="Running")
            for node in ("n1", "n2") for i in range(4)]
    pods += [b.pod("aa-pending", limits={"nvidia.com/gpu": 2}), b.pod("zz-pending", limits={"nvidia.com/gpu": 1})]
    return objects + sorted(pods, key=lambda pod: pod["metadata"]["name"])


def _record(objects: list[dict[str, Any]], listed_kinds: set[str], later: list[tuple[str, dict[str, Any]]]) -> bytes:
    out = io.BytesIO()
    writer = _Writer(out, lambda kind: kind in listed_kinds)
    for obj in objects:  # the initial lists, pods first as they may arrive
        if obj["kind"] == "Pod":
            writer("ADDED", obj)
    for obj in objects:
        if obj["kind"] != "Pod":
            writer("ADDED", obj)
    listed_kinds |= {"Pod", "Node"}
    for event_type, obj in later:  # watch events before every kind was synced
        writer(event_type, obj)
    writer.release()
    return out.getvalue()


def test_snapshot_is_nodes_then_bound_pods_then_pending_pods_then_held_watch_events() -> None:
    late = b.pod("late", limits={"nvidia.com/gpu": 1})
    data = _record(_cluster(), set(), [("ADDED", late), ("DELETED", late)])
    events = [orjson.loads(line) for line in data.splitlines()]
    order = [(e["type"], e["object"]["kind"], e["object"]["metadata"]["name"]) for e in events]
    assert [name for _, kind, name in order if kind == "Node"] == ["n1", "n2"]
    pods = [name for _, kind, name in order if kind == "Pod"]
    assert pods[:8] == sorted(f"bound-{n}-{i}" for n in ("n1", "n2") for i in range(4))  # name order kept
    assert pods[8:] == ["aa-pending", "zz-pending", "late", "late"]
    assert order[0][1] == "Node" and order[-2:] == [("ADDED", "Pod", "late"), ("DELETED", "Pod", "late")]


def test_recording_of_a_full_cluster_replays_to_the_same_placements() -> None:
    errors: list[str] = []
    run = Run(config())
    run.feed(*({"type": e.type, "object": e.object}
               for e in read_events(_record(_cluster(), set(), []).splitlines(), errors)))
    assert errors == []
    assert run.replay.stats.over_capacity == {}
    for node in ("n1", "n2"):
        assert run.state.nodes[node].used("nvidia.com/gpu") == 4
        assert all(run.node_of(f"bound-{node}-{i}") == node for i in range(4))
    assert run.node_of("aa-pending") is None and run.node_of("zz-pending") is None
    assert "Insufficient nvidia.com/gpu" in run.last("aa-pending").message
