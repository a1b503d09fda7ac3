"""Gangs inside one topology domain: required, preferred, pinning, tightest fit, repeated label values."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from scheduler.api.config import SchedulerConfig, parse_config
from scheduler.api.config_model import ConfigError
from scheduler.core.objects import GangTopology
from scheduler.core.plugins.topology import TopologyPlacement
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run

BLOCK, RACK = "example.com/block", "example.com/rack"
LEVELS = [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname", "name": "node"}]


def topology_config(**args: Any) -> SchedulerConfig:
    """binpack.yaml with TopologyPlacement args (levels block → rack → node unless given)."""
    with open(BINPACK) as f:
        raw = yaml.safe_load(f)
    raw["profiles"][0]["pluginConfig"].append({"name": "TopologyPlacement", "args": {"levels": LEVELS, **args}})
    return parse_config(raw, "test")


def rack_nodes(layout: dict[tuple[str, str], int], gpus: int = 4) -> list[dict[str, Any]]:
    """`layout`: (block, rack) -> node count; names are block-rack-i."""
    return [b.node(f"{block}-{rack}-{i}", gpus=gpus, labels={BLOCK: block, RACK: rack})
            for (block, rack), count in layout.items() for i in range(count)]


def gang(name: str, size: int, gpus: int, required: str = "", preferred: str = "",
         minimum: int | None = None) -> list[dict[str, Any]]:
    annotations = {}
    if required:
        annotations["tessera.dev/topology-required"] = required
    if preferred:
        annotations["tessera.dev/topology-preferred"] = preferred
    labels = b.gang_labels(name, minimum or size)
    return [b.pod(f"{name}-{i}", labels=labels, annotations=annotations, limits={"nvidia.com/gpu": gpus})
            for i in range(size)]


def test_preemption_says_which_racks_it_cannot_help_and_which_have_no_victims() -> None:
    """A trial: a topology-required gang that can never fit read "4 No preemption victims found",
    as if evicting lower-priority pods could have helped. As upstream words a node (preemption.go
    nodesWherePreemptionMightHelp: a node whose rejection removing pods cannot resolve is "not
    helpful"; default_preemption.go SelectVictimsOnNode: one with no lower-priority pod has "no
    victims"), a rack that could not hold the gang's members even empty is not helpful; one that
    could, but holds no lower-priority pod, has no victims."""
    run = Run(topology_config())
    # rack a/r1: 1 node of 4 GPUs, too small for 4 x 2 GPUs even empty; rack a/r2: 2 nodes, 8 GPUs,
    # full of pods of the gang's own priority (no victims)
    run.add(*rack_nodes({("a", "r1"): 1, ("a", "r2"): 2}))
    run.add(*[b.pod(f"busy-{i}", limits={"nvidia.com/gpu": 4}, node_name=f"a-r2-{i}", phase="Running")
              for i in range(2)])
    run.add(*gang("g", 4, 2, required=RACK))
    assert all(run.node_of(f"g-{i}") is None for i in range(4))
    assert run.last("g-0").message.endswith(
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming preemptor.")


def racks_of(run: Run, names: list[str]) -> set[tuple[str, str]]:
    out = set()
    for name in names:
        node = run.node_of(name)
        assert node is not None, name
        labels = run.state.nodes[node].node.meta.labels
        out.add((labels[BLOCK], labels[RACK]))
    return out


def test_required_rack_puts_the_whole_gang_in_one_rack() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2, ("a", "r2"): 2, ("b", "r1"): 2}))
    run.add(*gang("g", 4, 2, required=RACK))
    assert len(racks_of(run, [f"g-{i}" for i in range(4)])) == 1


def test_rack_values_repeated_across_blocks_are_different_racks() -> None:
    """a/r1 and b/r1 have 4 free GPUs each: 8 together under the value "r1", but no rack holds 4 x 2."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1, ("b", "r1"): 1}))
    run.add(*gang("g", 4, 2, required=RACK))
    assert all(run.node_of(f"g-{i}") is None for i in range(4))
    # the whole message: a new user's trial read "(largest: 2)" and then "only 0 of the 4 members it
    # needs fit" as a contradiction, and "fit) preemption:" lacked the full stop upstream puts there
    assert run.last("g-0").message == (
        "0/2 nodes are available: no rack has room for 4 pods of gang default/g (largest: 2). "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    # with the rack key alone (no configured ancestors) the value "r1" is one domain: upstream's rule
    plain = Run(topology_config(levels=[]))
    plain.add(*rack_nodes({("a", "r1"): 1, ("b", "r1"): 1}))
    plain.add(*gang("g", 4, 2, required=RACK))
    assert all(plain.node_of(f"g-{i}") is not None for i in range(4))


def test_the_tightest_rack_that_fits_is_taken() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 3, ("a", "r2"): 2, ("b", "r1"): 4}))
    run.add(*gang("g", 4, 2, required=RACK))  # 8 GPUs: a/r2 (8 free) is the tightest that fits
    assert racks_of(run, [f"g-{i}" for i in range(4)]) == {("a", "r2")}


