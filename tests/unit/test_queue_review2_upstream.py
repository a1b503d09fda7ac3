"""Scheduling queue, second review against kube-scheduler v1.36.3
(pkg/scheduler/backend/queue/{scheduling_queue,backoff_queue,active_queue}.go): each test failed
before its fix, except the one its docstring marks as bounding a fix."""

from __future__ import annotations

from typing import Any

from scheduler.core.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, SchedulingQueue
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config


def _fail_unschedulable(q: SchedulingQueue, uid: str, now: float) -> None:
    """Pop `uid`, reject it by a plugin, and let an event bring it back once its backoff is over."""
    assert q.pop(now) == uid
    q.unschedulable_failure(uid, {"NodeResourcesFit"}, now)
    q.move(now, lambda entry: True, "NodeAdd")


# --- 1. the backoff count: consecutive errors, else unschedulable attempts --------------------

def test_an_error_after_unschedulable_attempts_backs_off_one_second() -> None:
    """A pod rejected 4 times (its backoff grew to 8 s) is placed, and its Binding is refused
    (an error). Upstream counts the two separately (backoff_queue.go getBackoffTime: `count :=
    UnschedulableCount; if ConsecutiveErrorsCount > 0 { count = ConsecutiveErrorsCount }`;
    AddUnschedulableIfNotPresent increments one or the other and resets the errors on a
    rejection): the first error backs off 1 s. Tessera counted every failure in `attempts`, so
    the error backed off 5 failures' worth: the 10 s maximum."""
    q = SchedulingQueue(1.0, 10.0)
    q.add("p", 0, "", now=0.0)
    now = 0.0
    for _ in range(4):
        _fail_unschedulable(q, "p", now)
        now += 100.0  # every backoff over
    assert q.pop(now) == "p"
    q.done("p")  # placed; its Binding is refused:
    q.add("p", 0, "", now)
    q.error_failure("p", now)
    assert q.backoff_duration(q.entries["p"]) == 1.0


def test_a_rejection_after_errors_backs_off_by_rejections_only() -> None:
    """Three refused Bindings in a row (errors: 1, 2, 4 s), then the pod is rejected by a plugin
    for the first time. Upstream resets ConsecutiveErrorsCount and backs off by
    UnschedulableCount = 1: 1 s (scheduling_queue.go AddUnschedulableIfNotPresent,
    backoff_queue.go getBackoffTime). Tessera's single counter made it 4 failures: 8 s."""
    q = SchedulingQueue(1.0, 10.0)
    q.add("p", 0, "", now=0.0)
    now = 0.0
    for _ in range(3):
        assert q.pop(now) == "p"
        q.error_failure("p", now)
        now += 100.0
    _fail_unschedulable(q, "p", now)
    assert q.entries["p"].where == BACKOFF
    assert q.backoff_duration(q.entries["p"]) == 1.0


# --- 2. an idle scheduler does not wait out a backoff (SchedulerPopFromBackoffQ) ----------------

def test_pop_takes_a_backed_off_pod_when_nothing_else_is_ready() -> None:
    """An event moved a rejected pod to backoffQ and nothing else waits in activeQ. Since 1.33
    (SchedulerPopFromBackoffQ, beta and on by default in v1.36.3) Pop takes the head of the
    backoff queue when activeQ is empty (active_queue.go unlockedPop -> backoffQPopper.popBackoff;
    metric event PopFromBackoffQ): an idle scheduler does not sit out up to 10 s. Tessera's pop
    returned None until the backoff expired."""
    q = SchedulingQueue(1.0, 10.0)
    q.add("p", 0, "", now=0.0)
    now = 0.0
    for _ in range(4):  # backoff 8 s now
        _fail_unschedulable(q, "p", now)
        now += 100.0
    assert q.pop(now) == "p"
    q.unschedulable_failure("p", {"NodeResourcesFit"}, now)
    q.move(now + 0.5, lambda entry: True, "AssignedPodDelete")
    assert q.entries["p"].where == BACKOFF
    assert q.pop(now + 0.5) == "p"
    assert q.incoming[ACTIVE, "PopFromBackoffQ"] == 1


def test_errors_and_a_backed_off_gang_still_wait_out_their_backoff() -> None:
    """Upstream pops early only from podBackoffQ, the pods rejected by plugins; pods that came
    back after an error wait in podErrorBackoffQ (backoff_queue.go add, popBackoff). A gang kept
    out by podGroupBackoffSeconds is not a pod backoff either: it waits it out. (Passed before the
    fix too; it bounds the fix.)"""
    q = SchedulingQueue(1.0, 10.0)
    q.add("err", 0, "", now=0.0)
    assert q.pop(0.0) == "err"
    q.error_failure("err", 0.0)
    assert q.pop(0.5) is None
    q.add("m", 0, "g", now=0.0)
    assert q.pop(0.9) == "m"
    q.back_off_group("g", 30.0)
    q.unschedulable_failure("m", {"Coscheduling"}, 0.9)
    q.move(1.5, lambda entry: True, "UnschedulablePodAdd")
    assert q.entries["m"].where == BACKOFF
    assert q.pop(1.5) is None  # its own 1 s ends in window 1: ready at 2.0
    assert q.pop(2.0) == "err"
    assert q.pop(2.0) is None  # the gang waits for 30 s
    assert q.pop(30.0) == "m"


def test_room_freed_places_a_parked_pod_at_once_when_the_scheduler_is_idle() -> None:
    """End to end: `p` was rejected for CPU several times (its backoff is 8 s); the pod holding
    the room is deleted. kube-scheduler moves p to backoffQ and, its activeQ being empty, pops it
    at once (PopFromBackoffQ); Tessera left the node empty for up to 8 s more."""
    core = Scheduler(config(BINPACK))
    now = 0.0

    def apply(event_type: str, obj: dict[str, Any]) -> None:
        core.apply(event_type, obj, now)

    def run() -> list[str]:
        placed = []
        while (attempts := core.schedule_next(now)) is not None:
            placed += [a.pod.meta.name for a in attempts if a.node is not None]
        return placed

    apply("ADDED", b.node("n", cpu="4", memory="8Gi"))
    blocker = b.pod("blocker", requests={"cpu": "4"}, node_name="n", phase="Running")
    apply("ADDED", blocker)
    apply("ADDED", b.pod("p", requests={"cpu": "2"}))
    assert run() == []
    pod = core.state.pod_by_key("default/p")
    assert pod is not None
    for _ in range(3):  # three more rejections: other pods come and go elsewhere
        now += 100.0
        core.queue.move(now, lambda entry: True, "NodeAdd")
        assert run() == []
    assert core.queue.entries[pod.uid].where == UNSCHEDULABLE
    now += 0.5  # inside its 8 s backoff
    apply("DELETED", blocker)
    assert run() == ["p"]
