"""`python -m bench.replay_live`: the Alibaba trace replayed live, with its lifetimes, Tessera and
kube-scheduler side by side on the same apiserver.

Why: bench.churn replays arrivals and departures through the core on a virtual clock. This runs
the same workload for real: a LocalControlPlane with kwok, the trace's nodes (every 10th by
default: 122 nodes, 626 GPUs) with one ExtendedResource per GPU, and the pods created at their
(compressed) arrival times. kwok runs each bound pod and completes it after its (compressed)
trace lifetime — the `pod-complete.stage.kwok.x-k8s.io/delay` annotation — so GPUs free up and
waiting pods get placed, as in a cluster. Each round is one scheduler from a clean namespace;
rounds alternate (run r goes forward for even r, backward for odd r).

Time: the arrivals are those of bench.churn at the same `--load` (the 34-day observation window
compressed so the offered GPU load is L, ≈5.8 trace hours at 0.8); `--speed` trace seconds pass per
real second (default 60: one trace hour per real minute), so a round takes about six minutes. A
round ends at the end of the arrival window; pods still pending then are reported, not waited for.

The pods each scheduler gets: Tessera the trace's own form (bench.trace_workload: plain
`nvidia.com/gpu`, a class of the allowed GPU models, or a slice of a sharing class over the
devices' `gpu-milli`). kube-scheduler cannot share a GPU or read device objects, so its pods ask
for whole `nvidia.com/gpu` (a sharing pod rounds up to one GPU) and carry their model constraint as
required node affinity on `tessera.dev/gpu-model`: what a cluster without a GPU-aware scheduler
has to do. GPU allocation is the trace's GPU demand of the running pods (a shared pod counts its
slice), time-weighted over the window, as in bench.churn: the same work served, whatever it held.
Both schedulers run with kube-scheduler's default client limits (qps 50, burst 100), leader
election off. Methodology and figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.churn import churn_pods, plot
from bench.live_report import percentile
from bench.churn_run import ChurnPod
from bench.live_cluster import Api, ApiError, PodWatch, delete_pods
from bench.live_procs import (
    Contestant,
    bench_plane,
    compile_tessera_bytecode,
    cpu_seconds,
    control_plane_pids,
    cpu_delta,
    poll_ready,
    rss_mib,
    start_kube_scheduler,
    start_tessera,
)
from bench.trace import NODES_CSV, PODS_CSV, REPO_ROOT, trace_dir
from bench.trace_workload import (
    GPU_RESOURCE,
    MILLI,
    NAMESPACE,
    SCHEDULER_NAME,
    TraceError,
    TraceNode,
    TracePod,
    cluster_objects,
    pod_requests,
    read_nodes,
    subsample,
)
from scheduler.kube.controlplane import LocalControlPlane, find_binaries
from scheduler.kube.controlplane.components import KWOK_NODE_ANNOTATION

DEFAULT_OUT = REPO_ROOT / "bench" / "out" / "replay_live"
SCHEDULERS = ("tessera", "kube-scheduler")
COMPLETE_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
MODEL_LABEL = "tessera.dev/gpu-model"
ROUND_LABEL = "tessera.dev/replay-round"
QPS, BURST = 50.0, 100  # kube-scheduler's default client limits, for both
READY_TIMEOUT = 60.0


def progress(message: str) -> None:
    print(f"[bench.replay_live {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.replay_live", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=Path, help=f"node CSV (default: <trace dir>/{NODES_CSV})")
    p.add_argument("--pods", type=Path, help=f"pod CSV with creation_time/deletion_time (default: {PODS_CSV})")
    p.add_argument("--node-step", type=int, default=10, help="keep every N-th node (default 10: 122 nodes, 626 GPUs)")
    p.add_argument("--pod-step", type=int, default=1, help="keep every N-th pod (default 1: all)")
    p.add_argument("--load", type=float, default=0.8, help="offered GPU load, as bench.churn (default 0.8)")
    p.add_argument("--speed", type=float, default=60.0,
                   help="trace seconds per real second (default 60: one trace hour per minute)")
    p.add_argument("--window-hours", type=float,
                   help="replay only the first H trace hours of the arrival window (default: all of it)")
    p.add_argument("--schedulers", default=",".join(SCHEDULERS), help=f"subset of {','.join(SCHEDULERS)}")
    p.add_argument("--runs", type=int, default=1, help="rounds per scheduler, alternating (default 1)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: every 40th node, every 8th pod, the first trace hour at 600x")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    p.add_argument("--workdir", type=Path, help="control plane and logs here (default: a temp dir, removed)")
    return p


# --- the workload ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """What one round replays: nodes, pods with arrival and lifetime (trace seconds), the window."""

    nodes: list[TraceNode]
    pods: list[ChurnPod]
    window: float  # trace seconds of arrivals replayed
    compression: float  # bench.churn's arrival compression factor
    speed: float

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)


def make_plan(nodes: Sequence[TraceNode], pods_csv: Path, load: float, speed: float, pod_step: int = 1,
              window_hours: float | None = None) -> Plan:
    """bench.churn's workload, cut to the replayed window and sorted by arrival."""
    if speed <= 0:
        raise ValueError("--speed must be positive")
    churn, factor = churn_pods(pods_csv, nodes, load, pod_step)
    end = max(p.arrival for p in churn)
    window = end if window_hours is None else min(end, window_hours * 3600.0)
    if window <= 0:
        raise ValueError("--window-hours must be positive")
    kept = sorted((p for p in churn if p.arrival <= window), key=lambda p: (p.arrival, p.pod.name))
    return Plan(list(nodes), kept, window, factor, speed)


