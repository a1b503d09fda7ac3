"""Topology's promises on random clusters (hypothesis):

- a gang with a required topology level never spans two domains of that level (a domain named by
  its ancestors' label values too: rack "r1" of block "a" is not rack "r1" of block "b");
- a gang is placed all (≥ its minimum) or nothing, also when it is tried domain by domain;
- the core's accounting stays equal to a recomputation from its placements (trials undone).

The cluster: 2 blocks × up to 3 racks (rack names repeat across blocks) of 1–3 nodes with 2–8
GPUs, some nodes without rack labels; then gangs of 1–6 pods of 1–4 GPUs arrive, each required
per rack, required per block, preferred per rack, or unconstrained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from scheduler.sim import builders as b
from tests.helpers import Run
from tests.property.test_invariants import _settings, check_state_consistent
from tests.replay.test_topology import BLOCK, RACK, topology_config

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


def _assert_gangs_whole_and_in_one_domain(run: Run, gangs: list[GangCase]) -> None:
    """Every gang placed at least its minimum or not at all (a gang evicted whole is gone); a
    gang with a required level inside one domain of it; and the cache consistent."""
    state = run.state
    for case in gangs:
        members = [pod for i in range(case.size) if (pod := state.pod_by_key(f"default/{case.name}-{i}")) is not None]
        placed = [node for pod in members if (node := state.node_of(pod.uid)) is not None]
        assert not placed or len(placed) >= case.minimum, (case, placed)
        if case.constraint.startswith("required") and placed:
            keys = (BLOCK, RACK) if case.constraint.endswith("rack") else (BLOCK,)
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
    domain of that level only (a victim gang leaves whole, wherever it runs), never a pod of its
    own priority or above; every gang still ends all or nothing and inside one domain; the
    accounting survives every domain's dry run."""
    nodes, gangs = data
    run = Run(topology_config())
    run.add(*nodes)
    priority: dict[str, int] = {}
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
    state = run.state
    for case in gangs:
        level = draws.draw(st.sampled_from((0, 50, 1000)))
        pods = _pods(case)
        for pod in pods:
            pod["spec"]["priority"] = level
            priority[f"default/{pod['metadata']['name']}"] = level
        before = {key: state.node_of(uid) for key, uid in ((p.key, p.uid) for p in state.pods.values())}
        evicted_before = set(run.replay.stats.evicted)
        run.add(*pods)
        by_preemptor: dict[str, set[str]] = {}
        for victim, preemptor in run.replay.stats.evicted.items():
            if victim in evicted_before:
                continue
            assert priority[victim] < priority[preemptor], (victim, preemptor)
            if victim.startswith("default/f-") and before.get(victim):
                by_preemptor.setdefault(preemptor, set()).add(before[victim])
        for preemptor, victim_nodes in by_preemptor.items():
            gang = next(c for c in gangs if preemptor.startswith(f"default/{c.name}-"))
            if gang.constraint.startswith("required"):
                keys = (BLOCK, RACK) if gang.constraint.endswith("rack") else (BLOCK,)
                domains = {tuple(state.nodes[n].node.meta.labels.get(k) for k in keys) for n in victim_nodes}
                assert len(domains) == 1, (gang, victim_nodes)
                event("a required gang evicted single pods")
    _assert_gangs_whole_and_in_one_domain(run, gangs)  # a gang evicted whole by a later one is gone
