"""Topology's promises on random clusters (hypothesis):

- a gang with a required topology level never spans two domains of that level (a domain named by
  its ancestors' label values too: rack "r1" of block "a" is not rack "r1" of block "b");
- a gang is placed all (≥ its minimum) or nothing, also when it is tried domain by domain;
- the core's accounting stays equal to a recomputation from its placements (trials undone);
- a gang required at a level that evicts single pods evicts them only on the nodes of the domain
  it then runs in, and a gang that fits whole without preemption evicts nothing.

The cluster: 2 blocks × up to 3 racks (rack names repeat across blocks) of 1–3 nodes with 2–8
GPUs, some nodes without rack labels; then gangs of 1–6 pods of 1–4 GPUs arrive, each required
per rack, required per block, preferred per rack, or unconstrained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from hypothesis import event, given
from hypothesis import strategies as st

from scheduler.api.config import parse_config
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run
from tests.property.test_invariants import _settings, check_state_consistent
from tests.replay.test_topology import BLOCK, LEVELS, RACK, topology_config

CONSTRAINTS = ("required-rack", "required-block", "preferred-rack", "none")


@dataclass(frozen=True)
class GangCase:
    name: str
    size: int
    minimum: int
    gpus: int
    constraint: str


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[GangCase]]:
    nodes = []
    for block in ("a", "b"):
        for rack in range(draw(st.integers(1, 3))):
            for i in range(draw(st.integers(1, 3))):
                labels = {BLOCK: block, RACK: f"r{rack}"} if draw(st.integers(0, 9)) else {BLOCK: block}
                nodes.append(b.node(f"{block}-r{rack}-{i}", gpus=draw(st.sampled_from((2, 4, 8))), labels=labels))
    gangs = []
    for g in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 6))
        gangs.append(GangCase(f"g{g}", size, draw(st.integers(1, size)), draw(st.integers(1, 4)),
                              draw(st.sampled_from(CONSTRAINTS))))
    return nodes, gangs


def _pods(case: GangCase, constrained: bool = True) -> list[dict[str, Any]]:
    annotations = {}
    if constrained and case.constraint != "none":
        kind, level = case.constraint.split("-")
        annotations[f"tessera.dev/topology-{kind}"] = RACK if level == "rack" else BLOCK
    labels = b.gang_labels(case.name, case.minimum)
    return [b.pod(f"{case.name}-{i}", labels=labels, annotations=annotations, limits={"nvidia.com/gpu": case.gpus})
            for i in range(case.size)]


def _domain_keys(case: GangCase) -> tuple[str, ...]:
    """The labels naming a domain of the gang's required level (a rack is named with its block)."""
    return (BLOCK, RACK) if case.constraint.endswith("rack") else (BLOCK,)


def _without_preemption() -> Run:
    """topology_config() with DefaultPreemption disabled: where a gang fits as the cluster stands."""
    with open(BINPACK) as f:
        raw = yaml.safe_load(f)
    profile = raw["profiles"][0]
    profile["pluginConfig"].append({"name": "TopologyPlacement", "args": {"levels": LEVELS}})
    profile.setdefault("plugins", {})["postFilter"] = {"disabled": [{"name": "DefaultPreemption"}]}
    return Run(parse_config(raw, "test"))


def _fits_whole_without_preemption(run: Run, nodes: list[dict[str, Any]], added: dict[str, dict[str, Any]],
                                   pods: list[dict[str, Any]]) -> bool:
    """Every one of `pods` (a gang) binds on a copy of the cluster as it stands (each running pod
    on its node) where nothing may be preempted. Only asked when no pod is pending, so the copy
    holds no nomination either; identical members on one resource make the count placed the same
    whatever the tie-breaks."""
    twin = _without_preemption()
    twin.add(*nodes)
    state = run.state
    running = []
    for key, obj in added.items():
        pod = state.pod_by_key(key)
        node = state.node_of(pod.uid) if pod is not None else None
        if node is not None:
            running.append({**obj, "spec": {**obj["spec"], "nodeName": node}, "status": {"phase": "Running"}})
    twin.add(*running)
    twin.add(*pods)
    return all(twin.node_of(pod["metadata"]["name"]) is not None for pod in pods)


