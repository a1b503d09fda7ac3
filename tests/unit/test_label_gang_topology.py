"""A label gang's topology is read from all its live members: the informer's order does not
matter, a member without the annotations is reported, and members naming different levels wait."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.sim import builders as b
from tests.helpers import Run
from tests.replay.test_topology import BLOCK, RACK, rack_nodes, racks_of, topology_config

REQUIRED = "tessera.dev/topology-required"


def member(name: str, annotations: dict[str, str], gpus: int = 4, size: int = 2, **extra: Any) -> dict[str, Any]:
    return b.pod(name, labels=b.gang_labels("g", size), annotations=annotations,
                 limits={"nvidia.com/gpu": gpus}, **extra)


@pytest.mark.parametrize("order", [("g-0", "g-1"), ("g-1", "g-0")])
def test_a_label_gangs_constraint_does_not_depend_on_which_member_was_listed_first(order: tuple[str, str]) -> None:
    """g-1 asks for one rack, g-0 says nothing: in either informer order the gang must stay in one
    rack (here: no rack has 8 GPUs, so it waits) — it was unconstrained when g-0 came first."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1, ("b", "r1"): 1}))
    pods = {"g-0": member("g-0", {}), "g-1": member("g-1", {REQUIRED: RACK})}
    run.add(*(pods[name] for name in order))
    assert run.node_of("g-0") is None and run.node_of("g-1") is None
    assert "no rack has room for 2 pods of gang default/g" in run.last("g-0").message
    # the difference is reported on the member whose arrival made it
    assert any(n.startswith("GangTopologyMismatch: ") and REQUIRED in n and "default/g-" in n
               for n in run.notices()), run.notices()


def test_members_naming_different_levels_wait_with_the_disagreement_and_go_once_it_is_fixed() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2, ("b", "r2"): 2}))
    run.add(member("g-0", {REQUIRED: RACK}), member("g-1", {REQUIRED: BLOCK}))
    assert run.node_of("g-0") is None and run.node_of("g-1") is None
    message = run.last("g-1").message
    assert f'members of gang default/g disagree on {REQUIRED}: "{BLOCK}" (default/g-1), "{RACK}" (default/g-0)' \
        in message, message
    assert any(n.startswith("GangTopologyMismatch: ") for n in run.notices())
    run.feed(b.event("MODIFIED", member("g-1", {REQUIRED: RACK})))  # fixed: the gang is tried again
    assert len(racks_of(run, ["g-0", "g-1"])) == 1


def test_a_disagreeing_member_that_leaves_lets_the_rest_go() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    run.add(member("g-0", {REQUIRED: RACK}), member("g-1", {REQUIRED: BLOCK}), member("g-2", {REQUIRED: RACK}))
    assert run.node_of("g-0") is None
    run.feed(b.event("DELETED", member("g-1", {REQUIRED: BLOCK})))
    assert run.node_of("g-0") is not None and run.node_of("g-2") is not None

def test_a_member_without_the_annotation_is_reported_once_not_per_sibling() -> None:
    """g-0 (listed first) lacks the annotation its four siblings give: one Event, on the member
    whose arrival first made them differ, not one per sibling after it."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    run.add(member("g-0", {}, gpus=1, size=5), *(member(f"g-{i}", {REQUIRED: RACK}, gpus=1, size=5) for i in range(1, 5)))
    assert [n for n in run.notices() if n.startswith("GangTopologyMismatch")] == [
        'GangTopologyMismatch: members of gang default/g differ in their topology annotations: '
        f'{REQUIRED}: "{RACK}" is not on default/g-0; the whole gang is placed with it (a constraint binds every member)']
    assert racks_of(run, [f"g-{i}" for i in range(5)]) == {("a", "r1")}
