"""Upstream Workload API gangs (scheduling.k8s.io/v1alpha2 PodGroups) against kube-scheduler v1.36.3
(review findings): each test failed before its fix."""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.api.config import load_config
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.kube.run_cli import MetricsHooks
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi


def _synced_loop() -> SchedulerLoop:
    """A loop whose informers have all delivered their first LIST (it writes statuses)."""
    loop = SchedulerLoop(load_config(None), KubeHttp(FakeApi()), KubeHttp(FakeApi()),  # type: ignore[arg-type]
                         identity="t")
    for informer in loop.informers.informers:
        informer.synced.set()
    return loop


def _member(name: str, group: str) -> dict[str, Any]:
    return b.pod(name, limits={"nvidia.com/gpu": 1}, spec_extra={"schedulingGroup": {"podGroupName": group}})


def _group_conditions(loop: SchedulerLoop) -> list[dict[str, Any]]:
    return [body["status"]["conditions"][0] for (path, _), body in loop.statuses._dirty.items()
            if "/apis/scheduling.k8s.io/v1alpha2/" in path]


def _cycle(loop: SchedulerLoop) -> list[str | None]:
    """One scheduling cycle, its attempts handled as the live loop does; their gang outcomes."""
    attempts = loop.core.schedule_next(0.0)
    assert attempts is not None
    loop._handle_cycle(attempts, 0.0)
    return [attempt.gang_outcome for attempt in attempts]


def test_a_gang_still_gathering_its_members_gets_no_podgroupscheduled_condition() -> None:
    """A PodGroup with minCount 2 and one member so far was marked PodGroupScheduled=False,
    reason Unschedulable ("waiting for minCount pods from a gang to appear in scheduling queue"),
    although nothing was tried. kube-scheduler keeps such a pod out of its queue in the
    GangScheduling plugin's PreEnqueue (pkg/scheduler/framework/plugins/gangscheduling:
    GangScheduling.PreEnqueue; backend/queue/scheduling_queue.go runPreEnqueuePlugin records no
    status) and writes the condition only after a pod group scheduling cycle
    (pkg/scheduler/schedule_one_podgroup.go submitPodGroupAlgorithmResult ->
    updatePodGroupCondition); the API defines Unschedulable as "cannot be scheduled due to resource
    constraints ... or insufficient capacity" (k8s.io/api scheduling/v1alpha2
    PodGroupReasonUnschedulable), which a group still being created is not: a controller acting on
    it would act on every gang's normal start. Once the gang is complete and does not fit, False
    is written as before."""
    loop = _synced_loop()
    loop._on_event("ADDED", b.node("n", gpus=1))
    loop._on_event("ADDED", b.workload_podgroup("g", 2))
    loop._on_event("ADDED", _member("g-0", "g"))
    assert loop.core.schedule_next(0.0) is None  # gated at PreEnqueue: no cycle at all
    assert _group_conditions(loop) == []
    loop._on_event("ADDED", _member("g-1", "g"))
    assert _cycle(loop) == ["failed", "failed"]  # two members, one GPU: tried, and does not fit
    [condition] = _group_conditions(loop)
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")


def _pod_wishes(loop: SchedulerLoop) -> dict[str, dict[str, Any]]:
    """The pod statuses the loop wishes written, by pod name."""
    return {path.split("/")[-2]: body["status"] for (path, _), body in loop.statuses._dirty.items()
            if "/pods/" in path}


def _events_recorded(loop: SchedulerLoop) -> int:
    return loop.events._send.statistics().current_buffer_used


async def test_a_member_of_a_gang_still_gathering_is_not_attempted_so_nothing_is_written_or_counted() -> None:
    """A Workload API gang with one of its minCount 2 members got, every time that member was
    popped, a FailedScheduling Event and PodScheduled=False/Unschedulable ("0/1 nodes are
    available: waiting for minCount pods from a gang to appear in scheduling queue."), counted as
    an unschedulable scheduling attempt, the pod in scheduler_pending_pods{queue="unschedulable"}.
    kube-scheduler v1.36.3 gates it in GangScheduling.PreEnqueue: backend/queue/scheduling_queue.go
    runPreEnqueuePlugins parks it in unschedulablePods as gated (its gatedRecorder:
    scheduler_pending_pods{queue="gated"}); it is never popped, so schedule_one.go writes no Event,
    no condition (handleSchedulingFailure never runs) and counts no attempt. Once the gang is
    complete and tried, a failure is said as before."""
    metrics = Metrics(profiles=["tessera"])
    loop = _synced_loop()
    loop.hooks = MetricsHooks(metrics, loop)
    loop._on_event("ADDED", b.node("n", gpus=1))
    loop._on_event("ADDED", b.workload_podgroup("g", 2))
    loop._on_event("ADDED", _member("g-0", "g"))
    await loop._run_cycles()
    loop.hooks.on_queue(loop.core.pending_counts(), loop.core.take_queue_incoming())
    assert _events_recorded(loop) == 0
    assert _pod_wishes(loop) == {}
    assert _metric(metrics, "scheduler_schedule_attempts_total", result="unschedulable", profile="tessera") == 0
    assert _metric(metrics, "scheduler_pending_pods", queue="gated") == 1
    assert _metric(metrics, "scheduler_pending_pods", queue="unschedulable") == 0
    loop._on_event("ADDED", _member("g-1", "g"))
    await loop._run_cycles()  # complete, tried: two members, one GPU
    assert _events_recorded(loop) == 3  # each member's FailedScheduling, and the PodGroup's Unschedulable
    assert {name: status["conditions"][0]["reason"] for name, status in _pod_wishes(loop).items()} == {
        "g-0": "Unschedulable", "g-1": "Unschedulable"}
    assert _metric(metrics, "scheduler_schedule_attempts_total", result="unschedulable", profile="tessera") == 2


