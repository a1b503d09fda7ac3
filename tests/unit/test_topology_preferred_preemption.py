"""A preferred-topology gang that needs preemption: its dry run knows no domains (best effort),
but the gang is still all or nothing and takes the room its victims free."""

from __future__ import annotations

from scheduler.sim import builders as b
from tests.helpers import Run
from tests.replay.test_topology import RACK, rack_nodes, topology_config


def test_a_preferred_gang_that_must_preempt_across_racks_is_placed_whole() -> None:
    """No rack can hold the gang even after evictions: its dry run (no domains) evicts in both
    racks, and the gang is then placed whole across them — best effort, as documented: no member
    is left alone and no victim is evicted for room the gang does not take."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1, ("b", "r2"): 1}))
    run.add(*(b.pod(f"v-{node}", limits={"nvidia.com/gpu": 4}, node_name=node, phase="Running")
              for node in ("a-r1-0", "b-r2-0")))
    run.add(*(b.pod(f"p-{i}", labels=b.gang_labels("p", 2), priority=100, limits={"nvidia.com/gpu": 4},
                    annotations={"tessera.dev/topology-preferred": RACK}) for i in range(2)))
    assert set(run.replay.stats.evicted) == {"default/v-a-r1-0", "default/v-b-r2-0"}
    assert {run.node_of("p-0"), run.node_of("p-1")} == {"a-r1-0", "b-r2-0"}

