"""The live loop on a fake apiserver: its tasks live and die with it, and Events do not take the
Bindings' turn.

Regression (structured concurrency): every Binding used to run in a task of its own, created on
the event loop and owned by nothing. Cancelling the loop's owner (a crashed sibling, a test, a
shutdown path that gives up) stopped the informers and the cycles but left those Bindings running,
unowned, until the event loop closed: nothing waited for them and nothing could stop them. The
Binder now hosts its Bindings in a task group of its own inside the loop's, so they end with it.
"""

from __future__ import annotations

import copy
import time
import types
from collections.abc import Callable
from typing import Any

import anyio
import pytest
import structlog
import structlog.testing
from structlog.typing import EventDict

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.kube.evictor import Eviction
from scheduler.kube.http import KubeHttp, RateLimiter
from scheduler.kube import loop as loop_module
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.recorder import micro_time
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import until
from tests.unit.test_metrics_upstream import two_pods_at_the_allocation_gate


def _cluster() -> FakeApi:
    """One 4-GPU node and one pending pod that asks for a GPU (the CRDs are not installed: those
    informers count as synced and empty)."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=4)]
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    return api


async def _logs_until(loop: SchedulerLoop, logged: Callable[[EventDict], bool],
                      seconds: float = 10.0) -> list[EventDict]:
    """Run `loop` until it logs a line `logged` accepts (within `seconds`), then stop it: every
    line it logged, for the log-line tests below."""
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            await until(lambda: any(logged(entry) for entry in logs), seconds=seconds)
            owner.cancel_scope.cancel()
    return logs


async def test_cancelling_the_loops_owner_cancels_its_bindings() -> None:
    api = _cluster()
    api.fail_next("POST", "/binding", stall=True)  # the apiserver never answers this Binding
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: api.stalled == 1)
        owner.cancel_scope.cancel()
    await anyio.sleep(0.05)  # a Binding that outlived its owner would still be waiting now
    assert api.stalled == 0
    assert loop.binder.in_flight == 0


async def test_events_have_a_token_bucket_of_their_own() -> None:
    """With the write budget spent on the Binding, the Scheduled Event still goes out at once."""
    api = _cluster()
    http = KubeHttp(api, RateLimiter(qps=0.001, burst=1))  # type: ignore[arg-type]
    loop = SchedulerLoop(load_config(None), http, KubeHttp(api), identity="test")  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: any(e["reason"] == "Scheduled" for e in api.events.values()))
        owner.cancel_scope.cancel()
    assert api.pod("default", "p")["spec"]["nodeName"] == "n"
    [event] = api.events.values()
    assert event["note"] == "Successfully assigned default/p to n"


async def test_cycles_start_when_the_caches_are_synced_not_on_the_next_idle_tick(monkeypatch: Any) -> None:
    """Regression: the informers hand a first list to the core page by page, so the informer that
    completes the caches may deliver no event at that moment; the cycles slept until their idle
    tick (1 s: a second added to every start-up). With the tick pushed out of reach, the pod is
    bound only if sync itself wakes the cycles."""
    monkeypatch.setattr(loop_module, "IDLE_WAKE_SECONDS", 1e6)
    api = _cluster()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            await until(lambda: bool(api.pod("default", "p")["spec"].get("nodeName")), seconds=5)
            owner.cancel_scope.cancel()
    # one line says the start-up is over (a trial found only one informer.synced line per kind)
    events = [entry["event"] for entry in logs]
    assert events.count("tessera.ready") == 1 and events.count("informer.synced") >= 2
    assert max(i for i, event in enumerate(events) if event == "informer.synced") < events.index("tessera.ready")


def _workload_group_wishes(loop: SchedulerLoop) -> list[dict[str, Any]]:
    return [body["status"]["conditions"][0] for (path, _), body in loop.statuses._dirty.items()
            if "/apis/scheduling.k8s.io/v1alpha2/" in path]


def test_podgroupscheduled_never_goes_from_true_to_false_and_stamps_only_transitions() -> None:
    """Regression: a gang placed (True wished), then a member's Binding failed and the next gang
    cycle failed before the watch echoed True: False was written over True. And every message
    change restamped lastTransitionTime."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    core = loop.core
    core.apply("ADDED", b.node("n", gpus=4), 0.0)
    core.apply("ADDED", b.workload_podgroup("g", 2), 0.0)
    for i in range(2):
        core.apply("ADDED", b.pod(f"g-{i}", limits={"nvidia.com/gpu": 1},
                                  spec_extra={"schedulingGroup": {"podGroupName": "g"}}), 0.0)
    loop._write_group_status("default/scheduling.k8s.io/g", "0/1 nodes are available: no rack has room")
    [refused] = _workload_group_wishes(loop)
    assert refused["status"] == "False" and "lastTransitionTime" in refused
    stamped = b.workload_podgroup("g", 2)
    stamped["status"] = {"conditions": [{"type": "PodGroupScheduled", "status": "False"}]}
    core.apply("MODIFIED", stamped, 0.0)  # the watch echoes False: a new message keeps the time
    loop._write_group_status("default/scheduling.k8s.io/g", "0/1 nodes are available: something else")
    [again] = _workload_group_wishes(loop)
    assert again["message"].endswith("something else") and "lastTransitionTime" not in again
    assert core.schedule_next(0.0)  # the gang is placed: True is wished
    loop._write_group_status("default/scheduling.k8s.io/g")
    [placed] = _workload_group_wishes(loop)
    assert placed["status"] == "True"
    for i in range(2):  # the members' Bindings failed (before the watch echoed True): pending again
        pod = core.state.pod_by_key(f"default/g-{i}")
        assert pod is not None
        core.binding_failed(pod.uid, 0.0)
    assert core.group_status("default/scheduling.k8s.io/g").scheduled == 0  # type: ignore[union-attr]
    loop._write_group_status("default/scheduling.k8s.io/g", "0/1 nodes are available: no room any more")
    assert [c["status"] for c in _workload_group_wishes(loop)] == ["True"]


