"""Gangs inside one topology domain: required, preferred, pinning, tightest fit, repeated label values."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from scheduler.api.config import SchedulerConfig, parse_config
from scheduler.api.config_model import ConfigError
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
    assert run.last("g-0").message.startswith(
        "0/2 nodes are available: no rack has room for 4 pods of gang default/g (largest: 2).")
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
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2, ("b", "r2"): 4}))
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
    assert "pod group default/wl needs 3 members placed together, only 2 fit" in run.last("wl-0").message


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
