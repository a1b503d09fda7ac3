"""`python -m bench.churn`: the Alibaba trace with its lifetimes — pods arrive, wait, run and leave.

Why: bench.trace measures packing the way the FGD paper does (nothing ever leaves, a pod that does
not fit is dropped). A real cluster churns: jobs finish, their GPUs are reused, and a pod that does
not fit waits. This replays the trace's `creation_time`/`deletion_time` through the same core
(`bench/churn_run.py`) and reports, per policy: time-weighted GPU allocation, pending time
p50/p95/p99 (virtual seconds), pods never placed, and the makespan.

Time: the trace is the pods alive in a 34-day observation window (no pod leaves before its start,
the earliest deletion_time; 95 % are created inside it). A pod created before the window was
already running: it arrives at time 0 with the rest of its lifetime.
Load: on its own 1,213 nodes the trace is almost idle (at most 66 GPUs busy at once), so replayed
as recorded nothing ever waits. The replay keeps every 10th node (`--node-step`), and `--load L`
compresses the arrival times (lifetimes unchanged) so that the offered load — the GPU demand inside
the compressed arrival window, were every pod to run from its arrival, over the window's GPU
capacity — is L (default 1.0: demand equals capacity on average; a few pods run for months, so
without the window they would count for nearly all the work).
Methodology and figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.churn_run import ChurnPod, ChurnResult, replay
from bench.live_report import percentile
from bench.pool import run_pool
from bench.trace import NODES_CSV, PODS_CSV, REPO_ROOT, add_config_option, config_policies, parse_seeds, trace_dir
from bench.trace_policies import BY_NAME, config_for, from_file
from bench.trace_workload import MILLI, TraceError, TraceNode, read_lifetimes, read_nodes, read_pods, subsample
from scheduler.api.config import ConfigError

DEFAULT_OUT = REPO_ROOT / "bench" / "out" / "churn"
DEFAULT_POLICIES = "tessera-default,least-allocated,most-allocated"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.churn", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=Path, help=f"node CSV (default: <trace dir>/{NODES_CSV})")
    parser.add_argument("--pods", type=Path, help=f"pod CSV with creation_time/deletion_time (default: {PODS_CSV})")
    parser.add_argument("--policies", help=f"comma-separated (default {DEFAULT_POLICIES}, or none with --config)")
    add_config_option(parser)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-44"),
                        help="scheduler tie-break and same-time arrival order seeds (default 42-44)")
    parser.add_argument("--load", type=float, default=0.8,
                        help="offered GPU load the arrivals are compressed to (default 0.8; see above)")
    parser.add_argument("--node-step", type=int, default=10,
                        help="keep every N-th node of the trace (default 10: 122 nodes, 626 GPUs; see above)")
    parser.add_argument("--quick", action="store_true", help="every 40th node, every 4th pod, first seed (smoke test)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    return parser


def churn_pods(pods_csv: Path, nodes: Sequence[TraceNode], load: float, step: int = 1) -> tuple[list[ChurnPod], float]:
    """The trace's pods with arrivals compressed to the offered `load`; also the compression factor."""
    pods = subsample(read_pods(pods_csv), step)
    lifetimes = read_lifetimes(pods_csv)
    missing = [p.name for p in pods if p.name not in lifetimes]
    if missing:
        raise TraceError(f"{pods_csv}: no creation_time/deletion_time for {missing[0]}")
    # The trace is the pods alive in an observation window: nothing leaves before its start (the
    # earliest deletion_time); a pod created earlier was already running then and arrives at 0.
    start = min(lifetimes[p.name][1] for p in pods)
    span = max(lifetimes[p.name][0] for p in pods) - start
    capacity = sum(n.gpus for n in nodes)
    if span <= 0:
        raise TraceError(f"{pods_csv}: the pods' creation_time and deletion_time columns give no time to spread the "
                         f"arrivals over: no pod is created after the earliest deletion_time ({start})")
    if load <= 0 or capacity <= 0 or not any(p.total_gpu_milli for p in pods):
        raise TraceError("the trace has no GPU work spread over time (or --load is not positive)")
    shapes = [(p.total_gpu_milli / MILLI, max(0, lifetimes[p.name][0] - start),
               lifetimes[p.name][1] - max(lifetimes[p.name][0], start)) for p in pods]

    def offered(factor: float) -> float:
        # GPU demand inside the compressed arrival window (every pod running from its arrival,
        # capacity ignored) over the window's GPU capacity: increasing in the factor
        window = span / factor
        return float(sum(g * min(life, window - at / factor) for g, at, life in shapes)) / (capacity * window)

    low, high = 1e-6, 1e9
    if offered(high) < load:
        raise TraceError(f"the trace cannot offer load {load} on {capacity} GPUs at any compression")
    for _ in range(200):  # bisection on a log scale
        middle = (low * high) ** 0.5
        low, high = (middle, high) if offered(middle) < load else (low, middle)
    factor = high
    churn = [ChurnPod(p, at / factor, float(life)) for p, (_, at, life) in zip(pods, shapes, strict=True)]
    return churn, factor


_WORKER: dict[str, Any] = {}


def _init(nodes: list[TraceNode], pods: list[ChurnPod], files: dict[str, Path]) -> None:
    """`files`: the --config policies by name (workers are spawned: they rebuild them from the path)."""
    _WORKER.update(nodes=nodes, pods=pods, files={name: from_file(path) for name, path in files.items()})


def _run(task: tuple[str, int]) -> ChurnResult:
    name, seed = task
    policy = _WORKER["files"].get(name) or BY_NAME[name]
    return replay(name, config_for(policy), seed, _WORKER["nodes"], _WORKER["pods"])


