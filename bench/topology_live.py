"""`python -m bench.topology_live`: Tessera and kube-scheduler 1.36 place the same rack-bound gangs.

Both read the same upstream objects: each gang is a Workload API PodGroup
(`scheduling.k8s.io/v1alpha2`, `schedulingPolicy.gang.minCount` = its size,
`schedulingConstraints.topology: [{key: <rack label>}]`) and its pods join it with
`spec.schedulingGroup.podGroupName`; kube-scheduler runs its own GangScheduling and
TopologyAwareWorkloadScheduling (alpha gates on, see scheduler/kube/controlplane/components.py).

Cluster: the first `--nodes` GPU nodes of the Alibaba trace (8-GPU ones), in racks of 8–16 nodes as
bench.topology (rack label values unique per rack: kube-scheduler identifies a domain by the value
alone). Workload: bench.topology's units for the seed — the trace's whole-GPU pods without a model
constraint (kube-scheduler has no device classes) in FGD's arrival order, a gang of 8–64 GPUs
after every `--gang-every`-th pod (10) — cut at `--load` × the sample's GPUs. Units go in one at a time;
a unit counts as placed once every pod is bound, as refused once the scheduler says so
(PodScheduled=False, or PodGroupScheduled=False for a gang) or after `UNIT_TIMEOUT` s; refused
units are deleted. The two schedulers take turns on the same nodes (everything deleted between).
Nothing runs the pods (no kubelet): this measures placement only.

Reported per scheduler: gangs placed, unallocated GPU % at 100 % arrival, final allocation,
wall time. Output: a table on stdout and `bench/out/topology-live/results.json`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.live_procs import bench_plane, start_tessera
from bench.topology import MEMBER_GPUS, RACK, Gang, Unit, racks, units
from bench.trace import NODES_CSV, PODS_CSV, REPO_ROOT, parse_seeds, trace_dir
from bench.trace_metrics import Series, run_metrics
from bench.trace_workload import MILLI, TracePod, arrival_sequence, read_nodes, read_pods
from scheduler.kube.controlplane import find_binaries
from scheduler.kube.controlplane.rest import RestClient
from scheduler.sim import builders as b

OUT = REPO_ROOT / "bench" / "out" / "topology-live"
UNIT_TIMEOUT = 20.0
POLL = 0.05
PODGROUPS = "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups"
PODS = "/api/v1/namespaces/{ns}/pods"


@dataclass(frozen=True, slots=True)
class LiveRun:
    scheduler: str
    seed: int
    units: int
    gangs_arrived: int
    gangs_placed: int
    timeouts: int
    unallocated_gpu_pct_at_100: float | None
    final_allocation_pct: float
    seconds: float
    refused: tuple[int, ...] = ()  # indices of the units it refused


def workload(nodes_gpus: int, pods: Sequence[TracePod], seed: int, load: float, gang_every: int) -> list[Unit]:
    whole = [p for p in pods if p.num_gpu and p.gpu_milli == MILLI and not p.gpu_spec]
    out: list[Unit] = []
    total = 0
    for unit in units(arrival_sequence(whole, nodes_gpus, seed), seed, gang_every):
        total += unit.gpus * MILLI if isinstance(unit, Gang) else unit.total_gpu_milli
        if total > load * nodes_gpus * MILLI:
            break
        out.append(unit)
    return out


def _objects(unit: Unit, index: int, scheduler: str, namespace: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    requests: dict[str, str | int]
    if isinstance(unit, Gang):
        name = f"g{index}"
        group = b.workload_podgroup(name, unit.members, namespace, topology_key=RACK)
        group["metadata"].pop("uid")
        requests = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": MEMBER_GPUS}
        pods = [b.pod(f"{name}-{k}", namespace=namespace, scheduler=scheduler, requests=requests, limits=requests,
                      spec_extra={"schedulingGroup": {"podGroupName": name}, "terminationGracePeriodSeconds": 0})
                for k in range(unit.members)]
    else:
        group = None
        requests = {"cpu": f"{unit.cpu_milli}m", "memory": f"{unit.memory_mib}Mi", "nvidia.com/gpu": unit.num_gpu}
        pods = [b.pod(f"p{index}", namespace=namespace, scheduler=scheduler, requests=requests, limits=requests,
                      spec_extra={"terminationGracePeriodSeconds": 0})]
    for pod in pods:
        pod["metadata"].pop("uid")
        pod.pop("status")
    return group, pods


def _settled(api: RestClient, namespace: str, names: list[str], group: str | None) -> bool | None:
    """True: all bound; False: refused; None: not yet."""
    items = api.get(PODS.format(ns=namespace))["items"]
    mine = [p for p in items if p["metadata"]["name"] in names]
    if len(mine) == len(names) and all(p["spec"].get("nodeName") for p in mine):
        return True
    if group is not None:
        status = api.get(f"{PODGROUPS.format(ns=namespace)}/{group}").get("status", {})
        if any(c["type"] == "PodGroupScheduled" and c["status"] == "False" and "sibling" not in c.get("message", "")
               for c in status.get("conditions", [])):
            return False
        return None
    for pod in mine:
        if any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
               for c in pod["status"].get("conditions", [])):
            return False
    return None


def run_scheduler(api: RestClient, scheduler: str, seed: int, work: list[Unit], total_gpus: int) -> LiveRun:
    namespace = f"bench-{scheduler}-{seed}"
    api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                ok=(201, 409))
    series = Series(total_gpus, [], [])
    gangs = placed_gangs = timeouts = 0
    refused: list[int] = []
    start = time.monotonic()
    for index, unit in enumerate(work):
        group, pods = _objects(unit, index, scheduler, namespace)
        if group is not None:
            api.create(PODGROUPS.format(ns=namespace), group)
        for pod in pods:
            api.create(PODS.format(ns=namespace), pod)
        names = [p["metadata"]["name"] for p in pods]
        deadline = time.monotonic() + UNIT_TIMEOUT
        while (outcome := _settled(api, namespace, names, group["metadata"]["name"] if group else None)) is None:
            if time.monotonic() > deadline:
                timeouts += 1
                outcome = False
                break
            time.sleep(POLL)
        milli = unit.gpus * MILLI if isinstance(unit, Gang) else unit.total_gpu_milli
        gangs += isinstance(unit, Gang)
        series.record(milli, outcome)
        if outcome:
            placed_gangs += isinstance(unit, Gang)
        else:
            refused.append(index)
            for name in names:
                api.request("DELETE", f"{PODS.format(ns=namespace)}/{name}?gracePeriodSeconds=0", ok=(200, 404))
            if group is not None:
                api.delete(f"{PODGROUPS.format(ns=namespace)}/{group['metadata']['name']}")
        if index % 20 == 0:
            print(f"  {scheduler}: {index + 1}/{len(work)} units, {placed_gangs}/{gangs} gangs placed",
                  file=sys.stderr, flush=True)
    seconds = time.monotonic() - start
    api.request("DELETE", f"{PODS.format(ns=namespace)}?gracePeriodSeconds=0", ok=(200,))
    deadline = time.monotonic() + 60
    while api.get(PODS.format(ns=namespace))["items"] and time.monotonic() < deadline:
        time.sleep(0.2)
    metrics = run_metrics(series)
    return LiveRun(scheduler, seed, len(work), gangs, placed_gangs, timeouts, metrics.unallocated_gpu_pct_at_100,
                   metrics.final_allocation_pct, seconds, tuple(refused))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.topology_live", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64, help="8-GPU trace nodes in the sample (default 64)")
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-46"), help="42-46 (default)")
    parser.add_argument("--load", type=float, default=1.3, help="arriving GPUs as a multiple of the sample's (1.3)")
    parser.add_argument("--gang-every", type=int, default=10, help="a gang after every N-th pod (default 10)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the control plane and logs here")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    try:
        directory = trace_dir()
    except FileNotFoundError as err:
        print(f"bench.topology_live: {err}", file=sys.stderr)
        return 2
    nodes = [n for n in read_nodes(directory / NODES_CSV) if n.gpus == 8][: args.nodes]
    where = racks(nodes)
    total_gpus = sum(n.gpus for n in nodes)
    pods = read_pods(directory / PODS_CSV)
    works = {seed: workload(total_gpus, pods, seed, args.load, args.gang_every) for seed in args.seeds}
    print(f"bench.topology_live: {len(nodes)} nodes in {len(set(where.values()))} racks; seeds "
          f"{', '.join(map(str, args.seeds))}: {', '.join(str(len(w)) for w in works.values())} units "
          f"({', '.join(str(sum(isinstance(u, Gang) for u in w)) for w in works.values())} gangs)",
          file=sys.stderr, flush=True)
    results: list[LiveRun] = []
    with bench_plane(args.workdir, "tessera-topology-", find_binaries(build=False), with_kube_scheduler=True) as (plane, path):
        api = plane.admin
        for node in nodes:
            block, rack = where[node.name]
            obj = b.node(node.name, cpu=f"{node.cpu_milli}m", memory=f"{node.memory_mib}Mi", gpus=node.gpus,
                         labels={RACK: f"{block}-{rack}"})
            status = obj.pop("status")
            obj["metadata"].pop("uid")
            api.create("/api/v1/nodes", obj)
            api.merge_patch(f"/api/v1/nodes/{node.name}/status", {"status": status})
        config = path / "tessera.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"kubeconfig": str(plane.kubeconfig), "qps": 200, "burst": 400},
            "profiles": [{"schedulerName": "tessera", "pluginConfig": [
                {"name": "TopologyPlacement", "args": {"levels": [{"nodeLabel": RACK}]}}]}]}))
        tessera = start_tessera(path, config, plane.kubeconfig, "topology")
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not _ready(tessera.ready_url):
                time.sleep(0.2)
            for seed, work in works.items():  # the two take turns on the same nodes, seed by seed
                for scheduler in ("default-scheduler", "tessera"):
                    results.append(run_scheduler(api, scheduler, seed, work, total_gpus))
        finally:
            tessera.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
    print(table(results))
    return 0


def table(results: list[LiveRun]) -> str:
    """Per scheduler: medians over seeds (min–max)."""
    lines = ["| scheduler | gangs placed % | unallocated GPU % at 100 % arrival | final allocation % | "
             "units refused by timeout | seeds |", "|---|---:|---:|---:|---:|---:|"]
    for scheduler in ("default-scheduler", "tessera"):
        runs = [r for r in results if r.scheduler == scheduler]
        if not runs:
            continue
        placed = [100 * r.gangs_placed / r.gangs_arrived for r in runs if r.gangs_arrived]
        unallocated = [r.unallocated_gpu_pct_at_100 for r in runs if r.unallocated_gpu_pct_at_100 is not None]
        final = [r.final_allocation_pct for r in runs]
        lines.append(f"| {scheduler} | {_spread(placed)} | {_spread(unallocated)} | {_spread(final)} | "
                     f"{sum(r.timeouts for r in runs)} | {len(runs)} |")
    return "\n".join(lines)


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})" if values else "-"


def _ready(url: str | None) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url or "", timeout=1) as response:  # noqa: S310 - loopback readiness probe
            return bool(response.status == 200)
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
