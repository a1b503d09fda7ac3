"""Queue edges a one-line slip got past (mutation round 4): the 5-minute flush's boundary and its
gated pods, `activate` on a backed-off pod, and a gang member's order after an error."""

from __future__ import annotations

from scheduler.core.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, SchedulingQueue


def test_the_unschedulable_flush_wants_more_than_five_minutes() -> None:
    """Upstream's flushUnschedulablePodsLeftover moves a pod when now - Timestamp is *more* than
    podMaxInUnschedulablePodsDuration: at exactly 300 s it stays."""
    q = SchedulingQueue()
    q.add("p", 0, "", now=0.0)
    assert q.pop(0.0) == "p"
    q.unschedulable_failure("p", {"X"}, now=0.0)
    assert q.flush_unschedulable(300.0) == 0
    assert q.entries["p"].where == UNSCHEDULABLE
    assert q.flush_unschedulable(300.25) == 1


def test_the_unschedulable_flush_leaves_a_gated_pod_parked_and_uncounted() -> None:
    """A pod a PreEnqueue plugin gates is not moved by the timeout (its wildcard event is none the
    gating plugin registers): not counted as moved, no UnschedulableTimeout incoming."""
    q = SchedulingQueue()
    q.pre_enqueue = lambda uid: "Gate"
    q.add("p", 0, "", now=0.0)
    assert q.entries["p"].gating == "Gate"
    assert q.flush_unschedulable(1000.0) == 0
    assert q.entries["p"].where == UNSCHEDULABLE
    assert not any(event == "UnschedulableTimeout" for _, event in q.incoming)


def test_activate_takes_a_backed_off_pod_to_active_at_once() -> None:
    """Upstream's Activate moves a pod from backoffQ too (ForceActivate: a preemptor whose
    victim's eviction failed): an errored pod, which PopFromBackoffQ never takes early, pops now."""
    q = SchedulingQueue(1.0, 10.0)
    q.add("p", 0, "", now=0.0)
    assert q.pop(0.0) == "p"
    for _ in range(4):
        q.error_failure("p", 0.0)
        q.take("p")
    q.error_failure("p", 0.0)  # 5 errors in a row: 10 s backoff
    assert q.entries["p"].where == BACKOFF
    assert q.pop(1.0) is None
    q.activate(["p"], 1.0, "ForceActivate")
    assert q.entries["p"].where == ACTIVE
    assert q.incoming[ACTIVE, "ForceActivate"] == 1
    assert q.pop(1.0) == "p"


def test_an_error_does_not_move_a_gang_member_behind_pods_queued_after_it() -> None:
    """A gang member orders by its gang's last rejection, else its first queueing: an error (no
    rejection) leaves its place, unlike a single pod whose timestamp is its last attempt."""
    q = SchedulingQueue(1.0, 10.0)
    q.add("g-a", 0, "g", now=1.0)
    q.add("single", 0, "", now=5.0)
    assert q.pop(10.0) == "g-a"
    q.error_failure("g-a", 10.0)  # backs off to 12
    assert q.pop(20.0) == "g-a"
    assert q.pop(20.0) == "single"


def test_a_gang_member_is_not_held_at_the_instant_its_gangs_hold_ends() -> None:
    """Upstream's isPodBackingoff: backing off while the end is After now; at the end it is not.
    Both for a member arriving and for one whose Binding was outdated at that instant."""
    q = SchedulingQueue()
    q.back_off_group("g", until=5.0)
    q.add("g-a", 0, "g", now=5.0)
    assert q.entries["g-a"].where == ACTIVE
    assert q.incoming[ACTIVE, "UnschedulablePodAdd"] == 1
    assert q.pop(5.0) == "g-a"
    q.back_off_group("g", until=7.0)
    q.outdated_failure("g-a", 7.0)
    assert q.entries["g-a"].where == ACTIVE
    assert q.incoming[ACTIVE, "ScheduleAttemptFailure"] == 1
