"""Upstream Workload API gangs (scheduling.k8s.io/v1alpha2 PodGroups) against kube-scheduler v1.36.3
(review findings): each test failed before its fix."""

from __future__ import annotations

from typing import Any

from scheduler.api.config import load_config
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi


def _member(name: str, group: str) -> dict[str, Any]:
    return b.pod(name, limits={"nvidia.com/gpu": 1}, spec_extra={"schedulingGroup": {"podGroupName": group}})


def _group_conditions(loop: SchedulerLoop) -> list[dict[str, Any]]:
    return [body["status"]["conditions"][0] for (path, _), body in loop.statuses._dirty.items()
            if "/apis/scheduling.k8s.io/v1alpha2/" in path]


def _cycle(loop: SchedulerLoop) -> list[str | None]:
    """One scheduling cycle, its attempts handled as the live loop does; their gang outcomes."""
    attempts = loop.core.schedule_next(0.0)
    assert attempts is not None
    for attempt in attempts:
        loop._handle(attempt, 0.0)
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
    loop = SchedulerLoop(load_config(None), KubeHttp(FakeApi()), KubeHttp(FakeApi()),  # type: ignore[arg-type]
                         identity="t")
    for informer in loop.informers.informers:
        informer.synced.set()
    loop._on_event("ADDED", b.node("n", gpus=1))
    loop._on_event("ADDED", b.workload_podgroup("g", 2))
    loop._on_event("ADDED", _member("g-0", "g"))
    assert _cycle(loop) == ["waiting"]
    assert _group_conditions(loop) == []
    loop._on_event("ADDED", _member("g-1", "g"))
    assert _cycle(loop) == ["failed", "failed"]  # two members, one GPU: tried, and does not fit
    [condition] = _group_conditions(loop)
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
