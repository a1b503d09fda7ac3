"""One benchmark run: one policy, one seed, every pod through the real scheduler core.

Why it drives `Scheduler` directly: this is exactly how the live loop and `tessera simulate` use
the core (`apply` each watch event, `schedule_next` until None), minus the apiserver. Pods arrive
one at a time; a pod the core cannot place is DELETED right away, so it is never retried and holds
nothing (FGD's `assumePod` → `deletePod`). Placed pods stay assumed forever — the core counts an
assumed pod exactly like a bound one — and nothing is ever freed. Allocation is tallied from the
trace's own GPU numbers and checked at the end against the core's ledger, so a modelling mistake
(a pod placed without its GPUs) cannot go unnoticed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.trace_metrics import RunMetrics, Series, run_metrics
from bench.trace_workload import GPU_RESOURCE, MILLI, TraceNode, TracePod, cluster_objects, pod_object
from scheduler.api.config import SchedulerConfig
from scheduler.core.classes import DEFAULT_RESOURCE_PREFIX as CLASS_PREFIX
from scheduler.core.scheduler import Scheduler


@dataclass(frozen=True, slots=True)
class RunResult:
    policy: str
    seed: int
    pods: int
    failed: int
    elapsed_seconds: float  # wall clock of the pod loop (what pods/s reports)
    cpu_seconds: float  # this process's CPU time over the same loop: robust to a busy machine
    metrics: RunMetrics
    trace: str = ""  # the pod list it ran (a suite runs several)

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    @property
    def pods_per_cpu_second(self) -> float:
        return self.pods / self.cpu_seconds if self.cpu_seconds > 0 else 0.0


class LedgerMismatch(AssertionError):
    """The core's GPU accounting disagrees with the trace's: the workload model is wrong."""


def run_once(policy: str, config: SchedulerConfig, seed: int, nodes: Sequence[TraceNode],
             sequence: Sequence[TracePod]) -> RunResult:
    scheduler = Scheduler(config, seed=seed)
    now = 0.0  # virtual time never moves: nothing backs off, nothing expires
    for obj in cluster_objects(nodes, sequence):
        notices = scheduler.apply("ADDED", obj, now)
        if notices:
            raise ValueError(f"cluster object rejected: {notices[0].message}")
    series = Series(sum(n.gpus for n in nodes), [], [])
    failed = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    for pod in sequence:
        obj = pod_object(pod)
        scheduler.apply("ADDED", obj, now)
        placed = False
        while (attempts := scheduler.schedule_next(now)) is not None:
            placed = placed or any(a.node is not None for a in attempts)
        series.record(pod.total_gpu_milli, placed)
        if not placed:
            failed += 1
            scheduler.apply("DELETED", obj, now)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    check_ledger(scheduler, series.used_milli[-1] if sequence else 0, policy, seed)
    return RunResult(policy, seed, len(sequence), failed, elapsed, cpu, run_metrics(series))


def run_offline(policy: str, config: SchedulerConfig, seed: int, nodes: Sequence[TraceNode],
                pods: Sequence[TracePod]) -> RunResult:
    """The offline reference: every pod is known (and seen by the workload model) before the first
    is placed; they are then placed in the order given, each once (a pod that does not fit is
    dropped, as online). The metric is the final allocation against the pods' whole GPU demand."""
    scheduler = Scheduler(config, seed=seed)
    now = 0.0
    for obj in cluster_objects(nodes, pods):
        scheduler.apply("ADDED", obj, now)
    objects = {}
    for pod in pods:
        obj = pod_object(pod)
        objects[pod.name] = obj
        scheduler.apply("ADDED", obj, now)
    by_name = {pod.name: pod for pod in pods}
    used = failed = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    while (attempts := scheduler.schedule_next(now)) is not None:
        for attempt in attempts:
            if attempt.node is not None:
                used += by_name[attempt.pod.meta.name].total_gpu_milli
            else:
                failed += 1
                scheduler.apply("DELETED", objects[attempt.pod.meta.name], now)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    check_ledger(scheduler, used, policy, seed)
    arrived = sum(pod.total_gpu_milli for pod in pods)
    series = Series(sum(n.gpus for n in nodes), [arrived], [used])
    return RunResult(policy, seed, len(pods), failed, elapsed, cpu, run_metrics(series))


def check_ledger(scheduler: Scheduler, used: int, policy: str, seed: int) -> None:
    """The core must hold exactly the GPU milli the replay counted as placed (see the module doc)."""
    ledger = core_gpu_milli(scheduler)
    if ledger != used:
        raise LedgerMismatch(f"{policy} seed {seed}: the core holds {ledger} GPU milli, the trace placed {used}"
                             + _ungranted(scheduler))


def _ungranted(scheduler: Scheduler) -> str:
    """Placed pods that asked for ResourceClass devices but hold none (the usual culprit)."""
    keys = [placed.key for placed in scheduler.placements()
            if not placed.grants and any(r.startswith(CLASS_PREFIX) for r in placed.requests)]
    if not keys:
        return ""
    return f"; placed without their class devices: {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"


def core_gpu_milli(scheduler: Scheduler) -> int:
    """GPU milli held in the core: plain nvidia.com/gpu counts, exclusive devices, shared slices."""
    total = 0
    for placed in scheduler.placements():
        total += placed.requests.get(GPU_RESOURCE, 0) * MILLI
        for _device, amount, _resource, _dimension in placed.grants:
            total += MILLI if amount is None else int(amount)
    return total
