"""The test harness counts a held device where Tessera does (docs/api.md: "While a pod holds a
device, an edit of its object's identity does not move the hold"): on its holder's node, under the
resourceName it was granted under, also once its ExtendedResource names another node. The checker
counted it on the object's new node, so in a soak that moves devices the old node read a GPU
emptier than Tessera counts it (a false "unbound: fits on <old node>") and the new one fuller
(a false "node-allocatable" there).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tessera_testing.invariants import (DEVICE_CAPACITY, NODE_ALLOCATABLE, UNBOUND, ClusterView, ClusterWatcher, check,
                                        check_capacity, check_unbound, node_usage)

GPU = "nvidia.com/gpu"
WHOLE = "class.tessera.dev/v100"


def _holder(device: dict[str, Any], granted: str = GPU) -> dict[str, Any]:
    """A Running pod on node a holding `device` whole through the class, as a Binding wrote it."""
    grant = ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], None, resource_name=granted)
    record = ann.encode_devices({"main": {WHOLE: (grant,)}})
    return b.pod("holder", limits={WHOLE: 1}, node_name="a", phase="Running",
                 annotations={ann.DEVICES: record, ann.HELD_DEVICES: record})


def _moved(device: dict[str, Any], node: str) -> dict[str, Any]:
    moved = {**device, "spec": {**device["spec"], "nodeName": node},
             "metadata": {**device["metadata"], "labels": {"tessera.dev/node": node}}}
    return moved


def _scenario() -> tuple[list[dict[str, Any]], ClusterView]:
    """Nodes a (1 GPU, its device held by `holder`) and b (no GPU resource); the held device's
    object is then edited to name node b; `wants` asks for one plain GPU and waits."""
    device = b.device("a", 0)
    holder = _holder(device)
    wants = b.pod("wants", limits={GPU: 1})
    nodes = [b.node("a", gpus=1), b.node("b")]
    objects = [*nodes, b.resource_class("v100", match_labels={"model": "V100"}), device, holder, wants]
    moved = _moved(device, "b")
    view = ClusterView(nodes={n["metadata"]["name"]: n for n in nodes},
                       pods={p["metadata"]["uid"]: p for p in (holder, wants)},
                       devices={moved["metadata"]["name"]: moved},
                       classes={"v100": objects[2]})
    return [*objects, moved], view


def test_a_held_device_whose_object_moved_counts_on_its_holders_node_as_tessera_counts_it() -> None:
    events, view = _scenario()
    core = Scheduler(load_config(None), seed=0)
    *added, moved = events
    for obj in added:
        core.apply("ADDED", obj, 0.0)
    core.apply("MODIFIED", moved, 0.0)  # the object names node b now, while held
    assert core.state.placements[b.uid_for("Pod", "default", "holder")].node == "a"
    tessera = {node: core.state.nodes[node].used(GPU) for node in ("a", "b")}
    assert tessera == {"a": 1, "b": 0}  # the hold did not move (docs/api.md)
    usage = node_usage(view)
    assert {node: usage[node][GPU] if node in usage else 0 for node in ("a", "b")} == tessera
    assert core.schedule_next(0.0) is not None
    assert core.state.pods[b.uid_for("Pod", "default", "wants")].uid in core.state.pending  # Tessera: no room


def test_no_false_unbound_or_node_allocatable_report_for_it() -> None:
    _, view = _scenario()
    assert [v for v in check_unbound(view, ["default/wants"], only_if_room=True) if v.invariant == UNBOUND] == []
    assert [v for v in check_capacity(view) if v.invariant == NODE_ALLOCATABLE] == []


def test_a_held_device_counts_under_the_resource_name_it_was_granted_under() -> None:
    """Its object renamed to another resourceName while held: counted under the granted one."""
    device = b.device("a", 0)
    renamed = {**device, "spec": {**device["spec"], "resourceName": "example.com/gpu"}}
    holder = _holder(device)
    view = ClusterView(nodes={"a": b.node("a", gpus=1)}, pods={holder["metadata"]["uid"]: holder},
                       devices={renamed["metadata"]["name"]: renamed})
    usage = node_usage(view)["a"]
    assert (usage[GPU], usage["example.com/gpu"]) == (1, 0)


def _watcher_saw(*steps: tuple[str, str, dict[str, Any]]) -> ClusterWatcher:
    """A ClusterWatcher fed these watch events in order (no apiserver: only its bookkeeping)."""
    watcher = ClusterWatcher(None)  # type: ignore[arg-type]
    for kind, event_type, obj in steps:
        watcher._apply(kind, event_type, obj)
    return watcher


def test_a_device_moved_after_its_hold_began_is_no_device_on_another_node_for_the_watcher() -> None:
    """The capacity check flags a device held by a pod of another node than its object names
    (Tessera handing out a GPU of another node). The watcher saw the hold begin while the object
    named the holder's node, then the object move: the hold stayed, as documented; not flagged. A
    final LIST alone cannot tell the two apart and still flags it."""
    events, view = _scenario()
    nodes, device, holder, moved = events[:2], events[3], events[4], events[-1]
    watcher = _watcher_saw(*[("Node", "ADDED", n) for n in nodes], ("ExtendedResource", "ADDED", device),
                           ("Pod", "ADDED", holder), ("ExtendedResource", "MODIFIED", moved))
    assert [v for v in watcher.violations() if v.invariant == DEVICE_CAPACITY] == []
    assert [v for v in check(view, watcher=watcher) if v.invariant == DEVICE_CAPACITY] == []
    assert [v.detail for v in check_capacity(view) if v.invariant == DEVICE_CAPACITY] == [
        "device is on node b but pods on other nodes hold it: default/holder"]


@pytest.mark.parametrize("edit", ["moved", "deleted and created again"])
def test_a_hold_seen_before_its_device_is_noted_when_the_device_leaves(edit: str) -> None:
    """The watcher's pod LIST came before its device LIST (the kinds are listed concurrently): the
    hold is noted when the object leaves the node — edited to name another, or deleted and created
    again there."""
    events, view = _scenario()
    nodes, device, holder, moved = events[:2], events[3], events[4], events[-1]
    leaves = [("ExtendedResource", "MODIFIED", moved)] if edit == "moved" else \
        [("ExtendedResource", "DELETED", device), ("ExtendedResource", "ADDED", moved)]
    watcher = _watcher_saw(*[("Node", "ADDED", n) for n in nodes], ("Pod", "ADDED", holder),
                           ("ExtendedResource", "ADDED", device), *leaves)
    assert [v for v in check(view, watcher=watcher) if v.invariant == DEVICE_CAPACITY] == []


def test_a_pod_holding_a_device_of_another_node_from_the_start_is_still_flagged() -> None:
    """The object named node b when the watcher first saw the pod on node a hold it: flagged."""
    events, view = _scenario()
    nodes, holder, moved = events[:2], events[4], events[-1]
    watcher = _watcher_saw(*[("Node", "ADDED", n) for n in nodes], ("ExtendedResource", "ADDED", moved),
                           ("Pod", "ADDED", holder))
    assert [v.detail for v in check(view, watcher=watcher) if v.invariant == DEVICE_CAPACITY] == [
        "device is on node b but pods on other nodes hold it: default/holder"]
