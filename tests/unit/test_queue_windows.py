"""The backoff queue's one-second ordering windows, as kube-scheduler v1.36.3's
(pkg/scheduler/backend/queue/backoff_queue.go, KEP-5142):

- getBackoffTime = alignToWindow(Timestamp + calculateBackoffDuration(count)): the expiry is
  truncated to a whole second;
- isPodBackingoff = !boTime.Before(alignToWindow(now)): a pod backs off while its window is the
  current one, so it is ready at the start of the next window;
- podBackoffQ orders by that window, then by activeQ's less function
  (lessBackoffCompletedWithPriority); podErrorBackoffQ by the window only (lessBackoffCompleted);
- podMaxBackoff == 0 disables backoff completely.

Tessera used the exact expiry: each test below failed before the change, for the reason it gives.
The gang hold (podGroupBackoffSeconds, scheduler-plugins) is not upstream's backoff and stays exact.
"""

from __future__ import annotations

from scheduler.core.queue import ACTIVE, BACKOFF, SchedulingQueue


def _rejected(q: SchedulingQueue, uid: str, priority: int, now: float, *, group: str = "", times: int = 1) -> None:
    """`uid` rejected by a plugin `times` times, the last at `now`, with an event during each
    attempt: it goes to the (poppable) backoffQ, not to the unschedulable pods."""
    q.add(uid, priority, group, now)
    for _ in range(times):
        assert q.take(uid)
        q.move(now, lambda entry: False, "NodeAdd")  # an event while it was in flight
        q.unschedulable_failure(uid, {"NodeResourcesFit"}, now)
    assert q.entries[uid].where == BACKOFF


def _erred(q: SchedulingQueue, uid: str, priority: int, now: float) -> None:
    q.add(uid, priority, "", now)
    assert q.take(uid)
    q.error_failure(uid, now)


def test_a_one_second_backoff_from_10_3_is_still_on_at_11_9_and_over_at_12() -> None:
    """Timestamp 10.3 + 1 s = 11.3, truncated: window 11. At 11.9 the current window is 11, so
    the pod still backs off; at 12.0 it is over. Exactly, it was over at 11.3."""
    q = SchedulingQueue(1.0, 10.0)
    _erred(q, "a", 0, 10.3)  # an error: waits its backoff out (podErrorBackoffQ)
    assert q.next_backoff_expiry() == 12.0  # when it is ready, not 11.3: a sleeper would spin
    assert q.pop(11.9) is None
    assert q.pop(12.0) == "a"


def test_an_event_moves_a_pod_to_backoff_while_its_window_is_current_and_to_active_after() -> None:
    """requeuePodWithQueueingStrategy asks isPodBackingoff: the same rule decides on a move."""
    q = SchedulingQueue(1.0, 10.0)
    for uid in ("early", "late"):
        q.add(uid, 0, "", 10.3)
        assert q.take(uid)
        q.unschedulable_failure(uid, {"NodeResourcesFit"}, 10.3)
    q.move(11.9, lambda entry: entry.uid == "early", "NodeAdd")
    q.move(12.0, lambda entry: entry.uid == "late", "NodeAdd")
    assert (q.entries["early"].where, q.entries["late"].where) == (BACKOFF, ACTIVE)


def test_two_pods_whose_backoffs_end_in_one_window_pop_by_priority_not_by_expiry() -> None:
    """activeQ empty, the head of podBackoffQ is popped early. `low` expires at 11.1 and `high`
    at 11.8: one window (11), so the higher priority goes first. Exactly, `low` did."""
    q = SchedulingQueue(1.0, 10.0)
    _rejected(q, "low", 0, 10.1)
    _rejected(q, "high", 10, 10.8)
    assert [q.pop(10.9), q.pop(10.9)] == ["high", "low"]


def test_in_one_window_and_one_priority_the_earlier_timestamp_pops_first() -> None:
    """`x` (rejected twice: 2 s) last failed at 9.1, expiry 11.1; `y` (once: 1 s) at 10.05,
    expiry 11.05. Window 11 for both: activeQ's less function, the earlier timestamp: `x`."""
    q = SchedulingQueue(1.0, 10.0)
    _rejected(q, "x", 0, 9.1, times=2)
    _rejected(q, "y", 0, 10.05)
    assert [q.pop(10.5), q.pop(10.5)] == ["x", "y"]


