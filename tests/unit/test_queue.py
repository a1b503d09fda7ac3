"""The scheduling queue: ordering, backoff arithmetic, event-driven requeue, the 5-minute flush."""

from __future__ import annotations

from scheduler.core.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, QueuedPod, SchedulingQueue


def test_priority_then_timestamp_order() -> None:
    q = SchedulingQueue()
    q.add("low-old", 0, "", now=1.0)
    q.add("high", 10, "", now=3.0)
    q.add("low-new", 0, "", now=2.0)
    assert [q.pop(5.0), q.pop(5.0), q.pop(5.0), q.pop(5.0)] == ["high", "low-old", "low-new", None]


def test_backoff_doubles_from_one_to_ten_seconds() -> None:
    """The expiry (now + duration) is truncated to its second, and the pod is ready when that
    second is over (upstream's ordering windows): from whole seconds, a second after the expiry."""
    q = SchedulingQueue(1.0, 10.0)
    q.add("p", 0, "", now=0.0)
    durations = []
    now = 0.0
    for _ in range(6):
        assert q.pop(now) == "p"
        q.error_failure("p", now)
        entry = q.entries["p"]
        assert entry.where == BACKOFF
        durations.append(q.backoff_duration(entry))
        assert q.next_backoff_expiry() == now + durations[-1] + 1.0
        assert q.pop(now + durations[-1] + 0.999) is None
        now += durations[-1] + 1.0
    assert durations == [1, 2, 4, 8, 10, 10]


def test_unschedulable_waits_for_a_helpful_event_then_backs_off() -> None:
    q = SchedulingQueue(1.0, 10.0)
    q.add("p", 0, "", now=0.0)
    assert q.pop(0.0) == "p"
    q.unschedulable_failure("p", {"NodeResourcesFit"}, now=0.0)
    assert q.entries["p"].where == UNSCHEDULABLE
    assert q.pop(100.0) is None  # time alone does not bring it back (before 5 minutes)
    assert q.move(0.5, lambda e: False, "NodeAdd") == 0
    assert q.move(0.5, lambda e: "NodeResourcesFit" in e.rejectors, "NodeAdd") == 1
    assert q.entries["p"].where == BACKOFF  # still inside its 1 s backoff
    q.add("other", 0, "", now=0.6)
    assert q.pop(0.9) == "other"  # a pod ready in activeQ goes first
    assert q.pop(0.9) == "p"  # then, activeQ empty, the backoff is not waited out (PopFromBackoffQ)


def test_event_during_the_attempt_sends_the_pod_to_backoff_not_unschedulable() -> None:
    q = SchedulingQueue()
    q.add("p", 0, "", now=0.0)
    assert q.pop(0.0) == "p"
    q.move(0.0, lambda e: True, "NodeAdd")  # something changed while p was in flight
    q.unschedulable_failure("p", {"NodeResourcesFit"}, now=0.0)
    assert q.entries["p"].where == BACKOFF


def test_five_minute_flush() -> None:
    q = SchedulingQueue()
    q.add("p", 0, "", now=0.0)
    q.pop(0.0)
    q.unschedulable_failure("p", {"X"}, now=0.0)
    assert q.flush_unschedulable(299.0) == 0
    assert q.flush_unschedulable(300.5) == 1
    assert q.entries["p"].where == ACTIVE


def test_gang_uses_group_failure_time_and_group_backoff() -> None:
    q = SchedulingQueue()
    q.add("single", 0, "", now=5.0)
    q.add("g-a", 0, "g", now=1.0)
    assert q.pop(10.0) == "g-a"
    q.unschedulable_failure("g-a", {"Coscheduling"}, now=10.0)  # the group failed at t=10
    q.back_off_group("g", until=30.0)
    q.move(12.0, lambda e: True, "NodeAdd")
    assert q.pop(20.0) == "single"
    assert q.pop(29.0) is None  # group backoff holds it even though its own backoff ended
    assert q.pop(30.0) == "g-a"


