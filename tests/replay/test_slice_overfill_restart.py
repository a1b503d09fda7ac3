"""Slices over a shared GPU's capacity found at a start read the same whatever the informers list first.

The final cluster: three pods hold 5Gi slices of a T4 whose ExtendedResource says 14Gi. Live, a
process that placed them on 16Gi and then saw the capacity go down knows it was cut
(`slices`, CapacityLoweredWhileHeld, `DeviceUse.kept`); one that saw another writer bind a slice
beyond it knows it was a conflict. A process started after either finds the same objects and
cannot tell the two apart. Before, it read `conflict` with a DeviceConflict blaming whichever pod
its listing happened to charge last (the device listed first) or the greatest name (the pods
listed first). Now both orders read the same: the conservative reading (`conflict`, which feeds
TesseraGPUConflict, and no pod placed there until the slices fit), with one DeviceConflict on the
ExtendedResource that says it cannot tell a cut from slices given beyond it, and a REASON that
says so too.
"""

from __future__ import annotations

from typing import Any

from scheduler.core import annotations as ann
from scheduler.core.state import Notice
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from tests.helpers import config
from tests.replay.test_slice_capacity_cut import _capacity, _lowered
from tests.replay.test_slice_overfill_conflict import NODE, SHARED, _bound_elsewhere, _cluster, _conflicts, _gpu, _slice

CANNOT_TELL = ("found so when its pods were first seen, already bound (a start, a relist, a pod created with "
               "spec.nodeName): it cannot tell a capacity that went down beneath slices given within it from "
               "slices given beyond it (another scheduler, or a Binding by hand)")


def _restart(device_first: bool, memory: str = "14Gi", names: tuple[str, ...] = ("r1-2", "r1-0", "r1-1"),
             gib: int = 5) -> tuple[Replay, dict[str, Any]]:
    """A process started on the final cluster: bound pods listed in `names` order (not sorted:
    a listing's order is no evidence), the device before or after them."""
    device = b.device(NODE, 0, model="T4", memory=memory)
    holders = [b.pod(name, limits={SHARED: gib}, node_name=NODE, phase="Running",
                     annotations={ann.DEVICES: _slice(device, gib), ann.PHASE: ann.PHASE_ALLOCATED})
               for name in names]
    replay = Replay(config(), agent=True)
    first = [b.node(NODE, gpus=1),
             b.resource_class("t4-shared", match_labels={"model": "T4"}, sharing={"dimension": "memory", "unit": "1Gi"})]
    objs = [*first, device, *holders] if device_first else [*first, *holders, device]
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    return replay, device


def _conflict_notices(replay: Replay) -> list[Notice]:
    return [n for n in replay.stats.notices if n.reason == "DeviceConflict"]


def _another_writers_slice_is_a_conflict_it_can_tell(replay: Replay, device: dict[str, Any]) -> None:
    """Another writer's Binding of a 5Gi slice of `device`, seen live: a conflict that blames its
    pod, not one a listing cannot tell."""
    _bound_elsewhere(replay, "r2-31", _slice(device, 5))
    gpu = _gpu(replay)
    assert gpu.state == m.CONFLICT and CANNOT_TELL not in gpu.reason
    [conflict] = _conflict_notices(replay)
    assert conflict.key == "default/r2-31" and CANNOT_TELL not in conflict.message


def test_over_full_slices_found_at_a_start_read_the_same_in_either_listing_order() -> None:
    readings = []
    for device_first in (True, False):
        replay, device = _restart(device_first)
        name = device["metadata"]["name"]
        gpu = _gpu(replay)
        assert gpu.state == m.CONFLICT and gpu.used == "15Gi/14Gi" and _conflicts(replay) == 1
        assert gpu.reason == ("its slices use 15Gi of its 14Gi memory: shared by 3 pods at once: default/r1-0, "
                              f"default/r1-1, default/r1-2; {CANNOT_TELL}")
        notices = _conflict_notices(replay)
        assert notices and all((n.kind, n.key) == ("ExtendedResource", name) for n in notices)  # no pod blamed
        last = notices[-1]
        assert last.message == (f"ExtendedResource {name}: its slices use 15Gi of its 14Gi memory, held by "
                                f"default/r1-0, default/r1-1, default/r1-2, {CANNOT_TELL}; no more of it is given "
                                "out until they fit")
        assert replay.scheduler.still_stands(last)
        assert _lowered(replay) == []
        # the conservative reading: nothing more goes there
        list(replay.run([WatchEvent("ADDED", b.pod("small", limits={SHARED: 1}))]))
        assert replay.scheduler.state.node_of(b.uid_for("Pod", "default", "small")) is None
        readings.append((gpu, last))
        # one holder leaves: 10Gi of 14Gi fits; the notice no longer stands, the small pod goes there
        list(replay.run([WatchEvent("DELETED", b.pod("r1-0", limits={SHARED: 5}))]))
        assert not replay.scheduler.still_stands(last)
        assert _gpu(replay).state == m.SLICES and _conflicts(replay) == 0
        assert replay.scheduler.state.node_of(b.uid_for("Pod", "default", "small")) == NODE
    assert readings[0] == readings[1]


def test_the_live_cut_and_the_live_conflict_still_read_as_what_they_are() -> None:
    """What a process saw happen it knows: the cut reads `slices`, a slice bound beyond reads
    `conflict` blaming that pod, neither with the start's 'cannot tell'."""
    replay, device = _cluster()  # 3 x 5Gi placed on 16Gi by this core
    _capacity(replay, device, "14Gi", "9")
    gpu = _gpu(replay)
    assert gpu.state == m.SLICES and gpu.reason.startswith("its memory went down to 14Gi") and _lowered(replay)

    _another_writers_slice_is_a_conflict_it_can_tell(*_cluster())


def test_a_slice_seen_bound_beside_slices_found_at_a_start_is_a_conflict_it_can_tell() -> None:
    """Found within capacity (15Gi of 16Gi) at a start, then another writer's Binding seen live."""
    replay, device = _restart(device_first=True, memory="16Gi")
    assert _gpu(replay).state == m.SLICES and _conflict_notices(replay) == []
    _another_writers_slice_is_a_conflict_it_can_tell(replay, device)


def test_a_capacity_seen_going_down_under_slices_found_at_a_start_is_a_cut() -> None:
    replay, device = _restart(device_first=True, memory="16Gi")
    _capacity(replay, device, "14Gi", "9")
    gpu = _gpu(replay)
    assert gpu.state == m.SLICES and gpu.reason.startswith("its memory went down to 14Gi under 15Gi held")
    assert _conflict_notices(replay) == [] and len(_lowered(replay)) == 1