def pod_manifest(churn: ChurnPod, name: str, form: str, speed: float, round_tag: str) -> dict[str, Any]:
    """One trace pod as the given scheduler's users would write it (see the module docstring)."""
    pod = churn.pod
    requests = pod_requests(pod) if form == "tessera" else whole_gpu_requests(pod)
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": requests, "limits": requests}}],
    }
    if form == "kube-scheduler" and pod.gpu_spec and pod.num_gpu:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": list(pod.gpu_spec)}]}]}}}
    lifetime = max(0.001, churn.lifetime / speed)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {ROUND_LABEL: round_tag},
                         "annotations": {COMPLETE_DELAY: f"{lifetime:.3f}s"}},
            "spec": spec}


def whole_gpu_requests(pod: TracePod) -> dict[str, str | int]:
    """kube-scheduler's form: cpu, memory and whole GPUs (a GPU-sharing pod takes one)."""
    requests: dict[str, str | int] = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    if pod.num_gpu:
        requests[GPU_RESOURCE] = pod.num_gpu
    return requests


def with_kwok(obj: dict[str, Any]) -> dict[str, Any]:
    """A trace node kwok manages (its annotation), Ready like a registered kubelet's."""
    if obj.get("kind") != "Node":
        return obj
    meta = obj.setdefault("metadata", {})
    key, value = KWOK_NODE_ANNOTATION
    meta.setdefault("annotations", {})[key] = value
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    obj.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                                  "message": "trace node", "lastHeartbeatTime": now,
                                                  "lastTransitionTime": now}]
    return obj


# --- one round -------------------------------------------------------------------------------


@dataclass
class PodTimes:
    """Driver-clock times of one pod: created (201), bound (nodeName seen), finished (terminal)."""

    index: int
    created: float | None = None
    bound: float | None = None
    finished: float | None = None


