"""Metrics carry kube-scheduler's names, labels, label values and buckets, in a private registry."""

from __future__ import annotations

import math
from dataclasses import replace

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.kube.metrics import Metrics, attempts_label, exponential_buckets


def _families(metrics: Metrics) -> dict[str, object]:
    text = generate_latest(metrics.registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def _samples(metrics: Metrics) -> list[tuple[str, dict[str, str], float]]:
    text = generate_latest(metrics.registry).decode()
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def _value(metrics: Metrics, metric: str, **labels: str) -> float:
    matches = [v for n, lab, v in _samples(metrics) if n == metric and lab == labels]
    assert len(matches) == 1, (metric, labels, matches)
    return matches[0]


def _buckets(metrics: Metrics, metric: str, **labels: str) -> list[float]:
    return [float(lab["le"]) for n, lab, _ in _samples(metrics)
            if n == f"{metric}_bucket" and {k: v for k, v in lab.items() if k != "le"} == labels]


def test_upstream_bucket_layouts() -> None:
    assert exponential_buckets(0.001, 2, 15)[-1] == 16.384
    m = Metrics(profiles=["tessera"])
    m.observe_attempt("scheduled", "tessera", 0.003)
    m.observe_pod_scheduled(1, 0.5)
    attempt = _buckets(m, "scheduler_scheduling_attempt_duration_seconds", profile="tessera", result="scheduled")
    assert attempt[:-1] == [0.001 * 2**i for i in range(15)] and math.isinf(attempt[-1])
    sli = _buckets(m, "scheduler_pod_scheduling_sli_duration_seconds", attempts="1")
    assert sli[:-1] == [0.01 * 2**i for i in range(20)] and math.isinf(sli[-1])
    assert _buckets(m, "scheduler_pod_scheduling_attempts")[:-1] == [1, 2, 4, 8, 16]


def test_attempts_label_caps_at_15_plus() -> None:
    assert [attempts_label(n) for n in (1, 2, 14, 15, 99)] == ["1", "2", "14", "15+", "15+"]
    m = Metrics()
    m.observe_pod_scheduled(20, 3.0)
    m.observe_pod_scheduled(3, 1.0)
    assert _value(m, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="15+") == 1
    assert _value(m, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="3") == 1
    assert _value(m, "scheduler_pod_scheduling_attempts_count") == 2
    assert _value(m, "scheduler_pod_scheduling_attempts_sum") == 23


def test_attempts_counted_by_result_and_profile() -> None:
    m = Metrics(profiles=["tessera"])
    # Pre-created at zero, so the series exist from the first scrape.
    assert _value(m, "scheduler_schedule_attempts_total", result="error", profile="tessera") == 0
    m.observe_attempt("scheduled", "tessera", 0.01)
    m.observe_attempt("unschedulable", "tessera", 0.02)
    m.observe_attempt("unschedulable", "tessera", 0.02)
    assert _value(m, "scheduler_schedule_attempts_total", result="scheduled", profile="tessera") == 1
    assert _value(m, "scheduler_schedule_attempts_total", result="unschedulable", profile="tessera") == 2
    assert _value(m, "scheduler_scheduling_attempt_duration_seconds_count",
                  result="unschedulable", profile="tessera") == 2


def test_gauges_and_counters_with_upstream_label_values() -> None:
    m = Metrics()
    for queue in ("active", "backoff", "unschedulable", "gated"):
        assert _value(m, "scheduler_pending_pods", queue=queue) == 0
    m.set_pending({"active": 3, "unschedulable": 2})
    assert _value(m, "scheduler_pending_pods", queue="active") == 3
    assert _value(m, "scheduler_pending_pods", queue="gated") == 0

    m.set_cache_size(nodes=5, pods=40, assumed_pods=2)
    assert _value(m, "scheduler_cache_size", type="assumed_pods") == 2
    m.pod_incoming("active", "UnschedulablePodAdd")
    m.pod_incoming("backoff", "ScheduleAttemptFailure", 2)
    assert _value(m, "scheduler_queue_incoming_pods_total", queue="backoff", event="ScheduleAttemptFailure") == 2

    # the pod group attempts too, every result of every profile, as kube-scheduler's pod group cycle has them
    m = Metrics(profiles=["tessera"])
    assert {result: _value(m, "scheduler_podgroup_schedule_attempts_total", result=result, profile="tessera")
            for result in ("scheduled", "unschedulable", "waiting_on_preemption", "error")} == dict.fromkeys(
        ("scheduled", "unschedulable", "waiting_on_preemption", "error"), 0)
    m.observe_pod_group_attempt("scheduled", "tessera", 0.004)
    m.observe_pod_group_attempt("waiting_on_preemption", "tessera", 0.002)
    assert _value(m, "scheduler_podgroup_schedule_attempts_total", result="scheduled", profile="tessera") == 1
    assert _value(m, "scheduler_podgroup_scheduling_attempt_duration_seconds_count",
                  result="waiting_on_preemption", profile="tessera") == 1
    assert _value(m, "scheduler_podgroup_scheduling_attempt_duration_seconds_sum",
                  result="scheduled", profile="tessera") == 0.004

    m.observe_binding("success", 0.01)
    m.observe_binding("conflict", 0.02)
    assert _value(m, "tessera_bindings_total", result="conflict") == 1
    assert _value(m, "tessera_bindings_total", result="not_found") == 0
    assert _value(m, "tessera_binding_duration_seconds_count") == 2

    m.count_relists("Pod", 1)
    m.count_relists("Node", 0)
    m.set_informer_synced("Pod", True)
    m.set_informer_synced("Node", False)
    assert _value(m, "tessera_informer_relists_total", kind="Pod") == 1
    # a kind that never relisted shows 0, not nothing (a new user's trial: a PromQL query on the
    # counter returned no series until the first relist)
    assert _value(m, "tessera_informer_relists_total", kind="Node") == 0
    m.count_relists("Pod", 1)  # the informers' running total, read at each scrape
    m.count_relists("Pod", 3)
    assert _value(m, "tessera_informer_relists_total", kind="Pod") == 3
    assert _value(m, "tessera_informer_synced", kind="Pod") == 1
    assert _value(m, "tessera_informer_synced", kind="Node") == 0
    # a relist waiting (its pause, its LIST failing): the kind's view is stale, though synced stays 1
    # (the trial after an apiserver restart: nothing said so for 45-80 s)
    m.set_informer_relist_pending("Pod", True)
    m.set_informer_relist_pending("Node", False)
    assert _value(m, "tessera_informer_relist_pending", kind="Pod") == 1
    assert _value(m, "tessera_informer_relist_pending", kind="Node") == 0


def test_leader_gauges() -> None:
    m = Metrics(lease_name="tessera")
    assert _value(m, "tessera_leader") == 0
    assert _value(m, "leader_election_master_status", name="tessera") == 0
    m.set_leader(True)
    assert _value(m, "tessera_leader") == 1
    assert _value(m, "leader_election_master_status", name="tessera") == 1


def test_exposition_matches_upstream_text() -> None:
    m = Metrics(profiles=["tessera"])
    m.observe_attempt("scheduled", "tessera", 0.01)
    text = generate_latest(m.registry).decode()
    assert ("# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts to schedule pods, by the "
            "result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal "
            "scheduler problem.\n# TYPE scheduler_schedule_attempts_total counter\n") in text
    assert "# HELP scheduler_pod_scheduling_sli_duration_seconds [BETA] E2e latency" in text
    assert "# HELP scheduler_cache_size [ALPHA] Number of nodes" in text
    # the pod group metrics' help texts, word for word (metrics.go podGroupScheduleAttempts, …)
    assert ("# HELP scheduler_podgroup_schedule_attempts_total [ALPHA] Number of attempts to schedule pod group, by "
            "the result. 'unschedulable' means a pod group could not be scheduled, while 'error' means an internal "
            "scheduler problem.\n") in text
    assert ("# HELP scheduler_podgroup_scheduling_attempt_duration_seconds [ALPHA] Pod group scheduling attempt "
            "latency in seconds (scheduling algorithm + binding)\n") in text
    assert ("# HELP scheduler_podgroup_scheduling_algorithm_duration_seconds [ALPHA] Pod group scheduling algorithm "
            "latency in seconds\n") in text
    # kube-scheduler exposes no `_created` series; prometheus-client's are filtered out.
    assert "_created" not in text


def test_registries_are_private() -> None:
    first, second = Metrics(), Metrics()  # no "Duplicated timeseries"
    first.observe_pod_group_attempt("scheduled", "tessera", 0.01)
    assert "scheduler_podgroup_schedule_attempts_total{" not in generate_latest(second.registry).decode()
    assert "scheduler_schedule_attempts_total" not in generate_latest(REGISTRY).decode()
    # ... and nothing but ours, with this process' own process_* and python_info (below).
    assert all(name.startswith(("scheduler_", "tessera_", "leader_election_", "rest_client_", "process_", "python_"))
               for name in _families(first))


def test_the_process_metrics_kube_scheduler_exports_are_exported() -> None:
    """An on-call trial: kube-scheduler's /metrics has process_start_time_seconds,
    process_resident_memory_bytes, process_cpu_seconds_total, ... (client_golang's process
    collector), which dashboards and restart/memory alerts read; Tessera's had none (its private
    registry left prometheus-client's process and platform collectors out)."""
    families = _families(Metrics())
    for name in ("process_start_time_seconds", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                 "process_cpu_seconds", "process_open_fds", "process_max_fds", "python_info"):
        assert name in families, (name, sorted(families))
    samples = {sample.name: sample.value for sample in _families(Metrics())["process_start_time_seconds"].samples}  # type: ignore[attr-defined]
    assert abs(samples["process_start_time_seconds"] - _started_at()) < 2


def test_scrape_hooks_set_gauges_from_the_state_of_that_moment() -> None:
    """State gauges are set at scrape time, so a scrape never shows values older than itself."""
    m = Metrics()
    nodes = [0]
    m.on_scrape(lambda: m.set_cache_size(nodes=nodes[0], pods=0, assumed_pods=0))
    assert _value(m, "scheduler_cache_size", type="nodes") == 0
    nodes[0] = 7
    assert _value(m, "scheduler_cache_size", type="nodes") == 7


def test_gpus_by_model_and_their_totals_are_one_snapshot() -> None:
    """Per model, every state the views name (0 included, so a model's ratio has all its series);
    `tessera_devices` sums them."""
    from scheduler.sim import builders as b
    from tests.helpers import gpu_counts_of

    m = Metrics()
    m.set_gpus(gpu_counts_of(b.node("n1", gpus=2), b.node("n2", gpus=1), b.node("n3", gpus=1),
                        b.device("n1", 0, "V100"), b.device("n1", 1, "V100"), b.device("n2", 0, "A100", healthy=False),
                        b.pod("p", node_name="n1", phase="Running", limits={"nvidia.com/gpu": 1})))
    assert _value(m, "tessera_devices_by_model", model="V100", state="counted") == 1
    assert _value(m, "tessera_devices_by_model", model="V100", state="free") == 1
    assert _value(m, "tessera_devices_by_model", model="A100", state="unhealthy") == 1
    assert _value(m, "tessera_devices_by_model", model="A100", state="free") == 0
    assert _value(m, "tessera_devices_by_model", model="", state="free") == 1  # n3 counts a GPU it has no device for
    assert {s: _value(m, "tessera_devices", state=s) for s in ("free", "counted", "unhealthy", "whole")} == {
        "free": 2, "counted": 1, "unhealthy": 1, "whole": 0}


def _member(name: str, group: str, priority: int | None = None) -> dict[str, object]:
    from scheduler.sim import builders as b

    return b.pod(name, limits={"nvidia.com/gpu": 1}, priority=priority,
                 spec_extra={"schedulingGroup": {"podGroupName": group}})


def test_a_gang_cycle_is_one_pod_group_attempt_whatever_its_member_count() -> None:
    """kube-scheduler's pod group metrics (schedule_one_podgroup.go: one observation per pod group
    cycle, by its result and profile; the algorithm's time once per cycle). A new user saw 4 after
    two 2-pod gangs when gang cycles were counted per member. A gang that cannot be tried yet
    (fewer than minMember members present) is no pod group attempt: upstream gates such pods at
    PreEnqueue and never starts a cycle; its member's attempt is an ordinary unschedulable one."""
    from scheduler.kube.run_cli import MetricsHooks
    from scheduler.sim import builders as b
    from tests.helpers import Run

    run = Run()
    run.add(b.node("n1", gpus=2), b.workload_podgroup("two", 2), _member("two-0", "two"), _member("two-1", "two"),
            b.podgroup("short", 3),  # a scheduler-plugins group: rejected in PreFilter, not tried as a group
            b.pod("short-0", labels={"scheduling.x-k8s.io/pod-group": "short"}, limits={"nvidia.com/gpu": 1}),
            b.workload_podgroup("big", 2), _member("big-0", "big"), _member("big-1", "big"), b.pod("solo"))
    m = Metrics(profiles=["tessera"])
    hooks = MetricsHooks(m, loop=None)  # type: ignore[arg-type]  # on_cycle never looks at the loop
    hooks.on_cycle([run.last("two-0"), run.last("two-1")], 0.002)
    hooks.on_cycle([run.last("short-0")], 0.001)
    hooks.on_cycle([run.last("big-0"), run.last("big-1")], 0.003)
    hooks.on_cycle([run.last("solo")], 0.001)  # not a gang
    hooks.on_cycle([], 0.0)
    assert run.node_of("two-0") == "n1" and run.node_of("big-0") is None
    assert run.last("short-0").gang_outcome == "waiting"

    def attempts(result: str) -> float:
        return _value(m, "scheduler_podgroup_schedule_attempts_total", result=result, profile="tessera")

    assert [attempts(r) for r in ("scheduled", "unschedulable", "waiting_on_preemption", "error")] == [1, 1, 0, 0]
    assert _value(m, "scheduler_podgroup_scheduling_attempt_duration_seconds_sum",
                  result="unschedulable", profile="tessera") == 0.003
    assert _value(m, "scheduler_podgroup_scheduling_algorithm_duration_seconds_count") == 2
    assert _value(m, "scheduler_podgroup_scheduling_algorithm_duration_seconds_sum") == 0.005
    # the per-pod algorithm histogram still has one observation per attempt, gangs' members included
    assert _value(m, "scheduler_scheduling_algorithm_duration_seconds_count") == 6
    assert "tessera_gang_attempts_total" not in generate_latest(m.registry).decode()


def test_a_gang_that_preempts_waits_on_preemption_and_an_erring_one_is_an_error() -> None:
    """Upstream's other two results: a pod group cycle that chose victims is
    'waiting_on_preemption' (PodGroupWaitingOnPreemption), one that ended with an error 'error'
    (PodGroupScheduleError), each under its pods' profile."""
    from scheduler.core.framework.attempt import Attempt
    from scheduler.kube.run_cli import MetricsHooks
    from scheduler.sim import builders as b
    from tests.helpers import Run

    run = Run()
    run.add(b.node("n1", gpus=2), b.pod("low", node_name="n1", phase="Running", limits={"nvidia.com/gpu": 2}, priority=0),
            b.workload_podgroup("hi", 2), _member("hi-0", "hi", 100), _member("hi-1", "hi", 100))
    preempting = [a for a in run.attempts if a.preempted]
    assert len(preempting) == 1 and preempting[0].gang_outcome == "failed"
    cycle = run.attempts[run.attempts.index(preempting[0]):][:2]
    assert [a.pod.key for a in cycle] == ["default/hi-0", "default/hi-1"] and all(a.node is None for a in cycle)
    m = Metrics(profiles=["tessera"])
    hooks = MetricsHooks(m, loop=None)  # type: ignore[arg-type]
    hooks.on_cycle(cycle, 0.002)
    hooks.on_cycle([run.last("hi-0"), run.last("hi-1")], 0.001)  # placed once its victim is gone
    # the core's gang error (cycle.py _gang_error): every member erred, the outcome "failed"
    # (its pods in a second profile: the label is the profile that ran the cycle)
    errored = [Attempt(replace(a.pod, scheduler_name="tessera-spread"), None, message="boom", error=True,
                       gang_outcome="failed") for a in cycle]
    hooks.on_cycle(errored, 0.001)

    def attempts(result: str) -> float:
        return _value(m, "scheduler_podgroup_schedule_attempts_total", result=result, profile="tessera")

    assert [attempts(r) for r in ("scheduled", "unschedulable", "waiting_on_preemption", "error")] == [1, 0, 1, 0]
    assert _value(m, "scheduler_podgroup_schedule_attempts_total", result="error", profile="tessera-spread") == 1


def _started_at() -> float:
    """This process' start time by /proc (seconds since the epoch), as the kernel says it."""
    import os
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/self/stat") as stat:
        start = int(stat.read().rsplit(")", 1)[1].split()[19]) / ticks
    with open("/proc/stat") as boot:
        btime = next(int(line.split()[1]) for line in boot if line.startswith("btime"))
    return btime + start
