"""The Prometheus metrics and probes against kube-scheduler v1.36.3 (the version the project
builds and pins; source read from the k8s.io/kubernetes@v1.36.3 module): cases a review found,
each failing before its fix for the reason its docstring gives."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.kube.apiserver_wait import ApiserverWait
from scheduler.kube.run_cli import MetricsHooks, StateGauges, _readyz_checks
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi

BINPACK = str(Path(__file__).resolve().parents[2] / "config" / "binpack.yaml")


def _samples(metrics: Metrics) -> list[tuple[str, dict[str, str], float]]:
    text = generate_latest(metrics.registry).decode()
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def _value(metrics: Metrics, name: str, **labels: str) -> float:
    return sum(v for n, lab, v in _samples(metrics) if n == name and lab == labels)


# --- names and label values --------------------------------------------------------------------


def test_cache_size_gauge_has_v1_36_name_scheduler_cache_size() -> None:
    """v1.36.3 pkg/scheduler/metrics/metrics.go: CacheSize is Subsystem "scheduler", Name
    "cache_size" -> `scheduler_cache_size{type}` (test/instrumentation/documentation lists
    `scheduler_cache_size` too). Tessera exports `scheduler_scheduler_cache_size` (the pre-rename
    name), so a query or alert written for kube-scheduler v1.36 finds nothing."""
    m = Metrics()
    m.set_cache_size(nodes=3, pods=5, assumed_pods=1)
    names = {n for n, _, _ in _samples(m)}
    assert "scheduler_scheduler_cache_size" not in names
    assert _value(m, "scheduler_cache_size", type="nodes") == 3


def test_queue_incoming_event_label_of_a_new_pod_is_unschedulable_pod_add() -> None:
    """v1.36.3 backend/queue/scheduling_queue.go `PriorityQueue.Add` records
    `queue_incoming_pods_total{queue="active", event=framework.EventUnscheduledPodAdd.Label()}`,
    i.e. event="UnschedulablePodAdd" (ClusterEvent.Label() = Resource + ActionType; the queue's
    own test expects exactly that string). Tessera records event="PodAdd" (and "PodUpdate" for
    an update, upstream "UnschedulablePodUpdate"; "UnscheduledPodAdd" for a gang sibling's move)."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    core.apply("ADDED", b.pod("p", requests={"nvidia.com/gpu": 1}), 0.0)
    incoming = core.take_queue_incoming()
    assert incoming == {("active", "UnschedulablePodAdd"): 1}, incoming


# --- what is counted, and when -----------------------------------------------------------------


def test_a_pod_with_scheduling_gates_counts_as_pending_gated() -> None:
    """Upstream's `scheduler_pending_pods{queue="gated"}` is "the number of unschedulable pods
    that the scheduler never attempted to schedule because they are gated" (help text Tessera
    copies): a pod of ours with spec.schedulingGates is held by the SchedulingGates PreEnqueue
    plugin in unschedulablePods and counted by gatedRecorder (backend/queue/unschedulable_pods.go
    addOrUpdate). Tessera drops gated pods before the queue (state/cluster.py: `not pod.gated`),
    so they are counted nowhere."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    core.apply("ADDED", b.pod("g", requests={"nvidia.com/gpu": 1},
                              spec_extra={"schedulingGates": [{"name": "example.com/wait"}]}), 0.0)
    assert core.pending_counts()["gated"] == 1, core.pending_counts()


def two_pods_at_the_allocation_gate() -> tuple[FakeApi, Metrics, SchedulerLoop]:
    """A live loop with metrics over one node of two fresh GPUs and two one-GPU pods: the gate
    holds the second's Binding while the first is being allocated."""
    heartbeat = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=2)]
    api.lists["/apis/tessera.dev/v1alpha1/extendedresources"] = [
        b.device("n", i, heartbeat=heartbeat) for i in range(2)]
    api.lists["/apis/tessera.dev/v1alpha1/resourceclasses"] = [b.resource_class("v100", match_labels={"model": "V100"})]
    api.add_pod(b.pod("p0", limits={"class.tessera.dev/v100": 1}))
    api.add_pod(b.pod("p1", limits={"class.tessera.dev/v100": 1}))
    metrics = Metrics(profiles=["tessera"])
    loop = SchedulerLoop(load_config(BINPACK), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    loop.hooks = MetricsHooks(metrics, loop)
    return api, metrics, loop


async def test_attempt_duration_includes_the_time_the_binding_waited_at_the_allocation_gate() -> None:
    """Upstream measures `scheduling_attempt_duration_seconds{result="scheduled"}` from `start`
    (taken in ScheduleOne before the scheduling cycle) to the end of bind, so the time a pod
    waits in WaitOnPermit is in it (schedule_one.go bindingCycle: PodScheduled(profile,
    SinceInSeconds(start))). Tessera's allocation gate is a permit plugin holding the Binding, but
    the loop adds only the cycle's share and the Binding request (`seconds + result.seconds`), so
    a pod held 0.6 s at the gate reports a few milliseconds."""
    api, metrics, loop = two_pods_at_the_allocation_gate()
    held_for = 0.6
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while not (api.pod("default", "p0")["spec"].get("nodeName") and len(loop.core.held()) == 1):
                await anyio.sleep(0.01)
            assert not api.pod("default", "p1")["spec"].get("nodeName")  # held by the gate
            await anyio.sleep(held_for)
            p0 = copy.deepcopy(api.pod("default", "p0"))
            p0.setdefault("metadata", {}).setdefault("annotations", {})[ann.PHASE] = ann.PHASE_ALLOCATED
            loop._on_event("MODIFIED", {"apiVersion": "v1", "kind": "Pod", **p0})  # the agent allocated p0
            while not api.pod("default", "p1")["spec"].get("nodeName"):
                await anyio.sleep(0.01)
            await anyio.sleep(0.05)
        owner.cancel_scope.cancel()
    count = _value(metrics, "scheduler_scheduling_attempt_duration_seconds_count", result="scheduled",
                   profile="tessera")
    total = _value(metrics, "scheduler_scheduling_attempt_duration_seconds_sum", result="scheduled",
                   profile="tessera")
    assert count == 2
    assert total >= held_for, f"two scheduled attempts sum to {total:.4f}s; p1 alone waited {held_for}s at the gate"


# --- probes ------------------------------------------------------------------------------------


async def test_readyz_fails_once_graceful_shutdown_has_begun() -> None:
    """kube-scheduler's /readyz carries `healthz.NewShutdownHealthz(ctx.Done())`
    (cmd/kube-scheduler/app/server.go): from SIGTERM on it answers not ready, so endpoints and
    rollouts stop counting on the replica while it drains. Tessera's readiness (run_cli._ready ->
    SchedulerLoop.ready) only looked at the informers: after `loop.stop()` (the first step of
    step_down, while /readyz is still served during the up-to-10 s drain) it still answers ready."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while not loop.informers.synced:
                await anyio.sleep(0.01)
        assert _failing(loop) == []
        loop.stop()  # SIGTERM: step_down() begins
        await anyio.sleep(0.05)
        failing = _failing(loop)
        owner.cancel_scope.cancel()
    assert failing == ["shutdown"], f"/readyz still answers ready while shutting down: {failing}"


def _failing(loop: SchedulerLoop) -> list[str]:
    return [name for name, check in _readyz_checks(loop, ApiserverWait()) if check() is not None]



def test_a_gated_pod_enters_unschedulable_and_leaves_by_the_gates_eliminated_event() -> None:
    """v1.36.3 backend/queue: `PriorityQueue.Add` runs the PreEnqueue plugins (SchedulingGates)
    in moveToActiveQ; a gated pod goes to unschedulablePods, whose addOrUpdate counts
    `queue_incoming_pods_total{queue="unschedulable", event="UnschedulablePodAdd"}`. Removing
    the gates is an update that `framework.PodSchedulingPropertiesChange` names
    {UnschedulablePod, UpdatePodSchedulingGatesEliminated}, whose Label() is
    "UnschedulablePodUpdatePodSchedulingGatesEliminated"; the pod enters activeQ under it
    (`PriorityQueue.Update` -> requeuePodWithQueueingStrategy(evt.Label())). Tessera counted
    nothing for the gated pod and ("active", "UnschedulablePodAdd") when its gates went, as if
    the pod had just been created."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    gated = b.pod("g", requests={"nvidia.com/gpu": 1}, spec_extra={"schedulingGates": [{"name": "example.com/wait"}]})
    core.apply("ADDED", gated, 0.0)
    assert core.take_queue_incoming() == {("unschedulable", "UnschedulablePodAdd"): 1}
    ungated = copy.deepcopy(gated)
    del ungated["spec"]["schedulingGates"]
    core.apply("MODIFIED", ungated, 1.0)
    assert core.take_queue_incoming() == {("active", "UnschedulablePodUpdatePodSchedulingGatesEliminated"): 1}
    assert core.pending_counts()["gated"] == 0 and core.pending_counts()["active"] == 1


def test_unschedulable_pods_are_exported_by_the_plugins_that_rejected_them() -> None:
    """v1.36.3 metrics.go `scheduler_unschedulable_pods{plugin, profile}` (BETA): "The number of
    unschedulable pods broken down by plugin name". The queue adds one per plugin in a pod's
    UnschedulablePlugins when the failed pod comes back (scheduling_queue.go
    AddUnschedulableIfNotPresent), one for the PreEnqueue plugin that gates a pod
    (runPreEnqueuePlugin: SchedulingGates for spec.schedulingGates), and takes them off when the
    pod is popped (active_queue.go unlockedMovePodToInFlight) or deleted. The kube-scheduler
    dashboards' "why are pods pending" panel reads it; Tessera did not export it."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    metrics = Metrics(profiles=["tessera"])
    metrics.on_scrape(StateGauges(loop, metrics))
    core = loop.core
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    core.apply("ADDED", b.pod("big", requests={"nvidia.com/gpu": 2}), 0.0)
    core.apply("ADDED", b.pod("m0", requests={"nvidia.com/gpu": 1}, labels=b.gang_labels("g", 3)), 0.0)
    core.apply("ADDED", b.pod("g", spec_extra={"schedulingGates": [{"name": "example.com/wait"}]}), 0.0)
    while core.schedule_next(0.0) is not None:
        pass
    name = "scheduler_unschedulable_pods"
    assert _value(metrics, name, plugin="NodeResourcesFit", profile="tessera") == 1
    assert _value(metrics, name, plugin="Coscheduling", profile="tessera") == 1
    assert _value(metrics, name, plugin="SchedulingGates", profile="tessera") == 1
    core.apply("ADDED", b.node("n2", gpus=2), 1.0)  # "big" fits now: back in activeQ, still counted
    assert _value(metrics, name, plugin="NodeResourcesFit", profile="tessera") == 1
    attempts = core.schedule_next(2.0)  # popped (and placed): no longer counted; the series stays at 0
    assert attempts is not None and attempts[0].pod.meta.name == "big" and attempts[0].node == "n2"
    assert _value(metrics, name, plugin="NodeResourcesFit", profile="tessera") == 0
    assert [s for s in _samples(metrics) if s[0] == name and s[1]["plugin"] == "NodeResourcesFit"]
    text = generate_latest(metrics.registry).decode()
    assert ("# HELP scheduler_unschedulable_pods [BETA] The number of unschedulable pods broken down by plugin "
            "name. A pod will increment the gauge for all plugins that caused it to not schedule and so this "
            "metric have meaning only when broken down by plugin.\n# TYPE scheduler_unschedulable_pods gauge\n") in text


def test_a_binding_held_at_the_allocation_gate_is_not_a_gated_pending_pod() -> None:
    """Upstream's `scheduler_pending_pods{queue="gated"}` is "the number of unschedulable pods that
    the scheduler never attempted to schedule because they are gated" (help text), counted by
    unschedulablePods' gatedRecorder for pods a PreEnqueue plugin refused. A pod whose Binding a
    Permit plugin holds was attempted and placed: it is in the binding cycle (WaitOnPermit),
    in no queue, and kube-scheduler counts it under no `queue` value. Tessera's allocation gate
    is such a Permit wait, yet its held pods were added to "gated", so an alert or panel on gated
    pods (pods an external controller has yet to release) mixed in pods that are placed and only
    wait for the node agent. They have a gauge of their own, tessera_pods_waiting_for_allocation."""
    heartbeat = "2026-01-01T00:00:00Z"
    now = datetime.fromisoformat(heartbeat).timestamp()
    api = FakeApi()
    loop = SchedulerLoop(load_config(BINPACK), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    metrics = Metrics(profiles=["tessera"])
    metrics.on_scrape(StateGauges(loop, metrics))
    core = loop.core
    for obj in (b.node("n", gpus=2), *(b.device("n", i, heartbeat=heartbeat) for i in range(2)),
                b.resource_class("v100", match_labels={"model": "V100"})):
        core.apply("ADDED", obj, now)
    p0 = b.pod("p0", limits={"class.tessera.dev/v100": 1})
    core.apply("ADDED", p0, now)
    [placed] = core.schedule_next(now) or []
    bound = copy.deepcopy(p0)
    bound["spec"]["nodeName"] = "n"
    bound["metadata"]["annotations"] = {**placed.annotations, ann.PHASE: "Allocating"}
    core.apply("MODIFIED", bound, now)  # bound; the agent has not allocated yet
    core.apply("ADDED", b.pod("p1", limits={"class.tessera.dev/v100": 1}), now)
    [held] = core.schedule_next(now) or []
    assert held.deferred and [a.pod.meta.name for a in core.held()] == ["p1"]
    MetricsHooks(metrics, loop).on_queue(core.pending_counts(), {})
    assert _value(metrics, "scheduler_pending_pods", queue="gated") == 0
    assert _value(metrics, "tessera_pods_waiting_for_allocation") == 1
    # upstream's binding goroutine runs from WaitOnPermit to bind (schedule_one.go runBindingCycle:
    # scheduler_goroutines{operation="binding"}): the held Binding is one
    assert _value(metrics, "scheduler_goroutines", operation="binding") == 1


async def test_the_scheduling_algorithm_duration_is_observed_once_per_attempt() -> None:
    """v1.36.3 metrics.go `scheduler_scheduling_algorithm_duration_seconds` (ALPHA, registered
    always, buckets ExponentialBuckets(0.001, 2, 15)), observed once per scheduling attempt when
    schedulingAlgorithm returns (schedule_one.go), whatever its result. kube-prometheus'
    kubernetes-mixin records `cluster_quantile:scheduler_scheduling_algorithm_duration_seconds:
    histogram_quantile` from it; Tessera did not export it, so that rule and its panel had no data."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(b.pod("fits", requests={"nvidia.com/gpu": 1}))
    api.add_pod(b.pod("too-big", requests={"nvidia.com/gpu": 2}))
    metrics = Metrics(profiles=["tessera"])
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    loop.hooks = MetricsHooks(metrics, loop)
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while not (api.pod("default", "fits")["spec"].get("nodeName") and loop.stats.unschedulable >= 1):
                await anyio.sleep(0.01)
        owner.cancel_scope.cancel()
    name = "scheduler_scheduling_algorithm_duration_seconds"
    assert _value(metrics, f"{name}_count") == loop.stats.cycles == 2
    bounds = sorted(float(lab["le"]) for n, lab, _ in _samples(metrics) if n == f"{name}_bucket")
    assert bounds[:-1] == [0.001 * 2**i for i in range(15)]


async def test_a_binding_in_flight_is_a_binding_goroutine() -> None:
    """v1.36.3 `scheduler_goroutines{operation="binding"}` (BETA) is up for each binding cycle
    while it runs (schedule_one.go runBindingCycle): a Binding sent and not answered is one."""
    class SlowBindApi(FakeApi):
        async def _call(self, call: Call) -> Response:
            if call.method == "POST" and call.path.endswith("/binding"):
                await anyio.sleep(0.5)
            return await super()._call(call)

    api = SlowBindApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    metrics = Metrics(profiles=["tessera"])
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    metrics.on_scrape(StateGauges(loop, metrics))
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while loop.binder.in_flight == 0:
                await anyio.sleep(0.01)
            during = _value(metrics, "scheduler_goroutines", operation="binding")
            while not api.pod("default", "p")["spec"].get("nodeName") or loop.binder.in_flight:
                await anyio.sleep(0.01)
        owner.cancel_scope.cancel()
    assert during == 1
    assert _value(metrics, "scheduler_goroutines", operation="binding") == 0


def test_a_preemptor_whose_eviction_failed_comes_back_under_force_activate() -> None:
    """v1.36.3 framework/preemption/executor.go prepareCandidateAsync: when a victim's PreemptPod
    fails, the preemptor is `Activate`d; PriorityQueue.activate moves it with the event
    framework.ForceActivate ("ForceActivate"), the label scheduler_queue_incoming_pods_total
    carries. Tessera labelled it "EvictionFailed", a value no kube-scheduler query knows."""
    from tests.helpers import BINPACK as REPLAY_BINPACK
    from tests.helpers import Run, config

    run = Run(config(REPLAY_BINPACK))
    run.add(b.node("n", cpu="1", memory="1Gi"))
    low = b.pod("low", requests={"cpu": "1", "memory": "1Gi"}, priority=0, node_name="n", phase="Running")
    low["status"]["startTime"] = "2026-01-01T00:00:00Z"
    run.add(low)
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # the victim does not go
    run.add(b.pod("p", requests={"cpu": "1", "memory": "1Gi"}, priority=100))
    [victim] = next(a for a in run.attempts if a.pod.meta.name == "p").preempted
    run.scheduler.take_queue_incoming()
    run.scheduler.eviction_failed(victim.uid, 1.0)
    incoming = run.scheduler.take_queue_incoming()
    assert {event for _, event in incoming} == {"ForceActivate"}, incoming


def test_a_node_update_moves_pods_under_the_label_of_what_changed() -> None:
    """v1.36.3 framework/events.go NodeSchedulingPropertiesChange turns a node update into one
    ClusterEvent per changed property, in the order spec.unschedulable (UpdateNodeTaint),
    allocatable, labels, taints, ...; the queue moves pods under each one's Label(), Resource +
    ActionType: "NodeUpdateNodeAllocatable", "NodeUpdateNodeTaint", "NodeUpdateNodeLabel". Tessera
    counted every node update as "NodeUpdate", which kube-scheduler never records."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=1, unschedulable=True), 0.0)
    core.apply("ADDED", b.pod("big", requests={"nvidia.com/gpu": 2}), 0.0)
    core.apply("ADDED", b.pod("small", requests={"nvidia.com/gpu": 1}), 0.0)
    while core.schedule_next(0.0) is not None:
        pass
    core.take_queue_incoming()
    core.apply("MODIFIED", b.node("n", gpus=1), 100.0)  # uncordoned: both pass NodeUnschedulable now
    assert {event for _, event in core.take_queue_incoming()} == {"NodeUpdateNodeTaint"}
    while core.schedule_next(100.0) is not None:  # "small" lands; "big" is refused by NodeResourcesFit
        pass
    core.take_queue_incoming()
    core.apply("MODIFIED", b.node("n", gpus=3, labels={"zone": "a"}), 200.0)  # "big" fits beside "small" now
    assert {event for _, event in core.take_queue_incoming()} == {"NodeUpdateNodeAllocatable"}


async def test_a_standby_counts_the_pods_entering_its_queue_as_they_come() -> None:
    """kube-scheduler starts its informers before leader election (cmd/kube-scheduler/app/
    server.go Run: startInformersAndWaitForSync unless DelayCacheUntilActive), so a standby's
    event handlers add pods to its queue and count scheduler_queue_incoming_pods_total as they
    arrive. Tessera's standby kept its core's counts until it led, then added them all at once:
    after a failover, rate() showed every pod created during the standby's whole life as
    arriving in one scrape."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    metrics = Metrics(profiles=["tessera"])
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t",  # type: ignore[arg-type]
                         leader_term=lambda: None)
    loop.hooks = MetricsHooks(metrics, loop)
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while not loop.informers.synced:
                await anyio.sleep(0.01)
        await anyio.sleep(1.5)  # the loop wakes at least every second
        owner.cancel_scope.cancel()
    assert _value(metrics, "scheduler_queue_incoming_pods_total", queue="active", event="UnschedulablePodAdd") == 1
    assert _value(metrics, "scheduler_pending_pods", queue="active") == 0  # the queue gauges stay the leader's


