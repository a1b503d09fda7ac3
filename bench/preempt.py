"""`python -m bench.preempt`: the churning Alibaba trace with two priority tiers and gangs.

Why: preemption is judged by what it costs the low tier for what it gives the high tier. The
workload is bench.churn's (the trace's lifetimes, every 10th node, arrivals compressed to an
offered load) with two changes, both seeded:
- `--high` (default 20 %) of the GPU pods get priority 1000, the rest 0;
- every low-priority pod of two or more whole GPUs becomes a gang of that many one-GPU workers
  (minimum: all of them), arriving together and running the pod's lifetime: distributed training,
  the work that a broken gang wastes.
A victim is deleted at once and its pod re-created at the same moment with its whole lifetime (a
job restarts; nothing is checkpointed). Per policy, over the seeds:
- high-priority pending time p50/p95/p99 (virtual seconds, placed pods), low-priority p50/p95;
- preemptions, victims per preemption, GPUs evicted per GPU the preemptor gained;
- broken gangs: evictions that left a gang with 0 < running < minimum (goal 0);
- time-weighted GPU allocation.
Policies: `tessera` (the built-in default: gang-safe preemption), `per-pod` (the same, but every
pod its own victim unit: kube-scheduler's DefaultPreemption, which knows no gangs — replayed
through the same core, since kube-scheduler itself cannot run this replay), `none` (preemption off).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import heapq
import json
import random
import statistics
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.churn import churn_pods
from bench.live_report import percentile
from bench.churn_run import ChurnPod
from bench.pool import run_pool
from bench.trace import NODES_CSV, PODS_CSV, REPO_ROOT, parse_seeds, trace_dir
from bench.trace_policies import BY_NAME, config_for
from bench.trace_workload import MILLI, TraceError, TraceNode, TracePod, cluster_objects, pod_object, read_nodes, subsample
from scheduler.api.config import SchedulerConfig
from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.core.objects import GANG_MIN_LABEL, GANG_NAME_LABEL, Pod
from scheduler.core.scheduler import Scheduler
from scheduler.core.state import ClusterState

DEFAULT_OUT = REPO_ROOT / "bench" / "out" / "preempt"
POLICIES = ("tessera", "per-pod", "none")
HIGH, LOW = 1000, 0


@dataclass(frozen=True, slots=True)
class Job:
    """One unit of work: a pod, or a gang's workers (same arrival, same lifetime)."""

    name: str
    members: tuple[TracePod, ...]
    priority: int
    arrival: float
    lifetime: float

    @property
    def gang(self) -> bool:
        return len(self.members) > 1


@dataclass(slots=True)
class PreemptResult:
    policy: str
    seed: int
    high_pending: list[float] = field(default_factory=list)
    low_pending: list[float] = field(default_factory=list)
    preemptions: int = 0
    victims: int = 0
    gpus_evicted: float = 0.0
    gpus_gained: float = 0.0
    broken_gangs: int = 0
    restarts: int = 0
    allocation_pct: float = 0.0
    elapsed_seconds: float = 0.0


def jobs_of(pods: Sequence[ChurnPod], high_share: float, seed: int) -> list[Job]:
    rng = random.Random(seed)
    jobs = []
    for churn in pods:
        pod = churn.pod
        priority = HIGH if pod.num_gpu and rng.random() < high_share else LOW
        if priority == LOW and pod.num_gpu >= 2 and pod.gpu_milli == MILLI:
            workers = tuple(TracePod(f"{pod.name}-w{i}", pod.cpu_milli // pod.num_gpu, pod.memory_mib // pod.num_gpu,
                                     1, MILLI, pod.gpu_spec) for i in range(pod.num_gpu))
            jobs.append(Job(pod.name, workers, priority, churn.arrival, churn.lifetime))
        else:
            jobs.append(Job(pod.name, (pod,), priority, churn.arrival, churn.lifetime))
    return jobs


def _object(pod: TracePod, job: Job, incarnation: int) -> dict[str, Any]:
    obj = pod_object(pod.clone(f"{pod.name}-r{incarnation}" if incarnation else pod.name))
    obj["spec"]["priority"] = job.priority
    if job.gang:
        gang = f"{job.name}-r{incarnation}" if incarnation else job.name
        obj["metadata"]["labels"] = {GANG_NAME_LABEL: gang, GANG_MIN_LABEL: str(len(job.members))}
    return obj


def per_pod_units(state: ClusterState, preemptor_priority: int, pods: Iterable[Pod], exclude_gang: str = "") -> list[Any]:
    """kube-scheduler's victims: every lower-priority placed pod (bound, held at Permit, or assumed
    while its Binding is out) on its own, gangs or not."""
    from scheduler.core.plugins.preemption.victims import Unit

    return [Unit((pod,), pod.priority, "") for pod in pods
            if pod.priority < preemptor_priority and pod.uid in state.placements
            and (pod.gang is None or pod.gang.key != exclude_gang)]