async def test_a_gang_cycle_reaches_the_metrics_once_also_through_the_gpu_map_hooks() -> None:
    """scheduler_podgroup_schedule_attempts_total counts gang cycles through `LoopHooks.on_cycle`; the GPU map's
    DecisionHooks wrap the metrics hooks with --gpu-map and must pass it on."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from scheduler.kube.gpu_map import GpuMap
    from scheduler.kube.metrics import Metrics
    from scheduler.kube.run_cli import MetricsHooks

    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=4)]
    for i in range(2):
        api.add_pod(b.pod(f"w-{i}", requests={"nvidia.com/gpu": 1},
                          labels={"pod-group.scheduling.sigs.k8s.io/name": "w",
                                  "pod-group.scheduling.sigs.k8s.io/min-available": "2"}))
    metrics = Metrics(profiles=["tessera"])
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    loop.hooks = GpuMap(loop).hooks(MetricsHooks(metrics, loop))
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: all(api.pod("default", f"w-{i}")["spec"].get("nodeName") for i in range(2)), seconds=5)
        owner.cancel_scope.cancel()
    text = generate_latest(metrics.registry).decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("scheduler_podgroup_schedule_attempts_total", (("profile", "tessera"), ("result", "scheduled")))] == 1
    assert samples[("scheduler_podgroup_scheduling_algorithm_duration_seconds_count", ())] == 1


def test_a_finished_plugins_podgroup_gets_no_more_status_writes() -> None:
    """As scheduler-plugins' controller: Finished and Failed are final. Tessera wrote Pending over
    Finished once a finished Job's pods were gone."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    group = b.podgroup("g", 1)
    loop.core.apply("ADDED", group, 0.0)
    loop._write_group_status("default/scheduling.x-k8s.io/g")
    assert [body["status"]["phase"] for body in loop.statuses._dirty.values()] == ["Pending"]
    loop.statuses._dirty.clear()  # written
    loop.core.apply("MODIFIED", {**group, "status": {"phase": "Finished", "succeeded": 1}}, 0.0)
    loop._write_group_status("default/scheduling.x-k8s.io/g")  # its members are gone: the live count says Pending
    assert loop.statuses._dirty == {}


