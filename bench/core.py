"""`python -m bench.core`: how fast the scheduling core decides, from 500 to 5,000 GPU nodes.

Synthetic clusters of N nodes x 8 GPUs (one ExtendedResource per GPU, two GPU models, a class per
model and a shared class) already carry load — bound pods with plain GPU requests and with device
annotations, so the ledger is rebuilt from annotations as after a restart — and then 10,000+
pending pods arrive: CPU-only, 1/2/4/8-GPU, class and shared requests, and gangs of 4. Everything
goes through `Scheduler.apply` as watch events and `Scheduler.schedule_next`, exactly what the live
loop runs. Each size runs in its own process so its peak RSS is its own.

`--case topology` instead times gang decisions under a topology (issue 15's cost goal): N nodes
in racks of 16 and blocks of 8 racks (block → rack → hostname levels), the same existing load,
then gangs of 64 pods × 4 GPUs with a preferred rack (no rack holds one, so each climbs to a
block) and gangs with a required block; reported: ms per gang decision (median, max) and whether
each gang landed inside one block.

`--case gang --gang N[,N...]` times one scheduler-plugins gang (a PodGroup CRD) whose N members
arrive one by one, each followed by the cycles it causes (every earlier member is retried on a
sibling's arrival, so that its reason shows the current count): once with minMember above N (here
5N/3, never complete: "300 under minMember 500") and once with minMember = N (it completes at the
last arrival), on ceil(N/8) nodes x 8 GPUs, one GPU per member. Timed two ways: through the core as
the live loop drives it (`Scheduler.apply` per arrival, then `schedule_next` until nothing is left
to try; placements not bound back) and through `tessera simulate` (`run_simulation` on the same
events as a JSONL file, output discarded: binds back, and its end table asks `never_fits_told`).
Reported: seconds per run (median of --runs), attempts.

Reported per size: decisions/s (scheduling attempts per second of cycle time), p50/p99 cycle
time, microseconds per decision (to see how cost grows with nodes) and peak RSS. Output:
`bench/out/core/results.json`, a Markdown table on stdout and `bench/out/core/cycle_time.png`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b

MODELS = ("A100", "V100")
OUT = Path(__file__).resolve().parent / "out" / "core"


def _device(node: str, index: int, model: str) -> dict[str, Any]:
    dev = b.device(node, index, model=model, memory="40Gi")
    dev["spec"]["capacity"]["gpu-milli"] = "1000"
    return dev


def _pending_pod(rng: random.Random, i: int) -> list[dict[str, Any]]:
    roll = rng.random()
    cpu = {"cpu": f"{rng.choice([1, 2, 4, 8])}", "memory": f"{rng.choice([4, 8, 16, 32])}Gi"}
    if roll < 0.05:  # a gang of 4 one-GPU workers
        labels = b.gang_labels(f"gang-{i}", 4)
        return [b.pod(f"gang-{i}-{k}", labels=labels, requests=cpu, limits={"nvidia.com/gpu": 1}) for k in range(4)]
    if roll < 0.30:
        return [b.pod(f"cpu-{i}", requests=cpu)]
    if roll < 0.60:
        return [b.pod(f"gpu1-{i}", requests=cpu, limits={"nvidia.com/gpu": 1})]
    if roll < 0.70:
        return [b.pod(f"gpu{n}-{i}", requests=cpu, limits={"nvidia.com/gpu": n}) for n in [rng.choice([2, 4, 8])]]
    if roll < 0.85:
        model = rng.choice(MODELS).lower()
        return [b.pod(f"class-{i}", requests=cpu, limits={f"class.tessera.dev/{model}": rng.choice([1, 1, 2])})]
    return [b.pod(f"shared-{i}", requests=cpu, limits={"class.tessera.dev/shared": rng.choice([250, 500])})]


def build_events(nodes: int, pending: int, bound_per_node: int, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(cluster events incl. existing load, pending pod events)."""
    rng = random.Random(seed)
    cluster: list[dict[str, Any]] = []
    for model in MODELS:
        cluster.append(b.event("ADDED", b.resource_class(model.lower(), match_labels={"model": model})))
    cluster.append(b.event("ADDED", b.resource_class("shared", sharing={"dimension": "gpu-milli", "unit": "1"})))
    for n in range(nodes):
        name = f"node-{n:05d}"
        model = MODELS[n % 2]
        cluster.append(b.event("ADDED", b.node(name, cpu="96", memory="768Gi", gpus=8, labels={"gpu-model": model})))
        devices = [_device(name, g, model) for g in range(8)]
        cluster += [b.event("ADDED", d) for d in devices]
        for k in range(bound_per_node):
            if k == 0:  # one pod per node holds a device through its annotation
                d = devices[0]
                grant = ann.DeviceGrant(d["spec"]["deviceID"], d["metadata"]["name"], None)
                value = ann.encode_devices({"main": {f"class.tessera.dev/{model.lower()}": (grant,)}})
                pod = b.pod(f"load-{n}-{k}", node_name=name, phase="Running", requests={"cpu": "2", "memory": "8Gi"},
                            limits={f"class.tessera.dev/{model.lower()}": 1}, annotations={ann.DEVICES: value})
            elif k < 3:
                pod = b.pod(f"load-{n}-{k}", node_name=name, phase="Running", requests={"cpu": "2", "memory": "8Gi"},
                            limits={"nvidia.com/gpu": 1})
            else:
                pod = b.pod(f"load-{n}-{k}", node_name=name, phase="Running", scheduler="default-scheduler",
                            requests={"cpu": "500m", "memory": "1Gi"})
            cluster.append(b.event("ADDED", pod))
    pods: list[dict[str, Any]] = []
    i = 0
    while len(pods) < pending:
        pods += [b.event("ADDED", p) for p in _pending_pod(rng, i)]
        i += 1
    return cluster, pods


