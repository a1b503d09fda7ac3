"""Status writes across an object's life and the writer's leadership (review findings, each a
failing test first): condition times move only on a status change, a name deleted and created
again starts clean (also while a write is in flight), a value that goes back during a write is
written, nothing is kept per deleted object, and a replica that no longer leads writes nothing."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import anyio
import pytest

from scheduler.api.config import load_config
from scheduler.kube import status as status_module
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.status import UNSCHEDULABLE, StatusWriter
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi
from tests.helpers import run_for_a_while

NOW = ["2026-01-01T00:00:00.000000Z"]
CLASS_PATH = "/apis/tessera.dev/v1alpha1/resourceclasses/v100/status"
MESSAGE = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


@pytest.fixture(autouse=True)
def _clock(monkeypatch: pytest.MonkeyPatch) -> None:
    NOW[0] = "2026-01-01T00:00:00.000000Z"
    monkeypatch.setattr(status_module, "micro_time", lambda now=None: NOW[0])


def _class_bodies(api_bodies: list[dict[str, Any]]) -> FakeApi:
    def handler(call: Call) -> Response | None:
        if "/resourceclasses/" in call.path and call.method == "PATCH":
            api_bodies.append(call.body)
            return Response(200, b"{}")
        return None
    return FakeApi(handlers=[handler])


def _loop(api: FakeApi, term: list[int | None] | None = None) -> SchedulerLoop:
    leader = term if term is not None else [1]
    return SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t",  # type: ignore[arg-type]
                         leader_term=lambda: leader[0])


class GatedApi(FakeApi):
    """PATCHes wait while `gate` is set and not yet opened (a slow apiserver answer)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.gate: anyio.Event | None = None
        self.waiting = 0

    async def request(self, method: str, path: str, **kw: Any) -> Response:
        if method == "PATCH" and self.gate is not None:
            gate = self.gate
            self.waiting += 1
            await gate.wait()
            self.waiting -= 1
        return await super().request(method, path, **kw)


async def _until(check: Any) -> None:
    with anyio.fail_after(5):
        while not check():
            await anyio.sleep(0.001)


# --- lastTransitionTime and observedGeneration ------------------------------------------------

