"""kube-scheduler's framework duration metrics: `scheduler_framework_extension_point_duration_seconds`
and `scheduler_plugin_execution_duration_seconds` (k/k v1.36.3 pkg/scheduler/metrics/metrics.go),
recorded where upstream records them (framework/runtime/framework.go Run*Plugins, schedule_one.go
findNodesThatPassFilters for Filter), per plugin only in sampled cycles (schedule_one.go
pluginMetricsSamplePercent = 10), with upstream's status codes, and without changing a decision."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.api.config import load_config
from scheduler.core.framework.attempt import Attempt
from scheduler.core.framework.timing import Code, ExtensionPoint
from scheduler.core.scheduler import Scheduler
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics, MetricsStopwatch
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.replay.test_topology import BLOCK, RACK, rack_nodes, topology_config

TOPOLOGY_REQUIRED = "tessera.dev/topology-required"
Point = tuple[ExtensionPoint, Code, str]
PluginRun = tuple[str, ExtensionPoint, Code]


class Recording:
    """A stopwatch that keeps what it is told; `sampled` decides every cycle's sampling."""

    def __init__(self, sampled: bool) -> None:
        self.sampled = sampled
        self.clock = 0.0
        self.points: list[Point] = []
        self.plugins: list[PluginRun] = []
        self.seconds: list[float] = []

    def now(self) -> float:
        self.clock += 0.001  # every mark a millisecond after the last: durations are positive
        return self.clock

    def sample(self) -> bool:
        return self.sampled

    def extension_point(self, point: ExtensionPoint, status: Code, profile: str, seconds: float) -> None:
        self.points.append((point, status, profile))
        self.seconds.append(seconds)

    def plugin(self, plugin: str, point: ExtensionPoint, status: Code, seconds: float) -> None:
        self.plugins.append((plugin, point, status))
        self.seconds.append(seconds)


def _cluster(core: Scheduler) -> None:
    core.apply("ADDED", b.node("a", gpus=4), 0.0)
    core.apply("ADDED", b.node("b", gpus=4), 0.0)


def _schedule(core: Scheduler, *pods: dict[str, object]) -> list[Attempt]:
    for pod in pods:
        core.apply("ADDED", pod, 0.0)
    attempts: list[Attempt] = []
    while (made := core.schedule_next(0.0)) is not None:
        attempts += made
    return attempts


def test_a_placed_pods_cycle_times_each_extension_point_it_runs() -> None:
    watch = Recording(sampled=False)
    core = Scheduler(load_config(None), stopwatch=watch)
    _cluster(core)
    [attempt] = _schedule(core, b.pod("p", requests={"nvidia.com/gpu": 1}))
    assert attempt.node is not None
    # two nodes fit: PreScore and Score run (upstream skips prioritizeNodes for a single fit)
    assert watch.points == [("PreFilter", "Success", "tessera"), ("Filter", "Success", "tessera"),
                            ("PreScore", "Success", "tessera"), ("Score", "Success", "tessera"),
                            ("Reserve", "Success", "tessera"), ("Permit", "Success", "tessera")]
    assert watch.plugins == [], "a cycle the stopwatch did not sample times no plugin"
    assert all(seconds > 0 for seconds in watch.seconds)


def test_a_pod_that_fits_nowhere_reads_unschedulable_at_its_rejecting_plugins() -> None:
    watch = Recording(sampled=True)
    core = Scheduler(load_config(None), stopwatch=watch)
    _cluster(core)
    [attempt] = _schedule(core, b.pod("big", requests={"nvidia.com/gpu": 8}))
    assert attempt.node is None
    points = [(point, status) for point, status, _ in watch.points]
    # findNodesThatPassFilters records Success though no node passed; preemption found no victim
    assert points == [("PreFilter", "Success"), ("Filter", "Success"), ("PostFilter", "Unschedulable")]
    filters = {(plugin, status) for plugin, point, status in watch.plugins if point == "Filter"}
    assert ("NodeResourcesFit", "Unschedulable") in filters, filters
    assert ("NodeUnschedulable", "Success") in filters, filters  # a plugin that rejected no node
    assert ("DefaultPreemption", "PostFilter", "Unschedulable") in watch.plugins
    assert not [run for run in watch.plugins if run[1] in ("Score", "Reserve", "Permit")]


