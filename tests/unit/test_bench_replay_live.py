"""bench.replay_live's pure parts: the pods each scheduler gets, the round order, and the figures
computed from the driver's clock (the live part runs in tests/e2e/test_replay_live.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import replay_live as rl
from bench.churn_run import ChurnPod
from bench.trace_workload import TraceNode, TracePod, class_resource, sharing_class_name

NODES = [TraceNode("n1", 32000, 65536, 2, "T4")]


def test_tessera_gets_the_trace_form_and_kube_scheduler_whole_gpus_with_model_affinity() -> None:
    shared = ChurnPod(TracePod("s", 500, 1024, 1, 300, ("A10", "T4")), 0.0, 120.0)
    tessera = rl.pod_manifest(shared, "r0-00000", "tessera", 60.0, "r0")
    requests = tessera["spec"]["containers"][0]["resources"]["requests"]
    assert requests[class_resource(sharing_class_name(("A10", "T4")))] == 300
    assert "affinity" not in tessera["spec"]
    kube = rl.pod_manifest(shared, "r0-00000", "kube-scheduler", 60.0, "r0")
    assert kube["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1024Mi",
                                                                      "nvidia.com/gpu": 1}
    terms = kube["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "tessera.dev/gpu-model", "operator": "In", "values": ["A10", "T4"]}]
    # the lifetime, compressed by the speed, is kwok's completion delay; the round label selects it
    assert kube["metadata"]["annotations"][rl.COMPLETE_DELAY] == "2.000s"
    assert kube["metadata"]["labels"][rl.ROUND_LABEL] == "r0"
    assert kube["spec"]["schedulerName"] == "tessera"


def test_cpu_only_pods_ask_for_no_gpu_in_either_form() -> None:
    cpu = ChurnPod(TracePod("c", 4000, 8192, 0, 0, ()), 0.0, 10.0)
    for form in rl.SCHEDULERS:
        requests = rl.pod_manifest(cpu, "x", form, 60.0, "r0")["spec"]["containers"][0]["resources"]["requests"]
        assert requests == {"cpu": "4000m", "memory": "8192Mi"}


def test_trace_nodes_are_kwok_managed_and_ready() -> None:
    node = rl.with_kwok({"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {}}})
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["status"]["conditions"][0]["type"] == "Ready"
    device = {"kind": "ExtendedResource", "metadata": {"name": "d"}}
    assert rl.with_kwok(device) == {"kind": "ExtendedResource", "metadata": {"name": "d"}}


def test_rounds_alternate_direction() -> None:
    assert rl.plan_order(["tessera", "kube-scheduler"], 2) == [
        (0, "tessera"), (0, "kube-scheduler"), (1, "kube-scheduler"), (1, "tessera")]


def _plan(pods: list[ChurnPod], window: float, speed: float = 10.0) -> rl.Plan:
    return rl.Plan(NODES, pods, window, 1.0, speed)


def test_figures_are_in_trace_seconds_and_time_weighted_over_the_window() -> None:
    one = TracePod("a", 1000, 1024, 1, 1000, ())
    half = TracePod("b", 1000, 1024, 1, 500, ())
    plan = _plan([ChurnPod(one, 0.0, 100.0), ChurnPod(half, 0.0, 100.0), ChurnPod(one, 50.0, 10.0)], window=100.0)
    # real clock: start 1000, window 100 trace s / speed 10 = 10 real s
    times = [rl.PodTimes(0, created=1000.0, bound=1000.0),                    # 1 GPU the whole window
             rl.PodTimes(1, created=1000.0, bound=1002.0, finished=1007.0),   # 0.5 GPU from 2 s to 7 s
             rl.PodTimes(2, created=1005.0)]                                   # never placed
    result = rl.RoundResult("tessera", 0, times, 1000.0, 1010.0, 2.0, {}, 0.0, 0)
    figures = rl.round_figures(result, plan)
    # (1 GPU x 10 s + 0.5 GPU x 5 s) / (2 GPUs x 10 s)
    assert figures["gpu_allocation_pct"] == pytest.approx(62.5)
    assert (figures["created"], figures["placed"], figures["pending_at_end"]) == (3, 2, 1)
    # waits in trace seconds: a 0, b 2 real s x 10, and c, still waiting at the end, its 5 s so far
    assert (figures["pending_p50_s"], figures["pending_p99_s"]) == (pytest.approx(20.0), pytest.approx(50.0))
    assert figures["scheduler_cpu_ms_per_placed_pod"] == pytest.approx(1000.0)
    timeline = figures["timeline"]
    assert timeline[0][0] == 0.0 and timeline[-1][0] <= 100.0
    assert max(p for _, _, p in timeline) == 1  # b until it is bound at 2 s, c from 5 s on
    assert timeline[-1][1:] == (50.0, 1)  # at the end: a runs (1 of 2 GPUs), c waits


def test_the_plan_keeps_the_window_and_sorts_arrivals(tmp_path: Path) -> None:
    csv = tmp_path / "pods.csv"
    csv.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                   "deletion_time,scheduled_time\n"
                   "p4,1000,1024,1,1000,,LS,Running,10800,30000,10800\n"
                   "p1,1000,1024,1,1000,,LS,Running,0,3600,0\n"
                   "p3,1000,1024,1,1000,,LS,Running,7200,20000,7200\n"
                   "p2,1000,1024,1,1000,,LS,Running,1800,20000,1800\n")
    full = rl.make_plan(NODES, csv, 0.5, 60.0)
    assert [p.pod.name for p in full.pods] == ["p1", "p2", "p3", "p4"]  # by arrival, not file order
    assert [p.arrival for p in full.pods] == sorted(p.arrival for p in full.pods)
    cut = rl.make_plan(NODES, csv, 0.5, 60.0, window_hours=full.window / 3600 / 2)
    assert len(cut.pods) < len(full.pods) and cut.window == pytest.approx(full.window / 2)
    with pytest.raises(ValueError):
        rl.make_plan(NODES, csv, 0.5, 0.0)


def test_a_bind_seen_before_the_create_returned_never_counts_negative() -> None:
    pod = TracePod("a", 1000, 1024, 1, 1000, ())
    plan = _plan([ChurnPod(pod, 0.0, 100.0)], window=100.0)
    times = [rl.PodTimes(0, created=1001.0, bound=1000.9)]  # the watch event overtook the POST's 201
    figures = rl.round_figures(rl.RoundResult("tessera", 0, times, 1000.0, 1010.0, 1.0, {}, 0.0, 0), plan)
    assert figures["pending_p50_s"] == 0.0
    assert all(p >= 0 for _, _, p in figures["timeline"])