def run_size(nodes: int, pending: int, bound_per_node: int, seed: int) -> dict[str, Any]:
    cluster, pods = build_events(nodes, pending, bound_per_node, seed)
    scheduler = Scheduler(load_config(None), seed=seed)
    start = time.perf_counter()
    for event in cluster:
        scheduler.apply(event["type"], event["object"], 0.0)
    load_seconds = time.perf_counter() - start
    for event in pods:
        scheduler.apply(event["type"], event["object"], 0.0)
    cycle_times: list[float] = []
    decisions = placed = 0
    clock = time.perf_counter
    begin = clock()
    while True:
        t0 = clock()
        attempts = scheduler.schedule_next(0.0)
        if attempts is None:
            break
        cycle_times.append(clock() - t0)
        decisions += len(attempts)
        placed += sum(1 for a in attempts if a.node is not None)
    busy = sum(cycle_times)
    cycle_times.sort()
    return {
        "nodes": nodes,
        "gpus": nodes * 8,
        "pods_total": sum(1 for event in cluster if event["object"]["kind"] == "Pod") + len(pods),  # bound + pending
        "pending_pods": len(pods),
        "decisions": decisions,
        "placed": placed,
        "decisions_per_second": decisions / busy if busy else 0.0,
        "wall_seconds": clock() - begin,
        "us_per_decision": 1e6 * busy / decisions if decisions else 0.0,
        "cycle_p50_ms": 1000 * cycle_times[len(cycle_times) // 2],
        "cycle_p99_ms": 1000 * cycle_times[int(len(cycle_times) * 0.99)],
        "load_events_per_second": len(cluster) / load_seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


BLOCK_LABEL, RACK_LABEL = "bench.tessera.dev/block", "bench.tessera.dev/rack"
RACK_NODES, BLOCK_RACKS = 16, 8


def topology_config() -> Any:
    """The default configuration with block → rack → hostname levels."""
    from scheduler.api.config import parse_config

    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "tessera", "pluginConfig": [{"name": "TopologyPlacement", "args": {
               "levels": [{"nodeLabel": BLOCK_LABEL}, {"nodeLabel": RACK_LABEL},
                          {"nodeLabel": "kubernetes.io/hostname"}]}}]}]}
    return parse_config(raw, "bench.core --case topology")


