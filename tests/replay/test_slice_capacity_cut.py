"""A shared GPU whose capacity went down beneath the slices its pods hold was cut, not given twice.

An admin lowering an ExtendedResource's `capacity.memory` (or the node agent republishing a smaller
memory) under pods Tessera placed itself left `kubectl tessera nodes` reading `conflict 15Gi/14Gi`,
`tessera_devices{state="conflict"}` at 1 (the CRITICAL TesseraGPUConflict) and a DeviceConflict
Warning blaming the pods. docs/api.md says they keep what they were given: like a Node whose
allocatable was cut (GPUsOvercommitted "since its count went down"), the GPU stays `slices`, REASON
says its memory went down, a Warning on the ExtendedResource says so (CapacityLoweredWhileHeld) and
nothing more goes there until the slices fit. A holder charged after the cut (another install's
Binding onto the full GPU) is a real over-fill: `conflict`, as before.
"""

from __future__ import annotations

import copy
from typing import Any

from scheduler.core.state import Notice
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from scheduler.view.cluster import build_view
from scheduler.view.text import render_nodes
from tests.replay.test_slice_overfill_conflict import (SHARED, WHOLE, _bound_elsewhere, _cluster, _conflicts, _gpu,
                                                        _notices, _slice)


def _capacity(replay: Replay, device: dict[str, Any], memory: str, version: str) -> None:
    changed = copy.deepcopy(device)
    changed["spec"]["capacity"]["memory"] = memory
    changed["metadata"]["resourceVersion"] = version
    list(replay.run([WatchEvent("MODIFIED", changed)]))


def _lowered(replay: Replay) -> list[Notice]:
    return [n for n in replay.stats.notices if n.reason == "CapacityLoweredWhileHeld"]


def test_capacity_lowered_under_its_slices_is_no_conflict() -> None:
    replay, device = _cluster()  # 3 x 5Gi of a 16Gi T4, placed by this core
    name = device["metadata"]["name"]
    _capacity(replay, device, "14Gi", "9")

    gpu = _gpu(replay)
    assert gpu.state == m.SLICES and gpu.used == "15Gi/14Gi"
    assert gpu.reason == ("its memory went down to 14Gi under 15Gi held by default/r1-0, default/r1-1, default/r1-2: "
                          "they keep their slices, no more is given out until they fit")
    assert _conflicts(replay) == 0  # tessera_devices{state="conflict"} stays 0: no TesseraGPUConflict
    assert build_view(replay.scheduler, source="simulate", now=replay.now).summary.conflicts == 0
    assert "its memory went down to 14Gi" in render_nodes(build_view(replay.scheduler, source="simulate",
                                                                      now=replay.now))
    assert _notices(replay) == []  # no DeviceConflict blaming the pods
    [warning] = _lowered(replay)
    assert (warning.kind, warning.key) == ("ExtendedResource", name)
    assert warning.message == (
        f"ExtendedResource {name}: its memory went down from 16Gi to 14Gi under 15Gi held in slices by "
        "default/r1-0, default/r1-1, default/r1-2 (its object was edited, or its node agent publishes less): "
        "they keep the slices they hold, and no more is given out until they fit")
    assert replay.scheduler.still_stands(warning)

    # nothing more goes there
    list(replay.run([WatchEvent("ADDED", b.pod("small", limits={SHARED: 1}))]))
    assert replay.scheduler.state.node_of(b.uid_for("Pod", "default", "small")) is None

    # one holder leaves: 10Gi of 14Gi; the Warning no longer stands, the small pod goes there
    list(replay.run([WatchEvent("DELETED", b.pod("r1-0", limits={SHARED: 5}))]))
    assert not replay.scheduler.still_stands(warning)
    assert replay.scheduler.state.node_of(b.uid_for("Pod", "default", "small")) is not None
    gpu = _gpu(replay)
    assert gpu.state == m.SLICES and gpu.used == "11Gi/14Gi" and gpu.reason == ""
    assert _notices(replay) == [] and _conflicts(replay) == 0


