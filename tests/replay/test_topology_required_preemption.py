"""A gang with a required topology level preempts domain by domain: the dry run inside each
domain of the level (every member in it), the domain chosen as upstream chooses a node
(pickOneNodeForPreemption), victims evicted only there, the members nominated and bound there.

The set-up of a new user's trial: 4 x 8-GPU nodes, 2 per rack, full of lower-priority pods, and a
priority-1000 gang of 2 x 8-GPU members that must share a rack."""

from __future__ import annotations

from typing import Any

import yaml

from scheduler.api.config import parse_config
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run
from tests.replay.test_topology import BLOCK, LEVELS, RACK, rack_nodes, topology_config

NODES = ["a-r1-0", "a-r1-1", "a-r2-0", "a-r2-1"]
RACK_OF = {node: node.split("-")[1] for node in NODES}


def filler(node: str, priority: int = 0) -> dict[str, Any]:
    return b.pod(f"f-{node}", limits={"nvidia.com/gpu": 8}, node_name=node, phase="Running", priority=priority)


def required_gang(name: str = "hig", size: int = 2, priority: int = 1000) -> list[dict[str, Any]]:
    """The PodGroup carries the required level (docs/topology.md); its members ask for 8 GPUs each."""
    group = b.podgroup(name, size, annotations={"tessera.dev/topology-required": RACK})
    members = [b.pod(f"{name}-{i}", labels={"scheduling.x-k8s.io/pod-group": name}, priority=priority,
                     limits={"nvidia.com/gpu": 8}) for i in range(size)]
    return [group, *members]


def full_racks(priorities: dict[str, int] | None = None) -> Run:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2, ("a", "r2"): 2}, gpus=8))
    run.add(*(filler(node, (priorities or {}).get(node, 0)) for node in NODES))
    return run


def test_a_required_gang_preempts_inside_one_rack_and_binds_there() -> None:
    run = full_racks()
    run.add(*required_gang())
    evicted = set(run.replay.stats.evicted)
    assert len(evicted) == 2, evicted
    racks = {RACK_OF[key.removeprefix("default/f-")] for key in evicted}
    assert len(racks) == 1, evicted  # both victims in one rack, none in the other
    (rack,) = racks
    # the members were nominated to that rack's nodes while the victims terminated
    nominated = {a.nominated_node for a in run.attempts if a.pod.meta.name.startswith("hig-") and a.nominated_node}
    assert nominated == {node for node in NODES if RACK_OF[node] == rack}
    # and are bound there once the victims are gone
    assert {run.node_of("hig-0"), run.node_of("hig-1")} == nominated
    # the other rack's pods still run
    for node in NODES:
        if RACK_OF[node] != rack:
            assert run.node_of(f"f-{node}") == node


def test_the_rack_whose_victims_have_lower_priority_is_chosen() -> None:
    """Rack r1 is tried first, but its pods (500) are more important than r2's (0): upstream's
    second criterion (lowest highest-victim priority) sends the gang to r2."""
    run = full_racks({"a-r1-0": 500, "a-r1-1": 500})
    run.add(*required_gang())
    assert set(run.replay.stats.evicted) == {"default/f-a-r2-0", "default/f-a-r2-1"}
    assert {run.node_of("hig-0"), run.node_of("hig-1")} == {"a-r2-0", "a-r2-1"}
    assert run.node_of("f-a-r1-0") == "a-r1-0" and run.node_of("f-a-r1-1") == "a-r1-1"


