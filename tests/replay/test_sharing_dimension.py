"""A sharing class slices one capacity of a device (`sharing.dimension`). When none of its matching
devices has that capacity, no pod can ever be placed on it: the class is not valid, its status
and Warning name the dimension and the capacities the devices do have, and pods asking for it are
told so instead of "Insufficient" (issue 10, part 3.6: `dimension: cores` was reported Valid with
matching devices)."""

from __future__ import annotations

import copy

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

CORES = 'spec.sharing.dimension: Invalid value: "cores": none of the 2 matching devices has a cores capacity of ' \
        "at least one unit (1); their capacities: memory"


def _cluster() -> Run:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=2), b.device("n", 0), b.device("n", 1))
    run.add(b.resource_class("by-cores", match_labels={"model": "V100"}, sharing={"dimension": "cores", "unit": "1"}),
            b.resource_class("by-memory", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}))
    return run


def test_a_dimension_no_matching_device_has_makes_the_class_invalid() -> None:
    run = _cluster()
    assert run.state.class_status("by-cores") == (False, CORES, 2, "InvalidSpec")
    assert run.state.class_status("by-memory") == (True, "selector and resourceName are valid", 2, "Valid")
    assert f"InvalidResourceClass: ResourceClass by-cores is not valid: {CORES}" in run.notices()
    run.add(b.pod("p", limits={"class.tessera.dev/by-cores": 1}), b.pod("q", limits={"class.tessera.dev/by-memory": 4}))
    assert run.node_of("p") is None
    assert run.last("p").message == (f"0/1 nodes are available: ResourceClass by-cores is not valid: {CORES}. "
                                     "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    assert run.node_of("q") == "n"


def test_a_device_that_has_the_dimension_makes_it_valid_and_wakes_the_pod() -> None:
    run = _cluster()
    run.add(b.pod("p", limits={"class.tessera.dev/by-cores": 2}))
    assert run.node_of("p") is None
    with_cores = copy.deepcopy(b.device("n", 1))
    with_cores["spec"]["capacity"]["cores"] = "80"
    run.feed(b.event("MODIFIED", with_cores))
    assert run.state.class_status("by-cores") == (True, "selector and resourceName are valid", 2, "Valid")
    assert run.node_of("p") == "n"
    assert run.last("p").annotations  # the slice is on the device that has cores


def test_a_class_that_matches_no_device_yet_is_not_judged() -> None:
    run = Run(config(BINPACK))
    run.add(b.resource_class("by-cores", match_labels={"model": "V100"}, sharing={"dimension": "cores", "unit": "1"}))
    assert run.state.class_status("by-cores") == (
        True, "selector and resourceName are valid (no ExtendedResource matches the selector now)", 0, "NoMatchingDevices")
    run.add(b.node("n", gpus=2), b.device("n", 0))
    assert run.state.class_status("by-cores")[0] is False
    run.feed(b.event("DELETED", b.device("n", 0)))
    assert run.state.class_status("by-cores")[0] is True


def test_a_capacity_below_one_unit_cannot_hold_a_slice() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0, memory="4Gi"))
    run.add(b.resource_class("big-slices", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "8Gi"}))
    valid, message, matching, _ = run.state.class_status("big-slices")
    assert (valid, matching) == (False, 1)
    assert message == ('spec.sharing.dimension: Invalid value: "memory": none of the 1 matching devices has a memory '
                       "capacity of at least one unit (8Gi); their capacities: memory")


# --- a class's dimension edited while pods hold its slices ----------------------------------------

SLICED = "class.tessera.dev/edited"  # a memory class, edited below to share by cores
BESIDE = "class.tessera.dev/beside"  # another memory class over the same GPU


def _gpu_with_cores() -> dict[str, object]:
    device = b.device("n", 0, memory="32Gi")
    device["spec"]["capacity"]["cores"] = "100"
    return device


def _edited(dimension: str, unit: str) -> dict[str, object]:
    return b.resource_class("edited", match_labels={"model": "V100"}, sharing={"dimension": dimension, "unit": unit})


def _beside() -> dict[str, object]:
    return b.resource_class("beside", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"})


def test_slices_held_keep_their_dimension_when_their_class_is_edited_to_another() -> None:
    """24Gi of the GPU's 32Gi of memory is held; the class is then edited to share by cores. The
    pod still has its 24Gi of memory (the agent gave it that), so another memory class gets at
    most 8Gi of the GPU, and the cores are not taken by bytes read as cores."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), _gpu_with_cores(), _edited("memory", "1Gi"), _beside())
    run.add(b.pod("p", limits={SLICED: 24}))
    assert run.node_of("p") == "n"
    run.feed(b.event("MODIFIED", _edited("cores", "1")))
    run.add(b.pod("q", limits={BESIDE: 24}), b.pod("r", limits={BESIDE: 8}), b.pod("s", limits={SLICED: 100}))
    assert run.node_of("q") is None  # 24Gi + 24Gi of 32Gi
    assert run.node_of("r") == "n"  # the 8Gi left
    assert run.node_of("s") == "n"  # the cores are all free


def test_a_restarted_core_reads_the_dimension_a_slice_was_granted_in() -> None:
    """The same after a restart: the ledger is rebuilt from the annotations (and the class as it
    is now), so the dimension a slice was granted in must come from its annotation."""
    first = Run(config(BINPACK))
    first.add(b.node("n", gpus=1), _gpu_with_cores(), _edited("memory", "1Gi"), _beside())
    first.add(b.pod("p", limits={SLICED: 24}))
    annotations = first.last("p").annotations
    restarted = Run(config(BINPACK))
    restarted.add(b.node("n", gpus=1), _gpu_with_cores(), _edited("cores", "1"), _beside(),
                  b.pod("p", limits={SLICED: 24}, node_name="n", phase="Running", annotations=annotations))
    restarted.add(b.pod("q", limits={BESIDE: 24}), b.pod("r", limits={BESIDE: 8}))
    assert restarted.node_of("q") is None
    assert restarted.node_of("r") == "n"


def test_editing_the_dimension_of_a_class_whose_slices_are_held_says_so() -> None:
    """The edit is allowed (new slices are of the new dimension) but not silent: the pods holding
    slices keep them in the old dimension until they end, and the admin who edited the class would
    otherwise read a GPU's use in two dimensions without knowing why."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), _gpu_with_cores(), _edited("memory", "1Gi"), _beside())
    run.add(b.pod("p", limits={SLICED: 8}), b.pod("p2", limits={SLICED: 4}), b.pod("q", limits={BESIDE: 4}))
    assert {run.node_of(name) for name in ("p", "p2", "q")} == {"n"}
    before = len(run.notices())
    run.feed(b.event("MODIFIED", _edited("cores", "1")))
    assert run.notices()[before:] == [
        "SharingDimensionChanged: ResourceClass edited now shares by cores; 2 pods hold slices of it granted in "
        "memory (default/p, default/p2): they keep those until they end, new slices are of cores"]
    run.feed(b.event("MODIFIED", b.resource_class("edited", match_labels={"model": "V100"},
                                                  sharing={"dimension": "cores", "unit": "2"})))
    assert len(run.notices()) == before + 1  # another unit, the same dimension: nothing to say