def test_a_slice_bound_after_the_cut_is_a_conflict() -> None:
    """Another install's Binding onto the GPU its cut left full is a real over-fill."""
    replay, device = _cluster()
    _capacity(replay, device, "14Gi", "9")
    assert _gpu(replay).state == m.SLICES
    _bound_elsewhere(replay, "r2-31", _slice(device, 5))

    gpu = _gpu(replay)
    assert gpu.state == m.CONFLICT and gpu.used == "20Gi/14Gi"
    assert gpu.reason.startswith("its slices use 20Gi of its 14Gi memory: shared by 4 pods at once")
    assert _conflicts(replay) == 1
    [conflict] = _notices(replay)
    assert conflict.key == "default/r2-31" and "use 20Gi of its 14Gi memory" in conflict.message
    assert replay.scheduler.still_stands(conflict)


def test_a_cut_under_a_conflict_stays_a_conflict_and_a_cut_raised_back_is_gone() -> None:
    replay, device = _cluster()
    _bound_elsewhere(replay, "r2-31", _slice(device, 5))  # 20Gi of 16Gi: a conflict
    _capacity(replay, device, "14Gi", "9")
    assert _gpu(replay).state == m.CONFLICT and _lowered(replay) == []

    replay, device = _cluster()
    _capacity(replay, device, "14Gi", "9")
    [warning] = _lowered(replay)
    _capacity(replay, device, "16Gi", "10")  # raised back: 15Gi of 16Gi fits
    assert not replay.scheduler.still_stands(warning)
    assert _gpu(replay).state == m.SLICES and _gpu(replay).reason == ""
    _bound_elsewhere(replay, "r2-31", _slice(device, 5))  # now a Binding beyond it is a conflict again
    assert _gpu(replay).state == m.CONFLICT and [n.key for n in _notices(replay)] == ["default/r2-31"]


def test_a_whole_holder_beside_slices_is_worded_for_what_each_holds() -> None:
    """A whole hold beside slices is no GPU "assigned to more than one pod exclusively"."""
    replay, device = _cluster()
    name = device["metadata"]["name"]
    _bound_elsewhere(replay, "w", _slice(device, 0, WHOLE), resource=WHOLE, count=1)
    [conflict] = _notices(replay)
    assert conflict.message == (f"device {name} is held whole and by another pod besides: default/w (whole), and "
                                "default/r1-0, default/r1-1, default/r1-2 that hold slices of it")

    replay, device = _cluster()
    list(replay.run([WatchEvent("DELETED", b.pod(f"r1-{i}", limits={SHARED: 5})) for i in (1, 2)]))
    _bound_elsewhere(replay, "w", _slice(device, 0, WHOLE), resource=WHOLE, count=1)
    _bound_elsewhere(replay, "s", _slice(device, 2))
    conflicts = _notices(replay)
    assert [n.message for n in conflicts] == [
        f"device {name} is held whole and by another pod besides: default/w (whole), and default/r1-0 that holds "
        "a slice of it",
        f"device {name} is held whole and by another pod besides: default/s (a slice), and default/w that holds it "
        "whole; default/r1-0 that holds a slice of it"]


def test_the_warning_writes_the_amounts_it_compares_in_one_unit() -> None:
    """A cut to 14848Mi under 15Gi held read 'went down from 16Gi to 14848Mi under 15Gi' on the
    Event while `kubectl tessera nodes` wrote one unit (`format_alike`): the Warning writes the
    three amounts it compares in one exact unit too (final read: one sentence, two styles)."""
    replay, device = _cluster()  # 3 x 5Gi of a 16Gi T4
    _capacity(replay, device, "14848Mi", "9")
    [warning] = _lowered(replay)
    assert "its memory went down from 16384Mi to 14848Mi under 15360Mi held in slices by " in warning.message, \
        warning.message
    assert _gpu(replay).reason.startswith("its memory went down to 14848Mi under 15360Mi held by ")