async def test_a_new_message_with_the_same_status_keeps_the_pods_transition_time() -> None:
    """Upstream podutil.UpdatePodCondition keeps lastTransitionTime while the status stays."""
    api = FakeApi()
    pod = b.pod("p")
    pod["metadata"]["resourceVersion"] = "100"
    api.add_pod(pod)
    writer = StatusWriter(api, lambda ns, n, r: api.pod(ns, n)["metadata"]["resourceVersion"])  # type: ignore[arg-type]
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/3 nodes are available: 3 Insufficient cpu.")
    await run_for_a_while(writer.run, lambda: writer.writes == 1)
    NOW[0] = "2026-01-01T01:00:00.000000Z"  # an hour on, still unschedulable; a node joined
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/4 nodes are available: 4 Insufficient cpu.")
    await run_for_a_while(writer.run, lambda: writer.writes == 2)
    [condition] = [c for c in api.pod("default", "p")["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert condition["message"].startswith("0/4")
    assert condition["lastTransitionTime"] == "2026-01-01T00:00:00Z"


async def test_a_class_status_change_that_keeps_valid_keeps_its_transition_time() -> None:
    bodies: list[dict[str, Any]] = []
    writer = StatusWriter(_class_bodies(bodies), lambda ns, n, r: None)  # type: ignore[arg-type]
    writer.resource_class("v100", True, "valid", 4, "class.tessera.dev/v100", generation=1)
    await run_for_a_while(writer.run, lambda: len(bodies) == 1)
    NOW[0] = "2026-01-01T01:00:00.000000Z"  # a device joined: still Valid
    writer.resource_class("v100", True, "valid", 5, "class.tessera.dev/v100", generation=1)
    await run_for_a_while(writer.run, lambda: len(bodies) == 2)
    NOW[0] = "2026-01-01T02:00:00.000000Z"  # the spec was edited into an invalid one
    writer.resource_class("v100", False, "spec.selector: bad", 0, "class.tessera.dev/v100", generation=2)
    await run_for_a_while(writer.run, lambda: len(bodies) == 3)
    times = [body["status"]["conditions"][0]["lastTransitionTime"] for body in bodies]
    assert times == ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", "2026-01-01T02:00:00Z"]


async def test_class_status_says_which_generation_of_the_spec_it_describes() -> None:
    bodies: list[dict[str, Any]] = []
    writer = StatusWriter(_class_bodies(bodies), lambda ns, n, r: None)  # type: ignore[arg-type]
    writer.resource_class("v100", False, "spec.selector: bad", 0, "class.tessera.dev/v100", generation=3)
    await run_for_a_while(writer.run, lambda: len(bodies) == 1)
    status = bodies[0]["status"]
    assert status["observedGeneration"] == 3 and status["conditions"][0]["observedGeneration"] == 3


def test_the_loop_passes_the_class_generation() -> None:
    loop = _loop(FakeApi())
    cls = b.resource_class("v100", {"model": "V100"})
    cls["metadata"]["generation"] = 7
    loop._apply("ADDED", cls)
    loop._write_class_statuses()
    [body] = [body for (path, _), body in loop.statuses._dirty.items() if path == CLASS_PATH]
    assert body["status"]["observedGeneration"] == 7


# --- names deleted and created again ----------------------------------------------------------

async def test_a_resource_class_created_again_gets_its_status() -> None:
    bodies: list[dict[str, Any]] = []
    loop = _loop(_class_bodies(bodies))
    old = b.resource_class("v100", {"model": "V100"})
    loop._apply("ADDED", old)
    loop._write_class_statuses()
    await run_for_a_while(loop.statuses.run, lambda: len(bodies) == 1)
    loop._apply("DELETED", old)  # kubectl delete -f classes.yaml && kubectl apply -f classes.yaml
    new = b.resource_class("v100", {"model": "V100"})
    new["metadata"]["uid"] = "new-uid"
    loop._apply("ADDED", new)
    loop._write_class_statuses()
    await run_for_a_while(loop.statuses.run, lambda: len(bodies) == 2)
    assert len(bodies) == 2


def test_a_workload_podgroup_created_again_gets_podgroupscheduled() -> None:
    loop = _loop(FakeApi())
    core = loop.core
    core.apply("ADDED", b.node("n", gpus=4), 0.0)

    def members(suffix: str) -> list[dict[str, Any]]:
        return [b.pod(f"g-{suffix}{i}", limits={"nvidia.com/gpu": 1},
                      spec_extra={"schedulingGroup": {"podGroupName": "g"}}) for i in range(2)]

    group = b.workload_podgroup("g", 2)
    loop._apply("ADDED", group)
    first = members("a")
    for pod in first:
        loop._apply("ADDED", pod)
    assert core.schedule_next(0.0)
    loop._write_group_status("default/scheduling.k8s.io/g")
    loop.statuses._dirty.clear()  # as if written
    for pod in first:  # the job is done: its pods and PodGroup go; the next run makes "g" again
        loop._apply("DELETED", pod)
    loop._apply("DELETED", group)
    again = b.workload_podgroup("g", 2)
    again["metadata"]["uid"] = "second-run"
    loop._apply("ADDED", again)
    for pod in members("b"):
        loop._apply("ADDED", pod)
    assert core.schedule_next(0.0)
    loop._write_group_status("default/scheduling.k8s.io/g")
    wishes = [body for (path, _), body in loop.statuses._dirty.items() if "/podgroups/g/" in path]
    assert [c["status"] for c in wishes[0]["status"]["conditions"]] == ["True"]


async def test_nothing_is_kept_for_deleted_podgroups_and_classes() -> None:
    api = FakeApi(handlers=[lambda c: Response(200, b"{}") if c.method == "PATCH" else None])
    loop = _loop(api)
    groups = [b.podgroup(f"job-{i}", 1) for i in range(20)]
    for group in groups:
        loop._apply("ADDED", group)
    cls = b.resource_class("v100", {"model": "V100"})
    loop._apply("ADDED", cls)
    loop._write_class_statuses()
    await run_for_a_while(loop.statuses.run, lambda: loop.statuses.writes == 21)
    for obj in (*groups, cls):
        loop._apply("DELETED", obj)
    statuses = loop.statuses
    assert not (statuses._dirty or statuses._written or statuses._inflight or statuses._since)


async def test_a_write_in_flight_when_its_pod_goes_does_not_hold_back_the_next_pod_of_that_name() -> None:
    api = GatedApi()
    old = b.pod("p")
    old["metadata"]["resourceVersion"] = "100"
    api.add_pod(old)
    writer = StatusWriter(api, lambda ns, n, r: api.pods[(ns, n)]["metadata"]["resourceVersion"]  # type: ignore[arg-type]
                          if (ns, n) in api.pods else None)
    async with anyio.create_task_group() as group:
        group.start_soon(writer.run)
        api.gate = anyio.Event()
        writer.pod_waiting("default", "p", UNSCHEDULABLE, MESSAGE)
        await _until(lambda: api.waiting)
        writer.pod_gone("default", "p")  # the DELETED event comes before the PATCH's answer
        gate, api.gate = api.gate, None
        gate.set()
        await _until(lambda: api.waiting == 0 and not writer._inflight)
        del api.pods[("default", "p")]
        new = b.pod("p")  # a StatefulSet makes p again (new uid), stuck for the same reason
        new["metadata"].update(uid="uid-2", resourceVersion="200")
        api.add_pod(new)
        writer.pod_waiting("default", "p", UNSCHEDULABLE, MESSAGE)
        await _until(lambda: writer.writes == 1)
        group.cancel_scope.cancel()
    conditions = api.pods[("default", "p")]["status"]["conditions"]
    assert [c["reason"] for c in conditions if c["type"] == "PodScheduled"] == [UNSCHEDULABLE]


async def test_a_value_wished_back_while_another_is_written_is_written_again() -> None:
    """4 written, 5 in flight, 4 wished again: the object must end at 4."""
    sent: list[int] = []

    def ok(call: Call) -> Response | None:
        if "/resourceclasses/" in call.path:
            sent.append(call.body["status"]["matchingDevices"])
            return Response(200, b"{}")
        return None

    api = GatedApi(handlers=[ok])
    writer = StatusWriter(api, lambda ns, n, r: None)  # type: ignore[arg-type]
    async with anyio.create_task_group() as group:
        group.start_soon(writer.run)
        writer.resource_class("v100", True, "valid", 4, "class.tessera.dev/v100", generation=1)
        await _until(lambda: writer.writes == 1)
        api.gate = anyio.Event()
        writer.resource_class("v100", True, "valid", 5, "class.tessera.dev/v100", generation=1)
        await _until(lambda: api.waiting)
        writer.resource_class("v100", True, "valid", 4, "class.tessera.dev/v100", generation=1)
        gate, api.gate = api.gate, None
        gate.set()
        await _until(lambda: writer.writes == 3)
        group.cancel_scope.cancel()
    assert sent == [4, 5, 4]


# --- leadership -------------------------------------------------------------------------------

async def test_a_replica_that_lost_the_lease_sends_no_more_status_writes() -> None:
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=0)]
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    api.pod("default", "p")["metadata"]["resourceVersion"] = "7"
    for _ in range(20):
        api.fail_next("PATCH", "/pods/p/status", status=503)  # an overloaded apiserver: retried
    term: list[int | None] = [1]
    loop = _loop(api, term)
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await _until(lambda: api.of("PATCH", "/pods/p/status"))
        term[0] = None  # another replica leads now and writes this pod's status
        loop.lost_leadership()
        lost_at = len(api.of("PATCH", "/pods/p/status"))
        await anyio.sleep(2.5)  # the writer retries every second
        owner.cancel_scope.cancel()
    assert len(api.of("PATCH", "/pods/p/status")) == lost_at