def config(policy: str) -> SchedulerConfig:
    base = config_for(BY_NAME["tessera-default"])
    if policy == "none":
        profiles = tuple(p.model_copy(update={"preemption": False}) for p in base.profiles)
        return base.model_copy(update={"profiles": profiles})
    return base


class PreemptReplay:
    """bench.churn's virtual-clock loop (bench/churn_run.py) with priorities, gangs and evictions."""

    def __init__(self, policy: str, seed: int, nodes: Sequence[TraceNode], jobs: Sequence[Job]) -> None:
        self.result = PreemptResult(policy, seed)
        self.scheduler = Scheduler(config(policy), seed=seed)
        for obj in cluster_objects(nodes, [m for job in jobs for m in job.members]):
            self.scheduler.apply("ADDED", obj, 0.0)
        self.total = sum(n.gpus for n in nodes) * MILLI
        self.jobs = jobs
        self.events: list[tuple[float, int, int, int]] = []  # (time, 0 leave / 1 arrive, job, incarnation)
        for index, job in enumerate(jobs):
            heapq.heappush(self.events, (job.arrival, 1, index, 0))
        self.by_name: dict[str, tuple[int, int, int]] = {}  # pod -> (job, incarnation, GPU milli)
        self.objects: dict[str, dict[str, Any]] = {}
        self.arrived: dict[str, float] = {}
        self.running: dict[tuple[int, int], set[str]] = {}  # (job, incarnation) -> placed members
        self.incarnation = [0] * len(jobs)
        self.placed: set[str] = set()
        self.used = 0

    def run(self) -> PreemptResult:
        scheduler, events, jobs = self.scheduler, self.events, self.jobs
        window_start, window_end = min(j.arrival for j in jobs), max(j.arrival for j in jobs)
        last, area = window_start, 0.0
        wall = time.perf_counter()
        while events or scheduler.next_backoff_expiry() is not None:
            backoff = scheduler.next_backoff_expiry()
            now = min(t for t in (events[0][0] if events else None, backoff) if t is not None)
            if last < window_end:
                area += self.used * (min(now, window_end) - last)
            self._advance(last, now)
            last = now
            while events and events[0][0] <= now:
                _, kind, index, life = heapq.heappop(events)
                if kind == 1:
                    self._arrive(index, now)
                elif life == self.incarnation[index]:  # not restarted meanwhile
                    for name in self.running.pop((index, life), set()):
                        self._delete(name, now)
            scheduler.flush_unschedulable(now)
            while (attempts := scheduler.schedule_next(now)) is not None:
                for attempt in attempts:
                    if attempt.node is not None:
                        self._placed(attempt, now)
                victims = [v for attempt in attempts for v in attempt.preempted]
                if victims:
                    self._evict(victims, sum(self.by_name[a.pod.meta.name][2] for a in attempts), now)
            if not events and scheduler.next_backoff_expiry() is None:
                break
        self.result.allocation_pct = 100.0 * area / (self.total * (window_end - window_start))
        self.result.elapsed_seconds = time.perf_counter() - wall
        return self.result

    def _advance(self, last: float, now: float) -> None:
        """The virtual clock moves from `last` to `now` (bench.preempt_tail counts where pods wait)."""

    def _arrive(self, index: int, now: float) -> None:
        job = self.jobs[index]
        for member in job.members:
            obj = _object(member, job, self.incarnation[index])
            name = obj["metadata"]["name"]
            self.by_name[name] = (index, self.incarnation[index], member.total_gpu_milli)
            self.objects[name], self.arrived[name] = obj, now
            self.scheduler.apply("ADDED", obj, now)

    def _placed(self, attempt: Attempt, now: float) -> None:
        """Bound at once, as the apiserver would (a bound pod is what preemption may evict), with
        its devices handed out (the node agent's `Allocated`, on pods whose Binding gave devices)."""
        name = attempt.pod.meta.name
        obj = self.objects[name] = copy.deepcopy(self.objects[name])
        obj["spec"]["nodeName"] = attempt.node
        obj["metadata"]["annotations"] = {**attempt.annotations, ann.PHASE: ann.PHASE_ALLOCATED} \
            if ann.DEVICES in attempt.annotations else dict(attempt.annotations)
        self.scheduler.apply("MODIFIED", obj, now)
        index, life, milli = self.by_name[name]
        high = self.jobs[index].priority == HIGH
        (self.result.high_pending if high else self.result.low_pending).append(now - self.arrived[name])
        self.used += milli
        self.placed.add(name)
        members = self.running.setdefault((index, life), set())
        if not members:
            heapq.heappush(self.events, (now + self.jobs[index].lifetime, 0, index, life))
        members.add(name)

    def _delete(self, name: str, now: float) -> None:
        self.scheduler.apply("DELETED", self.objects.pop(name), now)
        if name in self.placed:
            self.placed.discard(name)
            self.used -= self.by_name[name][2]

    def _evict(self, victims: Sequence[Pod], gained: int, now: float) -> None:
        """Delete the victims; a job that lost a pod restarts whole (a broken gang is counted)."""
        result = self.result
        result.preemptions += 1
        result.victims += len(victims)
        result.gpus_gained += gained / MILLI
        hit: dict[tuple[int, int], int] = {}
        for victim in victims:
            index, life, milli = self.by_name[victim.meta.name]
            result.gpus_evicted += milli / MILLI
            self.running.get((index, life), set()).discard(victim.meta.name)
            self._delete(victim.meta.name, now)
            hit[(index, life)] = hit.get((index, life), 0) + 1
        for (index, life), count in hit.items():
            job = self.jobs[index]
            left = self.running.pop((index, life), set())
            if job.gang and left:
                result.broken_gangs += 1  # 0 < running < minimum: the job is lost with GPUs still held
            for member in job.members:  # the job restarts: its surviving and pending workers go too
                name = f"{member.name}-r{life}" if life else member.name
                if name in self.objects:
                    self._delete(name, now)
            self.incarnation[index] += 1
            result.restarts += 1
            self._arrive(index, now)