def test_preferred_climbs_to_the_block_then_the_cluster() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1, ("a", "r2"): 1, ("b", "r1"): 1}))
    run.add(*gang("g", 4, 2, preferred=RACK))  # no rack has 8 GPUs; block a has
    blocks = {block for block, _ in racks_of(run, [f"g-{i}" for i in range(4)])}
    assert blocks == {"a"}
    run.add(*gang("h", 2, 2, preferred=RACK))  # only b/r1 is left: 4 GPUs in one rack
    assert racks_of(run, ["h-0", "h-1"]) == {("b", "r1")}


def test_preferred_ends_anywhere_but_required_caps_the_climb() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1, ("b", "r1"): 1}))
    run.add(*gang("p", 4, 2, preferred=RACK))  # needs both blocks: preferred still places it
    assert len(racks_of(run, [f"p-{i}" for i in range(4)])) == 2
    capped = Run(topology_config())
    capped.add(*rack_nodes({("a", "r1"): 1, ("b", "r1"): 1}))
    capped.add(*gang("q", 4, 2, preferred=RACK, required=BLOCK))
    assert all(capped.node_of(f"q-{i}") is None for i in range(4))
    assert "no block has room for 4 pods of gang default/q (largest: 2)" in capped.last("q-0").message


def test_bound_members_pin_the_domain() -> None:
    """The bound member's rack a/r1 has more room than b/r2, the tightest rack that fits: pinning,
    not tightness, must send the rest to a/r1."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 3, ("b", "r2"): 1}))
    labels = b.gang_labels("g", 3)
    ann = {"tessera.dev/topology-required": RACK}
    run.add(b.pod("g-0", labels=labels, annotations=ann, limits={"nvidia.com/gpu": 2},
                  node_name="a-r1-0", phase="Running"))
    run.add(*[b.pod(f"g-{i}", labels=labels, annotations=ann, limits={"nvidia.com/gpu": 2}) for i in (1, 2)])
    assert racks_of(run, ["g-0", "g-1", "g-2"]) == {("a", "r1")}


def test_bound_members_in_two_racks_make_a_required_gang_unplaceable() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1, ("a", "r2"): 1}))
    labels = b.gang_labels("g", 3)
    ann = {"tessera.dev/topology-required": RACK}
    run.add(*[b.pod(f"g-{i}", labels=labels, annotations=ann, limits={"nvidia.com/gpu": 1},
                    node_name=node, phase="Running") for i, node in ((0, "a-r1-0"), (1, "a-r2-0"))])
    run.add(b.pod("g-2", labels=labels, annotations=ann, limits={"nvidia.com/gpu": 1}))
    assert run.node_of("g-2") is None
    assert "more than 1 rack found for pod group default/g: a/r1, a/r2" in run.last("g-2").message


def test_podgroup_annotations_and_upstream_workload_podgroups() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1, ("a", "r2"): 2}))
    run.add(b.podgroup("pg", 2, annotations={"tessera.dev/topology-required": RACK}))
    run.add(*[b.pod(f"pg-{i}", labels={"scheduling.x-k8s.io/pod-group": "pg"}, limits={"nvidia.com/gpu": 4})
              for i in range(2)])
    assert racks_of(run, ["pg-0", "pg-1"]) == {("a", "r2")}
    run.add(b.workload_podgroup("wl", 2, topology_key=RACK))
    run.add(*[b.pod(f"wl-{i}", limits={"nvidia.com/gpu": 2}, spec_extra={"schedulingGroup": {"podGroupName": "wl"}})
              for i in range(2)])
    assert racks_of(run, ["wl-0", "wl-1"]) == {("a", "r1")}


def test_upstream_podgroup_gang_minimum_is_all_or_nothing() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1}))
    run.add(b.workload_podgroup("wl", 3))
    run.add(*[b.pod(f"wl-{i}", limits={"nvidia.com/gpu": 2}, spec_extra={"schedulingGroup": {"podGroupName": "wl"}})
              for i in range(3)])
    assert all(run.node_of(f"wl-{i}") is None for i in range(3))
    assert "pod group default/scheduling.k8s.io/wl: only 2 of the 3 members it needs fit; " in run.last("wl-0").message


def test_a_gang_without_a_constraint_is_placed_as_before() -> None:
    """The plugin leaves unconstrained gangs to the ordinary transaction (same placements)."""
    plain, with_levels = Run(), Run(topology_config())
    for run in (plain, with_levels):
        run.add(*rack_nodes({("a", "r1"): 2, ("b", "r1"): 2}))
        run.add(*gang("g", 5, 2))
    assert [plain.node_of(f"g-{i}") for i in range(5)] == [with_levels.node_of(f"g-{i}") for i in range(5)]


@pytest.mark.parametrize("args, error", [
    ({"levels": [{"nodeLabel": ""}]}, "levels[0].nodeLabel: Required value"),
    ({"levels": [{"nodeLabel": RACK}, {"nodeLabel": RACK}]}, "levels[1].nodeLabel: Duplicate value"),
    ({"levels": [{"nodeLabel": RACK, "label": "x"}]}, "levels[0].label: unknown field"),
    ({"maxDomainTrials": 0}, "maxDomainTrials: Invalid value: 0"),
])
def test_bad_topology_args_are_refused_with_the_field(args: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError) as raised:
        topology_config(**args)
    assert error in str(raised.value)


def test_a_required_gang_reports_its_real_reason_and_is_retried_when_the_class_appears() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    labels = b.gang_labels("g", 2)
    ann = {"tessera.dev/topology-required": RACK}
    run.add(*[b.pod(f"g-{i}", labels=labels, annotations=ann, limits={"class.tessera.dev/v100": 1}) for i in range(2)])
    assert 'no ResourceClass provides "class.tessera.dev/v100"' in run.last("g-0").message
    run.add(b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(*[b.device(f"a-r1-{n}", i) for n in range(2) for i in range(4)])
    assert run.node_of("g-0") is not None and run.node_of("g-1") is not None


def test_the_room_check_never_refuses_a_domain_where_the_minimum_fits() -> None:
    """Members of 8, 1 and 1 GPUs, minimum 2, one rack of 4 GPUs: the two small ones fit there."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1}))
    labels = b.gang_labels("g", 2)
    ann = {"tessera.dev/topology-required": RACK}
    run.add(*[b.pod(f"g-{i}", labels=labels, annotations=ann, limits={"nvidia.com/gpu": gpus})
              for i, gpus in enumerate((8, 1, 1))])
    assert [run.node_of(f"g-{i}") for i in range(3)] == [None, "a-r1-0", "a-r1-0"]