def test_incoming_counts_say_which_queue_each_pod_entered_and_why() -> None:
    """scheduler_queue_incoming_pods_total{queue, event} used to read 0: nothing counted."""
    q = SchedulingQueue(1.0, 10.0)
    q.add("p", 0, "", now=0.0)
    assert q.pop(0.0) == "p"
    q.unschedulable_failure("p", {"NodeResourcesFit"}, now=0.0)
    q.move(0.5, lambda e: True, "NodeAdd")  # still inside its backoff
    q.flush_backoff(2.0)  # its backoff's window (1) is over
    assert q.pop(2.0) == "p"
    q.error_failure("p", now=2.0)
    q.add("p", 0, "", now=2.5)  # an update to a backed-off pod: counted only when it moves
    assert dict(q.incoming) == {
        (ACTIVE, "UnschedulablePodAdd"): 1,
        (UNSCHEDULABLE, "ScheduleAttemptFailure"): 1,
        (BACKOFF, "NodeAdd"): 1,
        (ACTIVE, "BackoffComplete"): 1,
        (BACKOFF, "ScheduleAttemptFailure"): 1,
    }


def test_repeated_binding_failures_back_off_exponentially_and_keep_the_pods_history() -> None:
    """Regression (review): a placed pod left the queue, so a refused Binding re-added it as new:
    1 s of backoff every time (a Binding a webhook keeps refusing was retried every second), its
    attempts and first-queued time (the scheduling SLI) lost. Upstream keeps the QueuedPodInfo."""
    from scheduler.core.scheduler import Scheduler
    from scheduler.sim import builders as b
    from tests.helpers import config

    core = Scheduler(config())
    core.apply("ADDED", b.node("n1", gpus=1), 0.0)
    core.apply("ADDED", b.pod("p", limits={"nvidia.com/gpu": 1}), 0.0)
    now, waits = 0.0, []
    for attempt_number in range(1, 6):
        [attempt] = core.schedule_next(now) or []
        assert attempt.node == "n1" and attempt.attempts == attempt_number and attempt.queued_at == 0.0
        core.binding_failed(attempt.pod.uid, now)
        expiry = core.next_backoff_expiry()
        assert expiry is not None
        waits.append(expiry - now)
        now = expiry
    assert waits == [2, 3, 5, 9, 11]  # 1, 2, 4, 8, 10 s, each ending in a window: ready when it is over
    assert core.pending_counts()["active"] + core.pending_counts()["backoff"] == 1


def test_a_placed_pods_queue_history_is_dropped_once_bound_or_deleted() -> None:
    queue = SchedulingQueue()
    queue.add("u", 0, "", 0.0)
    assert queue.pop(0.0) == "u"
    queue.done("u")
    queue.remove("u")  # bound (or deleted): nothing is kept for it
    queue.add("u", 0, "", 5.0)
    assert queue.entries["u"].initial == 5.0


def test_a_pod_created_again_under_its_name_leaves_no_old_entry_behind() -> None:
    """Regression (review): the state dropped the old uid of a name seen again with a new uid
    (no DELETED in between), the queue kept it: one pod counted twice, a ghost entry parked."""
    from scheduler.core.scheduler import Scheduler
    from scheduler.sim import builders as b
    from tests.helpers import config

    core = Scheduler(config())
    core.apply("ADDED", b.node("n1", gpus=1), 0.0)
    old = b.pod("worker", limits={"nvidia.com/gpu": 4})  # never fits: parked unschedulable
    core.apply("ADDED", old, 0.0)
    assert (core.schedule_next(0.0) or [])[0].node is None
    new = b.pod("worker", limits={"nvidia.com/gpu": 4})
    new["metadata"]["uid"] = "new-uid"
    core.apply("MODIFIED", new, 10.0)
    assert set(core.state.pods) == {"new-uid"} and set(core.queue.entries) == {"new-uid"}


