"""The harness judges a Binding by what it granted, and a hold from before the watch by the capacity then.

Two false reports of `tessera_testing.invariants`:

- `check_history` read only `tessera.dev/devices` of the pod as it is at the end: an edit of that
  annotation after the Binding (which Tessera keeps held through `tessera.dev/held-devices`, the
  union of every version) read as a Binding of the edited grants — a STALE_BINDING for an amount
  or a device the scheduler never gave. It now judges what the pod held when the watcher first saw
  it bound (the union of both annotations, as Tessera reads it: `_held_assignment`).
- `check_capacity`, given the watcher's history, judged a device with any hold from the initial
  LIST by its capacity now, so a capacity lowered during the run under slices held since before
  it read as slices given beyond it (lowered under held slices is allowed, docs/api.md). Such
  holds are now judged by the capacity the device had when the watch began (the first version
  the watcher knows), the nearest to when they began it can know.
"""

from __future__ import annotations

from typing import Any

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tessera_testing.invariants import (DEVICE_CAPACITY, STALE_BINDING, ClusterView, ClusterWatcher, check,
                                        check_history)
from tests.unit.test_invariants_history import NAME, NODES, SLICE, _doc, _device, _rv, _slice_pod

CLASS = _rv(b.resource_class("v100-mem", sharing={"dimension": "memory", "unit": "1Gi"}), 2)


def _bound(name: str, units: int, rv: int, devices: str, held: str | None = None) -> dict[str, Any]:
    """A pod asking `units` 1Gi units of SLICE, bound with these annotations."""
    pod = b.pod(name, limits={SLICE: units}, node_name="a", phase="Running",
                annotations={ann.DEVICES: devices, ann.HELD_DEVICES: held if held is not None else devices})
    return _rv(pod, rv)


def _history(*steps: tuple[str, str, dict[str, Any]]) -> list[str]:
    watcher = ClusterWatcher(None, grace=0.0)  # type: ignore[arg-type]
    for kind, event_type, obj in steps:
        watcher._apply(kind, event_type, obj)
    view = ClusterView(nodes=dict(watcher.view.nodes), pods=dict(watcher.view.pods),
                       devices=dict(watcher.view.devices), classes=dict(watcher.view.classes))
    return [f"{v.subject}: {v.detail}" for v in check_history(watcher, view, grace=0.0) if v.invariant == STALE_BINDING]


SETUP = (*NODES, ("ResourceClass", "ADDED", CLASS), ("ExtendedResource", "ADDED", _device(3)))


def test_a_devices_annotation_edited_after_the_binding_is_no_stale_binding() -> None:
    granted = _doc({"main": {SLICE: "16Gi"}})
    bound = _bound("p", 16, 10, granted)
    edited = _bound("p", 16, 11, _doc({"main": {SLICE: "8Gi"}}), held=granted)  # held-devices keeps 16Gi
    assert _history(*SETUP, ("Pod", "ADDED", _rv(b.pod("p", limits={SLICE: 16}), 9)),
                    ("Pod", "MODIFIED", bound), ("Pod", "MODIFIED", edited)) == []


def test_a_devices_annotation_edited_to_a_device_that_never_existed_is_no_stale_binding() -> None:
    granted = _doc({"main": {SLICE: "16Gi"}})
    bogus = granted.replace(NAME, "a.gpu-nothing")
    bound = _bound("p", 16, 10, granted)
    edited = _bound("p", 16, 11, bogus, held=granted)
    assert _history(*SETUP, ("Pod", "ADDED", _rv(b.pod("p", limits={SLICE: 16}), 9)),
                    ("Pod", "MODIFIED", bound), ("Pod", "MODIFIED", edited)) == []


def test_a_binding_that_granted_the_wrong_amount_is_still_flagged() -> None:
    """What the Binding wrote is judged: 8Gi for 16 units of 1Gi (then edited to the right amount)."""
    wrong = _doc({"main": {SLICE: "8Gi"}})
    bound = _bound("p", 16, 10, wrong)
    fixed = _bound("p", 16, 11, _doc({"main": {SLICE: "16Gi"}}), held=wrong)
    assert _history(*SETUP, ("Pod", "ADDED", _rv(b.pod("p", limits={SLICE: 16}), 9)),
                    ("Pod", "MODIFIED", bound), ("Pod", "MODIFIED", fixed)) == [
        "default/p: grant on " + NAME + " is 8Gi, ResourceClass v100-mem makes 16 units 16Gi"]


def test_a_grant_recorded_only_in_held_devices_is_judged_too() -> None:
    """Tessera holds union(devices, held-devices): a Binding's grant the held record names is one."""
    stale = _doc({"main": {SLICE: "16Gi"}}).replace(NAME, "a.gpu-nothing")
    bound = _bound("p", 16, 10, _doc({"main": {SLICE: "16Gi"}}), held=stale)
    assert _history(*SETUP, ("Pod", "ADDED", _rv(b.pod("p", limits={SLICE: 16}), 9)),
                    ("Pod", "MODIFIED", bound)) == ["default/p: granted device a.gpu-nothing, which never existed"]


def _started_with(memory: str, *pods: dict[str, Any]) -> ClusterWatcher:
    """A watcher whose initial LIST held these pods on a device of `memory`."""
    watcher = ClusterWatcher(None, grace=0.0)  # type: ignore[arg-type]
    watcher._replace("Node", [obj for _, _, obj in NODES], initial=True, listed_at="5")
    watcher._replace("ExtendedResource", [_device(3, memory=memory)], initial=True, listed_at="20")
    watcher._replace("Pod", list(pods), initial=True, listed_at="21")
    return watcher


def _capacity(watcher: ClusterWatcher) -> list[str]:
    watcher._run_checks()
    found = {v.detail for v in watcher.violations() if v.invariant == DEVICE_CAPACITY}
    view = ClusterView(nodes=dict(watcher.view.nodes), pods=dict(watcher.view.pods), devices=dict(watcher.view.devices))
    found |= {v.detail for v in check(view, watcher=watcher, grace=0.0) if v.invariant == DEVICE_CAPACITY}
    return sorted(found)


def test_capacity_lowered_during_the_run_under_slices_held_before_it_is_no_violation() -> None:
    watcher = _started_with("40Gi", _slice_pod("p", "16Gi", 10), _slice_pod("q", "16Gi", 11))
    assert _capacity(watcher) == []
    watcher._apply("ExtendedResource", "MODIFIED", _device(30, memory="16Gi"))
    assert _capacity(watcher) == []


def test_slices_held_before_the_run_beyond_the_capacity_then_are_flagged() -> None:
    watcher = _started_with("40Gi", _slice_pod("p", "32Gi", 10), _slice_pod("q", "16Gi", 11))
    assert _capacity(watcher) == ["shared 48Gi of memory > capacity 40Gi: default/p, default/q"]


def test_a_pod_that_began_during_the_run_beside_holds_from_before_it_is_judged_as_it_began() -> None:
    """p (from before) and r (seen begin, after the capacity went down to 24Gi): 16 + 16 > 24."""
    watcher = _started_with("40Gi", _slice_pod("p", "16Gi", 10))
    watcher._apply("ExtendedResource", "MODIFIED", _device(30, memory="24Gi"))
    watcher._apply("Pod", "ADDED", _slice_pod("r", "16Gi", 31))
    found = _capacity(watcher)
    assert found and all("32Gi of memory > capacity 24Gi" in detail for detail in found), found
