"""ExtendedResources that do not describe a GPU a pod can get: bad input is refused with a Warning,
and `kubectl tessera nodes` (and the GPU map, one view model) counts only GPUs a pod can get.

From a new user's trial on `tessera dev-cluster`: a hand-made ExtendedResource with a negative
memory capacity on a node whose 8 GPUs all had one was accepted silently and handed to a pod; the
summary then said 9 free on that node and a real GPU read `free` that no pod could get. A device
moved while held read as deleted, and one GPU under two names was counted twice with an empty
REASON.
"""

from __future__ import annotations

import copy
from typing import Any

from scheduler.sim import builders as b
from scheduler.view import model as m
from scheduler.view.cluster import build_view
from scheduler.view.text import render_nodes
from tests.helpers import BINPACK, Run, config

CLASS = "class.tessera.dev/v100"


def _class() -> dict[str, Any]:
    return b.resource_class("v100", match_labels={"model": "V100"})


def _pod_object(run: Run, name: str) -> dict[str, Any]:
    pod = run.state.pod_by_key(f"default/{name}")
    assert pod is not None
    obj = copy.deepcopy(b.pod(name, limits={CLASS: 1}))
    obj["metadata"]["uid"] = pod.uid
    obj["metadata"]["resourceVersion"] = "200"
    obj["spec"]["nodeName"] = pod.node_name
    obj["metadata"]["annotations"] = dict(pod.meta.annotations)
    return obj


def test_a_negative_capacity_is_bad_input_the_device_is_not_used() -> None:
    run = Run(config(BINPACK))
    bad = b.device("n", 1, memory="-16Gi")
    run.add(b.node("n", gpus=2), b.device("n", 0), bad, _class())
    assert bad["metadata"]["name"] not in run.state.devices
    assert (f'InvalidObject: ExtendedResource {bad["metadata"]["name"]}: ExtendedResource.spec.capacity[memory]: '
            'Invalid value: "-16Gi": must be greater than or equal to 0') in run.notices()
    run.add(b.pod("two", limits={CLASS: 2}))
    assert run.node_of("two") is None  # one usable device of the class, not two


def test_more_devices_than_the_node_counts_warns_and_views_count_only_what_a_pod_can_get() -> None:
    run = Run(config(BINPACK))
    devices = [b.device("n", i) for i in range(3)]
    run.add(b.node("n", gpus=2), *devices, _class())
    warnings = [n for n in run.replay.stats.notices if n.reason == "DevicesBeyondAllocatable"]
    assert [(n.kind, n.key) for n in warnings] == [("Node", "n")]
    assert warnings[0].message == (
        "node n has ExtendedResources for 3 nvidia.com/gpu devices (distinct deviceIDs) but only 2 nvidia.com/gpu "
        "allocatable: pods get at most 2 of them; delete the ExtendedResources no GPU of the node backs "
        "(made by hand, or left behind by a node agent)")
    summary = build_view(run.scheduler, source="simulate", now=0.0).summary
    assert (summary.gpus, summary.free, summary.largest_free, summary.unavailable) == (2, 2, 2, 0)

    run.add(b.pod("two", limits={CLASS: 2}))
    assert run.node_of("two") == "n"
    view = build_view(run.scheduler, source="simulate", now=0.0)
    [node] = view.nodes
    assert node.gpus_free == 0 and view.summary.free == 0 and view.summary.gpus == 2
    [left] = [gpu for gpu in node.gpus if not gpu.holders]
    assert left.state == m.FENCED
    assert left.reason == "the node counts 2 nvidia.com/gpu, all in use: no pod can get this one"
    assert "GPUs: 2 total, 2 in use, 0 free, 0 unavailable" in render_nodes(view)

    # once per crossing: a heartbeat changes nothing, back to the node's count and over it again warns again
    [spare] = [device for device in devices if device["metadata"]["name"] == left.device]
    run.feed(b.event("DELETED", spare))
    assert build_view(run.scheduler, source="simulate", now=0.0).summary.gpus == 2
    run.add(spare)
    assert sum(1 for n in run.replay.stats.notices if n.reason == "DevicesBeyondAllocatable") == 2


def test_a_device_moved_while_held_reads_as_moved_not_deleted() -> None:
    run = Run(config(BINPACK))
    device = b.device("a", 0)
    run.add(b.node("a", gpus=1), b.node("b", gpus=1), device, _class())
    run.add(b.pod("p", limits={CLASS: 1}))
    moved = copy.deepcopy(device)
    moved["spec"]["nodeName"] = "b"
    moved["metadata"]["resourceVersion"] = "7"
    run.feed(b.event("MODIFIED", moved))
    view = build_view(run.scheduler, source="simulate", now=0.0)
    [gpu] = next(node for node in view.nodes if node.name == "a").gpus
    assert gpu.reason == "moved to node b while held by default/p: it counts here until released"
    assert "no ExtendedResource describes it" not in render_nodes(view)


def test_one_gpu_under_two_names_has_its_reason_in_its_row_and_counts_once() -> None:
    run = Run(config(BINPACK))
    d0 = b.device("n", 0)
    renamed = copy.deepcopy(d0)
    renamed["metadata"].update(name="n.renamed", uid="n.renamed-uid")
    run.add(b.node("n", gpus=2), d0, renamed, b.device("n", 1), _class())
    view = build_view(run.scheduler, source="simulate", now=0.0)
    [node] = view.nodes
    rows = {gpu.device: gpu for gpu in node.gpus}
    device_id = d0["spec"]["deviceID"]
    assert rows["n.renamed"].state == rows[d0["metadata"]["name"]].state == m.CORDONED
    assert rows["n.renamed"].reason == (f"deviceID {device_id} is also named by {d0['metadata']['name']}: "
                                        "neither is given to a pod until one is gone")
    assert (view.summary.gpus, view.summary.free, view.summary.unavailable) == (2, 1, 1)
    assert node.gpus_unavailable == 1
    text = render_nodes(view)
    assert "GPUs: 2 total, 0 in use, 1 free, 1 unavailable" in text
    assert "name the same deviceID" not in text  # the cause is in the rows, not a note under the table