def test_a_sampled_cycle_times_every_plugin_it_runs() -> None:
    watch = Recording(sampled=True)
    core = Scheduler(load_config(None), stopwatch=watch)
    _cluster(core)
    _schedule(core, b.pod("p", requests={"nvidia.com/gpu": 1}))
    points = {point for _, point, _ in watch.plugins}
    assert points == {"PreFilter", "Filter", "PreScore", "Score", "Reserve"} | (
        {"Permit"} if core._engine.permits else set())
    assert ("NodeResourcesFit", "Score", "Success") in watch.plugins
    assert ("TesseraDevices", "Reserve", "Success") in watch.plugins
    assert all(status == "Success" for _, _, status in watch.plugins)


def test_timing_changes_no_decision() -> None:
    def placements(stopwatch: Recording | None) -> list[tuple[str, str | None]]:
        core = Scheduler(load_config(None), seed=7) if stopwatch is None else \
            Scheduler(load_config(None), seed=7, stopwatch=stopwatch)
        _cluster(core)
        pods = [b.pod(f"p{i}", requests={"nvidia.com/gpu": 1 + i % 3}) for i in range(8)]
        return [(a.pod.key, a.node) for a in _schedule(core, *pods)]

    assert placements(Recording(sampled=True)) == placements(None) == placements(Recording(sampled=False))


def test_the_live_stopwatch_samples_one_cycle_in_ten() -> None:
    watch = MetricsStopwatch(Metrics())
    drawn = [watch.sample() for _ in range(100)]
    assert sum(drawn) == 10
    assert drawn[9] and drawn[19] and not any(drawn[:9])


def _families(metrics: Metrics) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    text = generate_latest(metrics.registry).decode()
    return {f.name: [(s.name, s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def _count(metrics: Metrics, family: str, **labels: str) -> float:
    return sum(value for name, got, value in _families(metrics).get(family, [])
               if name == f"{family}_count" and got == labels)


async def test_the_live_loop_exports_both_histograms_with_upstream_labels() -> None:
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=4)]
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    api.add_pod(b.pod("big", requests={"nvidia.com/gpu": 8}))
    metrics = Metrics(profiles=["tessera"])
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t",  # type: ignore[arg-type]
                         stopwatch=MetricsStopwatch(metrics, sample_percent=100))
    point = "scheduler_framework_extension_point_duration_seconds"
    plugin = "scheduler_plugin_execution_duration_seconds"
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while not (api.pod("default", "p")["spec"].get("nodeName")
                       and _count(metrics, point, extension_point="Bind", status="Success", profile="tessera")
                       and _count(metrics, point, extension_point="PostFilter", status="Unschedulable",
                                  profile="tessera")):
                await anyio.sleep(0.01)
        owner.cancel_scope.cancel()
    for extension_point in ("PreFilter", "Filter", "Reserve", "Permit", "Bind"):
        assert _count(metrics, point, extension_point=extension_point, status="Success", profile="tessera") >= 1, \
            extension_point
    assert _count(metrics, plugin, plugin="NodeResourcesFit", extension_point="Filter", status="Unschedulable") >= 1
    assert _count(metrics, plugin, plugin="NodeResourcesFit", extension_point="Filter", status="Success") >= 1
    assert _count(metrics, plugin, plugin="TesseraDevices", extension_point="Reserve", status="Success") == 1


async def test_the_live_loop_times_no_plugin_in_an_unsampled_cycle() -> None:
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=4)]
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    metrics = Metrics(profiles=["tessera"])
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t",  # type: ignore[arg-type]
                         stopwatch=MetricsStopwatch(metrics))  # 10 %: the first cycle is not sampled
    point = "scheduler_framework_extension_point_duration_seconds"
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while not _count(metrics, point, extension_point="Bind", status="Success", profile="tessera"):
                await anyio.sleep(0.01)
        owner.cancel_scope.cancel()
    assert _count(metrics, point, extension_point="Filter", status="Success", profile="tessera") == 1
    assert "scheduler_plugin_execution_duration_seconds" not in {
        name for name, samples in _families(metrics).items() if samples}