def test_class_gpus_count_in_the_room_check_and_the_order() -> None:
    """Two CPU-only racks are tighter by CPU; with one trial per level the GPU rack must be first."""
    run = Run(topology_config(maxDomainTrials=1))
    run.add(*[b.node(f"cpu-{rack}", cpu="8", labels={BLOCK: "a", RACK: rack}) for rack in ("c1", "c2")])
    run.add(b.node("gpu-0", cpu="64", gpus=4, labels={BLOCK: "a", RACK: "g1"}))
    run.add(b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(*[b.device("gpu-0", i) for i in range(4)])
    labels = b.gang_labels("g", 2)
    ann = {"tessera.dev/topology-required": RACK}
    run.add(*[b.pod(f"g-{i}", labels=labels, annotations=ann, requests={"cpu": "1"},
                    limits={"class.tessera.dev/v100": 2}) for i in range(2)])
    assert run.node_of("g-0") == run.node_of("g-1") == "gpu-0"


def test_a_preferred_rack_inside_a_required_key_that_is_not_a_level() -> None:
    """required zone (not a configured level) + preferred rack: racks inside the zone first."""
    run = Run(topology_config())
    plugin = run.replay.scheduler._engine.profiles["tessera"].placement
    assert isinstance(plugin, TopologyPlacement)
    chains = [chain for chain, _ in plugin._climb(GangTopology(required="example.com/zone", preferred=RACK))]
    assert chains == [(BLOCK, RACK, "example.com/zone"), (BLOCK, "example.com/zone"), ("example.com/zone",)]
    unconfigured = [chain for chain, _ in plugin._climb(GangTopology(required=RACK, preferred="example.com/nvl"))]
    assert unconfigured == [(BLOCK, RACK, "example.com/nvl"), (BLOCK, RACK)]


def test_largest_counts_members_per_node_not_free_gpus_summed() -> None:
    """A new user's trial: rack r1 with 7 free GPUs on one node and 2 on another said "largest: 2"
    for 4-GPU members, where only one fits (a node's free GPUs cannot be pooled)."""
    run = Run(topology_config())
    run.add(b.node("r1-a", gpus=8, labels={BLOCK: "a", RACK: "r1"}), b.node("r1-b", gpus=2, labels={BLOCK: "a", RACK: "r1"}))
    run.add(b.pod("filler", node_name="r1-a", phase="Running", limits={"nvidia.com/gpu": 1}))
    labels = b.gang_labels("g", 5)
    ann = {"tessera.dev/topology-required": RACK}
    run.add(*[b.pod(f"g-{i}", labels=labels, annotations=ann, limits={"nvidia.com/gpu": 4}) for i in range(5)])
    assert "no rack has room for 5 pods of gang default/g (largest: 1)." in run.last("g-0").message


# --- review findings (each a failing test first) ----------------------------------------------

def _with_a_lower_priority_hold(core: Scheduler) -> None:
    """a-r1-0 (4 GPUs, block a, rack r1) held by `low` (priority 5), nominated there after
    preempting `v`, which is gone now."""
    core.apply("ADDED", b.node("a-r1-0", gpus=4, labels={BLOCK: "a", RACK: "r1"}), 0.0)
    victim = b.pod("v", limits={"nvidia.com/gpu": 4}, priority=0, node_name="a-r1-0", phase="Running")
    core.apply("ADDED", victim, 0.0)
    core.apply("ADDED", b.pod("low", limits={"nvidia.com/gpu": 4}, priority=5), 0.0)
    [first] = core.schedule_next(0.0) or []
    assert first.nominated_node == "a-r1-0" and core.state.holds
    core.apply("DELETED", victim, 0.0)


def _place_all(core: Scheduler) -> dict[str, str | None]:
    placed: dict[str, str | None] = {}
    while (attempts := core.schedule_next(0.0)) is not None:
        placed.update({a.pod.meta.name: a.node for a in attempts})
    return placed


@pytest.mark.parametrize("key", ["tessera.dev/topology-required", "tessera.dev/topology-preferred"])
def test_a_lower_priority_hold_does_not_shut_a_gang_out_of_a_domain_it_fits(key: str) -> None:
    """Regression (review): the room check counted the hold of a lower-priority nominated pod,
    which each member's own attempt lifts (as upstream): a required-rack gang was refused, a
    preferred one spread over two blocks, though rack r1 held both members."""
    core = Scheduler(topology_config())
    core.apply("ADDED", b.node("a-r2-0", gpus=4, labels={BLOCK: "a", RACK: "r2"}), 0.0)
    core.apply("ADDED", b.node("b-r3-0", gpus=4, labels={BLOCK: "b", RACK: "r3"}), 0.0)
    for name, node in (("f2", "a-r2-0"), ("f3", "b-r3-0")):
        core.apply("ADDED", b.pod(name, limits={"nvidia.com/gpu": 2}, priority=1000, node_name=node,
                                 phase="Running"), 0.0)
    _with_a_lower_priority_hold(core)
    for i in range(2):
        core.apply("ADDED", b.pod(f"g-{i}", limits={"nvidia.com/gpu": 2}, priority=100,
                                 labels=b.gang_labels("g", 2), annotations={key: RACK}), 0.0)
    placed = _place_all(core)
    assert (placed["g-0"], placed["g-1"]) == ("a-r1-0", "a-r1-0")


def test_a_preferred_level_gives_way_to_a_wider_one_that_holds_every_member() -> None:
    """Regression (review): a rack that took the minimum (2 of 4) was kept and the other two
    members parked as unschedulable, though block a holds all four (Kueue: the whole pod set)."""
    core = Scheduler(topology_config())
    for node in rack_nodes({("a", "r1"): 1, ("a", "r2"): 1, ("b", "r3"): 1}, gpus=4):
        core.apply("ADDED", node, 0.0)
    core.apply("ADDED", b.podgroup("pg", 2, annotations={"tessera.dev/topology-preferred": RACK}), 0.0)
    for i in range(4):
        core.apply("ADDED", b.pod(f"pg-{i}", labels={"scheduling.x-k8s.io/pod-group": "pg"},
                                 limits={"nvidia.com/gpu": 2}), 0.0)
    placed = _place_all(core)
    assert None not in placed.values()
    assert {node.split("-")[0] for node in placed.values() if node} == {"a"}


def test_a_required_key_no_node_carries_says_so_instead_of_no_room() -> None:
    """Regression (review): a typo read as a lack of room ("no rak has room ... (largest: 0)")."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    run.add(*gang("g", 2, 1, required="example.com/rak"))
    assert run.node_of("g-0") is None
    assert "no node has the label example.com/rak of the required rak level" in run.last("g-0").message


def test_a_member_node_missing_a_wider_levels_label_is_named() -> None:
    """Regression (review): n0 has the rack label but not the block label the configured rack
    level needs; the refusal blamed the rack label."""
    run = Run(topology_config())
    run.add(b.node("n0", gpus=4, labels={RACK: "r1"}), *rack_nodes({("a", "r1"): 1}))
    labels, annotations = b.gang_labels("g", 2), {"tessera.dev/topology-required": RACK}
    run.add(b.pod("g-0", labels=labels, annotations=annotations, limits={"nvidia.com/gpu": 1}, node_name="n0",
                  phase="Running"))
    run.add(b.pod("g-1", labels=labels, annotations=annotations, limits={"nvidia.com/gpu": 1}))
    assert f"a member's node has no label {BLOCK}" in run.last("g-1").message


@pytest.mark.parametrize(("levels", "field"), [
    ([{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": RACK}], "levels[0].nodeLabel"),
    ([{"nodeLabel": "example.com/rack zone"}], "levels[0].nodeLabel"),
])
def test_levels_are_validated_as_kueue_validates_a_topology(levels: list[dict[str, str]], field: str) -> None:
    """Regression (review): hostname above other levels made every rack one node; a nodeLabel
    that is no label key matched nothing."""
    with pytest.raises(ConfigError) as info:
        topology_config(levels=levels)
    assert info.value.field.endswith(field)


def test_a_gang_with_a_bound_member_needs_only_the_rest_of_its_minimum_in_its_rack() -> None:
    """cycle.py `_place_in_domains`: the members still needed are the minimum less those already
    bound. Gang g (4 members, minimum 3, rack required) has g-0 bound in rack a/r1, whose node has
    room for 2 more: g-1 and g-2 complete the minimum there (g-3 waits)."""
    run = Run(topology_config())
    members = gang("g", 4, 1, required=RACK, minimum=3)
    members[0]["spec"]["nodeName"] = "a-r1-0"
    members[0]["status"]["phase"] = "Running"
    run.add(b.pod("filler", limits={"nvidia.com/gpu": 1}, node_name="a-r1-0", phase="Running"))
    run.add(*members)  # all pending at once: the node comes last
    run.add(*rack_nodes({("a", "r1"): 1}))
    placed = sorted(name for name in ("g-1", "g-2", "g-3") if run.node_of(name) == "a-r1-0")
    assert len(placed) == 2