@contextlib.contextmanager
def victim_rule(policy: str) -> Iterator[None]:
    """The policy's victim units for the runs inside: `per-pod` swaps in kube-scheduler's rule
    (every pod alone) and restores the gang-aware one after."""
    if policy != "per-pod":
        yield
        return
    import scheduler.core.plugins.preemption as plugin

    gang_aware = plugin.units_for  # type: ignore[attr-defined]
    plugin.units_for = per_pod_units  # type: ignore[attr-defined]  # for this run only
    try:
        yield
    finally:
        plugin.units_for = gang_aware  # type: ignore[attr-defined]


def replay(policy: str, seed: int, nodes: Sequence[TraceNode], jobs: Sequence[Job]) -> PreemptResult:
    with victim_rule(policy):
        return PreemptReplay(policy, seed, nodes, jobs).run()


_WORKER: dict[str, Any] = {}


def _init(nodes: list[TraceNode], pods: list[ChurnPod], high: float) -> None:
    _WORKER.update(nodes=nodes, pods=pods, high=high)


def _run(task: tuple[str, int]) -> PreemptResult:
    policy, seed = task
    return replay(policy, seed, _WORKER["nodes"], jobs_of(_WORKER["pods"], _WORKER["high"], seed))


def summary(results: Sequence[PreemptResult]) -> dict[str, Any]:
    def med(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    def pct(attr: str, q: float) -> float | None:
        return med([v for r in results if (v := percentile(getattr(r, attr), q)) is not None])

    return {
        "seeds": [r.seed for r in results],
        "high_pending_p50": pct("high_pending", 50), "high_pending_p95": pct("high_pending", 95),
        "high_pending_p99": pct("high_pending", 99),
        "low_pending_p50": pct("low_pending", 50), "low_pending_p95": pct("low_pending", 95),
        "preemptions": med([float(r.preemptions) for r in results]),
        "victims_per_preemption": med([r.victims / r.preemptions for r in results if r.preemptions]),
        "gpus_evicted_per_gpu_gained": med([r.gpus_evicted / r.gpus_gained for r in results if r.gpus_gained]),
        "broken_gangs": med([float(r.broken_gangs) for r in results]),
        "broken_gangs_max": max((r.broken_gangs for r in results), default=0),
        "restarts": med([float(r.restarts) for r in results]),
        "gpu_allocation_pct": med([r.allocation_pct for r in results]),
        "elapsed_seconds": med([r.elapsed_seconds for r in results]),
    }


def _cell(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table(by_policy: dict[str, dict[str, Any]]) -> str:
    lines = ["| policy | high pending p50 / p95 / p99 s | low pending p50 / p95 s | preemptions | victims per "
             "preemption | GPUs evicted per GPU gained | broken gangs (max) | GPU allocation % |",
             "|---|---|---|---|---|---|---|---|"]
    for name, s in by_policy.items():
        lines.append(f"| {name} | {_cell(s['high_pending_p50'])} / {_cell(s['high_pending_p95'])} / "
                     f"{_cell(s['high_pending_p99'])} | {_cell(s['low_pending_p50'])} / {_cell(s['low_pending_p95'])} | "
                     f"{_cell(s['preemptions'])} | {_cell(s['victims_per_preemption'], 2)} | "
                     f"{_cell(s['gpus_evicted_per_gpu_gained'], 2)} | {_cell(s['broken_gangs'])} "
                     f"({s['broken_gangs_max']}) | {_cell(s['gpu_allocation_pct'], 2)} |")
    return "\n".join(lines)


def plot(by_policy: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(by_policy)
    panels = (("high_pending_p95", "high-priority pending p95 (s)"),
              ("gpus_evicted_per_gpu_gained", "GPUs evicted per GPU gained"), ("broken_gangs", "broken gangs"))
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 3.6))
    for ax, (key, label) in zip(axes, panels, strict=True):
        ax.bar(names, [by_policy[n][key] or 0 for n in names], color=["#1f77b4", "#ff7f0e", "#7f7f7f"][: len(names)])
        ax.set_title(label, fontsize=10)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.preempt", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=Path, help=f"node CSV (default: <trace dir>/{NODES_CSV})")
    parser.add_argument("--pods", type=Path, help=f"pod CSV with creation_time/deletion_time (default: {PODS_CSV})")
    parser.add_argument("--policies", default=",".join(POLICIES), help=f"subset of {','.join(POLICIES)}")
    parser.add_argument("--high", type=float, default=0.2, help="share of GPU pods at high priority (default 0.2)")
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-44"), help="seeds, e.g. 42-44 (default)")
    parser.add_argument("--load", type=float, default=1.0, help="offered load, as bench.churn (default 1.0)")
    parser.add_argument("--node-step", type=int, default=10, help="keep every n-th trace node (default 10)")
    parser.add_argument("--pod-step", type=int, default=1, help="keep every n-th trace pod (default 1)")
    parser.add_argument("--quick", action="store_true", help="every 40th node, every 4th pod, first seed (smoke test)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    try:
        unknown = [p for p in policies if p not in POLICIES]
        if unknown or not policies:
            raise ValueError(f"unknown policy {unknown[0] if unknown else ''!r}: choose from {', '.join(POLICIES)}")
        if not 0 <= args.high <= 1:
            raise ValueError("--high must be between 0 and 1")
        nodes = subsample(read_nodes(args.nodes or trace_dir() / NODES_CSV), 40 if args.quick else args.node_step)
        if args.node_step < 1 or args.pod_step < 1:
            raise ValueError("--node-step and --pod-step must be at least 1")
        pods, factor = churn_pods(args.pods or trace_dir() / PODS_CSV, nodes, args.load, 4 if args.quick else args.pod_step)
    except (OSError, TraceError, ValueError) as err:
        print(f"bench.preempt: {err}", file=sys.stderr)
        return 2
    seeds: list[int] = args.seeds[:1] if args.quick else args.seeds
    tasks = [(policy, seed) for policy in policies for seed in seeds]
    print(f"bench.preempt: {len(nodes)} nodes, {sum(n.gpus for n in nodes)} GPUs, {len(pods)} trace pods "
          f"({args.high:.0%} of GPU pods high priority), load {args.load} (arrivals compressed {factor:.0f}x); "
          f"{len(tasks)} runs, {args.jobs} jobs; each run reports when it finishes "
          f"({'about 2 minutes each' if args.quick else 'several minutes each'})", file=sys.stderr, flush=True)
    results: list[PreemptResult] = []
    start = time.perf_counter()

    def progress(result: PreemptResult) -> None:
        results.append(result)
        elapsed = time.perf_counter() - start
        print(f"[{len(results)}/{len(tasks)}] {result.policy:<8} seed {result.seed}: {result.preemptions} preemptions, "
              f"{result.victims} victims, {result.broken_gangs} broken gangs, high p95 "
              f"{percentile(result.high_pending, 95) or 0:.0f} s ({result.elapsed_seconds:.0f} s); elapsed {elapsed:.0f} s",
              file=sys.stderr, flush=True)

    run_pool(tasks, _run, _init, (nodes, pods, args.high), args.jobs, progress, fresh_workers=True)
    by_policy = {name: summary(sorted((r for r in results if r.policy == name), key=lambda r: r.seed))
                 for name in policies}
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    document = {"policies": by_policy, "workload": {"nodes": len(nodes), "gpus": sum(n.gpus for n in nodes),
                                                    "trace_pods": len(pods), "high_share": args.high,
                                                    "load": args.load, "arrival_compression": factor, "seeds": seeds}}
    (out / "results.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    plot(by_policy, out / "preempt.png", f"preemption on the churning trace: {len(pods)} pods, {len(nodes)} nodes, "
                                         f"{args.high:.0%} high priority")
    print(table(by_policy))
    print(f"\nbench.preempt: {len(results)} runs in {time.perf_counter() - start:.0f} s; wrote {out / 'results.json'} "
          f"and {out / 'preempt.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
