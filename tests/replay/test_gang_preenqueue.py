"""A Workload API gang still gathering its members is gated at PreEnqueue, as kube-scheduler v1.36.3
does it, not attempted.

Upstream: GangScheduling.PreEnqueue (pkg/scheduler/framework/plugins/gangscheduling) refuses a pod
whose PodGroup is missing or has fewer than minCount pods; the queue's runPreEnqueuePlugins
(backend/queue/scheduling_queue.go, from moveToActiveQ / moveToBackoffQ) then parks it in
unschedulablePods with GatingPlugin set: never popped (no attempt, no FailedScheduling Event, no
PodScheduled condition), counted as scheduler_pending_pods{queue="gated"}, moved again only by
events its gating plugin registers (a sibling's Pod/Add, the PodGroup's Add) — not by the
5-minute UnschedulableTimeout, a wildcard no plugin registers — and its InitialAttemptTimestamp
(the SLI's start) is set when it first enters activeQ. Before, Tessera popped such a member and
rejected it in the cycle as scheduler-plugins' PreFilter would. scheduler-plugins' own forms
still are (their Coscheduling rejects in PreFilter): the last test keeps that."""

from __future__ import annotations

from typing import Any

from scheduler.api.config import load_config
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b


def _member(name: str, group: str) -> dict[str, Any]:
    return b.pod(name, limits={"nvidia.com/gpu": 1}, spec_extra={"schedulingGroup": {"podGroupName": group}})


def _core(*objects: dict[str, Any], now: float = 0.0) -> Scheduler:
    core = Scheduler(load_config(None))
    _add(core, *objects, now=now)
    return core


def _add(core: Scheduler, *objects: dict[str, Any], now: float) -> None:
    for obj in objects:
        core.apply("ADDED", obj, now)


def test_a_member_of_a_short_gang_is_gated_not_attempted() -> None:
    core = _core(b.node("n", gpus=4), b.workload_podgroup("g", 2), _member("g-0", "g"))
    assert core.schedule_next(0.0) is None  # nothing to try: no attempt, so no Event or condition
    counts = core.pending_counts()
    assert (counts["gated"], counts["unschedulable"], counts["active"]) == (1, 0, 0)
    # upstream's unschedulablePods.addOrUpdate counts a gated new pod as entering there, twice:
    # PriorityQueue.Add parks it, then the same Pod/Add event (addPodToSchedulingQueue's
    # MoveAllToActiveOrBackoffQueue) takes it out and GangScheduling's hint sends it back in
    assert core.take_queue_incoming() == {("unschedulable", "UnschedulablePodAdd"): 2}
    # runPreEnqueuePlugin adds the gating plugin to the pod's UnschedulablePlugins
    assert core.unschedulable_by_plugin() == {("Coscheduling", "tessera"): 1}
    assert core.gated().get("default/g-0") == (
        "gated by Coscheduling: waiting for minCount pods from a gang to appear in scheduling queue")


def test_a_member_whose_podgroup_is_missing_waits_gated_until_it_arrives() -> None:
    core = _core(b.node("n", gpus=4), _member("lone-0", "lone"))
    assert core.schedule_next(0.0) is None
    assert core.gated().get("default/lone-0") == (
        'gated by Coscheduling: waiting for pods\'s pod group "lone" to appear in scheduling queue')
    _add(core, b.workload_podgroup("lone", 1), now=1.0)  # GangScheduling's PodGroup/Add hint
    attempts = core.schedule_next(1.0)
    assert attempts is not None and [a.node for a in attempts] == ["n"]
    assert core.pending_counts()["gated"] == 0


def test_the_completed_gang_is_tried_at_once_and_it_is_its_first_attempt() -> None:
    """The last member's arrival (a sibling's Pod/Add) brings the gated one back with no backoff
    (it was never attempted); both are placed in their first attempt, and the SLI counts from the
    time the gang could be tried, not from the first member's creation."""
    core = _core(b.node("n", gpus=4), b.workload_podgroup("g", 2), _member("g-0", "g"))
    while core.schedule_next(0.0) is not None:
        pass
    _add(core, _member("g-1", "g"), now=100.0)
    attempts = core.schedule_next(100.0)
    assert attempts is not None
    assert sorted((a.pod.meta.name, a.node, a.attempts, a.queued_at) for a in attempts) == [
        ("g-0", "n", 1, 100.0), ("g-1", "n", 1, 100.0)]


def test_a_gated_member_is_not_woken_by_the_timeout_nor_by_unrelated_events() -> None:
    core = _core(b.node("n", gpus=4), b.workload_podgroup("g", 3), _member("g-0", "g"), _member("g-1", "g"))
    assert core.schedule_next(0.0) is None
    _add(core, b.node("m", gpus=4), b.pod("other", requests={"cpu": "1"}), now=10.0)
    attempts = core.schedule_next(10.0)
    assert attempts is not None and [a.pod.meta.name for a in attempts] == ["other"]
    assert core.schedule_next(10.0) is None
    core.flush_unschedulable(400.0)  # past the 5-minute UnschedulableTimeout
    assert core.schedule_next(400.0) is None
    assert core.pending_counts()["gated"] == 2


def test_a_tried_gang_that_loses_a_member_is_gated_again_when_next_woken() -> None:
    """Tried complete (two members, one GPU: it does not fit), then a member is deleted: the
    next event that would retry the other brings it to PreEnqueue, which gates it again."""
    core = _core(b.node("n", gpus=1), b.workload_podgroup("g", 2), _member("g-0", "g"), _member("g-1", "g"))
    attempts = core.schedule_next(0.0)
    assert attempts is not None and [a.gang_outcome for a in attempts] == ["failed", "failed"]
    core.apply("DELETED", _member("g-1", "g"), 1.0)
    _add(core, b.node("m", gpus=1), now=2.0)  # room that the one left alone could use
    assert core.schedule_next(30.0) is None
    counts = core.pending_counts()
    assert (counts["gated"], counts["unschedulable"], counts["backoff"], counts["active"]) == (1, 0, 0, 0)


def test_scheduler_plugins_gangs_are_still_rejected_in_prefilter() -> None:
    """scheduler-plugins' Coscheduling has no PreEnqueue: a short group's member is attempted and
    rejected (pkg/coscheduling/core/core.go PodGroupManager.PreFilter), as before."""
    core = _core(b.node("n", gpus=4), b.podgroup("pg", 2),
                 b.pod("pg-0", labels={"scheduling.x-k8s.io/pod-group": "pg"}, limits={"nvidia.com/gpu": 1}))
    attempts = core.schedule_next(0.0)
    assert attempts is not None and attempts[0].gang_outcome == "waiting"
    assert "cannot find enough sibling pods, current pods number: 1, minMember of group: 2" in attempts[0].message
    assert core.pending_counts()["gated"] == 0 and "default/pg-0" not in core.gated()