def summary(results: Sequence[ChurnResult]) -> dict[str, Any]:
    def med(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return statistics.median(present) if present else None

    runs = [{"seed": r.seed, "placed": r.placed, "never_placed": r.never_placed,
             "gpu_allocation_pct": round(r.gpu_allocation_pct, 2),
             "pending_p50_s": percentile(r.pending_seconds, 50), "pending_p95_s": percentile(r.pending_seconds, 95),
             "pending_p99_s": percentile(r.pending_seconds, 99), "makespan_s": r.makespan,
             "elapsed_seconds": round(r.elapsed_seconds, 2), "cpu_seconds": round(r.cpu_seconds, 2)}
            for r in results]
    keys = ("gpu_allocation_pct", "pending_p50_s", "pending_p95_s", "pending_p99_s", "never_placed", "makespan_s",
            "cpu_seconds")
    return {"median": {k: med([run[k] for run in runs]) for k in keys}, "runs": runs,
            "timeline": results[0].timeline if results else []}


def table(by_policy: dict[str, dict[str, Any]]) -> str:
    lines = ["| policy | GPU allocation % (time-weighted) | pending p50 / p95 / p99 (s) | never placed | makespan (h) | CPU s |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]

    def fmt(value: float | None, digits: int = 0) -> str:
        return "–" if value is None else f"{value:,.{digits}f}"

    for name, entry in by_policy.items():
        m = entry["median"]
        lines.append(f"| {name} | {fmt(m['gpu_allocation_pct'], 2)} | {fmt(m['pending_p50_s'])} / "
                     f"{fmt(m['pending_p95_s'])} / {fmt(m['pending_p99_s'])} | {fmt(m['never_placed'])} | "
                     f"{fmt(m['makespan_s'] / 3600 if m['makespan_s'] is not None else None, 1)} | "
                     f"{fmt(m['cpu_seconds'], 1)} |")
    return "\n".join(lines)


def plot(by_policy: dict[str, dict[str, Any]], path: Path, title: str,
         xlabel: str = "virtual hours since the first arrival (first seed)") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), dpi=120, sharex=True)
    for i, (name, entry) in enumerate(by_policy.items()):
        timeline = entry["timeline"]
        hours = [t / 3600 for t, _, _ in timeline]
        top.plot(hours, [a for _, a, _ in timeline], label=name, color=f"C{i}", linewidth=1.3)
        bottom.plot(hours, [p for _, _, p in timeline], label=name, color=f"C{i}", linewidth=1.3)
    top.set_ylabel("allocated GPUs (% of capacity)")
    bottom.set_ylabel("pending pods")
    bottom.set_xlabel(xlabel)
    top.set_title(title)
    for ax in (top, bottom):
        ax.grid(linestyle="-.", alpha=0.5)
    top.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        chosen = config_policies(args.policies if args.policies or args.config else DEFAULT_POLICIES, args.config)
        policies = [p.name for p in chosen]
        nodes = read_nodes(args.nodes or trace_dir() / NODES_CSV)
        if args.node_step < 1:
            raise ValueError("--node-step must be at least 1")
        nodes = subsample(nodes, 40 if args.quick else args.node_step)
        pods, factor = churn_pods(args.pods or trace_dir() / PODS_CSV, nodes, args.load, 4 if args.quick else 1)
    except (OSError, TraceError, ValueError, ConfigError) as err:
        print(f"bench.churn: {err}", file=sys.stderr)
        return 2
    seeds: list[int] = args.seeds[:1] if args.quick else args.seeds
    print(f"bench.churn: {len(nodes)} nodes, {sum(n.gpus for n in nodes)} GPUs, {len(pods)} pods, arrivals "
          f"compressed {factor:.0f}x to offered load {args.load}; {len(policies)} policies x {len(seeds)} seeds, "
          f"{args.jobs} jobs", file=sys.stderr, flush=True)
    tasks = [(name, seed) for name in policies for seed in seeds]
    results: list[ChurnResult] = []
    start = time.perf_counter()

    def progress(result: ChurnResult) -> None:
        results.append(result)
        elapsed = time.perf_counter() - start
        print(f"[{len(results)}/{len(tasks)}] {result.policy:<16} seed {result.seed}: allocation "
              f"{result.gpu_allocation_pct:.2f} %, pending p95 {percentile(result.pending_seconds, 95) or 0:.0f} s, "
              f"never placed {result.never_placed} ({result.elapsed_seconds:.1f} s); elapsed {elapsed:.0f} s, "
              f"~{elapsed / len(results) * (len(tasks) - len(results)):.0f} s left", file=sys.stderr, flush=True)

    run_pool(tasks, _run, _init, (nodes, pods, {p.name: p.path for p in chosen if p.path is not None}), args.jobs,
             progress)
    by_policy = {name: summary(sorted((r for r in results if r.policy == name), key=lambda r: r.seed))
                 for name in policies}
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    document = {"policies": by_policy, "workload": {"nodes": len(nodes), "gpus": sum(n.gpus for n in nodes),
                                                    "pods": len(pods), "load": args.load,
                                                    "arrival_compression": factor, "seeds": seeds}}
    (out / "results.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    plot(by_policy, out / "churn.png", f"churn replay: {len(pods)} pods, {len(nodes)} nodes, offered load {args.load}")
    print(table(by_policy))
    print(f"\nbench.churn: {len(results)} runs in {time.perf_counter() - start:.0f} s; wrote {out / 'results.json'} "
          f"and {out / 'churn.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
