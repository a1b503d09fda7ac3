"""Requeue hints a one-line slip got past (mutation round 4): a pod no plugin rejected is worth
retrying on any event, and a gated pod listens to its gating plugin's hints only."""

from __future__ import annotations

from scheduler.api.config import load_config
from scheduler.core.queue import UNSCHEDULABLE
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.replay.test_gang_preenqueue import _add, _core, _member


def test_a_pod_parked_with_no_rejecting_plugin_is_moved_by_any_event() -> None:
    """Upstream's isPodWorthRequeuing: no UnschedulablePlugins and no PendingPlugins ->
    queueAfterBackoff, whatever the event. (The cycle names every filter plugin when no node
    passes, so the queue is driven directly here: the engine's rule for such a pod.)"""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", cpu="1"), 0.0)
    core.apply("ADDED", b.pod("p", requests={"cpu": "1"}), 0.0)
    queue = core._engine.queue
    [uid] = list(queue.entries)
    assert queue.pop(0.0) == uid
    queue.unschedulable_failure(uid, (), 0.0)  # failed, no plugin named
    assert queue.entries[uid].where == UNSCHEDULABLE
    core.apply("ADDED", b.node("m", cpu="1", labels={"unrelated": "yes"}), 5.0)
    assert queue.entries[uid].where != UNSCHEDULABLE


def test_a_gated_pod_is_not_moved_by_the_hints_of_plugins_that_rejected_it_before() -> None:
    """g-0 was tried (NodeResourcesFit rejected it), then its gang lost a member and PreEnqueue
    gates it again: a new node (NodeResourcesFit's event, not Coscheduling's) moves nothing
    (upstream skips a gated pod for events its GatingPluginEvents do not include)."""
    core = _core(b.node("n", gpus=1), b.workload_podgroup("g", 2), _member("g-0", "g"), _member("g-1", "g"))
    assert core.schedule_next(0.0) is not None
    core.apply("DELETED", _member("g-1", "g"), 1.0)
    _add(core, b.node("m", gpus=1), now=2.0)
    assert core.schedule_next(30.0) is None and core.pending_counts()["gated"] == 1
    core.take_queue_incoming()
    _add(core, b.node("o", gpus=1), now=31.0)
    assert core.take_queue_incoming() == {}
    assert core.pending_counts()["gated"] == 1


def test_a_bound_pods_update_that_changes_no_label_is_no_event() -> None:
    """A bound pod's update that changes none of what a plugin registers (here an annotation) is
    upstream's AssignedPodUpdate of no action any plugin registers (isEventOfInterest: nothing
    moves), so even a pod parked with no rejecting plugin, which any event moves, stays parked;
    a label changed is an AssignedPodUpdatePodLabel, which moves it."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", cpu="1"), 0.0)
    bound = b.pod("db", requests={"cpu": "1"}, node_name="n", phase="Running", scheduler="default-scheduler")
    core.apply("ADDED", bound, 0.0)
    core.apply("ADDED", b.pod("p", requests={"cpu": "1"}), 0.0)
    queue = core._engine.queue
    [uid] = list(queue.entries)
    assert queue.pop(0.0) == uid
    queue.unschedulable_failure(uid, (), 0.0)  # failed, no plugin named
    core.take_queue_incoming()
    core.apply("MODIFIED", b.pod("db", requests={"cpu": "1"}, node_name="n", phase="Running",
                                 scheduler="default-scheduler", annotations={"note": "x"}), 5.0)
    assert queue.entries[uid].where == UNSCHEDULABLE and core.take_queue_incoming() == {}
    core.apply("MODIFIED", b.pod("db", requests={"cpu": "1"}, node_name="n", phase="Running", labels={"app": "db"},
                                 scheduler="default-scheduler", annotations={"note": "x"}), 6.0)
    assert core.take_queue_incoming() == {("active", "AssignedPodUpdatePodLabel"): 1}  # its backoff is over
