"""`python -m bench.preempt_tail`: who makes bench.preempt's low-priority tail, and in what order.

Why: bench.preempt reports the low tier's p95 wait per policy; this says what that tail is made
of. One bench.preempt run per policy and seed (same workload, same core), with per-pod
bookkeeping: for the low-priority pods that waited at least the p95, how many belong to gangs, how
many are restarted jobs (a preemption's victims re-created), how their wait split between the
queue's parts (unschedulable, backoff, active); the low-tier work preemption threw away (GPU-hours
the victims' jobs had run); and the order the backlog was served in: the Spearman rank
correlation between arrival and placement of the low pods that waited over `--backlog` seconds
(+1 first come first served, -1 newest first).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import preempt
from bench.churn import churn_pods
from bench.live_report import percentile
from bench.trace import NODES_CSV, PODS_CSV, trace_dir
from bench.trace_workload import MILLI, TraceError, TraceNode, read_nodes, subsample
from scheduler.core.framework.attempt import Attempt
from scheduler.core.objects import Pod


@dataclass(frozen=True, slots=True)
class Sample:
    """One placed low-priority pod: its wait and where in the queue it spent it."""

    job: int
    incarnation: int  # 0: the job's first run; n: re-created after its n-th eviction
    gang_size: int
    arrived: float
    wait: float
    where: dict[str, float]


class TailReplay(preempt.PreemptReplay):
    """bench.preempt's replay, counting per pending pod the virtual seconds in each queue part."""

    def __init__(self, policy: str, seed: int, nodes: Sequence[TraceNode], jobs: Sequence[preempt.Job]) -> None:
        super().__init__(policy, seed, nodes, jobs)
        self.waited: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))  # pod -> queue part -> seconds
        self.samples: list[Sample] = []
        self.lost_gpu_seconds = 0.0  # run time of the victims' jobs, thrown away by their restart
        self.started: dict[tuple[int, int], list[tuple[float, int]]] = {}  # (job, incarnation) -> (start, milli)

    def _advance(self, last: float, now: float) -> None:
        pods = self.scheduler.state.pods
        for uid, entry in self.scheduler.queue.entries.items():
            pod = pods.get(uid)
            if pod is not None:
                self.waited[pod.meta.name][entry.where] += now - last

    def _placed(self, attempt: Attempt, now: float) -> None:
        name = attempt.pod.meta.name
        index, life, milli = self.by_name[name]
        job = self.jobs[index]
        self.started.setdefault((index, life), []).append((now, milli))
        if job.priority == preempt.LOW:
            self.samples.append(Sample(index, life, len(job.members), self.arrived[name], now - self.arrived[name],
                                       dict(self.waited.get(name, {}))))
        self.waited.pop(name, None)
        super()._placed(attempt, now)

    def _evict(self, victims: Sequence[Pod], gained: int, now: float) -> None:
        for index, life in {self.by_name[v.meta.name][:2] for v in victims}:
            self.lost_gpu_seconds += sum((now - at) * milli / MILLI for at, milli in self.started.get((index, life), []))
        super()._evict(victims, gained, now)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 2:
        return None
    rx, ry = np.argsort(np.argsort(xs)), np.argsort(np.argsort(ys))
    return float(np.corrcoef(rx, ry)[0, 1])


def report(policy: str, seed: int, replay: TailReplay, backlog: float) -> list[str]:
    samples = replay.samples
    p95 = percentile([s.wait for s in samples], 95) or 0.0
    tail = [s for s in samples if s.wait >= p95]
    where: defaultdict[str, float] = defaultdict(float)
    for s in tail:
        for part, seconds in s.where.items():
            where[part] += seconds
    total = sum(where.values()) or 1.0
    late = [s for s in samples if s.wait > backlog and s.incarnation == 0]
    order = spearman([s.arrived for s in late], [s.arrived + s.wait for s in late])
    cdf = " / ".join(f"{percentile([s.wait for s in samples], q) or 0:,.0f}" for q in (90, 94, 95, 96, 99))
    return [f"{policy} seed {seed}: low pending p90/p94/p95/p96/p99 {cdf} s, mean "
            f"{np.mean([s.wait for s in samples]):,.0f} s; {replay.result.preemptions} preemptions, "
            f"{replay.result.restarts} jobs restarted, low-tier work lost {replay.lost_gpu_seconds / 3600:,.1f} GPU-h",
            f"  tail (wait >= p95): {len(tail)} pods, {sum(1 for s in tail if s.gang_size > 1)} gang workers, "
            f"{sum(1 for s in tail if s.incarnation)} restarted after an eviction; waited "
            + ", ".join(f"{part} {seconds / total:.0%}" for part, seconds in sorted(where.items())),
            f"  backlog (first-run low pods waiting > {backlog:,.0f} s): {len(late)} pods, arrival/placement "
            f"rank correlation {order if order is None else round(order, 2)}"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.preempt_tail", description=__doc__.split("\n")[0])
    parser.add_argument("--policies", default="tessera,per-pod", help="subset of tessera,per-pod,none")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--node-step", type=int, default=20)
    parser.add_argument("--pod-step", type=int, default=2)
    parser.add_argument("--backlog", type=float, default=1000.0, help="wait (s) that counts as backlog (default 1000)")
    parser.add_argument("--pods", type=Path, help=f"pod CSV (default: <trace dir>/{PODS_CSV})")
    parser.add_argument("--nodes", type=Path, help=f"node CSV (default: <trace dir>/{NODES_CSV})")
    args = parser.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    try:
        if not policies or any(p not in preempt.POLICIES for p in policies):
            raise ValueError(f"--policies: choose from {', '.join(preempt.POLICIES)}")
        if args.node_step < 1 or args.pod_step < 1:
            raise ValueError("--node-step and --pod-step must be at least 1")
        nodes = subsample(read_nodes(args.nodes or trace_dir() / NODES_CSV), args.node_step)
        pods, _ = churn_pods(args.pods or trace_dir() / PODS_CSV, nodes, 1.0, args.pod_step)
    except (OSError, TraceError, ValueError) as err:
        print(f"bench.preempt_tail: {err}", file=sys.stderr)
        return 2
    jobs = preempt.jobs_of(pods, 0.2, args.seed)
    for policy in policies:
        replay = TailReplay(policy, args.seed, nodes, jobs)
        with preempt.victim_rule(policy):
            replay.run()
        print("\n".join(report(policy, args.seed, replay, args.backlog)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
