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

from hypothesis import given
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


@given(clusters())
@_settings(150)
def test_required_gangs_stay_in_one_domain_and_all_or_nothing(data: tuple[list[dict[str, Any]], list[GangCase]]) -> None:
    nodes, gangs = data
    run = Run(topology_config())
    run.add(*nodes)
    for case in gangs:
        run.add(*_pods(case))
    state = run.state
    for case in gangs:
        placed = [node for i in range(case.size) if (node := run.node_of(f"{case.name}-{i}")) is not None]
        assert not placed or len(placed) >= case.minimum, (case, placed)
        if case.constraint.startswith("required") and placed:
            keys = (BLOCK, RACK) if case.constraint.endswith("rack") else (BLOCK,)
            domains = {tuple(state.nodes[node].node.meta.labels.get(key) for key in keys) for node in placed}
            assert len(domains) == 1 and None not in next(iter(domains)), (case, domains)
    check_state_consistent(run.scheduler)
