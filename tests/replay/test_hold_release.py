"""Requeueing when a cycle gives room back (review finding, a failing test first)."""

from __future__ import annotations

from typing import Any

from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import config


def _drain(s: Scheduler, now: float) -> list[Attempt]:
    out: list[Attempt] = []
    while (a := s.schedule_next(now)) is not None:
        out += a
    return out


def _running(name: str, node: str, prio: int, gpus: int = 1, **kw: Any) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": gpus} if gpus else None
    return b.pod(name, node_name=node, phase="Running", limits=limits, priority=prio,
                 requests=None if gpus else {"cpu": "1"}, **kw)


def test_a_pod_blocked_by_a_hold_is_retried_when_the_cycle_drops_the_hold() -> None:
    """Regression (review): a hold dropped inside a cycle (a nominated gang member whose gang fell
    short) woke nobody: a pod refused only for that room waited for the 5-minute flush. The room a
    hold gave back is an AssignedPodDelete for the queue, as a deleted pod's is."""
    s = Scheduler(config())
    for n in ("n1", "n2", "n3"):
        s.apply("ADDED", b.node(n, gpus=1), 0.0)
    victim = _running("victim", "n1", 100)
    g1 = _running("g-1", "n2", 200, labels=b.gang_labels("g", 2))
    s.apply("ADDED", victim, 0.0)
    s.apply("ADDED", g1, 0.0)
    s.apply("ADDED", _running("x", "n3", 1000), 0.0)
    y = _running("y", "n3", 1000, gpus=0)
    s.apply("ADDED", y, 0.0)
    s.apply("ADDED", b.pod("g-0", labels=b.gang_labels("g", 2), limits={"nvidia.com/gpu": 1}, priority=200), 0.0)
    first = _drain(s, 0.0)
    assert [v.meta.name for v in first[0].preempted] == ["victim"]     # g-0 preempts, holds n1
    s.apply("DELETED", y, 29.0)                                         # unrelated: g-0 retried, fails again
    _drain(s, 29.0)                                                     # g-0 backs off until t=31
    s.apply("ADDED", b.pod("q", limits={"nvidia.com/gpu": 1}, priority=100), 29.5)
    assert _drain(s, 29.5)[0].node is None                              # q: n1 held for g-0
    leaving = _running("g-1", "n2", 200, labels=b.gang_labels("g", 2))
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    s.apply("MODIFIED", leaving, 29.7)                                  # the gang loses a member
    s.apply("DELETED", victim, 30.0)                                    # victim gone: q and g-0 woken
    # q first: n1 still held by g-0; then, activeQ empty, g-0 is taken from backoffQ before t=31
    # (upstream's PopFromBackoffQ), is short now and drops its hold: that wakes q, which takes n1
    assert [(a.pod.meta.name, a.node) for a in _drain(s, 30.5)] == [("q", None), ("g-0", None), ("q", "n1")]
    assert s.state.holds == {}
