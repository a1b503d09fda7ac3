"""A replay that keeps what-if's score breakdown (`Replay(breakdown=True)`) decides exactly as a
plain one on any stream: the same attempts (nodes, annotations, messages, tie counts), in the same
order, and the same final placements. The breakdown scores each plugin where the plain run scores
anyway and reads the tie-break's draw as it stands, so no RNG draw or tie may move."""

from __future__ import annotations

import functools
from typing import Any
from unittest import mock

from hypothesis import given

from scheduler.core.framework.attempt import Attempt
from scheduler.sim.replay import Replay
from tests.property import test_invariants as inv
from tests.property.strategies import Scenario


class _Recording(inv.Harness):
    """The invariants' harness, also noting each attempt's tie-break outcome, total and preemption."""

    def _decided(self, attempts: list[Attempt]) -> None:
        super()._decided(attempts)
        self.records += [(a.pod.key, a.tied, a.tied_count, a.score, a.nominated_node,
                          tuple(v.key for v in a.preempted)) for a in attempts]


def _run(scenario: Scenario, breakdown: bool) -> tuple[str, list[tuple[Any, ...]], dict[str, tuple[str, str]]]:
    """The stream's crash (if any), attempts and final placements; a restart's fresh core keeps the mode."""
    with mock.patch.object(inv, "Replay", functools.partial(Replay, breakdown=breakdown)):
        harness = _Recording(scenario, checks=False)
        assert harness.sched._cycle.breakdown is breakdown
        crash = harness.outcome()
    return crash, harness.records, harness.final()


@inv._settings(120)
@given(inv.SCENARIOS)
def test_a_breakdown_replay_decides_as_a_plain_one(scenario: Scenario) -> None:
    plain, broken_down = _run(scenario, False), _run(scenario, True)
    inv.check(plain[0] == broken_down[0], f"crashed differently: {plain[0]!r} / {broken_down[0]!r}")
    inv.check(plain[1] == broken_down[1], "the breakdown replay made different attempts")
    inv.check(plain[2] == broken_down[2], "the breakdown replay left different final placements")