def test_the_two_histograms_read_as_kube_schedulers() -> None:
    """metrics.go: FrameworkExtensionPointDuration (STABLE, ExponentialBuckets(0.0001, 2, 12)) and
    PluginExecutionDuration (ALPHA, ExponentialBuckets(0.00001, 1.5, 20)), help texts verbatim."""
    metrics = Metrics()
    metrics.observe_extension_point("Filter", "Success", "tessera", 0.001)
    metrics.observe_plugin("NodeResourcesFit", "Filter", "Unschedulable", 0.0001)
    text = generate_latest(metrics.registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    point = families["scheduler_framework_extension_point_duration_seconds"]
    plugin = families["scheduler_plugin_execution_duration_seconds"]
    assert point.documentation == "[STABLE] Latency for running all plugins of a specific extension point."
    assert plugin.documentation == "[ALPHA] Duration for running a plugin at a specific extension point."
    assert (point.type, plugin.type) == ("histogram", "histogram")

    def bounds(family_samples: list[tuple[str, dict[str, str], float]]) -> list[str]:
        return [labels["le"] for name, labels, _ in family_samples if name.endswith("_bucket")]

    samples = _families(metrics)
    assert bounds(samples["scheduler_framework_extension_point_duration_seconds"]) == [
        str(0.0001 * 2**i) for i in range(12)] + ["+Inf"]
    assert bounds(samples["scheduler_plugin_execution_duration_seconds"]) == [
        str(0.00001 * 1.5**i) for i in range(20)] + ["+Inf"]
    assert {k: v for k, v in samples["scheduler_framework_extension_point_duration_seconds"][0][1].items()
            if k != "le"} == {"extension_point": "Filter", "status": "Success", "profile": "tessera"}
    assert {k: v for k, v in samples["scheduler_plugin_execution_duration_seconds"][0][1].items()
            if k != "le"} == {"plugin": "NodeResourcesFit", "extension_point": "Filter", "status": "Unschedulable"}


def test_a_gangs_preemption_dry_run_is_one_postfilter_not_attempts_of_its_own() -> None:
    """Tessera's gang dry run places members with ordinary attempts; upstream's preemption runs
    no scheduling cycle, so those add no PreFilter/Filter/Reserve points — only their plugins'
    Filter runs count, as upstream's dry-run filters do."""
    watch = Recording(sampled=True)
    core = Scheduler(load_config(None), stopwatch=watch)
    core.apply("ADDED", b.node("n", gpus=4), 0.0)
    core.apply("ADDED", b.pod("low", requests={"nvidia.com/gpu": 4}, node_name="n", phase="Running", priority=0),
               0.0)
    labels = b.gang_labels("g", 2)
    attempts = _schedule(core, *[b.pod(f"g-{i}", labels=labels, requests={"nvidia.com/gpu": 2}, priority=100)
                                 for i in range(2)])
    assert [victim.key for victim in attempts[0].preempted] == ["default/low"]
    points = [(point, status) for point, status, _ in watch.points]
    assert points.count(("PostFilter", "Success")) == 1
    assert ("Reserve", "Success") not in points, "the dry run's placements were recorded as Reserve runs"
    tried = len(attempts)  # the transaction's own attempts: one PreFilter and one Filter each
    assert points.count(("PreFilter", "Success")) == points.count(("Filter", "Success")) == tried
    assert ("DefaultPreemption", "PostFilter", "Success") in watch.plugins
    assert ("NodeResourcesFit", "Filter", "Success") in watch.plugins  # the dry run's filter runs


def test_queueing_hints_between_cycles_time_no_plugin() -> None:
    """A sampled cycle's sampling ends with it: the filters a queueing hint runs on a node event
    (outside any cycle) are not plugin runs of a scheduling cycle."""
    watch = Recording(sampled=True)
    core = Scheduler(load_config(None), stopwatch=watch)
    core.apply("ADDED", b.node("a", gpus=4), 0.0)
    [attempt] = _schedule(core, b.pod("big", requests={"nvidia.com/gpu": 8}))
    assert attempt.node is None and watch.plugins
    watch.plugins.clear()
    core.apply("ADDED", b.node("b", gpus=8), 1.0)  # the hint asks the filters whether "big" fits on b
    assert watch.plugins == []


REJECTED: Code = "UnschedulableAndUnresolvable"  # how every PreFilter rejection here reads upstream


def _short_gang() -> list[dict[str, Any]]:
    """scheduler-plugins' label gang, one of three members: Coscheduling's PreFilter rejects it
    (scheduler-plugins pkg/coscheduling: `framework.NewStatus(framework.UnschedulableAndUnresolvable, ...)`)."""
    return [b.pod("w-0", requests={"nvidia.com/gpu": 1}, labels=b.gang_labels("w", 3))]


def _missing_podgroup() -> list[dict[str, Any]]:
    return [b.pod("m-0", requests={"nvidia.com/gpu": 1}, labels={"scheduling.x-k8s.io/pod-group": "m"})]


def _min_resources_gap() -> list[dict[str, Any]]:
    group = b.podgroup("r", 1)
    group["spec"]["minResources"] = {"nvidia.com/gpu": "16"}  # the two nodes have 8
    return [group, b.pod("r-0", requests={"nvidia.com/gpu": 1}, labels={"scheduling.x-k8s.io/pod-group": "r"})]


def _topology_mismatch() -> list[dict[str, Any]]:
    return [b.pod(f"t-{i}", requests={"nvidia.com/gpu": 1}, labels=b.gang_labels("t", 2),
                  annotations={TOPOLOGY_REQUIRED: level}) for i, level in enumerate((RACK, BLOCK))]


def _unknown_class() -> list[dict[str, Any]]:
    return [b.pod("c", limits={"class.tessera.dev/nope": 1})]


def _topology_gang_with_an_unknown_class() -> list[dict[str, Any]]:
    """A gang with a topology constraint checks its members' PreFilter before any domain."""
    return [b.pod(f"u-{i}", limits={"class.tessera.dev/nope" if i else "nvidia.com/gpu": 1},
                  labels=b.gang_labels("u", 2), annotations={TOPOLOGY_REQUIRED: RACK}) for i in range(2)]


def _runs(watch: Recording, first: str) -> list[Code]:
    """The sampled cycles' PreFilter runs, each the status of its last plugin: a run starts at the
    profile's first PreFilter plugin, or is Coscheduling's alone (the gang check before any)."""
    runs: list[list[Code]] = []
    for plugin, point, status in watch.plugins:
        if point == "PreFilter":
            if plugin in (first, "Coscheduling") or not runs:
                runs.append([])
            runs[-1].append(status)
    return [run[-1] for run in runs]


@pytest.mark.parametrize("pods", [_short_gang, _missing_podgroup, _min_resources_gap, _topology_mismatch,
                                  _unknown_class, _topology_gang_with_an_unknown_class])
def test_every_prefilter_rejection_records_its_prefilter_point_and_plugin(pods: Callable[[], list[dict[str, Any]]]) -> None:
    """A new user's trial counted 55 attempts but 40 PreFilter observations; the 15 missing were
    the gang cycles that could not be tried yet ("waiting"): a scheduler-plugins gang member rejected for
    its gang (short, PodGroup missing, minResources gap, members disagreeing on topology) recorded
    no PreFilter, where upstream runs RunPreFilterPlugins for every popped pod and records the
    point with the rejecting plugin's code. Every PreFilter run records one point, with its
    plugins in a sampled cycle, and a PreFilter plugin runs once per run (PostFilter's look at
    which plugin refused is no run of its own), and no decision changes."""
    outcomes = []
    for sampled in (True, False):
        watch = Recording(sampled=sampled)
        core = Scheduler(topology_config(), stopwatch=watch)
        for node in rack_nodes({("b1", "r1"): 1, ("b1", "r2"): 1}):
            core.apply("ADDED", node, 0.0)
        attempts = _schedule(core, *pods())
        assert attempts and all(attempt.node is None for attempt in attempts)
        outcomes.append([(attempt.pod.key, attempt.message) for attempt in attempts])
        prefilter = [status for point, status, _ in watch.points if point == "PreFilter"]
        assert REJECTED in prefilter, watch.points
        first = core._engine.profiles["tessera"].pre_filters[0].name
        if sampled:
            assert _runs(watch, first) == prefilter, (watch.plugins, watch.points)
        else:
            assert watch.plugins == []
        assert len(prefilter) == len(attempts)  # the trial's count: one PreFilter point per attempt
    assert outcomes[0] == outcomes[1]