async def test_a_replica_that_leads_again_writes_what_it_wrote_in_its_earlier_term() -> None:
    """A wrote matchingDevices=1; B led, wrote 2, and died as the device left again. A leads again
    and wishes 1, which A's own memory says is written: it must be written all the same."""
    server: dict[str, int] = {}

    def store(call: Call) -> Response | None:
        if "/resourceclasses/" in call.path and call.method == "PATCH":
            server["matching"] = call.body["status"]["matchingDevices"]
            return Response(200, b"{}")
        return None

    term: list[int | None] = [1]
    loop = _loop(FakeApi(handlers=[store]), term)
    loop._apply("ADDED", b.node("n", gpus=2))
    first, second = b.device("n", 0, model="V100"), b.device("n", 1, model="V100")
    loop._apply("ADDED", b.resource_class("v100", {"model": "V100"}))
    loop._apply("ADDED", first)
    loop._write_class_statuses()
    await run_for_a_while(loop.statuses.run, lambda: server.get("matching") == 1)
    term[0] = None
    loop.lost_leadership()
    loop._apply("ADDED", second)
    server["matching"] = 2  # leader B's write
    loop._apply("DELETED", second)
    term[0] = 2
    loop._write_class_statuses()
    await run_for_a_while(loop.statuses.run, lambda: server.get("matching") == 1)
    assert server["matching"] == 1