def test_after_stop_released_bindings_are_abandoned_not_sent() -> None:
    """Review: during graceful shutdown (after the drain, while the Lease is handed over) a watch
    event could open the allocation gate and send held Bindings, which the cancellation that
    follows might cut after the POST went out — the race the drain is there to avoid."""
    api = _cluster()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    calls: list[str] = []

    def take_released() -> list[Attempt]:
        calls.append("take")
        return []

    loop.core.take_released = take_released  # type: ignore[method-assign]
    loop.core.abandon_deferred = lambda now: calls.append("abandon")  # type: ignore[method-assign]
    loop._submit_released()
    assert calls == ["take"]
    loop.stop()
    calls.clear()
    loop._submit_released()
    assert calls == ["abandon"]


def _marked_member(name: str, group: str, node: str) -> dict[str, Any]:
    """A running gang member (minimum 3) that a Tessera leader marked as a preemption victim just now."""
    pod = b.pod(name, requests={"cpu": "1"}, node_name=node, phase="Running", labels=b.gang_labels(group, 3))
    pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                    "message": "tessera: preempting to accommodate a higher priority pod",
                                    "lastTransitionTime": micro_time().split(".")[0] + "Z"}]
    return pod


async def test_the_leader_finishes_a_gang_eviction_an_earlier_leader_left_half_done() -> None:
    """Gang `broken` lost one of its three members to a leader that died before the other two
    DELETEs: they are evicted, with an Event that says why. Gang `whole` was marked but nothing
    was deleted: it keeps running."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n1"), b.node("n2")]
    for pod in (_marked_member("broken-1", "broken", "n1"), _marked_member("broken-2", "broken", "n2"),
                *(_marked_member(f"whole-{i}", "whole", "n2") for i in range(3))):
        api.add_pod(pod)
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: sum(e["reason"] == "Preempted" for e in api.events.values()) == 2)
        owner.cancel_scope.cancel()
    assert sorted(name for _, name in api.pods) == ["whole-0", "whole-1", "whole-2"]
    notes = sorted(e["note"] for e in api.events.values() if e["reason"] == "Preempted")
    assert notes == ["Preempted to finish the eviction of gang default/broken, which an earlier leader began: "
                     "the gang was below its minimum"] * 2


def test_a_replica_that_loses_the_lease_forgets_the_evictions_it_had_under_way() -> None:
    """Review: the evictor dropped its queue with the lease but the core still counted those
    victims as being evicted, so a later term of the same replica neither finished their gang
    nor saw them as running (and the evictor skipped them as already under way)."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    for obj in (b.node("n1"), b.node("n2"), _marked_member("broken-1", "broken", "n1"),
                _marked_member("broken-2", "broken", "n2")):
        loop._apply("ADDED", obj)
    first = loop.core.finish_gang_evictions(time.time())
    loop._finish_gang_evictions(time.time())  # nothing left to hand out: all under way
    assert [item.pod.meta.name for item in first] == ["broken-1", "broken-2"]
    loop.evictor.submit([Eviction("default", "broken-1", first[0].pod.uid, "", "tessera", "n1",
                                  finishing_gang="default/broken")])
    loop.lost_leadership()
    assert not loop.evictor._preemptions
    again = loop.core.finish_gang_evictions(time.time())  # the next term finishes the gang itself
    assert [item.pod.meta.name for item in again] == ["broken-1", "broken-2"]


async def test_a_lease_that_lapses_and_comes_back_in_the_same_term_binds_without_waiting() -> None:
    """Soak seed 29000: a partition cost the leader its lease for two seconds; it took it back with
    nobody else having held it, but its Binding sent into the partition (an ambiguous answer)
    then waited out the whole late-landing window (90 s): the pod pending, its slice held. In the
    same term the loop goes on sending; a new term still never would (tests/unit/test_binder.py)."""
    api = _cluster()
    api.fail_next("POST", "/binding", status=503)
    term: list[int | None] = [1]
    reads = [0]

    def lapse_during_the_read_back(method: str, path: str) -> None:
        if method == "GET" and path.endswith("/pods/p"):
            reads[0] += 1
            if reads[0] == 1:  # the lease lapses while the pod is read back after the 503
                term[0] = None
                loop.lost_leadership()
            elif reads[0] == 3:  # and comes back: the Lease still names us, no transition
                term[0] = 1

    api.before = lapse_during_the_read_back
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test",  # type: ignore[arg-type]
                         leader_term=lambda: term[0])
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: bool(api.pod("default", "p")["spec"].get("nodeName")), seconds=10.0)
        owner.cancel_scope.cancel()
    assert reads[0] >= 3 and len(api.of("POST", "/binding")) == 2


