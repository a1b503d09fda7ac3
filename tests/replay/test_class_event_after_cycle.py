"""A class judged again inside a scheduling cycle wakes the pods waiting on it when the cycle ends.

A hold a cycle ends (a lower-priority nominated pod's, on the node a higher-priority pod takes)
may drop the last ghost of a node as the cycle ends: the node has no device left, its device
plugin's count takes the name back from the class that held it, and the class is judged again at
once (`ClusterState.forget_released_ghosts`). A hold the cycle only sets aside for its attempts and
puts back keeps its ghost, and the class stays as it was. Found in review: the class event that says so was kept
for the next watch event, so a pod parked on that class waited for an unrelated event (or the
5-minute flush). kube-scheduler's queue moves the parked pods an event may help as the event
comes, and an in-flight pod checks the events seen during its cycle when it fails
(`PriorityQueue.determineSchedulingHintForInFlightPod`): here, right after the cycle.
"""

from __future__ import annotations

from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config

PLUGIN = "example.com/gpu"  # node n's device plugin count, and its one device's resourceName
CLASS = "class.tessera.dev/v100"
TAKEN = ('spec.resourceName: Invalid value: "example.com/gpu": nodes already advertise this resource '
         "through a device plugin; use a name of its own")


def _cycle(s: Scheduler, now: float) -> list[Attempt]:
    attempts = s.schedule_next(now)
    assert attempts is not None, "no pod was ready"
    return attempts


def test_a_pod_parked_on_a_class_judged_again_inside_a_cycle_is_placed_on_the_next_cycle() -> None:
    s = Scheduler(config(BINPACK))
    device = b.device("n", 0, resource_name=PLUGIN)
    for obj in (b.node("n", cpu="4", extra={PLUGIN: "1"}), device,
                b.node("n2", cpu="500m"), b.device("n2", 0),  # a V100 elsewhere (h passes PreFilter)
                b.resource_class("v100", match_labels={"model": "V100"}),
                b.pod("busy", requests={"cpu": "4"}, node_name="n", phase="Running", priority=0)):
        s.apply("ADDED", obj, 0.0)
    s.apply("ADDED", b.pod("h", requests={"cpu": "1"}, limits={CLASS: 1}, priority=100), 1.0)
    [h] = _cycle(s, 1.0)
    assert [victim.meta.name for victim in h.preempted] == ["busy"]  # h holds n and its device
    assert s.schedule_next(1.0) is None
    s.apply("DELETED", device, 2.0)  # held by h's hold: a ghost, n still has a device
    s.apply("ADDED", b.resource_class("mine", match_labels={"model": "A100"}, resource_name=PLUGIN), 3.0)
    assert s.state.classes.error_of("mine") is None  # n is agent-served while the ghost is held
    s.apply("ADDED", b.pod("q", limits={PLUGIN: 1}, priority=1000), 4.0)
    [q] = _cycle(s, 4.0)  # its attempts set h's lower hold aside and put it back: the ghost stays
    assert q.node is None
    assert s.state.classes.error_of("mine") is None
    s.apply("ADDED", b.pod("t", priority=1000, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "n"}}), 5.0)
    [t] = _cycle(s, 5.0)  # t takes n: h's hold there ends with the cycle, its ghost too: n has no device
    assert t.node == "n"
    assert s.state.classes.error_of("mine") == TAKEN  # judged again inside t's cycle
    # no further event: q, parked on the class, is tried again and bound by count
    placed = [(a.pod.meta.name, a.node) for t in (6.0, 8.0, 12.0) for a in s.schedule_next(t) or ()]
    assert placed == [("q", "n")]


def test_a_class_judged_again_by_a_failed_binding_is_acted_on_at_once() -> None:
    """A Binding that did not land forgets its pod: a device deleted under it was a ghost it held,
    and with it gone the class is judged again. `Engine.take` (the failure's AssignedPodDelete)
    acts on that class event as it ends, not at the next cycle or watch event: none is left over
    (a leftover moves its pods late, and with the wrong event)."""
    s = Scheduler(config(BINPACK))
    device = b.device("n", 0, resource_name=PLUGIN)
    for obj in (b.node("n", cpu="4", extra={PLUGIN: "1"}), device, b.resource_class("v100", match_labels={"model": "V100"})):
        s.apply("ADDED", obj, 0.0)
    s.apply("ADDED", b.pod("p", requests={"cpu": "1"}, limits={CLASS: 1}), 1.0)
    [p] = _cycle(s, 1.0)
    assert p.node == "n"  # its Binding on the way
    s.apply("DELETED", device, 2.0)  # held by p: a ghost
    s.apply("ADDED", b.resource_class("mine", match_labels={"model": "V100"}, resource_name=PLUGIN), 3.0)
    assert s.state.classes.error_of("mine") is None
    s.apply("ADDED", b.pod("q", limits={PLUGIN: 1}, priority=1000), 4.0)
    [q] = _cycle(s, 4.0)
    assert q.node is None
    s.binding_failed(p.pod.uid, 5.0)
    assert s.state.classes.error_of("mine") == TAKEN  # judged again as p was forgotten
    assert s.state.deferred_events == []  # and acted on
    assert s._engine.queue.counts()["unschedulable"] == 0
