"""Intake edges a one-line slip got past (mutation round 4): a still-gated pod's update is not a
second arrival, and a pod seen bound leaves nothing behind in the queue."""

from __future__ import annotations

import copy

from scheduler.api.config import load_config
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b


def test_an_update_of_a_still_gated_pod_is_not_counted_as_another_arrival() -> None:
    """Upstream's unschedulablePods.addOrUpdate counts a pod entering only when it was not there:
    a gated pod's label edit, gates still on, counts nothing."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    gated = b.pod("g", requests={"nvidia.com/gpu": 1}, spec_extra={"schedulingGates": [{"name": "example.com/wait"}]})
    core.apply("ADDED", gated, 0.0)
    assert core.take_queue_incoming() == {("unschedulable", "UnschedulablePodAdd"): 1}
    relabelled = copy.deepcopy(gated)
    relabelled["metadata"]["labels"] = {"team": "a"}
    relabelled["metadata"]["resourceVersion"] = "2"
    core.apply("MODIFIED", relabelled, 1.0)
    assert core.take_queue_incoming() == {}
    assert core.pending_counts()["gated"] == 1


def test_a_pod_seen_bound_leaves_no_queue_history_behind() -> None:
    """Once the watch shows the pod on its node, what the queue kept while its Binding was out
    (attempts, first-queued time) is dropped: it would never be used again."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    pod = b.pod("p", requests={"nvidia.com/gpu": 1})
    core.apply("ADDED", pod, 0.0)
    [attempt] = core.schedule_next(0.0) or []
    assert attempt.node == "n"
    queue = core._engine.queue
    assert attempt.pod.uid in queue._placed  # kept while the Binding is out
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = "n"
    bound["metadata"]["resourceVersion"] = "2"
    core.apply("MODIFIED", bound, 0.5)
    assert attempt.pod.uid not in queue._placed and attempt.pod.uid not in queue