def test_nothing_is_kept_for_a_gang_whose_pods_are_all_gone() -> None:
    """Regression (review): group_failed_at and group_backoff_until grew by one per failed gang."""
    queue = SchedulingQueue()
    for i in range(50):
        queue.add(f"u{i}", 0, f"ns/g{i}", 0.0)
        assert queue.pop(0.0) == f"u{i}"
        queue.unschedulable_failure(f"u{i}", {"Coscheduling"}, 0.0)
        queue.back_off_group(f"ns/g{i}", 30.0)
        queue.remove(f"u{i}")
    assert queue.group_failed_at == {} and queue.group_backoff_until == {}


def test_a_gang_member_arriving_during_its_groups_backoff_waits_it_out() -> None:
    """Regression (review): a new member went straight to activeQ and its cycle re-ran the whole
    (certain to fail) transaction, pulling its siblings out of backoff; scheduler-plugins refuses
    every member while the group is backed off ("podGroup ... failed recently")."""
    from scheduler.api.config import parse_config
    from scheduler.core.scheduler import Scheduler
    from scheduler.sim import builders as b

    config = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                           "profiles": [{"schedulerName": "tessera", "pluginConfig": [
                               {"name": "Coscheduling", "args": {"podGroupBackoffSeconds": 30}}]}]}, "test")
    core = Scheduler(config)
    core.apply("ADDED", b.node("n1", gpus=2), 0.0)  # room for one 2-GPU member of the two needed

    def member(i: int) -> dict[str, object]:
        return b.pod(f"g-{i}", labels=b.gang_labels("g", 2), limits={"nvidia.com/gpu": 2})

    for i in range(2):
        core.apply("ADDED", member(i), 0.0)
    while core.schedule_next(0.0) is not None:
        pass
    assert core.queue.group_backoff_until == {"default/g": 30.0}
    core.apply("ADDED", member(2), 5.0)
    assert core.schedule_next(5.0) is None  # nobody is tried before the group's backoff ends
    tried = [a.pod.meta.name for a in core.schedule_next(30.0) or []]
    assert sorted(tried) == ["g-0", "g-1", "g-2"]


def test_an_event_asks_the_pods_its_plugins_may_wake_in_the_unschedulable_order() -> None:
    """`move` with the plugins listening to an event looks the parked pods up by rejector (or
    gating plugin) instead of walking them all: it must ask exactly the pods the walk would have
    let through — rejected by a listening plugin, gated by one, or rejected by none named — in
    `unschedulable`'s order (the order they are requeued in), whatever parked, unparked and
    re-gated them before. Random operations, fixed seeds."""
    import random

    names = ["A", "B", "C", "G"]
    for seed in range(100):
        rng = random.Random(seed)
        q = SchedulingQueue()
        gated: set[str] = set()
        q.pre_enqueue = lambda uid: "G" if uid in gated else None
        uids = [f"p{i}" for i in range(12)]
        now = 0.0
        for _ in range(300):
            now += rng.random()
            op, uid = rng.random(), rng.choice(uids)
            if op < 0.2:
                q.add(uid, rng.randint(0, 2), "", now)
            elif op < 0.35:
                if (popped := q.pop(now)) is not None:
                    if rng.random() < 0.7:
                        q.unschedulable_failure(popped, rng.sample(names[:3], rng.randint(0, 2)), now)
                    else:
                        q.error_failure(popped, now)
            elif op < 0.45:
                (gated.add if rng.random() < 0.5 else gated.discard)(uid)
            elif op < 0.5:
                q.remove(uid)
            elif op < 0.55:
                q.activate([uid], now, "ForceActivate")
            elif op < 0.6:
                q.flush_unschedulable(now + rng.choice([0.0, 400.0]))
            else:
                listening = frozenset(rng.sample(names, rng.randint(0, 3)))
                expected = [e.uid for e in q.unschedulable.values()
                            if not (wakers := {e.gating} if e.gating else e.rejectors) or wakers & listening]
                asked: list[str] = []
                moves = rng.random() < 0.5

                def worth(entry: QueuedPod) -> bool:
                    asked.append(entry.uid)
                    return moves and entry.priority > 0

                q.move(now, worth, "Event", listening)
                assert asked == expected, (seed, asked, expected)
