"""A gang's eviction that stopped half-way (the leader died between two DELETEs) is finished.

The evictor marks every victim of a preemption (DisruptionTarget, reason PreemptionByScheduler)
before it deletes any, so the marks are the whole decision, written down. Whichever replica
leads next finds a gang left below its minimum with marked members still running and evicts
those: a gang is never left with 0 < running < minimum. Marks older than upstream's
`stalePodDisruptionTimeout` (2 min: the disruption controller turns them False), marks of another
scheduler, and gangs still at their minimum are left alone.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from scheduler.core.objects import parse_pod
from scheduler.sim import builders as b
from tests.helpers import Run

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
MARKED_AT = "2027-01-15T07:59:30Z"  # 30 s before NOW


def _member(name: str, node: str, *, marked_by: str | None = None, at: str = MARKED_AT,
            minimum: int = 3) -> dict[str, Any]:
    pod = b.pod(name, requests={"cpu": "1"}, node_name=node, phase="Running", priority=0,
                labels=b.gang_labels("train", minimum))
    if marked_by is not None:
        pod["status"]["conditions"] = [{
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": f"{marked_by}: preempting to accommodate a higher priority pod", "lastTransitionTime": at}]
    return pod


def _cluster(*members: dict[str, Any]) -> Run:
    run = Run()
    run.add(b.node("n1", cpu="8"), b.node("n2", cpu="8"))
    run.add(*members)
    return run


def _finish(run: Run, now: float = NOW) -> list[str]:
    return sorted(item.pod.meta.name for item in run.scheduler.finish_gang_evictions(now))


def test_a_gang_left_below_its_minimum_has_its_marked_members_evicted() -> None:
    """train-0 was deleted by the dead leader; train-1 and train-2 carry its marks."""
    run = _cluster(_member("train-1", "n1", marked_by="tessera"), _member("train-2", "n2", marked_by="tessera"),
                   b.pod("other", requests={"cpu": "1"}, node_name="n2", phase="Running"))
    [first] = [item for item in run.scheduler.finish_gang_evictions(NOW) if item.pod.meta.name == "train-1"]
    assert (first.node, first.gang, first.scheduler) == ("n1", "default/train", "tessera")
    assert _finish(run) == []  # once handed out, not again (they are being evicted now)


def test_the_members_returned_are_evicted_once() -> None:
    run = _cluster(_member("train-1", "n1", marked_by="tessera"), _member("train-2", "n2", marked_by="tessera"))
    assert _finish(run) == ["train-1", "train-2"]
    assert _finish(run) == []


def test_a_gang_still_at_its_minimum_keeps_running() -> None:
    """The leader died after marking, before deleting anything: the gang is whole; the next
    leader decides again rather than finish a decision nothing has acted on yet."""
    run = _cluster(*(_member(f"train-{i}", "n1" if i < 2 else "n2", marked_by="tessera") for i in range(3)))
    assert _finish(run) == []


def test_marks_older_than_the_stale_timeout_are_not_acted_on() -> None:
    run = _cluster(_member("train-1", "n1", marked_by="tessera", at="2027-01-15T07:57:59Z"),
                   _member("train-2", "n2", marked_by="tessera", at="2027-01-15T07:57:59Z"))
    assert _finish(run) == []
    assert _finish(run, now=NOW - 60) == ["train-1", "train-2"]


def test_another_schedulers_marks_and_unreadable_times_are_left_alone() -> None:
    run = _cluster(_member("train-1", "n1", marked_by="default-scheduler"),
                   _member("train-2", "n2", marked_by="tessera", at="not a time"))
    assert _finish(run) == []


def test_a_gang_with_an_unmarked_running_member_is_left_alone() -> None:
    """Every running member of a gang the dead leader was evicting is marked (its decision takes
    a gang's core whole, and all marks are written before the first DELETE). An unmarked one means
    the marks are left from a preemption that failed before its DELETEs, and the gang is below its
    minimum for another reason (a member completed): not ours to finish."""
    run = _cluster(_member("train-1", "n1", marked_by="tessera"), _member("train-2", "n2"))
    assert _finish(run) == []


def test_a_member_that_completed_does_not_count_as_running() -> None:
    run = _cluster(_member("train-1", "n1", marked_by="tessera"), _member("train-2", "n2", marked_by="tessera"))
    done = _member("train-3", "n2")
    done["status"]["phase"] = "Succeeded"
    run.add(done)
    assert _finish(run) == ["train-1", "train-2"]


def test_a_mark_that_is_cleared_or_whose_pod_is_deleted_is_forgotten() -> None:
    run = _cluster(_member("train-1", "n1", marked_by="tessera"), _member("train-2", "n2", marked_by="tessera"))
    cleared = _member("train-1", "n1")
    cleared["metadata"]["resourceVersion"] = "2"
    run.feed(b.event("MODIFIED", cleared))
    run.feed(b.event("DELETED", _member("train-2", "n2", marked_by="tessera")))
    assert _finish(run) == []
    assert not run.state.marked


def test_a_finishing_eviction_refused_for_good_is_tried_again_later() -> None:
    run = _cluster(_member("train-1", "n1", marked_by="tessera"), _member("train-2", "n2", marked_by="tessera"))
    assert _finish(run) == ["train-1", "train-2"]
    pod = run.state.pod_by_key("default/train-1")
    assert pod is not None
    run.scheduler.eviction_failed(pod.uid, NOW)
    assert _finish(run) == ["train-1"]


def test_a_mark_time_without_a_zone_is_utc_whatever_the_machines_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review: a zone-less RFC 3339 time was read in the machine's local zone, so the core's
    answer depended on where it ran. Kubernetes times are UTC."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        mark = parse_pod(_member("train-1", "n1", marked_by="tessera", at="2027-01-15T07:59:30")).preemption_mark
    finally:
        monkeypatch.undo()
        time.tzset()
    assert mark is not None and mark.since == NOW - 30
