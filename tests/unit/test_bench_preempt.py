"""bench.preempt: two priority tiers and gangs on the churning trace; what preemption costs and gives."""

from __future__ import annotations

import multiprocessing

from bench import preempt
from bench.churn_run import ChurnPod
from bench.trace_workload import TraceNode, TracePod


def _pod(name: str, gpus: int) -> TracePod:
    return TracePod(name, 1000, 1024, gpus, 1000, ())


def _run_in_own_process(policy: str, nodes: list[TraceNode], jobs: list[preempt.Job]) -> preempt.PreemptResult:
    """The per-pod policy patches the preemption module: keep that out of the test process."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(preempt.replay, (policy, 42, nodes, jobs))


def test_a_high_priority_pod_evicts_a_whole_gang_and_the_gang_restarts() -> None:
    nodes = [TraceNode("n1", 32000, 65536, 4, "T4"), TraceNode("n2", 32000, 65536, 4, "T4")]
    gang = preempt.Job("train", tuple(_pod(f"train-w{i}", 1) for i in range(6)), preempt.LOW, 0.0, 100.0)
    filler = preempt.Job("filler", (_pod("filler", 2),), preempt.LOW, 0.0, 100.0)
    urgent = preempt.Job("urgent", (_pod("urgent", 2),), preempt.HIGH, 10.0, 5.0)
    result = preempt.replay("tessera", 42, nodes, [gang, filler, urgent])
    assert result.preemptions == 1 and result.broken_gangs == 0
    # its victims leave at once; nothing else waits, so it is taken from backoffQ without sitting
    # out its 1 s backoff (upstream's SchedulerPopFromBackoffQ)
    assert result.high_pending == [0.0]
    # the single 2-GPU pod is the cheaper victim (one pod, not a 6-pod gang of the same priority)
    assert (result.victims, result.gpus_evicted, result.gpus_gained, result.restarts) == (1, 2.0, 2.0, 1)


def test_per_pod_preemption_breaks_gangs_and_tessera_does_not() -> None:
    nodes = [TraceNode("n1", 32000, 65536, 4, "T4"), TraceNode("n2", 32000, 65536, 4, "T4")]
    gangs = [preempt.Job(f"g{j}", tuple(_pod(f"g{j}-w{i}", 1) for i in range(4)), preempt.LOW, 0.0, 100.0)
             for j in range(2)]
    urgent = preempt.Job("urgent", (_pod("urgent", 1),), preempt.HIGH, 10.0, 5.0)
    tessera = _run_in_own_process("tessera", nodes, [*gangs, urgent])
    per_pod = _run_in_own_process("per-pod", nodes, [*gangs, urgent])
    assert tessera.broken_gangs == 0 and tessera.victims == 4  # a whole gang: minimum 4 of 4
    assert per_pod.broken_gangs == 1 and per_pod.victims == 1  # one worker: the other three keep their GPUs
    none = preempt.replay("none", 42, nodes, [*gangs, urgent])
    assert none.preemptions == 0 and none.high_pending == [90.0]  # waits until a gang finishes at 100


def test_jobs_split_low_priority_multi_gpu_pods_into_gangs_of_workers() -> None:
    pods = [ChurnPod(_pod(f"p{i}", 1 + i % 3), float(i), 10.0) for i in range(60)]
    jobs = preempt.jobs_of(pods, 0.2, 7)
    assert sum(len(j.members) for j in jobs if j.priority == preempt.LOW and j.gang) > 0
    for job in jobs:
        if job.gang:
            assert job.priority == preempt.LOW and all(m.num_gpu == 1 for m in job.members)
    high = sum(1 for j in jobs if j.priority == preempt.HIGH)
    assert 4 <= high <= 24  # about 20 % of 60
    assert preempt.jobs_of(pods, 0.2, 7) == jobs  # seeded
