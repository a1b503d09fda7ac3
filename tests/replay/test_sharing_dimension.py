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
    assert run.state.class_status("by-cores") == (False, CORES, 2)
    assert run.state.class_status("by-memory") == (True, "selector and resourceName are valid", 2)
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
    assert run.state.class_status("by-cores") == (True, "selector and resourceName are valid", 2)
    assert run.node_of("p") == "n"
    assert run.last("p").annotations  # the slice is on the device that has cores


def test_a_class_that_matches_no_device_yet_is_not_judged() -> None:
    run = Run(config(BINPACK))
    run.add(b.resource_class("by-cores", match_labels={"model": "V100"}, sharing={"dimension": "cores", "unit": "1"}))
    assert run.state.class_status("by-cores") == (True, "selector and resourceName are valid", 0)
    run.add(b.node("n", gpus=2), b.device("n", 0))
    assert run.state.class_status("by-cores")[0] is False
    run.feed(b.event("DELETED", b.device("n", 0)))
    assert run.state.class_status("by-cores")[0] is True


def test_a_capacity_below_one_unit_cannot_hold_a_slice() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0, memory="4Gi"))
    run.add(b.resource_class("big-slices", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "8Gi"}))
    valid, message, matching = run.state.class_status("big-slices")
    assert (valid, matching) == (False, 1)
    assert message == ('spec.sharing.dimension: Invalid value: "memory": none of the 1 matching devices has a memory '
                       "capacity of at least one unit (8Gi); their capacities: memory")