def test_an_earlier_window_still_goes_before_a_higher_priority() -> None:
    """The window comes first: priority orders only within one. (Bounds the change: passed before.)"""
    q = SchedulingQueue(1.0, 10.0)
    _rejected(q, "low", 0, 9.9)  # window 10
    _rejected(q, "high", 10, 10.0)  # window 11
    assert [q.pop(10.0), q.pop(10.0)] == ["low", "high"]


def test_upstreams_backoff_queue_ordering_flushes_the_same_pods() -> None:
    """TestBackoffQueueOrdering (backoff_queue_test.go), the clock aligned to N: pods with
    timestamps N, N-1, N-2+1ms, N-2, N-2, N-3 and one rejection each (1 s). popAllBackoffCompleted
    at N moves pod5, pod4, pod2, pod3; pod1 (window N, the current one) and pod0 stay. Exactly,
    pod1's expiry N was reached at N."""
    n = 100.0
    q = SchedulingQueue(1.0, 10.0)
    for uid, priority, at in [("pod5", 1, n - 3), ("pod3", 1, n - 2), ("pod4", 2, n - 2),
                              ("pod2", 2, n - 2 + 0.001), ("pod1", 1, n - 1), ("pod0", 1, n)]:
        _rejected(q, uid, priority, at)
    q.flush_backoff(n)
    assert {uid for uid, e in q.entries.items() if e.where == ACTIVE} == {"pod5", "pod4", "pod2", "pod3"}
    # activeQ then orders them by its own less function, and the early pops follow the windows
    assert [q.pop(n) for _ in range(7)] == ["pod4", "pod2", "pod5", "pod3", "pod1", "pod0", None]


def test_the_error_queue_holds_pods_until_their_window_ends() -> None:
    """podErrorBackoffQ is ordered and flushed by the window: errors at 10.2 and 10.9 (1 s each)
    both end in window 11 and become ready together at 12.0. Exactly, the first was ready at 11.2."""
    q = SchedulingQueue(1.0, 10.0)
    _erred(q, "first", 0, 10.2)
    _erred(q, "second", 5, 10.9)
    assert q.next_backoff_expiry() == 12.0
    assert q.pop(11.5) is None
    assert [q.pop(12.0), q.pop(12.0), q.pop(12.0)] == ["second", "first", None]  # activeQ's order


def test_a_zero_max_backoff_disables_backoff() -> None:
    """getBackoffTime returns the zero time when podMaxBackoff is 0 ("zero maxBackoffDuration
    means no backoff"): isPodBackingoff is false and requeuePodWithQueueingStrategy puts the pod
    in activeQ. Tessera parked it in backoffQ for a flush."""
    q = SchedulingQueue(0.0, 0.0)
    _erred(q, "p", 0, 10.3)
    assert q.entries["p"].where == ACTIVE
    assert q.next_backoff_expiry() is None


def test_a_gang_hold_stays_exact_and_a_later_own_window_still_counts() -> None:
    """podGroupBackoffSeconds is scheduler-plugins' PreFilter rejection with an exact expiry, not
    upstream's backoff: a gang held until 30.4 is ready at 30.4, not 31. A member whose own window
    ends after the hold waits for its window."""
    q = SchedulingQueue(1.0, 10.0)
    q.back_off_group("held", 30.4)
    _rejected(q, "g-a", 0, 20.0, group="held")
    assert q.next_backoff_expiry() == 30.4
    assert q.pop(30.3) is None
    assert q.pop(30.4) == "g-a"
    q.back_off_group("short", 10.5)
    _rejected(q, "s-b", 0, 10.2, group="short")  # its own window 11 ends at 12.0, after the hold
    assert q.next_backoff_expiry() == 12.0
    q.flush_backoff(11.9)
    assert q.entries["s-b"].where == BACKOFF
    q.flush_backoff(12.0)
    assert q.entries["s-b"].where == ACTIVE


def test_a_gang_hold_set_after_a_member_entered_backoff_still_keeps_it_out() -> None:
    """A member waits in backoffQ with its own 1 s backoff (ready at 12.0); then its gang fails
    and is held until 30.4 (podGroupBackoffSeconds). The flush at 12.0 used the ready time stored
    when the member entered and let it out early, to be rejected again by the gang's PreFilter;
    the hold now counts whenever the member would leave backoffQ."""
    q = SchedulingQueue(1.0, 10.0)
    q.add("m", 0, "ns/g", 10.3)
    assert q.take("m")
    q.error_failure("m", 10.3)
    q.back_off_group("ns/g", 30.4)
    assert q.pop(12.0) is None
    assert q.entries["m"].where == BACKOFF
    assert q.next_backoff_expiry() == 30.4
    assert q.pop(30.4) == "m"