def test_a_standby_writes_no_podgroup_status() -> None:
    """Only the leader acts on the cluster: a standby wrote PodGroup status from its own cache
    (found in review), fighting the leader's with counts that lack the leader's decisions."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="standby",  # type: ignore[arg-type]
                         leader_term=lambda: None)
    for informer in loop.informers.informers:  # a complete cache: only leading holds the writes back
        informer.synced.set()
    loop._on_event("ADDED", b.node("n", gpus=4))
    loop._on_event("ADDED", b.podgroup("g", 2))
    for i in range(2):
        loop._on_event("ADDED", b.pod(f"g-{i}", limits={"nvidia.com/gpu": 1}, labels=b.gang_labels("g", 2)))
    assert not loop.statuses._dirty


async def test_a_standby_with_an_expired_backoff_entry_does_not_busy_loop() -> None:
    """Regression (review): the scheduling task slept until the next backoff expiry, which only a
    leader's cycle clears; a replica that lost the lease with a pod in backoff woke with timeout
    0 for ever (about 30,000 wake-ups a second)."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n")]  # no GPU yet: p is unschedulable
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    term: list[int | None] = [1]
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test",  # type: ignore[arg-type]
                         leader_term=lambda: term[0])
    waits: list[float] = []
    real_wait = loop._wake.wait

    async def counting_wait(timeout: float = float("inf")) -> bool:
        waits.append(timeout)
        return await real_wait(timeout)

    loop._wake.wait = counting_wait  # type: ignore[method-assign]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(5):
            while loop.stats.unschedulable < 1:
                await anyio.sleep(0.01)
        term[0] = None  # another replica leads from now on
        loop.lost_leadership()
        loop._on_event("MODIFIED", b.node("n", gpus=4))  # a node change that may help p: into backoff
        expiry = loop.core.next_backoff_expiry()
        assert expiry is not None
        await anyio.sleep(max(0.0, expiry - time.time()) + 0.1)
        before = len(waits)
        await anyio.sleep(1.0)
        spins = len(waits) - before
        owner.cancel_scope.cancel()
    assert spins <= 5, f"{spins} wake-ups in a second on a standby"


async def test_a_leader_busy_with_a_backlog_stays_live(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (review): liveness was stamped only between bursts of cycles, so a leader busy
    with a backlog for a minute answered 500 on /healthz and its probe restarted it mid-burst."""
    clock = [time.monotonic()]
    fake_time = types.SimpleNamespace(time=time.time, perf_counter=time.perf_counter, monotonic=lambda: clock[0])
    monkeypatch.setattr(loop_module, "time", fake_time)

    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    for i in range(100):  # a backlog: none fits, each cycle takes (simulated) 1 s
        api.add_pod(b.pod(f"p{i}", requests={"nvidia.com/gpu": 2}))
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    seen: list[bool] = []
    original = loop.core.schedule_next

    def slow_cycle(now: float) -> Any:
        attempts = original(now)
        if attempts is not None:
            clock[0] += 1.0  # this cycle took a second of real work
            seen.append(loop.healthy)
        return attempts

    loop.core.schedule_next = slow_cycle  # type: ignore[method-assign]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(20):
            while len(seen) < 100:
                await anyio.sleep(0.01)
        owner.cancel_scope.cancel()
    assert all(seen), f"/healthz turned 500 after {seen.index(False)} s of uninterrupted scheduling"


@pytest.mark.parametrize(("leading", "says"), [(True, "scheduling starts"),
                                                (False, "scheduling starts when this replica leads")])
async def test_the_ready_line_says_whether_scheduling_starts(leading: bool, says: str) -> None:
    """A new user's trial: a standby and a replica without leader election both printed "scheduling
    starts (if leading)"; each now says which it is."""
    api = _cluster()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test",  # type: ignore[arg-type]
                         leader_term=lambda: 0 if leading else None)
    logs = await _logs_until(loop, lambda entry: entry["event"] == "tessera.ready", seconds=5)
    [ready] = [entry for entry in logs if entry["event"] == "tessera.ready"]
    assert ready["message"] == f"every informer has listed: the cache is complete and {says}"


