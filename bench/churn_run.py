"""One churn replay: pods arrive, wait, run for their trace lifetime and leave — through the real core.

Why a virtual clock driving `Scheduler` directly: the live loop does the same (apply each watch
event, `schedule_next` until None, sleep until the next backoff expiry), minus the apiserver. Here
time jumps from one event to the next: an arrival, a departure, or a backed-off pod becoming ready.
A pod the core cannot place is *not* dropped (unlike bench.trace's FGD methodology): it waits in the
core's queue, and the core's own requeue rules (a pod leaving frees resources, backoff expiry, the
periodic flush of long-unschedulable pods) bring it back, as in a cluster. A placed pod runs for
its trace lifetime (`deletion_time - creation_time`), then its DELETED event frees what it held.
"""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.trace_run import check_ledger
from bench.trace_workload import MILLI, TraceNode, TracePod, cluster_objects, pod_object
from scheduler.api.config import SchedulerConfig
from scheduler.core.scheduler import Scheduler

_ARRIVE, _LEAVE = 1, 0  # at equal times departures go first: they free what arrivals need


@dataclass(frozen=True, slots=True)
class ChurnPod:
    pod: TracePod
    arrival: float  # virtual seconds
    lifetime: float  # seconds it runs once placed


@dataclass(slots=True)
class ChurnResult:
    policy: str
    seed: int
    pods: int
    placed: int
    never_placed: int
    gpu_allocation_pct: float  # time-weighted, over the arrival window
    pending_seconds: list[float]  # per placed pod: placement - arrival
    makespan: float  # first arrival to the last departure
    elapsed_seconds: float
    cpu_seconds: float
    timeline: list[tuple[float, float, int]] = field(default_factory=list)  # (t, allocated GPU %, pending pods)


def replay(policy: str, config: SchedulerConfig, seed: int, nodes: Sequence[TraceNode],
           pods: Sequence[ChurnPod], samples: int = 400) -> ChurnResult:
    scheduler = Scheduler(config, seed=seed)
    for obj in cluster_objects(nodes, [p.pod for p in pods]):
        scheduler.apply("ADDED", obj, 0.0)
    total_milli = sum(n.gpus for n in nodes) * MILLI
    rng = random.Random(seed)
    events: list[tuple[float, int, float, int]] = []  # (time, kind, tie-break, index)
    for index, churn in enumerate(pods):
        events.append((churn.arrival, _ARRIVE, rng.random(), index))
    heapq.heapify(events)
    by_name = {p.pod.name: i for i, p in enumerate(pods)}
    objects: dict[int, dict[str, object]] = {}
    placed_at: dict[int, float] = {}
    used = 0  # GPU milli held by running pods
    pending = 0
    window_end = max((p.arrival for p in pods), default=0.0)
    start_time = min((p.arrival for p in pods), default=0.0)
    area = 0.0  # ∫ used dt over the arrival window
    last = start_time
    sample_every = max(1.0, (window_end - start_time) / samples)
    next_sample = start_time
    timeline: list[tuple[float, float, int]] = []
    makespan_end = start_time
    wall, cpu = time.perf_counter(), time.process_time()
    while True:
        backoff = scheduler.next_backoff_expiry()
        next_event = events[0][0] if events else None
        if next_event is None and backoff is None:
            break
        now = min(t for t in (next_event, backoff) if t is not None)
        if last < window_end:
            area += used * (min(now, window_end) - last)
        while next_sample <= now and next_sample <= window_end:
            timeline.append((next_sample, 100.0 * used / total_milli, pending))
            next_sample += sample_every
        last = now
        while events and events[0][0] <= now:
            _, kind, _, index = heapq.heappop(events)
            churn = pods[index]
            if kind == _ARRIVE:
                objects[index] = pod_object(churn.pod)
                scheduler.apply("ADDED", objects[index], now)
                pending += 1
            else:
                scheduler.apply("DELETED", objects.pop(index), now)
                used -= churn.pod.total_gpu_milli
                makespan_end = max(makespan_end, now)
        scheduler.flush_unschedulable(now)
        while (attempts := scheduler.schedule_next(now)) is not None:
            for attempt in attempts:
                if attempt.node is None:
                    continue
                index = by_name[attempt.pod.meta.name]
                placed_at[index] = now
                pending -= 1
                used += pods[index].pod.total_gpu_milli
                heapq.heappush(events, (now + pods[index].lifetime, _LEAVE, 0.0, index))
        if not events and pending and scheduler.next_backoff_expiry() is None:
            break  # nothing will ever leave again: the rest can never be placed
    elapsed, cpu_used = time.perf_counter() - wall, time.process_time() - cpu
    check_ledger(scheduler, used, policy, seed)
    span = window_end - start_time
    allocation = 100.0 * area / (total_milli * span) if span > 0 else 0.0
    waits = [placed_at[i] - pods[i].arrival for i in sorted(placed_at)]
    return ChurnResult(policy, seed, len(pods), len(placed_at), len(pods) - len(placed_at), allocation, waits,
                       makespan_end - start_time, elapsed, cpu_used, timeline)
