"""Topology room edges a one-line slip got past (mutation round 4): the "largest" a required level's
message names is the most any domain holds, and an over-committed node takes no room from the
other nodes of its domain."""

from __future__ import annotations

from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import Run
from tests.replay.test_topology import BLOCK, RACK, gang, topology_config


def test_largest_is_the_most_members_any_short_rack_holds() -> None:
    """Rack r1 holds 2 of the 2-GPU members, rack r2 one: neither holds 4, and the message names
    the rack that came closest (2), not the other one."""
    run = Run(topology_config())
    run.add(b.node("r1-a", gpus=4, labels={BLOCK: "a", RACK: "r1"}),
            b.node("r2-a", gpus=2, labels={BLOCK: "a", RACK: "r2"}))
    run.add(*gang("g", 4, 2, required=RACK))
    assert all(run.node_of(f"g-{i}") is None for i in range(4))
    assert "no rack has room for 4 pods of gang default/g (largest: 2)." in run.last("g-0").message


def test_an_over_committed_node_takes_no_room_from_its_racks_other_nodes() -> None:
    """r1-b runs 3 GPUs though it now counts 1 (its count was cut): its free is -2, which is no
    room, not a debt against r1-a's 4 free GPUs. The 4 x 1-GPU gang fits rack r1 on r1-a."""
    run = Run(topology_config())
    run.add(b.node("r1-a", gpus=4, labels={BLOCK: "a", RACK: "r1"}),
            b.node("r1-b", gpus=4, labels={BLOCK: "a", RACK: "r1"}))
    run.add(b.pod("busy", node_name="r1-b", phase="Running", limits={"nvidia.com/gpu": 3}))
    run.feed(b.event("MODIFIED", b.node("r1-b", gpus=1, labels={BLOCK: "a", RACK: "r1"})))
    run.add(*gang("g", 4, 1, required=RACK))
    assert {run.node_of(f"g-{i}") for i in range(4)} == {"r1-a"}


def test_among_racks_that_reach_the_minimum_the_one_placing_most_members_wins() -> None:
    """Gang g: 4 x 2 GPUs, minimum 2, rack required. Rack a/r1 holds 2 members, rack a/r2 holds 3:
    neither holds all 4, both reach the minimum. Upstream's PodGroupPodsCount prefers the
    placement with most pods: a/r2, with 3 members placed (a/r1 is tried first, being tighter).
    Everything is known before the first cycle (a listing), so the gang sees both racks."""
    core = Scheduler(topology_config())
    for obj in (b.node("r1-a", gpus=4, labels={BLOCK: "a", RACK: "r1"}),
                b.node("r2-a", gpus=4, labels={BLOCK: "a", RACK: "r2"}),
                b.node("r2-b", gpus=2, labels={BLOCK: "a", RACK: "r2"}),
                *gang("g", 4, 2, required=RACK, minimum=2)):
        core.apply("ADDED", obj, 0.0)
    placed: dict[str, str] = {}
    while (attempts := core.schedule_next(0.0)) is not None:
        placed.update({a.pod.meta.name: a.node for a in attempts if a.node is not None})
    assert len(placed) == 3 and set(placed.values()) <= {"r2-a", "r2-b"}, placed
