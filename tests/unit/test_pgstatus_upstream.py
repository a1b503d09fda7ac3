"""PodGroup status writing against scheduler-plugins' PodGroup controller and kube-scheduler's
PodGroupScheduled condition (review findings): each test failed before its fix."""

from __future__ import annotations

from typing import Any

from scheduler.api.config import load_config
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi
from tests.helpers import run_for_a_while

PG_LABEL = "scheduling.x-k8s.io/pod-group"


def _loop(api: FakeApi, term: list[int | None]) -> SchedulerLoop:
    return SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t",  # type: ignore[arg-type]
                         leader_term=lambda: term[0])


def _synced(loop: SchedulerLoop) -> None:
    """Every informer has delivered its first LIST (the cache is complete)."""
    for informer in loop.informers.informers:
        informer.synced.set()


def _phases_wished(loop: SchedulerLoop, name: str) -> list[str]:
    return [body["status"]["phase"] for (path, _), body in loop.statuses._dirty.items()
            if f"/podgroups/{name}/status" in path]


def _member(name: str, group: str, phase: str, node: str = "n") -> dict[str, Any]:
    return b.pod(name, labels={PG_LABEL: group}, limits={"nvidia.com/gpu": 1}, node_name=node, phase=phase)


async def test_no_podgroup_status_is_written_from_a_cache_that_is_still_listing() -> None:
    """A leader (re)starting lists PodGroups and Pods concurrently; Tessera wrote a PodGroup's
    status on each event, before the Pod informer had synced. A job with minMember 4 whose worker
    failed once and was replaced (1 Failed, 4 Succeeded) is Finished — but from the first pages
    (3 Succeeded + the Failed one) Tessera wished `Failed`, a final phase it then never corrects
    once the last pod arrives. scheduler-plugins' controller only reconciles once its caches have
    synced (controller-runtime pkg/internal/controller/controller.go: Start waits for every
    source's WaitForSync before starting workers), from the full pod list (Reconcile ->
    r.List(podList)); kube-scheduler likewise acts only after WaitForCacheSync."""
    api = FakeApi()
    loop = _loop(api, [1])
    loop._on_event("ADDED", b.node("n", gpus=8))
    loop._on_event("ADDED", b.podgroup("job", 4))
    for i in range(3):
        loop._on_event("ADDED", _member(f"job-{i}", "job", "Succeeded"))
    loop._on_event("ADDED", _member("job-x", "job", "Failed"))
    early = _phases_wished(loop, "job")  # the cache is still incomplete: nothing is known yet
    loop._on_event("ADDED", _member("job-3", "job", "Succeeded"))  # the Pod informer's last page
    _synced(loop)
    loop._on_event("MODIFIED", b.node("n", gpus=8))
    assert (early, _phases_wished(loop, "job")) == ([], ["Finished"])


async def test_a_replica_that_leads_again_writes_the_podgroup_status_it_dropped() -> None:
    """The leader wished `Finished` for a job whose last worker succeeded, then its Lease lapsed
    before the write went out (`lost_leadership` drops every wish); it led again with nobody
    else having led. The group had already been taken from the core's touched set, so the new
    term never wrote it: the PodGroup said `Running` for good (and `Pending` once the Job's pods
    were cleaned up). scheduler-plugins' controller starts each leadership term with a full
    list of PodGroups (controller-runtime's leader-elected runnables start their sources on
    election, and the initial List enqueues every object), so every group is reconciled again."""
    phases: list[str] = []

    def store(call: Call) -> Response | None:
        if call.method == "PATCH" and "/podgroups/job/status" in call.path:
            phases.append(call.body["status"]["phase"])
            return Response(200, b"{}")
        return None

    term: list[int | None] = [1]
    loop = _loop(FakeApi(handlers=[store]), term)
    _synced(loop)
    loop._on_event("ADDED", b.node("n", gpus=8))
    loop._on_event("ADDED", b.podgroup("job", 1))
    loop._on_event("ADDED", _member("job-0", "job", "Running"))
    await run_for_a_while(loop.statuses.run, lambda: phases == ["Running"])
    loop._on_event("MODIFIED", _member("job-0", "job", "Succeeded"))
    assert _phases_wished(loop, "job") == ["Finished"]
    term[0] = None  # the Lease lapses before the writer flushed
    loop.lost_leadership()
    term[0] = 1  # and comes back to this replica
    loop._on_event("MODIFIED", b.node("n", gpus=8))  # any later event
    await run_for_a_while(loop.statuses.run, lambda: phases[-1:] == ["Finished"])
    assert phases == ["Running", "Finished"]


def test_podgroupscheduled_carries_the_podgroups_generation() -> None:
    """kube-scheduler's updatePodGroupCondition (pkg/scheduler/schedule_one_podgroup.go) sets
    `condition.ObservedGeneration = pg.Generation` on PodGroupScheduled, as metav1.Condition
    asks, so a client can tell whether the condition describes the spec it just changed.
    Tessera's condition had no observedGeneration (its pod and class conditions do)."""
    loop = _loop(FakeApi(), [1])
    _synced(loop)
    loop._on_event("ADDED", b.node("n", gpus=4))
    group = b.workload_podgroup("g", 2)
    group["metadata"]["generation"] = 3
    loop._on_event("ADDED", group)
    for i in range(2):
        loop._on_event("ADDED", b.pod(f"g-{i}", limits={"nvidia.com/gpu": 1},
                                      spec_extra={"schedulingGroup": {"podGroupName": "g"}}))
    loop._write_group_status("default/g", "0/1 nodes are available: no rack has room")
    [wish] = [body for (path, _), body in loop.statuses._dirty.items() if "/podgroups/g/status" in path]
    assert wish["status"]["conditions"][0]["observedGeneration"] == 3
