"""A held device whose ExtendedResource was moved to another node (its spec.nodeName edited) is
taken in there once released: when that gives the destination more ExtendedResources than it
allocates, the Node gets its DevicesBeyondAllocatable Warning, as a device added there directly
does. A day-2 trial: 9 devices for 8 allocatable, the fenced row shown, but no Event (the release
was taken to only ever end a surplus, true of the node the device left, not of the one it joined)."""

from __future__ import annotations

import copy

from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.sim.snapshot import load
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


HEARTBEAT = "2026-01-01T00:00:00Z"  # a node agent serves node a: its gate holds a second pod's Binding


def test_the_warning_comes_when_a_forgotten_pod_releases_the_moved_device_not_at_the_next_event() -> None:
    """The same crossing, raised while a pod is forgotten rather than by a watch event: `p2`'s
    Binding is held by node a's allocation gate on a device then moved to b; when `p1`'s
    allocation opens the gate, the held placement is no longer valid (its device is on b now) and
    is forgotten, which takes the device in on b. Before, the Warning waited in
    `ClusterState.deferred` for the next watch event (a replay ending there, or a core built from a
    listing, never said it); now the core hands it out with what it did (`Scheduler.take_notices`),
    and the replay reports it at once."""
    replay = Replay(config(), agent=False)
    moving = b.device("a", 1, heartbeat=HEARTBEAT)
    objs = [b.node("a", gpus=2), b.device("a", 0, heartbeat=HEARTBEAT), moving,
            b.node("b", gpus=2), *(b.device("b", i) for i in range(2)),
            b.resource_class("v100", match_labels={"model": "V100"}),
            *(b.pod(f"p{i}", limits={CLASS: 1}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}})
              for i in (1, 2))]
    attempts = {a.pod.meta.name: a for a in replay.run(WatchEvent("ADDED", obj) for obj in objs)}
    assert attempts["p2"].deferred and attempts["p2"].node == "a"  # held at a's gate, its device assumed
    moved = copy.deepcopy(moving)
    moved["spec"]["nodeName"] = "b"
    list(replay.run([WatchEvent("MODIFIED", moved)]))
    assert not _beyond(replay)  # still p2's, counted on a
    allocated = copy.deepcopy(replay.pods[b.uid_for("Pod", "default", "p1")])
    allocated["metadata"]["annotations"][ann.PHASE] = ann.PHASE_ALLOCATED
    list(replay.run([WatchEvent("MODIFIED", allocated)]))  # the gate opens: p2's placement is redone
    assert replay.scheduler.state.devices[moving["metadata"]["name"]].node_name == "b"
    assert _beyond(replay) == [
        "node b has ExtendedResources for 3 nvidia.com/gpu devices (distinct deviceIDs) but only 2 nvidia.com/gpu "
        "allocatable: pods get at most 2 of them; delete the ExtendedResources no GPU of the node backs (made by "
        "hand, or left behind by a node agent)"]


def _beyond(replay: Replay) -> list[str]:
    return [n.message for n in replay.stats.notices if n.reason == "DevicesBeyondAllocatable"]


def test_a_refused_binding_that_releases_the_moved_device_is_told_at_once() -> None:
    """Forgotten outside any watch event (the apiserver refused `p`'s Binding while its device
    moved to b): the core hands the Warning out as it forgets (`take_notices`, which the live loop
    and the replay ask after each call), not with the next event's notices."""
    core = Scheduler(config())
    moving = b.device("a", 0)
    load(core, [b.node("a", gpus=1), moving, b.node("b", gpus=2), *(b.device("b", i) for i in range(2)),
                b.resource_class("v100", match_labels={"model": "V100"}),
                b.pod("p", limits={CLASS: 1}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}})], 0.0)
    attempts = core.schedule_next(0.0)
    assert attempts is not None and attempts[0].node == "a"  # assumed: its Binding on its way
    moved = copy.deepcopy(moving)
    moved["spec"]["nodeName"] = "b"
    assert not [n for n in core.apply("MODIFIED", moved, 0.0) if n.reason == "DevicesBeyondAllocatable"]
    assert core.take_notices() == []
    core.binding_failed(attempts[0].pod.uid, 1.0)  # the assumption is forgotten: the device is taken in on b
    assert core.state.devices[moving["metadata"]["name"]].node_name == "b"
    assert [n.reason for n in core.take_notices()] == ["DevicesBeyondAllocatable"]
    assert core.take_notices() == []  # told once


def _surplus_notices(run: Run) -> list[str]:
    return [n.split(" has ", 1)[1].split(":", 1)[0] for n in run.notices() if n.startswith("DevicesBeyondAllocatable")]


def test_the_warning_says_the_current_count_when_it_changes() -> None:
    """A node-maintenance trial re-added a node whose count is 8 with 16 new ExtendedResources:
    its one Warning said 'ExtendedResources for 9 ... devices', written when the 9th appeared and
    never again. Each change of the surplus (more objects, fewer, a new count) is a new notice with
    the current numbers (a new note: the recorder aggregates only repeats of the same one); the
    end of the surplus says nothing."""
    run = Run(config())
    devices = [b.device("n", i) for i in range(16)]
    run.add(b.node("n", gpus=8), *devices)
    for_ = "ExtendedResources for {} nvidia.com/gpu devices (distinct deviceIDs) but only {} nvidia.com/gpu allocatable"
    assert _surplus_notices(run) == [for_.format(count, 8) for count in range(9, 17)]
    run.feed(b.event("DELETED", devices[-1]))
    run.feed(b.event("MODIFIED", b.node("n", gpus=10)))
    assert _surplus_notices(run)[8:] == [for_.format(15, 8), for_.format(15, 10)]
    run.feed(*(b.event("DELETED", device) for device in devices[10:15]))
    assert _surplus_notices(run)[10:] == [for_.format(count, 10) for count in (14, 13, 12, 11)]
