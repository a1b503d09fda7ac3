"""A shared GPU whose holders' slices together exceed its capacity is a conflict, as two whole holders are.

A trial (two Tessera installs on different Leases, 60 pods asking `class.tessera.dev/t4-shared: 5`
on 16Gi T4s, 3 slices per GPU) bound a fourth 5Gi slice onto a T4 that held three: `kubectl
tessera nodes` read `slices 20Gi/16Gi ... REASON -`, `tessera_devices{state="conflict"}` stayed 0
and no DeviceConflict was said, so TesseraGPUConflict could not fire. Only the install-level
ConflictingScheduler Event caught it. The over-full GPU must read `conflict` (naming its holders
and what they use of what it has) in the view, the gauge's input and a DeviceConflict Warning, and
the core must give it no further slice.

The cluster is built as the scheduler builds it: watch events replayed through the core, the
other install's Binding recorded as the pod update the apiserver sends (`spec.nodeName` and its
devices annotation).
"""

from __future__ import annotations

import copy
from typing import Any

from scheduler.core import annotations as ann
from scheduler.core.state import Notice
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from scheduler.view.cluster import build_view, gpu_counts
from scheduler.view.text import render_nodes
from tests.helpers import config

SHARED = "class.tessera.dev/t4-shared"
WHOLE = "class.tessera.dev/t4"
GI = 2**30
NODE = "t4-node-001"


def _cluster() -> tuple[Replay, dict[str, Any]]:
    device = b.device(NODE, 0, model="T4", memory="16Gi")
    replay = Replay(config(), agent=True)
    objs = [b.node(NODE, gpus=1), device,
            b.resource_class("t4-shared", match_labels={"model": "T4"}, sharing={"dimension": "memory", "unit": "1Gi"}),
            b.resource_class("t4", match_labels={"model": "T4"}),
            *(b.pod(f"r1-{i}", limits={SHARED: 5}) for i in range(3))]
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    return replay, device


def _slice(device: dict[str, Any], gib: int, resource: str = SHARED) -> str:
    spec = device["spec"]
    grant = ann.DeviceGrant(spec["deviceID"], device["metadata"]["name"], gib * GI if gib else None,
                            "memory" if gib else "")
    return ann.encode_devices({"main": {resource: (grant,)}})


def _bound_elsewhere(replay: Replay, name: str, devices: str, resource: str = SHARED, count: int = 5) -> None:
    """The other install's pod: created pending for it, then its Binding (nodeName and annotation)."""
    pod = b.pod(name, limits={resource: count})  # the same schedulerName, as in the trial
    list(replay.run([WatchEvent("ADDED", pod)]))
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = NODE
    bound["metadata"]["annotations"] = {ann.DEVICES: devices, ann.PHASE: ann.PHASE_ALLOCATED}
    bound["metadata"]["resourceVersion"] = "2"
    list(replay.run([WatchEvent("MODIFIED", bound)]))


def _conflicts(replay: Replay) -> int:
    counts = gpu_counts(replay.scheduler, now=replay.now)
    return sum(count for (_, state), count in counts.states.items() if state == m.CONFLICT)


def _gpu(replay: Replay) -> m.GpuView:
    view = build_view(replay.scheduler, source="simulate", now=replay.now)
    [node] = [node for node in view.nodes if node.name == NODE]
    [gpu] = node.gpus
    return gpu


