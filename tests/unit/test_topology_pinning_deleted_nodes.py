"""Bound members pin their gang's domain even when their Node object is deleted under them."""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.helpers import Run
from tests.replay.test_topology import BLOCK, RACK, rack_nodes, topology_config

REQUIRED = "tessera.dev/topology-required"


def member(name: str, annotations: dict[str, str], gpus: int = 4, size: int = 2, **extra: Any) -> dict[str, Any]:
    return b.pod(name, labels=b.gang_labels("g", size), annotations=annotations,
                 limits={"nvidia.com/gpu": gpus}, **extra)


def test_bound_members_on_a_deleted_node_still_pin_their_rack() -> None:
    """g-0 runs on a-r1-0, whose Node object is deleted (the pod lives on until the pod GC removes
    it). The rest must join rack a/r1 (its other node), not the tighter b/r2."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}), b.node("b-r2-0", gpus=2, labels={BLOCK: "b", RACK: "r2"}))
    run.add(member("g-0", {REQUIRED: RACK}, gpus=1, size=3, node_name="a-r1-0", phase="Running"))
    run.feed(b.event("DELETED", rack_nodes({("a", "r1"): 1})[0]))
    run.add(*(member(f"g-{i}", {REQUIRED: RACK}, gpus=1, size=3) for i in (1, 2)))
    assert [run.node_of(f"g-{i}") for i in (1, 2)] == ["a-r1-1", "a-r1-1"]


def test_bound_members_on_a_deleted_node_pin_a_rack_with_no_node_left() -> None:
    """The deleted node was the rack's only one: the rest cannot join it, and wait (upstream's
    TopologyPlacementGenerator places nothing while a scheduled member's node is unknown)."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1, ("b", "r2"): 1}))
    run.add(member("g-0", {REQUIRED: RACK}, gpus=1, size=2, node_name="a-r1-0", phase="Running"))
    run.feed(b.event("DELETED", rack_nodes({("a", "r1"): 1})[0]))
    run.add(member("g-1", {REQUIRED: RACK}, gpus=1, size=2))
    assert run.node_of("g-1") is None
    assert ("no room for 1 more pod of gang default/g: its bound members are in rack a/r1, which has room for 0 more"
            in run.last("g-1").message)


def test_a_bound_member_on_a_node_never_seen_makes_a_required_gang_wait() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1}))
    run.add(member("g-0", {REQUIRED: RACK}, gpus=1, size=2, node_name="gone", phase="Running"))
    run.add(member("g-1", {REQUIRED: RACK}, gpus=1, size=2))
    assert run.node_of("g-1") is None
    assert 'the node "gone" of member default/g-0 is not known' in run.last("g-1").message
