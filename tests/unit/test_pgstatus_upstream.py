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


def _leading_beside_node_n(api: FakeApi) -> SchedulerLoop:
    """A synced leader (term 1) whose cluster has the one 8-GPU node `n`."""
    loop = _loop(api, [1])
    _synced(loop)
    loop._on_event("ADDED", b.node("n", gpus=8))
    return loop


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
    loop._write_group_status("default/scheduling.k8s.io/g", "0/1 nodes are available: no rack has room")
    [wish] = [body for (path, _), body in loop.statuses._dirty.items() if "/podgroups/g/status" in path]
    assert wish["status"]["conditions"][0]["observedGeneration"] == 3


def _recording(store: list[dict[str, Any]], name: str) -> Any:
    def handler(call: Call) -> Response | None:
        if call.method == "PATCH" and f"/podgroups/{name}/status" in call.path:
            store.append(call.body["status"])
            return Response(200, b"{}")
        return None
    return handler


def _shown(group: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """The PodGroup as the watch shows it once a status was written to it (by anyone)."""
    return {**group, "status": status}


async def test_a_stale_podgroup_phase_written_late_by_an_earlier_term_is_written_over() -> None:
    """Replica A wished `Scheduling` for a group in its term; its PATCH was still on the wire when
    it lost the Lease, and landed after this replica (the new leader) had written `Running`. The
    watch then shows `Scheduling`, and the leader never wrote `Running` again: its writer skips a
    wish equal to what it last wrote, whatever the object says. scheduler-plugins' controller
    compares what it computes with the object it reads (pkg/controllers/podgroup_controller.go
    Reconcile: `r.patchPodGroup(ctx, pg, pgCopy)` from the informer's object, on every PodGroup
    update), so it writes `Running` again on that update."""
    written: list[dict[str, Any]] = []
    loop = _leading_beside_node_n(FakeApi(handlers=[_recording(written, "job")]))
    group = b.podgroup("job", 1)
    loop._on_event("ADDED", group)
    loop._on_event("ADDED", _member("job-0", "job", "Running"))
    await run_for_a_while(loop.statuses.run, lambda: len(written) == 1)
    assert [s["phase"] for s in written] == ["Running"]
    loop._on_event("MODIFIED", _shown(group, {**written[0]}))  # our own echo: nothing to do
    loop._on_event("MODIFIED", _shown(group, {"phase": "Scheduling", "running": 0, "succeeded": 0, "failed": 0}))
    await run_for_a_while(loop.statuses.run, lambda: len(written) == 2)
    assert [s["phase"] for s in written] == ["Running", "Running"]


async def test_a_stale_phase_landing_over_a_final_one_is_written_over() -> None:
    """The same late write landing over `Finished`, which this replica had written (and settled:
    nothing is written over a final phase before its echo). The object then says `Running` for a
    job that is done, for good."""
    written: list[dict[str, Any]] = []
    loop = _leading_beside_node_n(FakeApi(handlers=[_recording(written, "job")]))
    group = b.podgroup("job", 1)
    loop._on_event("ADDED", group)
    loop._on_event("ADDED", _member("job-0", "job", "Succeeded"))
    await run_for_a_while(loop.statuses.run, lambda: len(written) == 1)
    assert [s["phase"] for s in written] == ["Finished"]
    loop._on_event("MODIFIED", _shown(group, {"phase": "Running", "running": 1, "succeeded": 0, "failed": 0}))
    await run_for_a_while(loop.statuses.run, lambda: len(written) == 2)
    assert [s["phase"] for s in written] == ["Finished", "Finished"]


async def test_a_stale_podgroupscheduled_false_landing_over_true_is_written_over() -> None:
    """Upstream's PodGroup: this leader wrote PodGroupScheduled=True; an earlier term's False
    (Unschedulable) lands after it. kube-scheduler reads the condition from its lister before each
    write (schedule_one_podgroup.go updatePodGroupCondition: `apimeta.SetStatusCondition` on the
    object's status) and would write True again at the next pod group cycle; Tessera's group is
    settled and its members are bound, so no cycle comes: the group read False for good."""
    written: list[dict[str, Any]] = []
    loop = _leading_beside_node_n(FakeApi(handlers=[_recording(written, "g")]))
    group = b.workload_podgroup("g", 1)
    loop._on_event("ADDED", group)
    loop._on_event("ADDED", b.pod("g-0", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running",
                                  spec_extra={"schedulingGroup": {"podGroupName": "g"}}))
    await run_for_a_while(loop.statuses.run, lambda: len(written) == 1)
    assert [c["status"] for s in written for c in s["conditions"]] == ["True"]
    stale = {"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable",
             "message": "pod group is unschedulable", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    loop._on_event("MODIFIED", _shown(group, {"conditions": [stale]}))
    await run_for_a_while(loop.statuses.run, lambda: len(written) == 2)
    assert [c["status"] for s in written for c in s["conditions"]] == ["True", "True"]


def test_one_name_in_both_podgroup_apis_gets_both_statuses() -> None:
    """A scheduler-plugins PodGroup `g` with one Running member and a Workload API PodGroup `g`
    with one bound member: each is its own gang, and each gets its own API's status (the second
    seen was held back as a duplicate and got none)."""
    loop = _leading_beside_node_n(FakeApi())
    loop._on_event("ADDED", b.podgroup("g", 1))
    loop._on_event("ADDED", b.workload_podgroup("g", 1))
    loop._on_event("ADDED", _member("p-0", "g", "Running"))
    loop._on_event("ADDED", b.pod("w-0", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running",
                                  spec_extra={"schedulingGroup": {"podGroupName": "g"}}))
    wishes = {path: body["status"] for (path, _), body in loop.statuses._dirty.items() if "/podgroups/g/" in path}
    assert wishes["/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/g/status"] == {
        "phase": "Running", "running": 1, "succeeded": 0, "failed": 0}
    [condition] = wishes["/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups/g/status"]["conditions"]
    assert (condition["type"], condition["status"]) == ("PodGroupScheduled", "True")


def _owned(pod: dict[str, Any], *owners: str) -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner,
                                           "uid": f"{owner}-uid", "controller": True} for owner in owners]
    return pod