def test_a_rack_with_fewer_budget_violations_wins_over_lower_priority() -> None:
    """Fewest PDB violations comes first (upstream's first criterion): r2's pods are cheaper but
    a PodDisruptionBudget allows none of them to go, so r1's go."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2, ("a", "r2"): 2}, gpus=8))
    run.add(*(filler(node, 500) for node in ("a-r1-0", "a-r1-1")))
    run.add(*(b.pod(f"f-{node}", limits={"nvidia.com/gpu": 8}, node_name=node, phase="Running",
                    labels={"app": "keep"}) for node in ("a-r2-0", "a-r2-1")))
    run.add({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": "keep", "namespace": "default",
                          "uid": b.uid_for("PodDisruptionBudget", "default", "keep")},
             "spec": {"selector": {"matchLabels": {"app": "keep"}}}, "status": {"disruptionsAllowed": 0}})
    run.add(*required_gang())
    assert set(run.replay.stats.evicted) == {"default/f-a-r1-0", "default/f-a-r1-1"}
    assert {run.node_of("hig-0"), run.node_of("hig-1")} == {"a-r1-0", "a-r1-1"}


def test_a_gang_no_rack_can_hold_even_without_its_victims_preempts_nothing_and_says_why() -> None:
    """r1 runs only pods above the gang (no victims there); r2 has one victim, but its other node
    runs a pod above the gang, so even without every lower-priority pod r2 holds 1 of 2 members."""
    run = full_racks({"a-r1-0": 2000, "a-r1-1": 2000, "a-r2-1": 2000})
    run.add(*required_gang())
    assert run.replay.stats.evicted == {}
    assert run.node_of("hig-0") is None and run.node_of("hig-1") is None
    assert not any(a.nominated_node for a in run.attempts if a.pod.meta.name.startswith("hig-"))
    assert run.last("hig-0").message == (
        "0/4 nodes are available: no rack has room for 2 pods of gang default/hig (largest: 0). "
        "4 Insufficient nvidia.com/gpu. "  # every node full: no member can use one, and says why
        "preemption: 0/4 nodes are available: 2 No preemption victims found for incoming preemptor, "
        "2 node(s) were in a rack where only 1 of the 2 pods of pod group default/hig fit even without "
        "every lower-priority pod.")


def test_a_gang_larger_than_any_rack_preempts_nothing() -> None:
    """No rack could hold it even empty: upstream's words for a node no eviction can help
    (nodesWherePreemptionMightHelp), not "only 2 of the 3 fit", which reads like a shortage of
    victims (a trial's); explain says it can never fit (`capacity.beyond_the_cluster`)."""
    run = full_racks()
    run.add(*required_gang(size=3))
    assert run.replay.stats.evicted == {}
    assert run.last("hig-0").message.endswith(
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")


def test_members_already_bound_pin_the_rack_of_the_preemption() -> None:
    """One member runs in r1 (its gang's minimum is 3): the other two may only preempt in r1, even
    though r2's pods are cheaper."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 3, ("a", "r2"): 2}, gpus=8))
    run.add(*(filler(node, 500) for node in ("a-r1-1", "a-r1-2")), *(filler(node) for node in ("a-r2-0", "a-r2-1")))
    group = b.podgroup("hig", 3, annotations={"tessera.dev/topology-required": RACK})
    labels = {"scheduling.x-k8s.io/pod-group": "hig"}
    run.add(group, b.pod("hig-0", labels=labels, priority=1000, limits={"nvidia.com/gpu": 8},
                         node_name="a-r1-0", phase="Running"))
    run.add(*(b.pod(f"hig-{i}", labels=labels, priority=1000, limits={"nvidia.com/gpu": 8}) for i in (1, 2)))
    assert set(run.replay.stats.evicted) == {"default/f-a-r1-1", "default/f-a-r1-2"}
    assert {run.node_of("hig-1"), run.node_of("hig-2")} == {"a-r1-1", "a-r1-2"}


def test_block_level_required_gang_preempts_inside_one_block() -> None:
    """The level is whatever the annotation names: a block required, two blocks of one rack each."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2, ("b", "r1"): 2}, gpus=8))
    nodes = ["a-r1-0", "a-r1-1", "b-r1-0", "b-r1-1"]
    run.add(*(filler(node, 500 if node.startswith("a") else 0) for node in nodes))
    group = b.podgroup("hig", 2, annotations={"tessera.dev/topology-required": BLOCK})
    run.add(group, *(b.pod(f"hig-{i}", labels={"scheduling.x-k8s.io/pod-group": "hig"}, priority=1000,
                           limits={"nvidia.com/gpu": 8}) for i in range(2)))
    assert set(run.replay.stats.evicted) == {"default/f-b-r1-0", "default/f-b-r1-1"}
    assert {run.node_of("hig-0"), run.node_of("hig-1")} == {"b-r1-0", "b-r1-1"}


def _three_members_beside_r1_filler(priority: int) -> Run:
    """Rack r1 of 3 nodes with a filler of `priority` on its third, rack r2 of 2 full nodes
    (priority 0); then a 3-member priority-1000 gang of minimum 2 required in one rack."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 3, ("a", "r2"): 2}, gpus=8))
    run.add(filler("a-r1-2", priority), filler("a-r2-0"), filler("a-r2-1"))
    group = b.podgroup("hig", 2, annotations={"tessera.dev/topology-required": RACK})
    run.add(group, *(b.pod(f"hig-{i}", labels={"scheduling.x-k8s.io/pod-group": "hig"}, priority=1000,
                           limits={"nvidia.com/gpu": 8}) for i in range(3)))
    return run


def test_a_member_alone_once_its_gang_has_its_minimum_preempts_only_in_the_gangs_rack() -> None:
    """3 members, minimum 2: two fit on r1's free nodes, the third preempts alone (upstream's
    DefaultPreemption, node by node) — but only on r1's nodes: r2's pods (0) are cheaper than
    r1's last one (500), yet evicting there would free room the member may not use."""
    run = _three_members_beside_r1_filler(500)
    assert set(run.replay.stats.evicted) == {"default/f-a-r1-2"}
    assert {run.node_of(f"hig-{i}") for i in range(3)} == {"a-r1-0", "a-r1-1", "a-r1-2"}


def test_a_member_alone_with_no_victim_in_its_gangs_rack_preempts_nothing() -> None:
    run = _three_members_beside_r1_filler(2000)
    assert run.replay.stats.evicted == {}
    alone = next(i for i in range(3) if run.node_of(f"hig-{i}") is None)
    assert run.last(f"hig-{alone}").message.endswith(
        "preemption: 0/5 nodes are available: 2 Preemption is not helpful for scheduling, "
        "3 No preemption victims found for incoming pod.")  # r1's nodes: its gang's and a more important pod


def test_domains_are_tried_as_upstream_bounds_node_candidates() -> None:
    """r1's pods (0) are cheaper than r2's (500). With the default args (at least 100 nodes'
    worth of candidates) both racks are compared and r1's go; with minCandidateNodesAbsolute 1
    the first candidate rack from the (seeded) random offset — r2 — is taken, as upstream's
    DryRunPreemption stops once it has enough candidates."""
    def run_with(preemption_args: dict[str, Any] | None) -> Run:
        with open(BINPACK) as f:
            raw = yaml.safe_load(f)
        raw["profiles"][0]["pluginConfig"].append({"name": "TopologyPlacement", "args": {"levels": LEVELS}})
        if preemption_args is not None:
            raw["profiles"][0]["pluginConfig"].append({"name": "DefaultPreemption", "args": preemption_args})
        run = Run(parse_config(raw, "test"))
        run.add(*rack_nodes({("a", "r1"): 2, ("a", "r2"): 2}, gpus=8))
        run.add(*(filler(node, 500 if RACK_OF[node] == "r2" else 0) for node in NODES))
        run.add(*required_gang())
        return run

    compared = run_with(None)
    assert set(compared.replay.stats.evicted) == {"default/f-a-r1-0", "default/f-a-r1-1"}
    bounded = run_with({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1})
    assert set(bounded.replay.stats.evicted) == {"default/f-a-r2-0", "default/f-a-r2-1"}
    assert {bounded.node_of("hig-0"), bounded.node_of("hig-1")} == {"a-r2-0", "a-r2-1"}



def _a_late_member_beside_its_gang_in_a_full_rack(*r1_pods: dict[str, Any]) -> Run:
    """Two members of a minimum-2 gang already run on r1's first two nodes; `r1_pods` fill r1's
    other two, r2 runs pods of priority 0 (the cheapest); then the gang's third member arrives.
    r1 has no free room, so the topology plan holds no domain and no member is tried in it: the
    member alone has no failed search inside its gang's rack until it makes one of its own there
    (the cycle's _search_in)."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 4, ("a", "r2"): 2}, gpus=8))
    run.add(*r1_pods, *(filler(node) for node in ("a-r2-0", "a-r2-1")))
    group = b.podgroup("hig", 2, annotations={"tessera.dev/topology-required": RACK})
    labels = {"scheduling.x-k8s.io/pod-group": "hig"}
    run.add(group, *(b.pod(f"hig-{i}", labels=labels, priority=1000, limits={"nvidia.com/gpu": 8},
                           node_name=f"a-r1-{i}", phase="Running") for i in (0, 1)))
    run.add(b.pod("hig-2", labels=labels, priority=1000, limits={"nvidia.com/gpu": 8}))
    return run


def test_a_late_member_whose_gang_rack_has_no_room_preempts_there_node_by_node() -> None:
    """The member preempts alone as upstream's DefaultPreemption (per node, the candidate whose
    highest victim is lowest: r1-3's 100 over r1-2's 500), on the rack's nodes only (r2's pods,
    cheaper still, stay)."""
    run = _a_late_member_beside_its_gang_in_a_full_rack(filler("a-r1-2", 500), filler("a-r1-3", 100))
    assert set(run.replay.stats.evicted) == {"default/f-a-r1-3"}
    assert run.node_of("hig-2") == "a-r1-3"
    assert {run.node_of(f"f-{node}") for node in ("a-r1-2", "a-r2-0", "a-r2-1")} == {"a-r1-2", "a-r2-0", "a-r2-1"}


def test_a_late_member_preempts_on_its_own_search_inside_its_gangs_rack() -> None:
    """r1-2 runs a 2-GPU pod below the member beside a 6-GPU one above it, r1-3 one above it:
    evicting the low one would not make room. The member's PostFilter reads the per-node
    statuses of a search it makes inside the rack, as upstream's DefaultPreemption for one pod
    (r1-2 counted by the filter that still rejects it there, r1's others as having no victim,
    r2's as not helpful) — not the gang's rack-by-rack dry run ("node(s) were in a rack where
    only 0 of the 1 pods ..."), which it would fall back to without that search."""
    low = b.pod("low", limits={"nvidia.com/gpu": 2}, node_name="a-r1-2", phase="Running", priority=0)
    high = b.pod("high", limits={"nvidia.com/gpu": 6}, node_name="a-r1-2", phase="Running", priority=2000)
    run = _a_late_member_beside_its_gang_in_a_full_rack(low, high, filler("a-r1-3", 2000))
    assert run.replay.stats.evicted == {}
    assert run.node_of("hig-2") is None
    assert run.last("hig-2").message.endswith(
        "preemption: 0/6 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "2 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod.")
