"""`python -m bench.topology`: distributed-training gangs inside racks, on the Alibaba trace's cluster.

Cluster: the trace's GPU nodes in name order, cut into racks of 8–16 nodes (sizes drawn from
`random.Random(RACK_SEED)`), 8 consecutive racks to a block; rack names r0..r7 repeat in every
block, so a rack is only identified with its block (the TopologyPlacement levels are
block → rack → hostname).

Workload: the trace's pods in FGD's arrival order for the seed (1.3 × GPU capacity, as bench.trace),
with a gang inserted after every `GANG_EVERY`-th pod: 8, 16, 32 or 64 GPUs (drawn from the seed),
as pods of 4 whole GPUs, 8 CPUs and 32 GiB each, all members required. A unit (a pod, or a whole
gang) that cannot be placed is deleted at once, as in bench.trace; nothing ever finishes.

Policies (each a full configuration, the rest the built-in default):
- `no-topology`: the built-in default, gangs are ordinary all-or-nothing transactions;
- `preferred-rack`: gangs annotated `tessera.dev/topology-preferred: <rack label>` (one rack if
  any has room, else one block, else anywhere);
- `required-rack`: `tessera.dev/topology-required: <rack label>` (one rack or not at all).

Reported per policy (median over seeds, min–max): gangs placed of those that arrived, the share
of placed gangs inside one rack, mean racks spanned per placed gang, and the unallocated GPU % at
100 % arrival (FGD's measure, bench.trace's definition, gang GPUs counted with the trace's).
kube-scheduler 1.36's own TopologyAwareWorkloadScheduling is not in this table: it needs the live
apiserver with upstream Workload/PodGroup objects (see bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.pool import run_pool
from bench.trace import NODES_CSV, PODS_CSV, REPO_ROOT, parse_seeds, trace_dir
from bench.trace_metrics import Series, run_metrics
from bench.trace_workload import MILLI, TraceNode, TracePod, arrival_sequence, cluster_objects, pod_object, read_nodes, read_pods
from scheduler.api.config import SchedulerConfig, parse_config
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b

BLOCK, RACK = "bench.tessera.dev/block", "bench.tessera.dev/rack"
RACK_SEED = 2026
RACK_SIZES = (8, 16)
BLOCK_RACKS = 8
GANG_EVERY = 40
GANG_GPUS = (8, 16, 32, 64)
MEMBER_GPUS = 4
POLICIES = ("no-topology", "preferred-rack", "required-rack")
OUT = REPO_ROOT / "bench" / "out" / "topology"


def racks(nodes: Sequence[TraceNode]) -> dict[str, tuple[str, str]]:
    """Node name -> (block, rack): name order, racks of 8–16 nodes, 8 racks per block."""
    rng = random.Random(RACK_SEED)
    out: dict[str, tuple[str, str]] = {}
    ordered = sorted(nodes, key=lambda n: n.name)
    index = rack = 0
    while index < len(ordered):
        size = rng.randint(*RACK_SIZES)
        for node in ordered[index:index + size]:
            out[node.name] = (f"b{rack // BLOCK_RACKS}", f"r{rack % BLOCK_RACKS}")
        index += size
        rack += 1
    return out


def config(policy: str) -> SchedulerConfig:
    """The built-in default, every node scored (as bench.trace), with the rack levels."""
    levels = [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "percentageOfNodesToScore": 100,
           "profiles": [{"schedulerName": "tessera",
                         "pluginConfig": [{"name": "TopologyPlacement", "args": {"levels": levels}}]}]}
    return parse_config(raw, f"bench.topology {policy}")


@dataclass(frozen=True, slots=True)
class Gang:
    name: str
    gpus: int

    @property
    def members(self) -> int:
        return self.gpus // MEMBER_GPUS


Unit = TracePod | Gang


def units(pods: Sequence[TracePod], seed: int, gang_every: int = GANG_EVERY) -> list[Unit]:
    """The pods in order, a gang of 8–64 GPUs (drawn from the seed) after every `gang_every`-th."""
    rng = random.Random(seed * 7919)
    out: list[Unit] = []
    for i, pod in enumerate(pods):
        out.append(pod)
        if (i + 1) % gang_every == 0:
            out.append(Gang(f"gang-{i}", rng.choice(GANG_GPUS)))
    return out


def gang_pods(gang: Gang, policy: str) -> list[dict[str, Any]]:
    annotations = {}
    if policy == "preferred-rack":
        annotations["tessera.dev/topology-preferred"] = RACK
    elif policy == "required-rack":
        annotations["tessera.dev/topology-required"] = RACK
    labels = b.gang_labels(gang.name, gang.members)
    requests: dict[str, str | int] = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": MEMBER_GPUS}
    return [b.pod(f"{gang.name}-{k}", namespace="trace", requests=requests, limits=requests, labels=labels,
                  annotations=annotations) for k in range(gang.members)]


@dataclass(frozen=True, slots=True)
class TopologyRun:
    policy: str
    seed: int
    gangs_arrived: int
    gangs_placed: int
    gangs_in_one_rack: int
    racks_spanned: int  # summed over placed gangs
    unallocated_gpu_pct_at_100: float | None


def run(task: tuple[str, int]) -> TopologyRun:
    policy, seed = task
    nodes, pods = _DATA["nodes"], _DATA["pods"]
    where = racks(nodes)
    total_gpus = sum(n.gpus for n in nodes)
    sequence = units(arrival_sequence(pods, total_gpus, seed), seed)
    scheduler = Scheduler(config(policy), seed=seed)
    for obj in cluster_objects(nodes, pods):
        if obj["kind"] == "Node":
            block, rack = where[obj["metadata"]["name"]]
            obj["metadata"]["labels"].update({BLOCK: block, RACK: rack})
        scheduler.apply("ADDED", obj, 0.0)
    series = Series(total_gpus, [], [])
    gangs = placed_gangs = in_one_rack = spanned = 0
    for unit in sequence:
        objects = gang_pods(unit, policy) if isinstance(unit, Gang) else [pod_object(unit)]
        milli = unit.gpus * MILLI if isinstance(unit, Gang) else unit.total_gpu_milli
        for obj in objects:
            scheduler.apply("ADDED", obj, 0.0)
        nodes_of: dict[str, str] = {}
        while (attempts := scheduler.schedule_next(0.0)) is not None:
            nodes_of.update({a.pod.meta.name: a.node for a in attempts if a.node is not None})
        placed = len(nodes_of) == len(objects)
        series.record(milli, placed)
        if placed:
            if isinstance(unit, Gang):
                placed_gangs += 1
                count = len({where[node] for node in nodes_of.values()})
                spanned += count
                in_one_rack += count == 1
        else:
            for obj in objects:
                scheduler.apply("DELETED", obj, 0.0)
        gangs += isinstance(unit, Gang)
    metrics = run_metrics(series)
    return TopologyRun(policy, seed, gangs, placed_gangs, in_one_rack, spanned, metrics.unallocated_gpu_pct_at_100)


_DATA: dict[str, Any] = {}


def _init(nodes_path: Path, pods_path: Path) -> None:
    _DATA["nodes"] = read_nodes(nodes_path)
    _DATA["pods"] = read_pods(pods_path)


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def table(results: list[TopologyRun]) -> str:
    lines = ["| policy | gangs placed % | placed gangs inside one rack % | racks per placed gang | "
             "unallocated GPU % at 100 % arrival |", "|---|---:|---:|---:|---:|"]
    for policy in POLICIES:
        runs = [r for r in results if r.policy == policy]
        if not runs:
            continue
        placed = [100 * r.gangs_placed / r.gangs_arrived for r in runs if r.gangs_arrived]
        inside = [100 * r.gangs_in_one_rack / r.gangs_placed for r in runs if r.gangs_placed]
        spans = [r.racks_spanned / r.gangs_placed for r in runs if r.gangs_placed]
        unallocated = [r.unallocated_gpu_pct_at_100 for r in runs if r.unallocated_gpu_pct_at_100 is not None]
        lines.append(f"| {policy} | {_spread(placed)} | {_spread(inside)} | {_spread(spans)} | "
                     f"{_spread(unallocated) if unallocated else '-'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.topology", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"), help="42-51 (default)")
    parser.add_argument("--policies", default=",".join(POLICIES), help=f"any of {', '.join(POLICIES)}")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        print(f"bench.topology: unknown policy {', '.join(unknown)}; known: {', '.join(POLICIES)}", file=sys.stderr)
        return 2
    tasks = [(policy, seed) for seed in args.seeds for policy in policies]
    results: list[TopologyRun] = []

    def done(result: TopologyRun) -> None:
        results.append(result)
        print(f"[{len(results)}/{len(tasks)}] {result.policy} seed {result.seed}: {result.gangs_placed}/"
              f"{result.gangs_arrived} gangs placed, {result.gangs_in_one_rack} in one rack, unallocated "
              f"{result.unallocated_gpu_pct_at_100}%", file=sys.stderr, flush=True)

    try:
        directory = trace_dir()
    except FileNotFoundError as err:
        print(f"bench.topology: {err}", file=sys.stderr)
        return 2
    run_pool(tasks, run, _init, (directory / NODES_CSV, directory / PODS_CSV), args.jobs, done)
    results.sort(key=lambda r: (POLICIES.index(r.policy), r.seed))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
