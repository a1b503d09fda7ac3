"""`tessera record`'s snapshot order: a recording replays from the bound state (issue 10, part 3.4).

A cluster with every GPU in use and pods pending, listed in name order, put a pending pod before
the bound pods after it; the replay placed it on GPUs those bound pods hold and showed `6/4`.
"""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest

from scheduler.kube.record_cli import _Writer
from scheduler.sim import builders as b
from scheduler.sim.replay import read_events
from tests.helpers import Run, budget_protected_cluster, config


def _cluster() -> list[dict[str, Any]]:
    """Two full 4-GPU nodes and two pending pods, in the order the apiserver lists them: pods by name."""
    objects: list[dict[str, Any]] = [b.node("n1", gpus=4), b.node("n2", gpus=4)]
    pods = [b.pod(f"bound-{node}-{i}", limits={"nvidia.com/gpu": 1}, node_name=node, phase="Running")
            for node in ("n1", "n2") for i in range(4)]
    pods += [b.pod("aa-pending", limits={"nvidia.com/gpu": 2}), b.pod("zz-pending", limits={"nvidia.com/gpu": 1})]
    return objects + sorted(pods, key=lambda pod: pod["metadata"]["name"])


def _record(objects: list[dict[str, Any]], listed_kinds: set[str], later: list[tuple[str, dict[str, Any]]]) -> bytes:
    out = io.BytesIO()
    writer = _Writer(out, lambda kind: kind in listed_kinds, lambda: None)
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


def test_a_recording_replays_preemption_with_the_budgets_it_recorded() -> None:
    """A new user's trial: the budget was written after the pending pod, so the replay preempted
    the pod it protects where the live scheduler had taken the other one."""
    objects = budget_protected_cluster()  # listed as the informers deliver them: the budget last
    errors: list[str] = []
    run = Run(config())
    run.feed(*({"type": e.type, "object": e.object}
               for e in read_events(_record(objects, set(), []).splitlines(), errors)))
    assert errors == []
    assert run.node_of("a-kept") == "n1"  # the budget protects it, though its priority is the lower
    assert run.node_of("high") == "n2" and run.replay.stats.evicted == {"default/b-other": "default/high"}


def test_a_recording_replays_a_gangs_priority_from_the_class_it_recorded() -> None:
    """A review: PriorityClasses were written after the pods too. A gang's PodGroup names a
    low class; the pending pod is tried at once, and must see the gang at that class's priority."""
    group = b.podgroup("train", 2)
    group["spec"]["priorityClassName"] = "batch"
    batch = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch", "uid": "pc"},
             "value": 10}
    members = [b.pod(f"t-{i}", limits={"nvidia.com/gpu": 2}, priority=1000, node_name="a", phase="Running",
                     labels={"scheduling.x-k8s.io/pod-group": "train"}) for i in range(2)]
    objects = [b.node("a", gpus=4), group, *members, b.pod("mid", limits={"nvidia.com/gpu": 2}, priority=100), batch]
    errors: list[str] = []
    run = Run(config())
    run.feed(*({"type": e.type, "object": e.object}
               for e in read_events(_record(objects, set(), []).splitlines(), errors)))
    assert errors == []
    assert run.node_of("mid") == "a"
    assert run.replay.stats.evicted == {"default/t-0": "default/mid", "default/t-1": "default/mid"}


# --- both PodGroup APIs (issue 15's follow-up: upstream PodGroups were not recorded) -----------


def test_kinds_name_both_podgroup_apis_or_one_by_its_group() -> None:
    from scheduler.kube.informers import POD_GROUPS, SCHEDULER_KINDS, WORKLOAD_POD_GROUPS
    from scheduler.kube.record_cli import _parse_kinds

    assert _parse_kinds(None) == SCHEDULER_KINDS  # what the scheduler watches, upstream PodGroups too
    assert _parse_kinds(["podgroups"]) == (POD_GROUPS, WORKLOAD_POD_GROUPS)
    assert _parse_kinds(["podgroups.scheduling.k8s.io"]) == (WORKLOAD_POD_GROUPS,)
    assert _parse_kinds(["pods,PodGroup.scheduling.x-k8s.io"])[1:] == (POD_GROUPS,)
    with pytest.raises(ValueError, match="unknown kind\\(s\\) gangs; choose from nodes, pods"):
        _parse_kinds(["gangs"])


def test_an_upstream_podgroup_is_its_own_kind_until_its_list_is_in_and_replays_as_a_gang() -> None:
    """The two PodGroup APIs share the kind name: an upstream PodGroup listed while only the
    scheduler-plugins list is in belongs to the snapshot (before the pods), not to the held watch
    events after them — else its gang's pods replay before their group exists."""
    out = io.BytesIO()
    writer = _Writer(out, lambda kind: kind == "PodGroup", lambda: None)  # only the scheduler-plugins list is in
    pods = [b.pod(f"wl-{i}", limits={"nvidia.com/gpu": 2}, spec_extra={"schedulingGroup": {"podGroupName": "wl"}})
            for i in range(2)]
    writer("ADDED", b.node("n1", gpus=4))
    for pod in pods:
        writer("ADDED", pod)
    writer("ADDED", b.workload_podgroup("wl", 2))
    writer.release()
    events = [orjson.loads(line) for line in out.getvalue().splitlines()]
    kinds = [e["object"]["kind"] for e in events]
    assert kinds.index("PodGroup") < kinds.index("Pod")
    assert "PodGroup.scheduling.k8s.io 1" in writer.summary()
    run = Run(config())
    run.feed(*events)
    assert {run.node_of("wl-0"), run.node_of("wl-1")} == {"n1"}
