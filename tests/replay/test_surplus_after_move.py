"""A held device whose ExtendedResource was moved to another node (its spec.nodeName edited) is
taken in there once released: when that gives the destination more ExtendedResources than it
allocates, the Node gets its DevicesBeyondAllocatable Warning, as a device added there directly
does. A day-2 trial: 9 devices for 8 allocatable, the fenced row shown, but no Event (the release
was taken to only ever end a surplus, true of the node the device left, not of the one it joined)."""

from __future__ import annotations

import copy

from scheduler.sim import builders as b
from tests.helpers import Run, config

CLASS = "class.tessera.dev/v100"


def test_a_held_device_moved_onto_a_full_node_warns_there_once_released() -> None:
    run = Run(config())
    device = b.device("a", 0)
    run.add(b.node("a", gpus=1), device, b.node("b", gpus=2), *(b.device("b", i) for i in range(2)),
            b.resource_class("v100", match_labels={"model": "V100"}),
            b.pod("p", limits={CLASS: 1}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}}))
    assert run.node_of("p") == "a"
    moved = copy.deepcopy(device)
    moved["spec"]["nodeName"] = "b"
    run.feed(b.event("MODIFIED", moved))
    assert not [n for n in run.notices() if n.startswith("DevicesBeyondAllocatable")]  # still counted on a
    pod = run.state.pod_by_key("default/p")
    done = b.pod("p", limits={CLASS: 1}, node_name="a", phase="Succeeded",
                 spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}},
                 annotations=dict(pod.meta.annotations))
    run.feed(b.event("MODIFIED", done))  # released: the object is taken in on b
    assert run.state.devices[device["metadata"]["name"]].node_name == "b"
    assert [n for n in run.notices() if n.startswith("DevicesBeyondAllocatable")] == [
        "DevicesBeyondAllocatable: node b has ExtendedResources for 3 nvidia.com/gpu devices (distinct deviceIDs) "
        "but only 2 nvidia.com/gpu allocatable: pods get at most 2 of them; delete the ExtendedResources no GPU of "
        "the node backs (made by hand, or left behind by a node agent)"]
