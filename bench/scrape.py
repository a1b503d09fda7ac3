"""`python -m bench.scrape`: what one /metrics scrape costs the scheduler's event loop.

Every scrape runs the live scrape hook (`StateGauges`, `Metrics.on_scrape`) on the loop's event
loop, between two steps of the core: while it runs, nothing is scheduled. This measures one
scrape (`generate_latest` of the registry, the hook included) on `bench.core`'s synthetic
clusters (N nodes x 8 GPUs with bound pods, some pending pods placed and the rest left waiting),
with this checkout's `scheduler` and, side by side, another checkout's (`--baseline-tree`, e.g.
`git worktree add --detach /tmp/scrape-base ce4d380^`, the per-device classification before the
view's states). Each (tree, size, run) is its own process, the trees alternating (ABBA), so both
see the same machine; reported are the medians of the scrapes and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

OUT = Path(__file__).resolve().parent / "out" / "scrape"
HERE = "current"
BASELINE = "baseline"


def measure(nodes: int, pending: int, placed: int, scrapes: int, seed: int) -> dict[str, Any]:
    """In this process: build the cluster, place `placed` of the pending pods, time `scrapes` scrapes."""
    from prometheus_client import generate_latest

    import scheduler
    from bench.core import build_events
    from scheduler.api.config import load_config
    from scheduler.core.scheduler import Scheduler
    from scheduler.kube.metrics import Metrics
    from scheduler.kube.run_cli import StateGauges

    cluster, pods = build_events(nodes, pending, 4, seed)
    core = Scheduler(load_config(None), seed=seed)
    for event in cluster + pods:
        core.apply(event["type"], event["object"], 0.0)
    decided = 0
    while decided < placed and (attempts := core.schedule_next(0.0)) is not None:
        decided += len(attempts)
    # the loop's parts the hook reads besides the core: nothing in flight, no fence pending, no
    # other Tessera's writes, no informers
    loop = SimpleNamespace(core=core, binder=SimpleNamespace(in_flight=0), fence_pending=0,
                           conflicting=SimpleNamespace(writes={}),
                           informers=SimpleNamespace(stats=dict, informers=[]))
    metrics = Metrics()
    metrics.on_scrape(StateGauges(loop, metrics))  # type: ignore[arg-type]
    generate_latest(metrics.registry)  # warm-up
    seconds = []
    for _ in range(scrapes):
        start = time.perf_counter()
        generate_latest(metrics.registry)
        seconds.append(time.perf_counter() - start)
    return {"tree": str(Path(scheduler.__file__).parent.parent), "nodes": nodes, "gpus": nodes * 8, "pending": len(core.state.pending), "decided": decided,
            "scrape_seconds": seconds, "median_seconds": statistics.median(seconds)}


def _child(tree: Path, args: argparse.Namespace, nodes: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.scrape", "--child", str(tree), "--sizes", str(nodes),
               "--pending", str(args.pending), "--placed", str(args.placed), "--scrapes", str(args.scrapes),
               "--seed", str(args.seed)]
    done = subprocess.run(command, capture_output=True, check=False, cwd=Path(__file__).resolve().parent.parent)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr.decode()}")
    result: dict[str, Any] = orjson.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scrape", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="500,5000", help="node counts, comma-separated (default 500,5000)")
    p.add_argument("--pending", type=int, default=2000, help="pending pods fed to the core (default 2000)")
    p.add_argument("--placed", type=int, default=1000, help="of those, decisions taken before scraping (default 1000)")
    p.add_argument("--runs", type=int, default=3, help="processes per tree and size (default 3)")
    p.add_argument("--scrapes", type=int, default=5, help="timed scrapes per process (default 5)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--baseline-tree", type=Path, help="another checkout of Tessera, measured side by side")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.child is not None:  # its `scheduler` package first, before anything imports one
        sys.path.insert(0, str(args.child.resolve()))
        sys.stdout.buffer.write(orjson.dumps(measure(sizes[0], args.pending, args.placed, args.scrapes, args.seed)))
        return 0
    here = Path(__file__).resolve().parent.parent
    trees = {HERE: here}
    if args.baseline_tree is not None:
        if not (args.baseline_tree / "scheduler" / "__main__.py").is_file():
            print(f"--baseline-tree {args.baseline_tree}: not a Tessera checkout", file=sys.stderr)
            return 2
        trees[BASELINE] = args.baseline_tree.resolve()
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for nodes in sizes:
        for run in range(args.runs):
            order = list(trees) if run % 2 == 0 else list(reversed(trees))  # ABBA
            for name in order:
                result = _child(trees[name], args, nodes)
                results.setdefault(str(nodes), {}).setdefault(name, []).append(result)
                print(f"{nodes} nodes, run {run + 1}/{args.runs}, {name}: "
                      f"{result['median_seconds'] * 1000:.1f} ms per scrape", file=sys.stderr, flush=True)
    summary: dict[str, dict[str, Any]] = {}
    lines = ["| nodes | GPUs | pending | " + " | ".join(f"{name} ms/scrape" for name in trees)
             + (" | current / baseline |" if BASELINE in trees else " |"),
             "|---:|---:|---:|" + "---:|" * len(trees) + ("---:|" if BASELINE in trees else "")]
    for size, by_tree in results.items():
        medians = {name: statistics.median(r["median_seconds"] for r in runs) for name, runs in by_tree.items()}
        ratio = medians[HERE] / medians[BASELINE] if BASELINE in medians else None
        summary[size] = {"median_seconds": medians, "ratio": ratio, "runs": by_tree}
        first = by_tree[HERE][0]
        lines.append(f"| {size} | {first['gpus']} | {first['pending']} | "
                     + " | ".join(f"{medians[name] * 1000:.1f}" for name in trees)
                     + (f" | {ratio:.2f}x |" if ratio is not None else " |"))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_bytes(orjson.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                     "trees": {k: str(v) for k, v in trees.items()},
                                                     "sizes": summary}, option=orjson.OPT_INDENT_2))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