async def test_the_line_of_a_successful_binding_names_the_devices_the_pod_got() -> None:
    """A platform engineer's trial: no log line named the GPUs a pod got (cycle.scheduled is
    debug and has pod and node only), so an audit could not tell, once the pod was gone, which
    GPU it had had. The Binding's success is logged at info with the devices and their IDs, as
    the Binding's tessera.dev/devices annotation names them."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=2)]
    devices = [b.device("n", i) for i in range(2)]
    api.lists["/apis/tessera.dev/v1alpha1/extendedresources"] = devices
    api.lists["/apis/tessera.dev/v1alpha1/resourceclasses"] = [b.resource_class("v100", match_labels={"model": "V100"})]
    api.add_pod(b.pod("p", limits={"class.tessera.dev/v100": 1}))
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    logs = await _logs_until(loop, lambda e: e["event"] == "binder.bound")
    [bound] = [e for e in logs if e["event"] == "binder.bound"]
    pod = api.pod("default", "p")
    given = ann.decode_devices(pod["metadata"]["annotations"][ann.DEVICES])
    [grant] = [g for by_resource in given.values() for grants in by_resource.values() for g in grants]
    assert grant.device in {d["metadata"]["name"] for d in devices}
    assert bound["log_level"] == "info"
    assert {k: bound[k] for k in ("pod", "uid", "node", "devices", "device_ids")} == {
        "pod": "default/p", "uid": pod["metadata"]["uid"], "node": "n", "devices": [grant.device],
        "device_ids": [grant.device_id]}


async def test_the_device_conflict_log_line_names_both_holders() -> None:
    """A platform engineer's trial: the DeviceConflict line (input.invalid) named only one of the
    two pods that held the GPU; an audit needs both."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    [device] = [b.device("n", 0)]
    api.lists["/apis/tessera.dev/v1alpha1/extendedresources"] = [device]
    api.lists["/apis/tessera.dev/v1alpha1/resourceclasses"] = [b.resource_class("v100", match_labels={"model": "V100"})]
    name = device["metadata"]["name"]
    value = ann.encode_devices({"main": {"class.tessera.dev/v100": (ann.DeviceGrant(device["spec"]["deviceID"], name, None),)}})
    for holder in ("a", "b"):
        api.add_pod(b.pod(holder, node_name="n", phase="Running", annotations={ann.DEVICES: value}))
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    logs = await _logs_until(loop, lambda e: e.get("reason") == "DeviceConflict")
    [line] = [e for e in logs if e.get("reason") == "DeviceConflict"]
    assert line["event"] == "input.invalid" and line["log_level"] == "warning"
    first, second = sorted(("default/a", "default/b"), key=lambda key: key != line["object"])
    assert line["message"] == (f"device {name} is assigned to more than one pod exclusively: {first}, and {second} "
                               "that holds it")