def test_a_warning_about_an_upstream_podgroup_names_its_own_api() -> None:
    """Regression (review): the Event's `regarding` was looked up by kind alone and named
    scheduler-plugins' API for a scheduling.k8s.io PodGroup."""
    loop = _loop(FakeApi())
    bad = b.workload_podgroup("g", 2)
    bad["spec"] = {"schedulingPolicy": {"gang": {"minCount": "many"}}}
    loop._on_event("ADDED", bad)  # seen before the caches are complete: told once they are
    loop._tell_untold()
    told = loop.events._receive.receive_nowait()
    assert not isinstance(told, anyio.Event)  # an Event, not a flush marker
    regarding = told.regarding
    assert (regarding.uid, regarding.api_version) == (bad["metadata"]["uid"], "scheduling.k8s.io/v1alpha2")


async def test_podgroup_status_is_written_once_the_cache_syncs_without_waiting_for_an_event() -> None:
    """PodGroup statuses wait for a complete cache (tests/unit/test_pgstatus_upstream.py); the
    ones held back while the informers list are written as soon as they have all synced, not
    only when some later watch event happens to arrive (a quiet cluster may send none)."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=8)]
    api.lists["/apis/scheduling.x-k8s.io/v1alpha1/podgroups"] = [b.podgroup("job", 1)]
    api.add_pod(b.pod("job-0", labels={"scheduling.x-k8s.io/pod-group": "job"}, limits={"nvidia.com/gpu": 1},
                      node_name="n", phase="Running"))
    loop = _loop(api)
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await _until(lambda: api.of("PATCH", "/podgroups/job/status"))
        owner.cancel_scope.cancel()
    [patch] = api.of("PATCH", "/podgroups/job/status")
    assert patch.body["status"]["phase"] == "Running"


# --- when the class statuses are computed ------------------------------------------------------


def _counting_class_statuses(loop: SchedulerLoop) -> list[int]:
    """How many times the loop computes the class statuses (`Scheduler.class_statuses`)."""
    calls = [0]
    real = loop.core.class_statuses

    def counted() -> Any:
        calls[0] += 1
        return real()

    loop.core.class_statuses = counted  # type: ignore[method-assign]
    return calls


def test_a_device_heartbeat_that_changes_nothing_recomputes_no_class_status() -> None:
    """Each ExtendedResource event made the loop compute every class's status again (matching
    devices, the ghosts among them, the unknown-attribute note) although a heartbeat, the node
    agent's steady write, changes nothing a status says: only a class event or a move of the
    class registry's generation (a device or class change it indexed) does."""
    loop = _loop(FakeApi())
    calls = _counting_class_statuses(loop)
    device = b.device("n0", 0, heartbeat="2026-01-01T00:00:00Z")
    for obj in (b.node("n0", gpus=1), device, b.resource_class("v100", {"model": "V100"})):
        loop._apply("ADDED", obj)
    loop._write_class_statuses_when_moved()
    assert calls[0] == 1
    for second in range(10, 60, 10):  # heartbeats: only status.lastHeartbeatTime moves
        beat = b.device("n0", 0, heartbeat=f"2026-01-01T00:00:{second}Z")
        loop._apply("MODIFIED", beat)
        loop._write_class_statuses_when_moved()
    # the heartbeats were taken in
    last = datetime(2026, 1, 1, 0, 0, 50, tzinfo=timezone.utc).timestamp()
    assert loop.core.state.devices[device["metadata"]["name"]].heartbeat == last
    assert calls[0] == 1
    # a device change a class reads is computed again: the device turns unhealthy, a second comes
    loop._apply("MODIFIED", b.device("n0", 0, healthy=False, heartbeat="2026-01-01T00:01:00Z"))
    loop._write_class_statuses_when_moved()
    assert calls[0] == 2
    loop._apply("ADDED", b.device("n0", 1, heartbeat="2026-01-01T00:01:00Z"))
    loop._write_class_statuses_when_moved()
    assert calls[0] == 3
    [body] = [body for (path, _), body in loop.statuses._dirty.items() if path == CLASS_PATH]
    assert body["status"]["matchingDevices"] == 2
    # an edit of the class that keeps its meaning moves only metadata.generation: written too
    edited = b.resource_class("v100", {"model": "V100"})
    edited["metadata"]["generation"] = 2
    loop._apply("MODIFIED", edited)
    loop._write_class_statuses_when_moved()
    assert calls[0] == 4
    [body] = [body for (path, _), body in loop.statuses._dirty.items() if path == CLASS_PATH]
    assert body["status"]["observedGeneration"] == 2