def observer(by_name: dict[str, PodTimes]) -> Callable[[dict[str, Any], float], None]:
    """For a PodWatch: note when each of the round's pods is first seen bound and terminal."""

    def observe(pod: dict[str, Any], now: float) -> None:
        times = by_name.get((pod.get("metadata") or {}).get("name", ""))
        if times is None:
            return
        if times.bound is None and (pod.get("spec") or {}).get("nodeName"):
            times.bound = now
        if times.finished is None and (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            times.finished = now

    return observe


@dataclass
class RoundResult:
    scheduler: str
    run: int
    times: list[PodTimes]
    start: float
    end: float
    scheduler_cpu_seconds: float | None
    control_plane_cpu_seconds: dict[str, float | None]
    create_lag_p99_s: float
    relists: int
    extra: dict[str, Any] = field(default_factory=dict)


async def run_round(api: Api, plane: LocalControlPlane, workdir: Path, plan: Plan, scheduler: str, run: int,
                    index: int, pids: dict[str, int | None]) -> RoundResult:
    tag = f"r{index}"
    names = [f"{tag}-{i:05d}" for i in range(len(plan.pods))]
    times = {name: PodTimes(i) for i, name in enumerate(names)}
    watch = PodWatch(api, NAMESPACE, observer(times), selector=f"{ROUND_LABEL}={tag}")
    contestant: Contestant | None = None
    try:
        await watch.start()
        contestant = await asyncio.to_thread(_start, scheduler, plane, workdir, tag)
        cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        assert contestant.ready_url is not None
        try:
            await asyncio.wait_for(poll_ready(contestant.ready_url), READY_TIMEOUT)
        except asyncio.TimeoutError:
            raise RuntimeError(f"{scheduler} not ready after {READY_TIMEOUT:.0f} s: "
                               f"{contestant.process.log_tail(10)}") from None
        start = time.monotonic()
        lags = await _create_on_time(api, plan, names, times, scheduler, start, tag)
        # the window has passed and every pod exists (the last ones arrive at its very end)
        end = max(start + plan.window / plan.speed, max((t.created or start for t in times.values()), default=start))
        await asyncio.sleep(max(0.0, end - time.monotonic()))
        sched_cpu = cpu_seconds(contestant.pid)
        cpu1 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        rss = rss_mib(contestant.pid)
        alive = contestant.running()
    finally:
        if contestant is not None:
            await asyncio.to_thread(contestant.stop, 10.0)
        await watch.stop()
    if watch.failed:
        raise RuntimeError(f"the round's pod watch failed ({watch.failed}); its figures would be incomplete")
    control = {name: cpu_delta(cpu0[name], cpu1[name]) for name in pids}
    extra: dict[str, Any] = {"scheduler_rss_mib": rss, "scheduler_alive_at_end": alive}
    if not alive:
        extra["log_tail"] = contestant.process.log_tail(15)
    return RoundResult(scheduler, run, list(times.values()), start, end, sched_cpu, control,
                       percentile(lags, 99) or 0.0, watch.relists, extra)


def _start(scheduler: str, plane: LocalControlPlane, workdir: Path, tag: str) -> Contestant:
    kubeconfig = plane.kubeconfig
    config = workdir / f"{scheduler}-config.yaml"
    if scheduler == "tessera":
        # the product's built-in configuration, with leader election off as for kube-scheduler
        doc = yaml.safe_load((REPO_ROOT / "scheduler" / "data" / "default-config.yaml").read_text())
    else:
        doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
               "profiles": [{"schedulerName": SCHEDULER_NAME}]}  # kube-scheduler's default plugins
    doc["leaderElection"] = {"leaderElect": False}
    doc["clientConnection"] = {"kubeconfig": str(kubeconfig), "qps": QPS, "burst": BURST}
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    if scheduler == "tessera":
        return start_tessera(workdir, config, kubeconfig, tag)
    binary = plane.binaries.kube_scheduler
    if binary is None:
        raise FileNotFoundError("kube-scheduler binary is not available (run hack/build-control-plane.sh)")
    return start_kube_scheduler(binary, workdir, config, tag)


