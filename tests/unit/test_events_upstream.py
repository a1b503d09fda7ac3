"""How Tessera writes Kubernetes Events, against kube-scheduler v1.36.3 and client-go
v0.36.3 `tools/events` (the events.k8s.io/v1 EventBroadcaster kube-scheduler uses).

Each test failed before its fix (a review found them); its docstring names the upstream code read and what
Tessera does instead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from scheduler.api.config import load_config
from scheduler.kube.binder import Binding, BindResult, Outcome
from scheduler.kube.evictor import Eviction
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.recorder import EventRecorder, ObjectRef
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.unit.test_event_recorder import EVENTS, NOTE, POD, T0, Clock, _recorder, _writes, running

# apimachinery NameIsDNSSubdomain: at most 253 characters, lower-case RFC 1123 labels joined by dots
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _pod(name: str) -> ObjectRef:
    return ObjectRef("Pod", "v1", name, "default", f"uid-{name}")


async def _until(condition: Any, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        while not condition():
            await anyio.sleep(0.001)
        return True
    return False


# --- leadership --------------------------------------------------------------------------------


async def test_a_replica_that_lost_the_lease_does_not_write_the_events_it_had_queued() -> None:
    """Upstream: kube-scheduler's OnStoppedLeading (cmd/kube-scheduler/app/server.go) exits the
    process (klog.FlushAndExit), so the EventBroadcaster writes nothing once the lease is lost;
    the brief's rule is the same: a standby emits no scheduling Events.

    Tessera: `SchedulerLoop.lost_leadership()` drops unsent Bindings, evictions and status
    writes (and the status writer even re-checks leadership after its token wait), but the
    EventRecorder has no leadership gate and its queue (up to 10,000 events, written at the
    events client's QPS, i.e. minutes of backlog under a flood) is not reset: FailedScheduling
    Events decided in the old term are POSTed by the now-standby replica, possibly after the
    new leader's `Scheduled` for the same pod."""
    api = FakeApi()
    term: list[int | None] = [1]
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="a",  # type: ignore[arg-type]
                         leader_term=lambda: term[0])
    # the cycles of the old term recorded these; the writer has not reached them yet
    for i in range(3):
        loop.events.record(_pod(f"p{i}"), "Warning", "FailedScheduling", "Scheduling", NOTE)
    term[0] = None  # the Lease is lost
    loop.lost_leadership()
    assert not loop.is_leader()
    with anyio.move_on_after(0.5):
        await loop.events.run()
    posted = [c.body["regarding"]["name"] for c in api.of("POST", "/events")]
    assert posted == [], f"a replica that no longer leads wrote Events: {posted}"


# --- spam filter / aggregation ----------------------------------------------------------------


async def test_the_scheduled_event_is_not_eaten_by_the_pods_earlier_failed_scheduling_events() -> None:
    """Upstream: client-go tools/events (event_broadcaster.go recordToSink/attemptRecording) has
    no spam filter at all — the burst-25 / 1-per-5-min token bucket belongs to the legacy
    tools/record EventCorrelator, which kube-scheduler does not use — so schedule_one.go
    finishBinding's `Scheduled` Event is always written.

    Tessera: one token bucket per *object* (not per reason) guards every new Event. A pod whose
    FailedScheduling message changed 25 times (node counts and reasons change in a busy cluster;
    each distinct note is a new Event) has spent its bucket, and the `Scheduled` Event when it
    finally binds is silently dropped: `kubectl describe pod` never shows where it went."""
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    async with running(recorder, api) as settle:
        for i in range(25):  # one attempt every 10 s for four minutes, the message changing each time
            clock.now = T0 + 10 * i
            recorder.record(POD, "Warning", "FailedScheduling", "Scheduling",
                            f"0/{12 + i} nodes are available: {12 + i} Insufficient nvidia.com/gpu.")
        await settle()
        clock.now = T0 + 250
        recorder.record(POD, "Normal", "Scheduled", "Binding", "Successfully assigned default/p to n")
        await settle()
    reasons = [body["reason"] for method, body in _writes(api) if method == "POST"]
    assert "Scheduled" in reasons, f"the Scheduled Event was dropped (recorder.dropped={recorder.dropped})"


