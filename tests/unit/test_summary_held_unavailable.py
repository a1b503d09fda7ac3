"""The summary line counts a GPU that pods still hold while it cannot take new work.

A trial: a running pod held a GPU that turned unhealthy, another one whose ExtendedResource was
deleted (a ghost). `kubectl tessera nodes` said "0 in use" and "0 sit on nodes with GPUs in use"
though both nodes ran a pod on a GPU: such GPUs count as unavailable (they take no new work), and
the line now says how many of those are still held, and counts the nodes they sit on as used.
"""

from __future__ import annotations

from typing import Any

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from scheduler.view.cluster import build_view
from tests.helpers import config
from tests.unit.test_view_fences_and_conflicts import CLASS, _bound, _grant


def test_gpus_held_while_unhealthy_or_gone_are_said_apart_and_their_nodes_are_in_use() -> None:
    sick = [b.device("n", i, healthy=i != 0) for i in range(2)]
    gone = [b.device("g", i) for i in range(2)]
    objs: list[dict[str, Any]] = [
        b.node("n", gpus=2), *sick, b.node("g", gpus=2), *gone,
        b.resource_class("v100", match_labels={"model": "V100"}),
        _bound("a", "n", {CLASS: 1}, {ann.DEVICES: _grant(sick[0]), ann.PHASE: ann.PHASE_ALLOCATED}),
        _bound("b", "g", {CLASS: 1}, {ann.DEVICES: _grant(gone[0]), ann.PHASE: ann.PHASE_ALLOCATED}),
    ]
    replay = Replay(config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    list(replay.run([WatchEvent("DELETED", gone[0])]))
    view = build_view(replay.scheduler, source="simulate", now=replay.now)
    states = sorted(gpu.state for node in view.nodes for gpu in node.gpus)
    assert states == [m.FREE, m.FREE, m.GHOST, m.UNHEALTHY]
    assert view.summary == m.Summary(gpus=4, used=0, shared=0, free=2, unavailable=2, free_on_partial=2,
                                      largest_free=1, largest_free_node="g", held_unavailable=2)
    assert view.summary.line() == (
        "GPUs: 4 total, 0 in use, 2 free, 2 unavailable (2 of them still held by pods); of the 2 free, 2 (100 %) "
        "sit on nodes with GPUs in use or held, 0 on nodes with none in use or held; most free on one node: 1, g")
    one = m.Summary(gpus=2, used=0, shared=0, free=1, unavailable=1, free_on_partial=1, largest_free=1,
                    largest_free_node="n", held_unavailable=1)
    assert one.line().startswith("GPUs: 2 total, 0 in use, 1 free, 1 unavailable (1 of them still held by a pod); ")