def _metric(metrics: Metrics, name: str, **labels: str) -> float:
    text = generate_latest(metrics.registry).decode()
    [value] = [s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name and s.labels == labels]
    return value


def test_a_gang_that_does_not_fit_is_worded_as_kube_scheduler_words_it() -> None:
    """PodGroupScheduled=False carried the first member's FitError ("0/1 nodes are available: ...")
    as its message. kube-scheduler v1.36.3 writes the pod group's status message, not a pod's
    (pkg/scheduler/schedule_one_podgroup.go submitPodGroupAlgorithmResult: `Message:
    podGroupResult.status.Message()`), and a group whose members were tried and rejected has the
    status podGroupSchedulingDefaultAlgorithm starts with, `fwk.NewStatus(fwk.Unschedulable)
    .WithError(errPodGroupUnschedulable)`, whose Message() is the error's text alone
    (k8s.io/kube-scheduler framework/interface.go Status.Reasons): "pod group is unschedulable".
    The members' own reasons stay on the pods (PodScheduled, FailedScheduling Events)."""
    loop = _synced_loop()
    loop._on_event("ADDED", b.node("n", gpus=1))
    loop._on_event("ADDED", b.workload_podgroup("g", 2))
    loop._on_event("ADDED", _member("g-0", "g"))
    loop._on_event("ADDED", _member("g-1", "g"))
    assert _cycle(loop) == ["failed", "failed"]
    [condition] = _group_conditions(loop)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False", "Unschedulable", "pod group is unschedulable")


def test_a_gang_waiting_for_its_victims_is_worded_as_kube_scheduler_words_it() -> None:
    """A gang that fits once lower-priority pods are evicted: kube-scheduler's group status is
    `fwk.NewStatus(fwk.Unschedulable, "pod group is waiting for preemption to complete")
    .WithError(errPodGroupUnschedulable)` (schedule_one_podgroup.go podGroupSchedulingDefaultAlgorithm,
    waitingOnPreemption), the error's text first: "pod group is unschedulable, pod group is waiting
    for preemption to complete"."""
    loop = _synced_loop()
    loop._on_event("ADDED", b.node("n", gpus=2))
    for i in range(2):
        loop._on_event("ADDED", b.pod(f"low-{i}", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running"))
    loop._on_event("ADDED", b.workload_podgroup("g", 2))
    for i in range(2):
        loop._on_event("ADDED", b.pod(f"g-{i}", limits={"nvidia.com/gpu": 1}, priority=1000,
                                      spec_extra={"schedulingGroup": {"podGroupName": "g"}}))
    attempts = loop.core.schedule_next(0.0)
    assert attempts is not None
    loop._handle_cycle(attempts, 0.0)
    assert attempts[0].preempted, "the gang should preempt the two low pods"
    [condition] = _group_conditions(loop)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False", "Unschedulable", "pod group is unschedulable, pod group is waiting for preemption to complete")


def _racked(name: str, rack: str) -> dict[str, Any]:
    node = b.node(name, gpus=1)
    node["metadata"].setdefault("labels", {})["example.com/rack"] = rack
    return node


def test_a_gang_with_a_topology_constraint_that_fits_no_domain_is_worded_as_kube_scheduler_words_it() -> None:
    """A PodGroup with `schedulingConstraints.topology` is placed by kube-scheduler's placement
    algorithm: one placement per value of the key among the nodes (pkg/scheduler/framework/plugins/
    topologyaware/topology_placement.go GeneratePlacements), and when none fits the group's status is
    `0/%d placements are available, first placement status: %v`, the first placement's error
    (schedule_one_podgroup.go podGroupSchedulingPlacementAlgorithm): here "0/2 placements are
    available, first placement status: pod group is unschedulable". No node with the key at all:
    "no feasible placements found" (framework.go RunPlacementGeneratePlugins)."""
    loop = _synced_loop()
    for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2")):
        loop._on_event("ADDED", _racked(name, rack))
    loop._on_event("ADDED", b.workload_podgroup("g", 3, topology_key="example.com/rack"))
    for i in range(3):
        loop._on_event("ADDED", _member(f"g-{i}", "g"))
    assert _cycle(loop) == ["failed"] * 3
    [condition] = _group_conditions(loop)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False", "Unschedulable", "0/2 placements are available, first placement status: pod group is unschedulable")

    bare = _synced_loop()
    bare._on_event("ADDED", b.node("n", gpus=4))
    bare._on_event("ADDED", b.workload_podgroup("g", 2, topology_key="example.com/rack"))
    for i in range(2):
        bare._on_event("ADDED", _member(f"g-{i}", "g"))
    assert _cycle(bare) == ["failed"] * 2
    [condition] = _group_conditions(bare)
    assert condition["message"] == "no feasible placements found"