async def _create_on_time(api: Api, plan: Plan, names: list[str], times: dict[str, PodTimes], form: str,
                          start: float, tag: str, concurrency: int = 32) -> list[float]:
    """POST each pod at its arrival time (bounded concurrency); the lags behind schedule (s)."""
    lags: list[float] = []
    slots = asyncio.Semaphore(concurrency)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    last_report = start

    async def create(i: int, due: float) -> None:
        async with slots:
            body = pod_manifest(plan.pods[i], names[i], form, plan.speed, tag)
            for attempt in range(5):
                try:
                    await api.request("POST", path, body, ok=(201,))
                    break
                except (ApiError, OSError, asyncio.TimeoutError):
                    if attempt == 4:
                        raise
                    await asyncio.sleep(0.2 * (attempt + 1))
            now = time.monotonic()
            times[names[i]].created = now
            lags.append(now - due)

    async with asyncio.TaskGroup() as group:
        for i, churn in enumerate(plan.pods):
            due = start + churn.arrival / plan.speed
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            group.create_task(create(i, due))
            now = time.monotonic()
            if now - last_report >= 30:
                last_report = now
                bound = sum(1 for t in times.values() if t.bound is not None)
                progress(f"  {form}: {i + 1}/{len(plan.pods)} created, {bound} bound, "
                         f"trace hour {(now - start) * plan.speed / 3600:.1f}")
    return lags


# --- figures ---------------------------------------------------------------------------------


def round_figures(result: RoundResult, plan: Plan, samples: int = 400) -> dict[str, Any]:
    """bench.churn's figures from the driver's clock, in trace seconds."""
    speed, start, end = plan.speed, result.start, result.end
    if end <= start:
        raise ValueError("a round's end must come after its start")
    total_milli = plan.gpus * MILLI
    deltas: list[tuple[float, int, int]] = []  # (time, GPU milli change, pending change)
    waits: list[float] = []
    placed = finished = 0
    for t in result.times:
        if t.created is None or t.created > end:
            continue
        milli = plan.pods[t.index].pod.total_gpu_milli
        deltas.append((t.created, 0, 1))
        if t.bound is not None and t.bound <= end:
            bound = max(t.bound, t.created)  # the watch can show the pod before the POST's 201 returns
            placed += 1
            waits.append((bound - t.created) * speed)
            deltas.append((bound, milli, -1))
            if t.finished is not None and t.finished <= end:
                finished += 1
                deltas.append((max(t.finished, bound), -milli, 0))
        else:
            waits.append((end - t.created) * speed)  # still waiting: its wait so far, a lower bound
    deltas.sort()
    area, used, pending, last = 0.0, 0, 0, start
    timeline: list[tuple[float, float, int]] = []
    step = (end - start) / samples
    next_sample = start
    for when, milli, change in deltas + [(end, 0, 0)]:
        while next_sample <= when and next_sample <= end:
            timeline.append(((next_sample - start) * speed, 100.0 * used / total_milli, pending))
            next_sample += step
        area += used * (min(when, end) - last)
        last = min(when, end)
        used += milli
        pending += change
    created = sum(1 for t in result.times if t.created is not None and t.created <= end)
    cpu = result.scheduler_cpu_seconds
    return {
        "scheduler": result.scheduler, "run": result.run,
        "gpu_allocation_pct": round(100.0 * area / (total_milli * (end - start)), 2),
        "pending_p50_s": percentile(waits, 50), "pending_p95_s": percentile(waits, 95),
        "pending_p99_s": percentile(waits, 99),
        "created": created, "placed": placed, "finished": finished, "pending_at_end": created - placed,
        "scheduler_cpu_seconds": None if cpu is None else round(cpu, 2),
        "scheduler_cpu_ms_per_placed_pod": None if cpu is None or not placed else round(1000 * cpu / placed, 2),
        "control_plane_cpu_seconds": result.control_plane_cpu_seconds,
        "create_lag_p99_real_s": round(result.create_lag_p99_s, 3), "watch_relists": result.relists,
        **result.extra, "timeline": timeline,
    }