def test_a_new_term_writes_the_class_statuses_again() -> None:
    """Losing the lease drops the statuses not yet written (`StatusWriter.reset`): the next term
    computes and wishes every class's status again, as it does every PodGroup's, also when no
    class or device changed in between (device heartbeats no longer bring it about)."""
    loop = _loop(FakeApi())
    calls = _counting_class_statuses(loop)
    for obj in (b.node("n0", gpus=1), b.device("n0", 0), b.resource_class("v100", {"model": "V100"})):
        loop._apply("ADDED", obj)
    loop._write_class_statuses_when_moved()
    assert CLASS_PATH in {path for path, _ in loop.statuses._dirty}
    loop.lost_leadership()
    assert not loop.statuses._dirty
    loop._write_class_statuses_when_moved()
    assert calls[0] == 2
    assert CLASS_PATH in {path for path, _ in loop.statuses._dirty}


async def test_a_status_wished_in_a_moment_of_doubt_is_written_once_the_same_term_leads_on() -> None:
    """The writer finds it may not write (a doubt from a newer term token seen, the renew deadline
    lapsing for a moment) while the term goes on: no `lost_leadership`, no new term. The wish is
    kept and written once it leads again, not dropped: a class status is wished again only when the
    registry moves (not on device heartbeats), a PodGroup's only on its group's next change, so a
    dropped wish could stay unwritten for hours on a quiet cluster (review of bbfce34)."""
    patches: list[dict[str, Any]] = []
    term: list[int | None] = [1]
    loop = _loop(_class_bodies(patches), term)
    loop.statuses._retry_seconds = 0.01
    for obj in (b.node("n0", gpus=1), b.device("n0", 0, heartbeat="2026-01-01T00:00:00Z"),
                b.resource_class("v100", {"model": "V100"})):
        loop._apply("ADDED", obj)
    loop._write_class_statuses_when_moved()
    assert CLASS_PATH in {path for path, _ in loop.statuses._dirty}
    term[0] = None  # a moment of doubt as the writer gets to the wish

    async def doubt_then_lead() -> None:
        await anyio.sleep(0.1)
        assert not patches  # nothing written while it may not write
        term[0] = 1  # the same term goes on; the agent's heartbeats change nothing a class reads
        for second in (10, 20, 30):
            loop._apply("MODIFIED", b.device("n0", 0, heartbeat=f"2026-01-01T00:00:{second}Z"))
            loop._write_class_statuses_when_moved()

    async with anyio.create_task_group() as group:
        group.start_soon(loop.statuses.run)
        group.start_soon(doubt_then_lead)
        with anyio.move_on_after(5):
            while not patches:
                await anyio.sleep(0.01)
        group.cancel_scope.cancel()
    assert [body["status"]["matchingDevices"] for body in patches] == [1]