def test_cache_size_pods_counts_the_pods_on_nodes_as_kube_schedulers_cache() -> None:
    """v1.36.3 backend/cache/cache.go updateMetrics: `scheduler_cache_size{type="pods"}` is
    len(cache.podStates), the pods the cache holds: assigned pods (eventhandlers.go addPod ->
    addAssignedPodToCache only when assignedPod) and assumed ones; the pod informer leaves out
    Succeeded and Failed pods (scheduler.go newPodInformer's field selector). Pending pods live in
    the queue, not the cache. Tessera counted every pod it knew, pending, other schedulers'
    pending and finished ones included: a batch cluster's thousands of Succeeded pods."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    core.apply("ADDED", b.pod("pending", requests={"nvidia.com/gpu": 2}), 0.0)
    core.apply("ADDED", b.pod("others", scheduler="default-scheduler"), 0.0)
    core.apply("ADDED", b.pod("running", node_name="n", phase="Running"), 0.0)
    core.apply("ADDED", b.pod("done", node_name="n", phase="Succeeded"), 0.0)
    core.apply("ADDED", b.pod("fits", requests={"nvidia.com/gpu": 1}), 0.0)
    while core.schedule_next(0.0) is not None:
        pass
    assert core.cache_sizes() == {"nodes": 1, "pods": 2, "assumed_pods": 1}  # "running", and "fits" assumed


@pytest.mark.parametrize("end", ["allocated", "deleted"])
async def test_the_wait_at_the_allocation_gate_is_the_permit_wait_duration(end: str) -> None:
    """v1.36.3 metrics.go `scheduler_permit_wait_duration_seconds{result}` (BETA, buckets
    ExponentialBuckets(0.001, 2, 15)): framework WaitOnPermit observes, for a pod a Permit plugin
    made wait, the time until it was allowed or stopped, labelled with the status code
    ("Success"; "Unschedulable" when rejected or deleted; "Error" when preempted). Tessera's
    allocation gate is that wait, and its length is what a GPU platform team wants to see (how
    long Bindings wait for the node agent); it was not exported."""
    api, metrics, loop = two_pods_at_the_allocation_gate()
    held_for = 0.3
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while not (api.pod("default", "p0")["spec"].get("nodeName") and len(loop.core.held()) == 1):
                await anyio.sleep(0.01)
            await anyio.sleep(held_for)
            if end == "allocated":
                p0 = copy.deepcopy(api.pod("default", "p0"))
                p0.setdefault("metadata", {}).setdefault("annotations", {})[ann.PHASE] = ann.PHASE_ALLOCATED
                loop._on_event("MODIFIED", {"apiVersion": "v1", "kind": "Pod", **p0})  # the agent allocated p0
                while not api.pod("default", "p1")["spec"].get("nodeName"):
                    await anyio.sleep(0.01)
            else:  # upstream's deletePod -> RejectWaitingPod: status Unschedulable
                loop._on_event("DELETED", {"apiVersion": "v1", "kind": "Pod", **api.pod("default", "p1")})
                await anyio.sleep(0.05)
        owner.cancel_scope.cancel()
    name = "scheduler_permit_wait_duration_seconds"
    result = "Success" if end == "allocated" else "Unschedulable"
    assert _value(metrics, f"{name}_count", result=result) == 1  # p1 only: p0 never waited
    assert _value(metrics, f"{name}_sum", result=result) >= held_for
    assert sum(v for n, _, v in _samples(metrics) if n == f"{name}_count") == 1
    bounds = sorted(float(lab["le"]) for n, lab, _ in _samples(metrics) if n == f"{name}_bucket")
    assert bounds[:-1] == [0.001 * 2**i for i in range(15)]
