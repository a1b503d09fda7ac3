"""Property: what each /metrics scrape exports (`gpu_counts`: the view's GPU rules without the
view, sorting a node's devices only where the order could change a count) is exactly what the
view counts: per (model, state) as its rows in the node's order give them (`_count` of the
ordered rows), and in sum its summary, on clusters whose ExtendedResources are edited under held
GPUs (a deviceID under two names, ghosts, devices moved or renamed, more objects than a node
counts), with pods taking whole GPUs, slices and plain counts, and restarts."""

from __future__ import annotations

import os
from collections import Counter

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler.core.scheduler import Scheduler
from scheduler.view import model as m
from scheduler.view.cluster import (_count, _Facts, _fence_reason, _rows, _shown_nodes, agent_timeout, build_view,
                                    gpu_counts)
from tests.property.test_device_identity_edits import Edit, World, edits, probe


def _in_order(core: Scheduler) -> dict[tuple[str, str], int]:
    facts = _Facts(core.state, frozenset(), None, 0.0, {}, agent_timeout(core))
    counts: Counter[tuple[str, str]] = Counter()
    for info in _shown_nodes(core.state):
        _count(info, _rows(facts, info, _fence_reason(core.state, info), ordered=True), counts)
    return dict(counts)


def _agree(core: Scheduler) -> None:
    counts = gpu_counts(core, now=0.0)
    assert counts.states == _in_order(core)
    states: Counter[str] = Counter()
    for (_, state), count in counts.states.items():
        states[state] += count
    summary = build_view(core, source="simulate", now=0.0).summary
    assert sum(states.values()) == summary.gpus
    assert (states[m.FREE], sum(states[s] for s in m.IN_USE), states[m.SLICES], states[m.CONFLICT]) == \
        (summary.free, summary.used, summary.shared, summary.conflicts)


@settings(max_examples=int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0) or 150, deadline=None,
          database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(edits, min_size=1, max_size=24), st.integers(0, 5))
# one deviceID under two resourceNames, one row held (a ghost) and one idle: which row the GPU is
# counted as must not depend on the order the node's devices were listed in
@example([Edit("pod", 0, 0, False), Edit("resource", 0, 1, False), Edit("dup", 0, 0, False)], 0)
def test_the_scrapes_gpu_counts_are_the_views(stream: list[Edit], order: int) -> None:
    world = World()
    for edit in stream:
        world.apply(edit)
        _agree(world.run.scheduler)
    world.restart(order)
    probe(world)
    _agree(world.run.scheduler)
