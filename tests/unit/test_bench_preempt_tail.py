"""bench.preempt_tail: the per-pod bookkeeping behind the low tier's tail."""

from __future__ import annotations

from bench import preempt
from bench.preempt_tail import TailReplay, report, spearman
from bench.trace_workload import TraceNode, TracePod


def _pod(name: str, gpus: int) -> TracePod:
    return TracePod(name, 1000, 1024, gpus, 1000, ())


def test_a_victim_restarts_its_job_and_its_wait_and_lost_work_are_counted() -> None:
    nodes = [TraceNode("n1", 32000, 65536, 1, "T4")]
    low = preempt.Job("low", (_pod("low", 1),), preempt.LOW, 0.0, 100.0)
    later = preempt.Job("later", (_pod("later", 1),), preempt.LOW, 1.0, 100.0)
    urgent = preempt.Job("urgent", (_pod("urgent", 1),), preempt.HIGH, 10.0, 5.0)
    replay = TailReplay("tessera", 42, nodes, [low, later, urgent])
    result = replay.run()
    assert result.preemptions == 1 and result.high_pending == [0.0]
    assert replay.lost_gpu_seconds == 10.0  # "low" ran 0..10 s on its GPU, then was evicted
    by_run = {(s.job, s.incarnation): s for s in replay.samples}
    assert set(by_run) == {(0, 0), (1, 0), (0, 1)}  # the high-priority pod is no sample
    # "later" waited from 1 s until "urgent" left at 15 s, parked as unschedulable (no backoff:
    # taken from backoffQ at once); the restarted "low" then waits for "later" to finish at 115 s
    assert by_run[1, 0].wait == 14.0 and by_run[1, 0].where == {"unschedulable": 14.0}
    assert by_run[0, 1].arrived == 10.0 and by_run[0, 1].wait == 105.0
    lines = report("tessera", 42, replay, backlog=10.0)
    assert "1 restarted after an eviction" in lines[1] and "low-tier work lost 0.0 GPU-h" in lines[0]


def test_spearman_says_first_come_first_served_or_newest_first() -> None:
    assert spearman([1.0, 2.0, 3.0], [10.0, 20.0, 30.0]) == 1.0
    assert spearman([1.0, 2.0, 3.0], [30.0, 20.0, 10.0]) == -1.0
    assert spearman([1.0], [1.0]) is None