async def test_terms_tessera_does_not_score_are_logged_at_info_not_as_invalid_input() -> None:
    """A trial finding: a valid preferred term Tessera does not score (then a ScheduleAnyway
    constraint, now scored; still a preferred pod term with a namespaceSelector) was logged
    `input.invalid` at warning level once per replica. The pod's Warning Event
    (IgnoredPreferredTerms) is the user's channel; the log says it at info as what it is, once per
    pod as the Event (the core raises it once)."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=8)]
    preferred = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "infer"}},
                                           "topologyKey": "kubernetes.io/hostname",
                                           "namespaceSelector": {"matchLabels": {"team": "a"}}}}]}}
    for i in range(3):
        api.add_pod(b.pod(f"infer-{i}", labels={"app": "infer"}, limits={"nvidia.com/gpu": 1},
                          spec_extra={"affinity": preferred}))
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    logs = await _logs_until(loop, lambda e: e.get("reason") == "IgnoredPreferredTerms"
                             and e.get("object") == "default/infer-2")
    told = [e for e in logs if e.get("reason") == "IgnoredPreferredTerms"]
    assert sorted(e["object"] for e in told) == ["default/infer-0", "default/infer-1", "default/infer-2"]
    assert all(e["event"] == "input.not_read" and e["log_level"] == "info" for e in told)


async def test_a_refused_binding_is_logged_at_error_level() -> None:
    """A day-2 trial: a ValidatingAdmissionPolicy refusing pods/binding (HTTP 422) was logged as
    `binder.failed` at info. kube-scheduler logs every binding-cycle error at error level
    (schedule_one.go handleSchedulingFailure: utilruntime.HandleErrorWithContext "Error scheduling
    pod; retrying"), so the line must reach an error-level log alert."""
    api = _cluster()
    api.fail_next("POST", "/binding", status=422)
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    logs = await _logs_until(loop, lambda e: e["event"] == "binder.failed")
    [failed] = [e for e in logs if e["event"] == "binder.failed"]
    assert failed["log_level"] == "error"
    assert failed["pod"] == "default/p" and failed["outcome"] == "error"
    assert "HTTP 422" in failed["message"]


async def test_a_binding_for_a_pod_deleted_meanwhile_is_logged_at_info_level() -> None:
    """A pod its user deleted while its Binding was out is nothing to page on: one info line,
    `binder.pod_gone`, with the reason. kube-scheduler logs the Bind error itself at error level
    (framework/runtime/framework.go RunBindPlugins "Plugin Failed", then schedule_one.go
    handleSchedulingFailure's HandleErrorWithContext) before its info line "Pod doesn't exist in
    informer cache"; Tessera keeps only what is true: the pod went, nothing failed."""
    api = _cluster()

    def delete_on_bind(call: Any) -> Any:
        if call.method == "POST" and call.path.endswith("/binding"):
            api.pods.pop(("default", "p"), None)
        return None

    api.handlers.insert(0, delete_on_bind)
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    logs = await _logs_until(loop, lambda e: e["event"] == "binder.pod_gone")
    [gone] = [e for e in logs if e["event"] == "binder.pod_gone"]
    assert gone["log_level"] == "info" and gone["outcome"] == "not_found"
    assert gone["reason"] == "the pod was deleted while its Binding was in flight"
    assert not [e for e in logs if e["event"] == "binder.failed"]


def _status_write_answered_late() -> tuple[FakeApi, dict[str, Any], anyio.Event]:
    """One 1-GPU node full with `filler`, and `p` (at resourceVersion 5) waiting for it; p's status
    PATCH is applied at once but answered only once the returned event is set."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    filler = b.pod("filler", requests={"nvidia.com/gpu": 1}, node_name="n", phase="Running")
    api.add_pod(filler)
    pending = b.pod("p", requests={"nvidia.com/gpu": 1})
    pending["metadata"]["resourceVersion"] = "5"
    api.add_pod(pending)
    answered = anyio.Event()
    serve = api._call

    async def answer_late(call: Any) -> Any:
        response = await serve(call)
        if call.method == "PATCH" and call.path.endswith("/pods/p/status"):
            await answered.wait()
        return response

    api._call = answer_late  # type: ignore[method-assign]
    return api, filler, answered


async def test_a_binding_waits_for_the_pods_own_status_write_in_flight_instead_of_running_into_it() -> None:
    """A new user's trial (preemption, 2 of 2 runs): the preemptor's Binding came back 409 —
    "resourceVersion 1152 -> 1178", `binder.failed` at error level, a SchedulerError condition, one
    more `tessera_bindings_total{result="error"}` — and bound on the retry a second later. The only
    writer in between was Tessera: its own PodScheduled=False/nomination PATCH, sent while the pod
    still waited, landed (conditional on the pod's version, so it changed the version) while the
    pod was decided and bound at the version it replaced. The Binding now waits for the pod's status
    write in flight and is conditional on the version that write left: one POST, bound."""
    api, filler, answered = _status_write_answered_late()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            await until(lambda: bool(api.of("PATCH", "/pods/p/status")))  # applied, unanswered
            del api.pods[("default", "filler")]
            loop._apply("DELETED", {"apiVersion": "v1", "kind": "Pod", **filler})  # the watch says: gone
            with anyio.move_on_after(1.0):  # the decision, and (before the fix) its Binding
                await until(lambda: bool(api.of("POST", "/binding")), seconds=2.0)
            answered.set()
            await until(lambda: any(e["event"] in ("binder.bound", "binder.failed") for e in logs))
            owner.cancel_scope.cancel()
    assert [e["event"] for e in logs if e["event"].startswith("binder.")] == ["binder.bound"]
    assert len(api.of("POST", "/binding")) == 1
    assert api.pod("default", "p")["spec"]["nodeName"] == "n"


async def test_a_binding_adopts_only_the_version_its_pods_own_status_write_left() -> None:
    """The session's review: after the pod's status write was answered, the Binding took whatever
    version the cache held — here a user's label edit that made the pod a member of a 2-pod gang
    after it was decided — and bound it alone. Only the version the write itself left (on top of
    the decided one) is adopted; a change by anyone else still costs the Binding a 409 and the pod
    a new decision."""
    api, filler, answered = _status_write_answered_late()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    uid = api.pod("default", "p")["metadata"]["uid"]
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            await until(lambda: bool(api.of("PATCH", "/pods/p/status")))  # applied, unanswered
            written = api.pod("default", "p")["metadata"]["resourceVersion"]
            del api.pods[("default", "filler")]
            loop._apply("DELETED", {"apiVersion": "v1", "kind": "Pod", **filler})
            await until(lambda: loop.core.state.node_of(uid) == "n")  # decided (assumed) at "5"
            pod = api.pod("default", "p")  # a user makes it a member of a 2-pod label gang
            pod["metadata"].setdefault("labels", {}).update(b.gang_labels("g", 2))
            api.resource_version += 1
            pod["metadata"]["resourceVersion"] = str(api.resource_version)
            loop._apply("MODIFIED", {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(pod)})  # the watch shows it
            answered.set()
            await until(lambda: any(e["event"] in ("binder.bound", "binder.failed", "binder.pod_changed")
                                     for e in logs))
            # decided again at once (a user's edit: no error backoff), as a member of its new gang
            await until(lambda: (entry := loop.core.queue.entries.get(uid)) is not None
                        and entry.rejectors == {"Coscheduling"} and entry.errors == 0)
            owner.cancel_scope.cancel()
    first = api.of("POST", "/binding")[0]
    assert first.body["metadata"]["resourceVersion"] == written  # our write's version, not the user's
    assert not api.pod("default", "p")["spec"].get("nodeName")  # refused (409), decided again: a gang of 2 waits
    assert [e["event"] for e in logs if str(e["event"]).startswith("binder.")] == ["binder.pod_changed"]
    assert len(api.of("POST", "/binding")) == 1  # the new decision saw the gang: nothing sent alone


async def test_a_leader_that_loses_the_lease_says_what_it_abandoned() -> None:
    """SRE trial: a leader lost its Lease with Bindings pending and dropped them silently: after
    `leader.lost` nothing said what the old leader abandoned (a Binding held at the allocation gate
    ends with no line at all). One line at the hand-over counts the Bindings not bound yet (held,
    or in flight: those end with their own binder.given_up/withdrawn line) and the evictions under
    way, and names a few of their pods."""
    api, _, loop = two_pods_at_the_allocation_gate()  # p0's Binding never answers; the gate holds p1's
    api.fail_next("POST", "/binding", stall=True)
    victim = b.pod("victim", node_name="m", phase="Running")
    api.add_pod(victim)
    api.fail_next("PATCH", "/pods/victim", stall=True)  # its preemption's first write never answers
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            await until(lambda: loop.binder.in_flight == 1 and len(loop.core.held()) == 1)
            loop.evictor.submit([Eviction("default", "victim", victim["metadata"]["uid"], "preemptor-uid",
                                          "tessera", "m")])
            await until(lambda: api.stalled == 2)
            loop.lost_leadership()
            owner.cancel_scope.cancel()
    abandoned = [entry for entry in logs if entry["event"] == "leader.abandoned"]
    assert len(abandoned) == 1, logs
    line = abandoned[0]
    assert line["log_level"] == "warning"
    assert (line["bindings"], line["bindings_in_flight"], line["evictions"]) == (2, 1, 1), line
    assert (line["pods"], line["victims"]) == ("default/p0, default/p1", "default/victim"), line


def test_an_abandoned_line_warns_when_anything_at_all_was_left_undone() -> None:
    """Evictions under way alone are left undone too (a warning); a term that leaves nothing is info."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    with structlog.testing.capture_logs() as logs:
        loop._log_abandoned(["default/victim"])
        loop._log_abandoned([])
    assert [(entry["log_level"], entry["evictions"]) for entry in logs if entry["event"] == "leader.abandoned"] == [
        ("warning", 1), ("info", 0)]
