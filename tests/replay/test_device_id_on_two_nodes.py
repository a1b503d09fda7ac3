"""One deviceID (a GPU's UUID) named by ExtendedResources on two nodes: one GPU sits in one node, so
one of the objects describes no GPU of its node (made by hand, copied, left by an agent of a node
the GPU moved from). A pod given that object gets a deviceID its node agent does not have. A live
adversary saw pods given such a copy with no word anywhere; the same deviceID twice on ONE node is
`DuplicateDeviceID` (both fenced). Across nodes Tessera cannot tell which object is wrong, so it
places as before and says so: a Warning on each object, once per crossing."""

from __future__ import annotations

import copy

from scheduler.core.state.standing import still_stands
from scheduler.sim import builders as b
from tests.helpers import Run, config


def _copy_onto(device: dict[str, object], node: str, name: str) -> dict[str, object]:
    copied = copy.deepcopy(device)
    copied["metadata"] = {**copied["metadata"], "name": name, "uid": f"uid-{name}"}  # type: ignore[dict-item]
    copied["spec"] = {**copied["spec"], "nodeName": node}  # type: ignore[dict-item]
    return copied


def _run() -> tuple[Run, dict[str, object]]:
    run = Run(config())
    real = b.device("a", 0)
    run.add(b.node("a", gpus=1), b.node("b", gpus=1), real, b.device("b", 0))
    return run, real


def _warnings(run: Run) -> list[str]:
    return [n for n in run.notices() if n.startswith("DeviceIDOnTwoNodes")]


def test_a_device_id_named_on_two_nodes_is_warned_on_both_objects_once() -> None:
    run, real = _run()
    device_id = real["spec"]["deviceID"]  # type: ignore[index]
    run.add(_copy_onto(real, "b", "b.copy"))
    assert _warnings(run) == [
        f"DeviceIDOnTwoNodes: ExtendedResource b.copy on node b names deviceID {device_id}, as "
        f"{real['metadata']['name']} on node a does: a GPU is in one node, so one of them describes no GPU "  # type: ignore[index]
        "of its node (a pod given it gets a deviceID its node agent does not have); delete the one no node "
        "agent backs",
        f"DeviceIDOnTwoNodes: ExtendedResource {real['metadata']['name']} on node a names deviceID {device_id}, "  # type: ignore[index]
        "as b.copy on node b does: a GPU is in one node, so one of them describes no GPU of its node (a pod "
        "given it gets a deviceID its node agent does not have); delete the one no node agent backs",
    ]
    copied = _copy_onto(real, "b", "b.copy")
    copied["metadata"]["labels"] = {"touched": "yes"}  # type: ignore[index]
    run.feed(b.event("MODIFIED", copied))  # a resync or an unrelated edit: no repeat
    assert len(_warnings(run)) == 2


def test_the_warning_is_told_late_only_while_both_objects_stand_and_rearms() -> None:
    run, real = _run()
    copied = _copy_onto(real, "b", "b.copy")
    run.add(copied)
    [first, _] = [n for n in run.replay.stats.notices if n.reason == "DeviceIDOnTwoNodes"]
    assert still_stands(run.state, first)
    run.feed(b.event("DELETED", copied))
    assert not still_stands(run.state, first)
    run.add(_copy_onto(real, "b", "b.copy"))  # back again: a new crossing, warned again
    assert len(_warnings(run)) == 4


def test_a_device_id_on_one_node_only_is_not_this_warning() -> None:
    run, real = _run()
    run.add(_copy_onto(real, "a", "a.copy"))  # the same node: DuplicateDeviceID's case
    assert _warnings(run) == []
    assert any(n.startswith("DuplicateDeviceID") for n in run.notices())


def test_kubectl_tessera_nodes_says_so_on_both_rows() -> None:
    """A day-2 trial (item 9): both pods got the GPU (placement unchanged, as documented) and both
    objects had their Warning, but `kubectl tessera nodes` showed no REASON on either row."""
    from scheduler.view.cluster import build_view

    run = Run(config())
    real = b.device("a", 0)
    copied = _copy_onto(real, "b", "b.copy")
    run.add(b.node("a", gpus=1), b.node("b", gpus=1), real, copied,
            b.resource_class("v100", match_labels={"model": "V100"}),
            b.pod("p", limits={"class.tessera.dev/v100": 1}), b.pod("q", limits={"class.tessera.dev/v100": 1}))
    assert {run.node_of("p"), run.node_of("q")} == {"a", "b"}
    view = build_view(run.replay.scheduler, source="simulate", now=run.replay.now)
    device_id = real["spec"]["deviceID"]
    reasons = {node.name: [gpu.reason for gpu in node.gpus] for node in view.nodes}
    warning = ("a GPU sits in one node, so one of them describes no GPU of its node (a pod given it gets a deviceID "
               "its node agent does not have): delete the one no node agent backs")
    assert reasons == {
        "a": [f"deviceID {device_id} is also named by b.copy on node b: {warning}"],
        "b": [f"deviceID {device_id} is also named by {real['metadata']['name']} on node a: {warning}"],
    }
