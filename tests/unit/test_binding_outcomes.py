"""What a Binding's failure frees wakes the pods waiting for it, as a deleted pod's room does.

kube-scheduler moves waiting pods when a Binding fails (handleBindingCycleError ->
AssignedPodDelete). Tessera dropped the event: a pod parked for exactly that GPU waited for the
5-minute unschedulable flush (found in review).
"""

from __future__ import annotations

import pytest

from scheduler.api.config import load_config
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b


@pytest.mark.parametrize("outcome", ["dropped", "failed"])
def test_room_freed_by_a_binding_that_did_not_land_wakes_the_pod_waiting_for_it(outcome: str) -> None:
    core = Scheduler(load_config(None), seed=1)
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    p, q = b.pod("p", requests={"nvidia.com/gpu": 1}), b.pod("q", requests={"nvidia.com/gpu": 1})
    core.apply("ADDED", p, 0.0)
    core.apply("ADDED", q, 0.0)
    [placed] = core.schedule_next(0.0) or []
    [parked] = core.schedule_next(0.0) or []
    assert (placed.pod.meta.name, placed.node, parked.pod.meta.name, parked.node) == ("p", "n", "q", None)
    if outcome == "dropped":  # p deleted while its Binding was out: the POST's 404 before the watch's DELETED
        core.binding_dropped(p["metadata"]["uid"])
        core.apply("DELETED", p, 0.5)
    else:  # the Binding refused; p itself backs off
        core.binding_failed(p["metadata"]["uid"], 0.5)
    tried = [attempt for tick in range(1, 31) for attempt in core.schedule_next(float(tick)) or ()]
    assert "q" in [attempt.pod.meta.name for attempt in tried]  # not only at the 5-minute flush
    if outcome == "dropped":
        assert [(a.pod.meta.name, a.node) for a in tried] == [("q", "n")]