def _assert_gangs_whole_and_in_one_domain(run: Run, gangs: list[GangCase]) -> None:
    """Every gang placed at least its minimum or not at all (a gang evicted whole is gone); a
    gang with a required level inside one domain of it; and the cache consistent."""
    state = run.state
    for case in gangs:
        members = [pod for i in range(case.size) if (pod := state.pod_by_key(f"default/{case.name}-{i}")) is not None]
        placed = [node for pod in members if (node := state.node_of(pod.uid)) is not None]
        assert not placed or len(placed) >= case.minimum, (case, placed)
        if case.constraint.startswith("required") and placed:
            keys = _domain_keys(case)
            domains = {tuple(state.nodes[node].node.meta.labels.get(key) for key in keys) for node in placed}
            assert len(domains) == 1 and None not in next(iter(domains)), (case, domains)
    check_state_consistent(run.scheduler)


@given(clusters())
@_settings(150)
def test_required_gangs_stay_in_one_domain_and_all_or_nothing(data: tuple[list[dict[str, Any]], list[GangCase]]) -> None:
    nodes, gangs = data
    run = Run(topology_config())
    run.add(*nodes)
    for case in gangs:
        run.add(*_pods(case))
    _assert_gangs_whole_and_in_one_domain(run, gangs)


@given(clusters(), st.data())
@_settings(100)
def test_required_gangs_preempt_inside_one_domain(data: tuple[list[dict[str, Any]], list[GangCase]],
                                                  draws: st.DataObject) -> None:
    """With lower-priority pods in the way, a gang required at a level evicts single pods of one
    domain of that level only — the one its members then run in (a victim gang leaves whole,
    wherever it runs) — never a pod of its own priority or above, and nothing at all when it fits
    whole as the cluster stands; every gang still ends all or nothing and inside one domain; the
    accounting survives every domain's dry run."""
    nodes, gangs = data
    run = Run(topology_config())
    run.add(*nodes)
    priority: dict[str, int] = {}
    added: dict[str, dict[str, Any]] = {}  # every pod added, by key: the running ones make the twin's cluster
    fillers = []
    for node in nodes:
        if draws.draw(st.booleans()):
            name = f"f-{node['metadata']['name']}"
            priority[f"default/{name}"] = draws.draw(st.sampled_from((0, 100)))
            gpus = int(node["status"]["allocatable"]["nvidia.com/gpu"])
            fillers.append(b.pod(name, limits={"nvidia.com/gpu": draws.draw(st.integers(1, gpus))},
                                 node_name=node["metadata"]["name"], phase="Running",
                                 priority=priority[f"default/{name}"]))
    run.add(*fillers)
    added.update((f"default/{pod['metadata']['name']}", pod) for pod in fillers)
    state = run.state
    for case in gangs:
        level = draws.draw(st.sampled_from((0, 50, 1000)))
        pods = _pods(case)
        for pod in pods:
            pod["spec"]["priority"] = level
            priority[f"default/{pod['metadata']['name']}"] = level
        fits = not state.pending and _fits_whole_without_preemption(run, nodes, added, pods)
        before = {key: state.node_of(uid) for key, uid in ((p.key, p.uid) for p in state.pods.values())}
        evicted_before = set(run.replay.stats.evicted)
        run.add(*pods)
        added.update((f"default/{pod['metadata']['name']}", pod) for pod in pods)
        by_preemptor: dict[str, set[str]] = {}
        for victim, preemptor in run.replay.stats.evicted.items():
            if victim in evicted_before:
                continue
            assert priority[victim] < priority[preemptor], (victim, preemptor)
            assert not (fits and preemptor.startswith(f"default/{case.name}-")), (case, victim)
            if victim.startswith("default/f-") and before.get(victim):
                by_preemptor.setdefault(preemptor, set()).add(before[victim])
        if fits:
            event("a gang that fit whole without preemption")
        for preemptor, victim_nodes in by_preemptor.items():
            gang = next(c for c in gangs if preemptor.startswith(f"default/{c.name}-"))
            if gang.constraint.startswith("required"):
                keys = _domain_keys(gang)
                domains = {tuple(state.nodes[n].node.meta.labels.get(k) for k in keys) for n in victim_nodes}
                assert len(domains) == 1, (gang, victim_nodes)
                if gang is case:  # the gang now runs in the domain it evicted in, on its nodes
                    members = [pod for i in range(case.size)
                               if (pod := state.pod_by_key(f"default/{case.name}-{i}")) is not None]
                    ran = {tuple(state.nodes[n].node.meta.labels.get(k) for k in keys)
                           for pod in members if (n := state.node_of(pod.uid)) is not None}
                    assert ran == domains, (gang, victim_nodes, ran)
                    event("a required gang evicted single pods")
    _assert_gangs_whole_and_in_one_domain(run, gangs)  # a gang evicted whole by a later one is gone
