"""The test harness counts a held device where Tessera does (docs/api.md: "While a pod holds a
device, an edit of its object's identity does not move the hold"): on its holder's node, under the
resourceName it was granted under, also once its ExtendedResource names another node. The checker
counted it on the object's new node, so in a soak that moves devices the old node read a GPU
emptier than Tessera counts it (a false "unbound: fits on <old node>") and the new one fuller
(a false "node-allocatable" there).
"""

from __future__ import annotations

from typing import Any

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tessera_testing.invariants import NODE_ALLOCATABLE, UNBOUND, ClusterView, check_capacity, check_unbound, node_usage

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