def summarize(rounds: Sequence[dict[str, Any]], schedulers: Sequence[str]) -> dict[str, dict[str, Any]]:
    keys = ("gpu_allocation_pct", "pending_p50_s", "pending_p95_s", "pending_p99_s", "placed", "pending_at_end",
            "scheduler_cpu_ms_per_placed_pod")
    out: dict[str, dict[str, Any]] = {}
    for name in schedulers:
        mine = [r for r in rounds if r["scheduler"] == name]
        if not mine:
            continue
        median = {k: _median([r[k] for r in mine]) for k in keys}
        out[name] = {"median": median, "runs": len(mine), "timeline": mine[0]["timeline"]}
    return out


def _median(values: list[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def table(summary: dict[str, dict[str, Any]]) -> str:
    def fmt(value: float | None, digits: int = 0) -> str:
        return "–" if value is None else f"{value:,.{digits}f}"

    lines = ["| scheduler | GPU allocation % (time-weighted) | pending p50 / p95 / p99 (trace s) | placed | "
             "pending at end | scheduler CPU ms per placed pod |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, entry in summary.items():
        m = entry["median"]
        lines.append(f"| {name} | {fmt(m['gpu_allocation_pct'], 2)} | {fmt(m['pending_p50_s'])} / "
                     f"{fmt(m['pending_p95_s'])} / {fmt(m['pending_p99_s'])} | {fmt(m['placed'])} | "
                     f"{fmt(m['pending_at_end'])} | {fmt(m['scheduler_cpu_ms_per_placed_pod'], 2)} |")
    return "\n".join(lines)


# --- the run ---------------------------------------------------------------------------------


async def _setup(api: Api, plan: Plan) -> None:
    """The namespace, the trace's classes, nodes (kwok-managed, Ready) and devices."""
    await api.request("POST", "/api/v1/namespaces",
                      {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, ok=(201, 409))
    objects = [with_kwok(o) for o in cluster_objects(plan.nodes, [p.pod for p in plan.pods])]
    slots = asyncio.Semaphore(32)

    async def one(obj: dict[str, Any]) -> None:
        kind = obj["kind"]
        base = {"Node": "/api/v1/nodes", "ExtendedResource": "/apis/tessera.dev/v1alpha1/extendedresources",
                "ResourceClass": "/apis/tessera.dev/v1alpha1/resourceclasses"}[kind]
        status = obj.pop("status", None)
        async with slots:
            await api.request("POST", base, obj, ok=(201, 409))
            if status and kind != "ResourceClass":
                await api.request("PATCH", f"{base}/{obj['metadata']['name']}/status", {"status": status},
                                  content_type="application/merge-patch+json")

    classes = [o for o in objects if o["kind"] == "ResourceClass"]
    await asyncio.gather(*(one(o) for o in classes))
    await asyncio.gather(*(one(o) for o in objects if o["kind"] != "ResourceClass"))


def plan_order(schedulers: Sequence[str], runs: int) -> list[tuple[int, str]]:
    order: list[tuple[int, str]] = []
    for run in range(runs):
        order += [(run, s) for s in (schedulers if run % 2 == 0 else list(reversed(schedulers)))]
    return order


async def _run(plane: LocalControlPlane, workdir: Path, plan: Plan, schedulers: list[str],
               runs: int, save: Callable[[list[dict[str, Any]]], None]) -> list[dict[str, Any]]:
    api = Api(plane.server, str(plane.ca_file), plane.admin_token)
    pids = control_plane_pids(plane)
    rounds: list[dict[str, Any]] = []
    try:
        began = time.monotonic()
        await _setup(api, plan)
        progress(f"{len(plan.nodes)} nodes, {plan.gpus} GPUs ready in {time.monotonic() - began:.1f} s")
        order = plan_order(schedulers, runs)
        for index, (run, scheduler) in enumerate(order):
            progress(f"round {index + 1}/{len(order)}: run {run + 1}, {scheduler}, {len(plan.pods)} pods over "
                     f"{plan.window / plan.speed / 60:.1f} min")
            result = await run_round(api, plane, workdir, plan, scheduler, run, index, pids)
            figures = round_figures(result, plan)
            rounds.append(figures)
            save(rounds)  # a long run keeps what it measured even if a later round fails
            progress(f"  -> {scheduler}: allocation {figures['gpu_allocation_pct']:.2f} %, pending p95 "
                     f"{figures['pending_p95_s'] or 0:.0f} s, placed {figures['placed']}/{figures['created']}, "
                     f"{figures['scheduler_cpu_ms_per_placed_pod']} ms CPU per placed pod")
            deleted = await delete_pods(api, NAMESPACE, timeout=600)
            progress(f"  cleaned up {deleted} pods")
    finally:
        await api.close()
    return rounds


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.node_step, args.pod_step, args.window_hours, args.speed = 40, 8, 1.0, 600.0
    schedulers = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    if not schedulers or set(schedulers) - set(SCHEDULERS):
        print(f"--schedulers takes a subset of {','.join(SCHEDULERS)}", file=sys.stderr)
        return 2
    try:
        if args.node_step < 1 or args.pod_step < 1 or args.runs < 1:
            raise ValueError("--node-step, --pod-step and --runs must be at least 1")
        nodes = subsample(read_nodes(args.nodes or trace_dir() / NODES_CSV), args.node_step)
        plan = make_plan(nodes, args.pods or trace_dir() / PODS_CSV, args.load, args.speed, args.pod_step,
                         args.window_hours)
    except (OSError, TraceError, ValueError) as err:
        print(f"bench.replay_live: {err}", file=sys.stderr)
        return 2
    binaries = find_binaries()
    if binaries.kwok is None or ("kube-scheduler" in schedulers and binaries.kube_scheduler is None):
        print("kwok or kube-scheduler binary not found (run hack/build-control-plane.sh)", file=sys.stderr)
        return 2
    progress(f"{len(plan.nodes)} nodes, {plan.gpus} GPUs, {len(plan.pods)} pods arriving over "
             f"{plan.window / 3600:.1f} trace hours (arrivals compressed {plan.compression:.0f}x to load {args.load}), "
             f"{plan.speed:g} trace s per real s")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()

    def save(rounds: list[dict[str, Any]]) -> None:
        summary = summarize(rounds, schedulers)
        document = {
            "benchmark": "replay_live",
            "workload": {"nodes": len(plan.nodes), "gpus": plan.gpus, "pods": len(plan.pods), "load": args.load,
                         "arrival_compression": plan.compression, "window_trace_hours": plan.window / 3600,
                         "speed": plan.speed, "node_step": args.node_step, "pod_step": args.pod_step,
                         "client_qps": QPS, "client_burst": BURST},
            "machine": {"cpus": os.cpu_count()},
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "wall_seconds": round(time.time() - started, 1),
            "summary": {k: {"median": v["median"], "runs": v["runs"]} for k, v in summary.items()},
            "rounds": rounds,
        }
        (args.out / "results.json").write_text(json.dumps(document, indent=2) + "\n")

    compile_tessera_bytecode()
    with bench_plane(args.workdir, "tessera-replay-live-", binaries, with_kwok=True) as (plane, workdir):
        progress(f"control plane with kwok up in {plane.startup_seconds:.1f} s (in {workdir})")
        rounds = asyncio.run(_run(plane, workdir, plan, schedulers, args.runs, save))
    summary = summarize(rounds, schedulers)
    title = (f"live replay: {len(plan.pods)} pods, {len(plan.nodes)} nodes, load {args.load}, "
             f"{plan.speed:g}x, {args.runs} run(s)")
    plot(summary, args.out / "replay_live.png", title, xlabel="trace hours since the first arrival (first run)")
    print(f"## {title}\n")
    print(table(summary))
    print(f"\nresults: {args.out / 'results.json'}, plot: {args.out / 'replay_live.png'}")
    stuck = [r for r in rounds if not r.get("scheduler_alive_at_end", True)]
    if stuck:
        progress(f"{len(stuck)} round(s) lost their scheduler: " + ", ".join(r["scheduler"] for r in stuck))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