def run_topology(nodes: int, gangs: int, bound_per_node: int, seed: int) -> dict[str, Any]:
    """Gang decisions of 64 pods x 4 GPUs on `nodes` nodes in 3 topology levels."""
    cluster, _ = build_events(nodes, 0, bound_per_node, seed)
    for event in cluster:
        obj = event["object"]
        if obj["kind"] == "Node":
            n = int(obj["metadata"]["name"].split("-")[1])
            rack = n // RACK_NODES
            obj["metadata"]["labels"].update({BLOCK_LABEL: f"b{rack // BLOCK_RACKS}", RACK_LABEL: f"r{rack % BLOCK_RACKS}"})
    scheduler = Scheduler(topology_config(), seed=seed)
    for event in cluster:
        scheduler.apply(event["type"], event["object"], 0.0)
    # warm-up: the first cycle builds the node table's columns, whatever the pod (not a gang cost)
    scheduler.apply("ADDED", b.pod("warm-up", requests={"cpu": "1"}), 0.0)
    scheduler.schedule_next(0.0)
    times: list[float] = []
    inside = 0
    for g in range(gangs):
        key = "tessera.dev/topology-preferred" if g % 2 == 0 else "tessera.dev/topology-required"
        value = RACK_LABEL if g % 2 == 0 else BLOCK_LABEL
        labels = b.gang_labels(f"topo-{g}", 64)
        for k in range(64):
            pod = b.pod(f"topo-{g}-{k}", labels=labels, annotations={key: value},
                        requests={"cpu": "4", "memory": "16Gi"}, limits={"nvidia.com/gpu": 4})
            scheduler.apply("ADDED", pod, 0.0)
        start = time.perf_counter()
        attempts = scheduler.schedule_next(0.0)
        times.append(time.perf_counter() - start)
        assert attempts is not None and len(attempts) == 64
        placed = [a.node for a in attempts if a.node is not None]
        blocks = {int(node.split("-")[1]) // (RACK_NODES * BLOCK_RACKS) for node in placed}
        inside += len(placed) == 64 and len(blocks) == 1
    times.sort()
    return {"nodes": nodes, "gangs": gangs, "gangs_inside_one_block": inside,
            "gang_ms_p50": 1000 * times[len(times) // 2], "gang_ms_max": 1000 * times[-1],
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def gang_events(members: int, min_member: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(nodes and the PodGroup, the members' ADDED events in arrival order) for `--case gang`."""
    cluster = [b.event("ADDED", b.node(f"node-{n:04d}", cpu="96", memory="768Gi", gpus=8))
               for n in range(-(-members // 8))]
    cluster.append(b.event("ADDED", b.podgroup("big", min_member)))
    labels = {"scheduling.x-k8s.io/pod-group": "big"}
    pods = [b.event("ADDED", b.pod(f"big-{k:05d}", labels=labels, requests={"cpu": "1", "memory": "4Gi"},
                                   limits={"nvidia.com/gpu": 1})) for k in range(members)]
    return cluster, pods


def run_gang(members: int, min_member: int, way: str) -> dict[str, Any]:
    """One run of `--case gang`: `way` is "core" (apply + schedule_next) or "simulate"."""
    cluster, pods = gang_events(members, min_member)
    attempts = placed = 0
    if way == "core":
        scheduler = Scheduler(load_config(None), seed=0)
        for event in cluster:
            scheduler.apply(event["type"], event["object"], 0.0)
        start = time.perf_counter()
        for event in pods:
            scheduler.apply(event["type"], event["object"], 0.0)
            while (found := scheduler.schedule_next(0.0)) is not None:
                attempts += len(found)
                placed += sum(1 for a in found if a.node is not None)
        seconds = time.perf_counter() - start
    else:
        from scheduler.sim.report import run_simulation

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "gang.jsonl"
            path.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in cluster + pods))
            saved = os.dup(1), os.dup(2)
            sink = os.open(os.devnull, os.O_WRONLY)
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(sink, 1)
            os.dup2(sink, 2)
            try:
                start = time.perf_counter()
                run_simulation(str(path), load_config(None), explain=False, output="json", seed=0)
                sys.stdout.flush()
                seconds = time.perf_counter() - start
            finally:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                for fd in (*saved, sink):
                    os.close(fd)
    return {"members": members, "min_member": min_member, "way": way, "seconds": seconds,
            "attempts": attempts, "placed": placed}


def _gang_worker(args: tuple[int, int, str]) -> dict[str, Any]:
    return run_gang(*args)


def _main_gang(sizes: list[int], runs: int, out: Path) -> int:
    cases = [(n, m) for n in sizes for m in (n * 5 // 3, n)]
    jobs = [(n, m, way) for n, m in cases for way in ("core", "simulate") for _ in range(runs)]
    results: dict[str, list[dict[str, Any]]] = {}
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        for i, result in enumerate(pool.imap(_gang_worker, jobs), start=1):
            results.setdefault(f"{result['members']}/{result['min_member']}/{result['way']}", []).append(result)
            print(f"[{i}/{len(jobs)}] {result['members']} members, minMember {result['min_member']}, "
                  f"{result['way']}: {result['seconds']:.2f} s", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gang.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print("| members | minMember | core s (median) | core attempts | simulate s (median) |")
    print("|---:|---:|---:|---:|---:|")
    for n, m in cases:
        core, sim = results[f"{n}/{m}/core"], results[f"{n}/{m}/simulate"]
        print(f"| {n} | {m} | {statistics.median(r['seconds'] for r in core):.2f} | {core[0]['attempts']} | "
              f"{statistics.median(r['seconds'] for r in sim):.2f} |")
    return 0


def _worker(args: tuple[int, int, int, int]) -> dict[str, Any]:
    return run_size(*args)


def _topology_worker(args: tuple[int, int, int, int]) -> dict[str, Any]:
    return run_topology(*args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.core", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,1000,5000", help="node counts (default 500,1000,5000)")
    parser.add_argument("--pending", type=int, default=10_000, help="pending pods per size (default 10000)")
    parser.add_argument("--bound-per-node", type=int, default=8,
                        help="existing pods per node (default 8: 5,000 nodes carry 40,000 + 10,000 pending = 50,000 pods)")
    parser.add_argument("--runs", type=int, default=3, help="runs per size; medians are reported (default 3)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--case", choices=("mix", "topology", "gang"), default="mix",
                        help="mix: the pending-pod mix (default); topology: 64-pod gang decisions in 3 levels; "
                             "gang: one gang's members arriving one by one (--gang)")
    parser.add_argument("--gang", default="150,300", help="--case gang: member counts (default 150,300)")
    args = parser.parse_args(argv)
    if args.case == "gang":
        return _main_gang([int(n) for n in args.gang.split(",")], args.runs, args.out)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.case == "topology":
        return _main_topology(sizes, args.runs, args.bound_per_node, args.out)
    jobs = [(n, args.pending, args.bound_per_node, 1000 + r) for n in sizes for r in range(args.runs)]
    results: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1, maxtasksperchild=1) as pool:  # one at a time: timing is not shared with a neighbour
        for i, result in enumerate(pool.imap(_worker, jobs), start=1):
            results[result["nodes"]].append(result)
            print(f"[{i}/{len(jobs)}] {result['nodes']} nodes: {result['decisions_per_second']:.0f} decisions/s, "
                  f"p99 {result['cycle_p99_ms']:.2f} ms, RSS {result['peak_rss_mib']:.0f} MiB", file=sys.stderr)
    summary = {str(n): _median(runs) for n, runs in results.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_bytes(orjson.dumps({"sizes": summary, "runs": results}, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    print(_table(summary))
    _plot(summary, args.out / "cycle_time.png")
    return 0


def _main_topology(sizes: list[int], runs: int, bound_per_node: int, out: Path) -> int:
    jobs = [(n, 10, bound_per_node, 1000 + r) for n in sizes for r in range(runs)]
    results: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        for i, result in enumerate(pool.imap(_topology_worker, jobs), start=1):
            results[result["nodes"]].append(result)
            print(f"[{i}/{len(jobs)}] {result['nodes']} nodes: gang decision p50 {result['gang_ms_p50']:.1f} ms, "
                  f"max {result['gang_ms_max']:.1f} ms, {result['gangs_inside_one_block']}/{result['gangs']} "
                  "inside one block", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    (out / "topology.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    print("| nodes | gang decision ms p50 (median of runs) | max ms (max of runs) | gangs inside one block |")
    print("|---:|---:|---:|---:|")
    for n, found in results.items():
        print(f"| {n} | {statistics.median(r['gang_ms_p50'] for r in found):.1f} | "
              f"{max(r['gang_ms_max'] for r in found):.1f} | "
              f"{sum(r['gangs_inside_one_block'] for r in found)}/{sum(r['gangs'] for r in found)} |")
    return 0


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float))]
    out: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k in keys}
    out["decisions_per_second_min"] = min(r["decisions_per_second"] for r in runs)
    out["decisions_per_second_max"] = max(r["decisions_per_second"] for r in runs)
    out["runs"] = len(runs)
    return out


def _table(summary: dict[str, dict[str, Any]]) -> str:
    base = summary[min(summary, key=int)]
    lines = ["| nodes | pods (bound + pending) | decisions/s (min-max) | µs/decision (× smallest) | p50 cycle ms | p99 cycle ms | peak RSS MiB |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sorted(summary, key=int):
        s = summary[n]
        growth = s["us_per_decision"] / base["us_per_decision"] if base["us_per_decision"] else 0
        lines.append(f"| {n} | {s['pods_total']:.0f} | {s['decisions_per_second']:.0f} "
                     f"({s['decisions_per_second_min']:.0f}-{s['decisions_per_second_max']:.0f}) | "
                     f"{s['us_per_decision']:.0f} (×{growth:.2f}) | {s['cycle_p50_ms']:.2f} | {s['cycle_p99_ms']:.2f} | "
                     f"{s['peak_rss_mib']:.0f} |")
    return "\n".join(lines)


def _plot(summary: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(summary, key=int)
    x = [int(n) for n in sizes]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(x, [summary[n]["decisions_per_second"] for n in sizes], marker="o")
    left.axhline(1000, color="grey", linestyle="--", label="goal 1,000/s")
    left.set(xlabel="nodes (x 8 GPUs)", ylabel="decisions / s", title="Core throughput")
    left.legend()
    right.plot(x, [summary[n]["cycle_p50_ms"] for n in sizes], marker="o", label="p50")
    right.plot(x, [summary[n]["cycle_p99_ms"] for n in sizes], marker="o", label="p99")
    right.set(xlabel="nodes (x 8 GPUs)", ylabel="cycle time (ms)", title="Cycle time")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