def _plugins_wishes(loop: SchedulerLoop, name: str) -> list[dict[str, Any]]:
    return [body["status"] for (path, _), body in loop.statuses._dirty.items()
            if f"/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/{name}/status" in path]


def test_a_podgroup_with_its_minimum_of_members_is_occupied_by_their_owner() -> None:
    """scheduler-plugins' PodGroup controller, when a group leaves Pending (its minMember pods
    exist), sets status.occupiedBy from the first pod's ownerReferences: each
    "<namespace>/<owner name>", sorted, joined by "," (pkg/controllers/podgroup_controller.go
    Reconcile -> fillOccupiedObj), and never changes it after. Tessera, which writes that
    controller's status in its place, never set it: a tool asking which workload holds a group
    found nothing."""
    loop = _leading_beside_node_n(FakeApi())
    loop._on_event("ADDED", b.podgroup("job", 2))
    loop._on_event("ADDED", _owned(_member("job-0", "job", "Pending", node=""), "trainer", "launcher"))
    [pending] = _plugins_wishes(loop, "job")
    assert pending["phase"] == "Pending" and "occupiedBy" not in pending  # not yet: below minMember
    loop._on_event("ADDED", _owned(_member("job-1", "job", "Pending", node=""), "trainer", "launcher"))
    [scheduling] = _plugins_wishes(loop, "job")
    assert (scheduling["phase"], scheduling["occupiedBy"]) == ("Scheduling", "default/launcher,default/trainer")


def test_an_occupied_podgroup_keeps_what_it_shows() -> None:
    """Once set, the controller never writes occupiedBy again (only from Pending): a group that
    shows one keeps it, whatever its pods' owners say now."""
    loop = _leading_beside_node_n(FakeApi())
    group = b.podgroup("job", 1)
    group["status"] = {"phase": "Running", "occupiedBy": "default/first-run"}
    loop._on_event("ADDED", group)
    loop._on_event("ADDED", _owned(_member("job-0", "job", "Running"), "second-run"))
    [status] = _plugins_wishes(loop, "job")
    assert status["phase"] == "Running" and "occupiedBy" not in status


def test_a_member_without_owners_occupies_nothing() -> None:
    loop = _leading_beside_node_n(FakeApi())
    loop._on_event("ADDED", b.podgroup("job", 1))
    loop._on_event("ADDED", _member("job-0", "job", "Running"))
    [status] = _plugins_wishes(loop, "job")
    assert status["phase"] == "Running" and "occupiedBy" not in status