def test_slices_beyond_the_gpu_memory_are_a_conflict_seen_everywhere() -> None:
    replay, device = _cluster()
    placed = [replay.scheduler.state.node_of(b.uid_for("Pod", "default", f"r1-{i}")) for i in range(3)]
    assert placed == [NODE] * 3
    assert _gpu(replay).state == m.SLICES and _conflicts(replay) == 0  # 15Gi of 16Gi: full, not over

    _bound_elsewhere(replay, "r2-31", _slice(device, 5))

    gpu = _gpu(replay)
    assert gpu.state == m.CONFLICT
    assert gpu.used == "20Gi/16Gi"
    assert gpu.reason == ("its slices use 20Gi of its 16Gi memory: shared by 4 pods at once: "
                          "default/r1-0, default/r1-1, default/r1-2, default/r2-31")
    assert _conflicts(replay) == 1  # tessera_devices{state="conflict"}: TesseraGPUConflict's input
    view = build_view(replay.scheduler, source="simulate", now=replay.now)
    assert view.summary.conflicts == 1
    table = render_nodes(view)
    assert "conflict" in table and "its slices use 20Gi of its 16Gi memory" in table
    [conflict] = [n for n in replay.stats.notices if n.reason == "DeviceConflict"]
    assert conflict.key == "default/r2-31"
    assert conflict.message == (
        f"device {device['metadata']['name']} is shared beyond its capacity: default/r2-31, and default/r1-0, "
        "default/r1-1, default/r1-2 that hold slices of it, use 20Gi of its 16Gi memory")
    assert replay.scheduler.still_stands(conflict)

    # nothing more goes there: not even the smallest slice (its room is below none, not wrapped)
    list(replay.run([WatchEvent("ADDED", b.pod("small", limits={SHARED: 1}))]))
    assert replay.scheduler.state.node_of(b.uid_for("Pod", "default", "small")) is None
    assert replay.stats.final["default/small"].message.startswith("0/1 nodes are available")

    # one holder leaves: 15Gi of 16Gi, no conflict any more; the notice no longer stands
    gone = b.pod("r1-0", limits={SHARED: 5})
    list(replay.run([WatchEvent("DELETED", gone)]))
    assert _gpu(replay).state == m.SLICES and _conflicts(replay) == 0
    assert not replay.scheduler.still_stands(conflict)
    assert replay.scheduler.state.node_of(b.uid_for("Pod", "default", "small")) == NODE  # 16Gi of 16Gi


def test_a_full_gpu_is_no_conflict() -> None:
    """Exactly at capacity (16 slices of 1Gi on 16Gi) is full, not over: no notice, no conflict."""
    replay, device = _cluster()
    _bound_elsewhere(replay, "r2-1", _slice(device, 1), count=1)
    assert _gpu(replay).state == m.SLICES and _conflicts(replay) == 0
    assert not [n for n in replay.stats.notices if n.reason == "DeviceConflict"]


def test_a_whole_holder_beside_slices_is_a_conflict() -> None:
    replay, device = _cluster()
    _bound_elsewhere(replay, "w", _slice(device, 0, WHOLE), resource=WHOLE, count=1)
    gpu = _gpu(replay)
    assert gpu.state == m.CONFLICT and _conflicts(replay) == 1
    assert [n.key for n in replay.stats.notices if n.reason == "DeviceConflict"] == ["default/w"]


def _notices(replay: Replay) -> list[Notice]:
    return [n for n in replay.stats.notices if n.reason == "DeviceConflict"]


def test_slices_listed_before_their_device_are_a_conflict_when_it_arrives() -> None:
    """A restart lists the pods before the ExtendedResources (informers list in any order): the
    charges cannot see the capacity yet, the device's arrival must."""
    device = b.device(NODE, 0, model="T4", memory="16Gi")
    holders = [b.pod(f"p{i}", limits={SHARED: 5}, node_name=NODE, phase="Running",
                     annotations={ann.DEVICES: _slice(device, 5), ann.PHASE: ann.PHASE_ALLOCATED}) for i in range(4)]
    replay = Replay(config(), agent=True)
    objs = [b.node(NODE, gpus=1),
            b.resource_class("t4-shared", match_labels={"model": "T4"}, sharing={"dimension": "memory", "unit": "1Gi"}),
            *holders, device]
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    assert _gpu(replay).state == m.CONFLICT and _conflicts(replay) == 1
    # found so at a start: on the ExtendedResource, blaming no pod, saying it cannot tell a cut from
    # slices given beyond it (tests/replay/test_slice_overfill_restart.py)
    [conflict] = _notices(replay)
    assert (conflict.kind, conflict.key) == ("ExtendedResource", device["metadata"]["name"])
    assert "use 20Gi of its 16Gi memory" in conflict.message and "cannot tell" in conflict.message
    assert replay.scheduler.still_stands(conflict)