async def test_thousands_of_unschedulable_pods_still_aggregate_into_series() -> None:
    """Upstream: eventBroadcasterImpl.eventCache (event_broadcaster.go) is an unbounded map; an
    isomorphic repeat (same getKey) stays a series until finishSeries (every 6 min) ends it, so
    N unschedulable pods retried cost N Events and then series PATCHes, however large N is.

    Tessera: the series cache and the per-object buckets are capped at 4,096 entries, evicting
    the oldest. With 4,200 unschedulable pods retried round-robin, each pod's series is evicted
    before its next attempt, so every retry POSTs a brand-new Event (its bucket was evicted
    too, so it is full again): no aggregation at all exactly when the apiserver needs it most."""
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    pods = [_pod(f"p{i}") for i in range(4200)]
    async with running(recorder, api) as settle:
        for round_ in range(2):  # two attempts per pod, 10 s apart: well inside the 6-minute window
            clock.now = T0 + 10 * round_
            for pod in pods:
                recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", NOTE)
            await settle()
    methods = [method for method, _ in _writes(api)]
    assert methods.count("POST") == len(pods), \
        f"{methods.count('POST')} Events created for {len(pods)} pods (second attempts did not join a series)"


# --- names, 404 and transport errors ----------------------------------------------------------


async def test_an_event_about_a_pod_with_a_long_name_has_a_valid_name() -> None:
    """Upstream: makeEvent (event_recorder.go) names the Event with
    tools/record/util.GenerateEventName: `<name>.<hex nanos>`, and when that is not a valid DNS
    subdomain (longer than 253 characters, kubernetes#127594) a UUID instead.

    Tessera: always `<name>.<16 hex>`; for a pod whose (valid) name is longer than 236
    characters the Event name exceeds 253 and the apiserver refuses every Event about that pod
    (422), so it never gets FailedScheduling, Scheduled or Preempted."""
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    long_pod = ObjectRef("Pod", "v1", "a" * 250, "default", "uid-long")
    async with running(recorder, api) as settle:
        recorder.record(long_pod, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
    [(_, body)] = _writes(api)
    name = body["metadata"]["name"]
    assert len(name) <= 253 and _DNS_SUBDOMAIN.match(name), f"invalid Event name ({len(name)} characters)"


async def test_a_repeat_whose_event_is_gone_creates_it_again() -> None:
    """Upstream: recordEvent (event_broadcaster.go) PATCHes a series and, when the Event is not
    found (`util.IsKeyNotFoundError`: expired by --event-ttl, or deleted), falls back to
    `sink.Create` of the Event with its series, so the occurrence is written.

    Tessera: `_patch_series` on 404 only forgets the series; the occurrence that found the Event
    gone is never written (no POST), and only a later occurrence creates a new Event."""
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    async with running(recorder, api) as settle:
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
        for key in [k for k in api.events if k[0] == "default"]:
            del api.events[key]  # `kubectl delete events --all -n default`, or the TTL ran out
        clock.now = T0 + 10
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
    methods = [method for method, _ in _writes(api)]
    assert methods[:2] == ["POST", "PATCH"]
    assert [e for k, e in api.events.items() if k[0] == "default"], \
        f"the repeat was lost: writes {methods}, no Event about the pod exists"


async def test_a_scheduled_event_survives_a_connection_blip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream: attemptRecording (event_broadcaster.go) retries a write that failed in transport
    (connection refused/reset: not a StatusError) up to maxTriesPerEvent=12 times, sleeping
    ~10 s (jittered) between tries.

    Tessera: `run()` catches the aiohttp error, logs `events.write_failed` and moves on: the
    Event is lost (not even counted in `dropped`). For a one-off Event such as `Scheduled` or
    `Preempted` there is no later occurrence to recreate it. (Sleeps are made instant here; the
    wait allows for a real ~10 s retry too.)"""
    real_sleep = anyio.sleep

    async def instant(delay: float = 0, *args: Any, **kwargs: Any) -> None:
        await real_sleep(0)

    monkeypatch.setattr(anyio, "sleep", instant)
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    api.fail_next("POST", EVENTS, error=aiohttp.ClientConnectionError("connection refused"))
    async with running(recorder, api):
        recorder.record(POD, "Normal", "Scheduled", "Binding", "Successfully assigned default/p to n")
        written = await _until(lambda: any(k[0] == "default" for k in api.events), 13.0)
    assert written, f"the Scheduled Event was lost after one failed POST (dropped={recorder.dropped})"


# --- what the loop records ----------------------------------------------------------------------


async def test_a_refused_binding_is_reported_with_the_scheduling_action() -> None:
    """Upstream: a Bind failure goes handleBindingCycleError -> FailureHandler ->
    handleSchedulingFailure (schedule_one.go), whose only Event is
    Eventf(pod, nil, Warning, "FailedScheduling", "Scheduling", msg): FailedScheduling always
    carries action "Scheduling" (action "Binding" is only for the Normal `Scheduled`).

    Tessera: `_on_bound` records the refused Binding's FailedScheduling with action "Binding",
    so tools that select kube-scheduler's events by (reason, action) miss it."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="a")  # type: ignore[arg-type]
    binding = Binding("uid-p", "default", "p", "n", {})
    loop._on_bound(BindResult(binding, Outcome.RETRY, "Internal error occurred: etcd timeout", 0.1))
    with anyio.move_on_after(0.3):
        await loop.events.run()
    [event] = [c.body for c in api.of("POST", "/events")]
    assert (event["reason"], event["action"]) == ("FailedScheduling", "Scheduling")


async def test_a_long_identity_still_gives_a_valid_reporting_instance() -> None:
    """The apiserver refuses an Event whose `reportingInstance` is longer than 128 characters
    (events.k8s.io/v1 validation). Tessera reports its leader-election identity there, and
    `--identity` is free text: a long one got every Event refused. It is now cut to 128, with a
    hash of the whole so two long identities stay apart."""
    api, clock = FakeApi(), Clock()
    long_identity = "replica-" + "x" * 200
    recorder = EventRecorder(KubeHttp(api), controller="tessera", instance=long_identity, clock=clock)  # type: ignore[arg-type]
    other = EventRecorder(KubeHttp(api), controller="tessera", instance=long_identity + "y", clock=clock)  # type: ignore[arg-type]
    assert len(recorder.instance) <= 128 and recorder.instance.startswith("replica-xxx")
    assert recorder.instance != other.instance
    short = EventRecorder(KubeHttp(api), controller="tessera", instance="tessera-0", clock=clock)  # type: ignore[arg-type]
    assert short.instance == "tessera-0"


# --- who reports, and about whom ----------------------------------------------------------------


def _two_profiles(tmp_path: Path) -> Any:
    path = tmp_path / "profiles.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    "profiles:\n- schedulerName: tessera\n- schedulerName: tessera-spread\n")
    return load_config(path)


async def test_a_profiles_events_name_its_scheduler_as_the_reporting_controller(tmp_path: Path) -> None:
    """kube-scheduler gives each profile its own recorder, `EventBroadcaster.NewRecorder(
    schedulerName)` (cmd/kube-scheduler/app/server.go getRecorderFactory, pkg/scheduler/profile/
    profile.go newProfile), and client-go's NewRecorder makes that name the Events'
    `reportingController` (tools/events/event_broadcaster.go:164). A victim's `Preempted` is
    recorded through the preemptor's framework (`fh.EventRecorder()`, framework/preemption/
    executor.go PreemptPod), so it carries the preemptor's scheduler name even when the victim is
    another scheduler's pod.

    Tessera wrote `reportingController: tessera` for every profile: a second profile's pods'
    Events could not be told apart, nor selected as kube-scheduler's can."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n1", gpus=1)]
    api.add_pod(b.pod("low", scheduler="default-scheduler", limits={"nvidia.com/gpu": 1}, node_name="n1",
                      phase="Running", priority=0))
    api.add_pod(b.pod("fits", scheduler="tessera-spread", requests={"cpu": "100m"}))
    api.add_pod(b.pod("never", scheduler="tessera-spread", limits={"nvidia.com/gpu": 8}))
    api.add_pod(b.pod("urgent", scheduler="tessera-spread", limits={"nvidia.com/gpu": 1}, priority=1000))
    loop = SchedulerLoop(_two_profiles(tmp_path), KubeHttp(api), KubeHttp(api), identity="a")  # type: ignore[arg-type]

    def by_reason() -> dict[tuple[str, str], dict[str, Any]]:
        return {(e["reason"], e["regarding"]["name"]): e for e in api.events.values()}

    wanted = {("Scheduled", "fits"), ("FailedScheduling", "never"), ("Preempted", "low")}
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        assert await _until(lambda: wanted <= set(by_reason()), 10.0), sorted(by_reason())
        owner.cancel_scope.cancel()
    events = by_reason()
    assert {key: events[key]["reportingController"] for key in wanted} == dict.fromkeys(wanted, "tessera-spread")
    assert all(events[key]["reportingInstance"] == "a" for key in wanted)


async def test_a_preempted_event_is_related_to_its_preemptor_even_once_it_left_the_cache() -> None:
    """Upstream's `Eventf(victim, preemptor.Obj(), ...)` always relates the victim's Event to its
    preemptor. Tessera looked the preemptor up in its cache when the DELETE answered, and wrote no
    `related` when the preemptor had gone meanwhile (deleted, or its uid unknown after a relist)."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="a")  # type: ignore[arg-type]
    urgent = ObjectRef("Pod", "v1", "urgent", "default", "uid-urgent")
    loop._on_evicted(Eviction("default", "low", "uid-low", "uid-urgent", "tessera", "n1", by=urgent), True)
    with anyio.move_on_after(0.3):
        await loop.events.run()
    [event] = [c.body for c in api.of("POST", "/events")]
    assert event["note"] == "Preempted by pod uid-urgent on node n1"
    assert event["related"] == {"kind": "Pod", "apiVersion": "v1", "name": "urgent", "namespace": "default",
                                "uid": "uid-urgent"}


async def test_a_replica_that_takes_the_lease_records_leader_election_on_it() -> None:
    """Upstream: client-go's LeaderElector.acquire calls Lock.RecordEvent("became leader") once
    the Lease is taken, and LeaseLock.RecordEvent writes a Normal Event, reason LeaderElection,
    note "<identity> became leader", regarding the Lease (kind Lease, coordination.k8s.io/v1), so
    `kubectl describe lease` and `kubectl get events` show each takeover. An on-call trial found
    none from Tessera. (events.k8s.io/v1 needs an action: LeaderElection too.)"""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="tessera-7c9_1f")  # type: ignore[arg-type]
    loop.leadership_started(lease=ObjectRef("Lease", "coordination.k8s.io/v1", "tessera", "tessera-system", "u-1"))
    with anyio.move_on_after(0.3):
        await loop.events.run()
    [event] = [c.body for c in api.of("POST", "/events")]
    assert (event["type"], event["reason"], event["action"], event["note"]) == (
        "Normal", "LeaderElection", "LeaderElection", "tessera-7c9_1f became leader")
    assert event["metadata"]["namespace"] == "tessera-system"
    assert {k: v for k, v in event["regarding"].items() if v is not None} == {
        "kind": "Lease", "apiVersion": "coordination.k8s.io/v1", "name": "tessera", "namespace": "tessera-system",
        "uid": "u-1"}
    # without leader election there is no Lease and no takeover: nothing is recorded
    api2 = FakeApi()
    alone = SchedulerLoop(load_config(None), KubeHttp(api2), KubeHttp(api2), identity="a")  # type: ignore[arg-type]
    alone.leadership_started()
    with anyio.move_on_after(0.3):
        await alone.events.run()
    assert not api2.of("POST", "/events")
