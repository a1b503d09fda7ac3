"""`python -m bench.live`: live scheduling throughput, Tessera side by side with kube-scheduler.

Same apiserver, same machine, same run: a LocalControlPlane (etcd + kube-apiserver, nothing else)
in a temp dir, N fake GPU nodes, and for every round M pods (1 `nvidia.com/gpu` + cpu 100m each)
scheduled by
  (a) Tessera (`python -m scheduler run`),
  (b) the real kube-scheduler of the same Kubernetes version (v1.36.3) with the same
      configuration file (see `bench/live_procs.py`), and
  (c) the raw binder (`bench/live_raw.py`): precomputed Bindings POSTed with bounded concurrency
      and no client rate limit — the ceiling of what the apiserver accepts here.
(a) and (b) run at equal client settings, both at kube-scheduler's defaults (qps 50, burst 100)
and both raised (qps/burst 5000 by default). `--workload` gives the pods the topology-spread or
inter-pod-affinity terms of one of kube-scheduler's scheduler_perf workloads (`live_cluster.WORKLOADS`),
labels the nodes into zones when the terms need them, and checks each round's placements.

Method (why pre-created pods): all M pods are created concurrently *before* the scheduler starts,
so pod creation can never be the bottleneck; then the scheduler process is started and the clock
runs from its start to the last bind seen by the driver's watch. Between rounds the scheduler is
stopped and all pods (and Events) are deleted; the node set stays. Rounds alternate: run r goes
through the (scheduler, settings) list forward for even r and backward for odd r. A warm-up
create/delete cycle runs first so no round pays for cold apiserver caches.

Outputs: `bench/out/live/results.json`, a Markdown table on stdout, `bench/out/live/throughput.png`;
progress on stderr. Every child process is stopped on the way out, also on errors and Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.live_cluster import (
    GPU,
    WORKLOADS,
    ZONE_LABEL,
    Api,
    BindWatch,
    create_pods,
    delete_pods,
    node_use,
    unbound_reasons,
    zone_of,
)
from bench.live_procs import (
    Contestant,
    Profiler,
    bench_plane,
    compile_tessera_bytecode,
    cpu_seconds,
    cpu_times,
    control_plane_pids,
    cpu_delta,
    poll_ready,
    rss_mib,
    scheduler_config,
    start_kube_scheduler,
    start_raw_binder,
    start_tessera,
)
from bench.live_report import (
    BASELINE,
    CEILING,
    SCHEDULERS,
    UNLIMITED,
    cprofile_summary,
    markdown_table,
    plot,
    profile_summary,
    round_metrics,
    summarize,
)
from scheduler.kube.controlplane import LocalControlPlane, find_binaries
from scheduler.kube.controlplane.binaries import K8S_VERSION
from scheduler.kube.controlplane.fakenodes import FakeGpuNodeSpec, create_fake_gpu_nodes

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "bench" / "out" / "live"
NAMESPACE = "tessera-bench-live"
SCHEDULER_NAME = "tessera"  # both schedulers' profile; the pods ask for it
GPU_MODEL = "A100"
DEFAULT_SCHEDULERS = ("tessera", "kube-scheduler", "raw-binder")


@dataclass(frozen=True)
class Settings:
    name: str
    qps: float
    burst: int

    @property
    def label(self) -> str:
        return f"qps {self.qps:g} / burst {self.burst}"


def _seconds(value: float | None) -> str:
    """Seconds as a person reads them: `0.87`, not the float sum `0.8700000000000001`; `–` unknown."""
    return "–" if value is None else f"{value:.2f}"


def round_line(result: Mapping[str, Any]) -> str:
    """The progress line after a round: outcome, throughput, first bind, nodes, CPU seconds."""
    pps = result.get("pods_per_second")
    cpu = "/".join(_seconds(result.get(f"{who}_cpu_seconds")) for who in ("scheduler", "apiserver", "etcd"))
    return (f"  -> {result['outcome']}: {result['bound']}/{result['pods']} bound, "
            f"{'–' if pps is None else f'{pps:.1f}'} pods/s, first bind after "
            f"{_seconds(result.get('first_bind_seconds'))} s, {result['nodes_used']} nodes used, "
            f"CPU s sched/apiserver/etcd {cpu}"
            + "".join(f", {key} {value}" for key, value in (result.get("placement") or {}).items()))


def progress(message: str) -> None:
    print(f"[bench.live {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.live", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=500, help="fake GPU nodes (default 500)")
    p.add_argument("--gpus-per-node", type=int, default=16,
                   help="nvidia.com/gpu per node (default 16: 500 x 16 = 8,000 GPUs for 5,000 one-GPU pods)")
    p.add_argument("--pods", type=int, default=5000, help="pods per round (default 5,000)")
    p.add_argument("--runs", type=int, default=3, help="rounds per (scheduler, settings) (default 3)")
    p.add_argument("--schedulers", default=",".join(DEFAULT_SCHEDULERS),
                   help=f"subset of {','.join(SCHEDULERS)} (default {','.join(DEFAULT_SCHEDULERS)}); "
                        "raw-binder+events also POSTs one Event per pod, as both schedulers do")
    p.add_argument("--settings", default="default,raised", help="client settings: default (qps 50/burst 100), raised")
    p.add_argument("--raised-qps", type=float, default=5000)
    p.add_argument("--raised-burst", type=int, default=5000)
    p.add_argument("--binder-concurrency", type=int, default=64, help="raw binder's Bindings in flight (default 64)")
    p.add_argument("--create-concurrency", type=int, default=64, help="pod creations in flight (default 64)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per round before it counts as failed")
    p.add_argument("--with-devices", action="store_true",
                   help="keep one ExtendedResource per GPU (default: delete them; kube-scheduler does not read them)")
    p.add_argument("--no-warmup", action="store_true", help="skip the unmeasured create/delete cycle")
    p.add_argument("--kwok", action="store_true",
                   help="kwok manages the fake nodes, as in kube-scheduler's own 5,000-node tests: node Leases are "
                        "renewed every 40 s and bound pods become Running (a load both schedulers share)")
    p.add_argument("--profile", nargs="?", const="py-spy", choices=("py-spy", "cprofile"),
                   help="profile Tessera in every Tessera round: py-spy (default; wall-clock samples, collapsed "
                        "stacks) or cprofile (CPU-time attribution, slows Tessera down); files in the output dir")
    p.add_argument("--workload", choices=tuple(WORKLOADS), default="gpu",
                   help="pod shape, after kube-scheduler's scheduler_perf workloads: gpu (default; plain GPU pods, "
                        "SchedulingBasic), spread (DoNotSchedule maxSkew 1 over 10 zones, TopologySpreading), "
                        "spread-soft (ScheduleAnyway, PreferredTopologySpreading), anti-affinity (required, hostname, "
                        "groups of 100 pods, SchedulingPodAntiAffinity), affinity-soft (preferred, hostname, "
                        "SchedulingPreferredPodAffinity); the same pods for every scheduler")
    p.add_argument("--quick", action="store_true", help="smoke test: 50 nodes, 300 pods, 1 run")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    p.add_argument("--workdir", type=Path, help="control plane and logs here (default: a temp dir, removed)")
    p.add_argument("--baseline-tree", type=Path,
                   help=f"another checkout of Tessera (e.g. `git worktree add /tmp/base HEAD~1`) run as the "
                        f"{BASELINE} contestant: a before/after in the same rounds; adds it to --schedulers")
    return p


def plan_rounds(schedulers: Sequence[str], settings: Sequence[Settings], runs: int) -> list[tuple[int, str, Settings | None]]:
    """(run, scheduler, settings) in execution order: ABBA-style alternation over runs."""
    base: list[tuple[str, Settings | None]] = []
    for s in settings:
        base += [(name, s) for name in schedulers if name not in UNLIMITED]
    base += [(name, None) for name in schedulers if name in UNLIMITED]
    order: list[tuple[int, str, Settings | None]] = []
    for run in range(runs):
        seq = base if run % 2 == 0 else list(reversed(base))
        order += [(run, name, s) for name, s in seq]
    return order


class Bench:
    def __init__(self, args: argparse.Namespace, plane: LocalControlPlane, workdir: Path, settings: list[Settings]) -> None:
        self.args = args
        self.plane = plane
        self.workdir = workdir
        self.settings = settings
        self.api: Api | None = None
        self.nodes: list[str] = []
        self.workload = WORKLOADS[args.workload]
        self.zones: dict[str, str] = {}  # node -> zone label, when the workload needs zones
        self.pod_names = self.names("warmup")
        self.running: list[Contestant] = []
        pids = control_plane_pids(plane)
        self.apiserver_pid, self.etcd_pid, self.kwok_pid = pids["apiserver"], pids["etcd"], pids["kwok"]
        self.token_file = workdir / "admin.token"
        self.token_file.write_text(plane.admin_token)
        self.token_file.chmod(0o600)

    def names(self, tag: str) -> list[str]:
        """Pod names of one round: never reused across rounds, so nothing still acting on the last
        round's pods (kwok's queued stage actions, which address pods by name) can touch a new one."""
        return [f"bench-{tag}-{i:05d}" for i in range(self.args.pods)]

    # --- set-up ------------------------------------------------------------------------------
    async def setup(self) -> dict[str, Any]:
        self.api = Api(self.plane.server, str(self.plane.ca_file), self.plane.admin_token)
        await self.api.request("POST", "/api/v1/namespaces",
                               {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                               ok=(201, 409))
        began = time.monotonic()
        zones = self.workload.zones or 1
        for zone in range(zones):
            count = len(range(zone, self.args.nodes, zones))
            labels = {ZONE_LABEL: zone_of(zone, zones)} if self.workload.zones else {}
            if self.args.with_devices:
                made = await asyncio.to_thread(self.plane.add_fake_gpu_nodes, count, self.args.gpus_per_node,
                                               GPU_MODEL, prefix="bench-node", labels=labels, workers=16)
            else:
                made = await self._plain_gpu_nodes(
                    [f"bench-node-{i:03d}" for i in range(zone, self.args.nodes, zones)], labels)
            self.nodes += made
        if self.workload.zones:  # the placement check reads the zones the apiserver holds
            listed, _ = await self.api.list_all("/api/v1/nodes")
            self.zones = {n["metadata"]["name"]: n["metadata"].get("labels", {}).get(ZONE_LABEL, "") for n in listed}
        info: dict[str, Any] = {"nodes_seconds": round(time.monotonic() - began, 1), **self.memory()}
        progress(f"{len(self.nodes)} nodes x {self.args.gpus_per_node} GPUs ready in {info['nodes_seconds']} s")
        if not self.args.no_warmup:
            began = time.monotonic()
            await create_pods(self.api, NAMESPACE, self.pod_names, "bench-warmup", self.args.create_concurrency)
            created = time.monotonic() - began
            await delete_pods(self.api, NAMESPACE)
            info["warmup_create_pods_per_second"] = round(len(self.pod_names) / created, 1)
            progress(f"warm-up: created {len(self.pod_names)} pods at {info['warmup_create_pods_per_second']} pods/s")
        memory = self.memory()
        progress("memory (RSS MiB): " + ", ".join(f"{k.removesuffix('_rss_mib')} {v}" for k, v in memory.items()))
        return info

    def memory(self) -> dict[str, float | None]:
        """RSS of the control plane's processes (MiB): where the node count's limit shows first."""
        pids = {"apiserver": self.apiserver_pid, "etcd": self.etcd_pid, "kwok": self.kwok_pid}
        return {f"{name}_rss_mib": rss_mib(pid) for name, pid in pids.items() if pid is not None}

    async def _plain_gpu_nodes(self, names: list[str], labels: dict[str, str]) -> list[str]:
        """Fake nodes with `nvidia.com/gpu` allocatable but no ExtendedResource objects: a plain
        device-plugin cluster, what kube-scheduler sees too. `add_fake_gpu_nodes` always writes one
        ExtendedResource (two requests) per GPU, 16,000 requests for 500 x 16 GPUs, so the nodes
        are made by the same module with zero devices and their GPU count is patched in."""
        assert self.api is not None
        api, gpus = self.api, str(self.args.gpus_per_node)
        spec = FakeGpuNodeSpec(gpus_per_node=0, gpu_model=GPU_MODEL, labels={"nvidia.com/gpu.count": gpus, **labels})
        await asyncio.to_thread(create_fake_gpu_nodes, self.plane.admin, names, spec, 16)
        patch = {"status": {"capacity": {GPU: gpus}, "allocatable": {GPU: gpus}}}

        async def one(name: str) -> None:
            await api.request("PATCH", f"/api/v1/nodes/{name}/status", patch,
                              content_type="application/merge-patch+json")

        await asyncio.gather(*(one(name) for name in names))
        return names

    # --- one round ---------------------------------------------------------------------------
    async def round(self, run: int, scheduler: str, settings: Settings | None, index: int) -> dict[str, Any]:
        assert self.api is not None
        api = self.api
        tag = f"r{run}-{index:02d}-{scheduler}-{settings.name if settings else 'unlimited'}"
        result: dict[str, Any] = {"run": run, "order": index, "scheduler": scheduler,
                                  "settings": settings.name if settings else "unlimited",
                                  "qps": settings.qps if settings else None,
                                  "burst": settings.burst if settings else None, "pods": len(self.pod_names)}
        await delete_pods(api, NAMESPACE)
        self.pod_names = self.names(f"r{index}")
        watch = BindWatch(api, NAMESPACE, frozenset(self.pod_names))
        await watch.start()
        began = time.monotonic()
        created = await create_pods(api, NAMESPACE, self.pod_names, SCHEDULER_NAME, self.args.create_concurrency,
                                    self.workload)
        result["create_seconds"] = round(time.monotonic() - began, 2)
        contestant = None
        profiler = None
        ready_task = None
        load0 = round(os.getloadavg()[0], 2)  # other work on the machine skews every figure; keep a trace
        cpu0 = (cpu_seconds(self.apiserver_pid), cpu_seconds(self.etcd_pid), _self_cpu(), cpu_seconds(self.kwok_pid))
        start = time.monotonic()
        try:
            contestant = await asyncio.to_thread(self._start, scheduler, settings, tag)
            self.running.append(contestant)
            if self.args.profile == "py-spy" and scheduler == "tessera" and contestant.pid is not None:
                profiler = Profiler(contestant.pid, self.args.out / f"profile-{tag}.txt")
            ready_task = asyncio.create_task(poll_ready(contestant.ready_url)) if contestant.ready_url else None
            outcome = await self._wait(watch, contestant, start)
        finally:
            end = time.monotonic()
            cpu1 = (cpu_seconds(self.apiserver_pid), cpu_seconds(self.etcd_pid), _self_cpu(),
                    cpu_seconds(self.kwok_pid))
            sched_rss = rss_mib(contestant.pid) if contestant is not None else None
            sched_times = cpu_times(contestant.pid) if contestant is not None else None
            sched_cpu = None if sched_times is None else round(sum(sched_times), 2)
            if profiler is not None:
                path = await asyncio.to_thread(profiler.stop)
                if path is not None:
                    result["profile"] = {"file": str(path), **profile_summary(path)}
            if ready_task is not None:
                ready_task.cancel()
                ready = await asyncio.gather(ready_task, return_exceptions=True)
                result["ready_seconds"] = ready[0] - start if isinstance(ready[0], float) else None
            if contestant is not None:
                returncode = contestant.process.returncode()
                await asyncio.to_thread(contestant.stop, 10.0)
                self.running.remove(contestant)
                if returncode not in (None, 0):
                    result["exit_code"] = returncode
            await watch.stop()
            pstats_file = self.args.out / f"cprofile-{tag}.pstats"
            if self.args.profile == "cprofile" and scheduler == "tessera" and pstats_file.is_file():
                result["cprofile"] = {"file": str(pstats_file), **cprofile_summary(pstats_file)}
        result["outcome"] = outcome
        result.update(round_metrics(len(self.pod_names), start, created, watch.bound))
        result["wall_seconds"] = end - start
        result["scheduler_cpu_seconds"] = sched_cpu
        result["scheduler_cpu_user_seconds"] = None if sched_times is None else round(sched_times[0], 2)
        result["scheduler_cpu_sys_seconds"] = None if sched_times is None else round(sched_times[1], 2)
        result["scheduler_cpu_ms_per_pod"] = (None if sched_cpu is None or not watch.bound
                                              else round(1000 * sched_cpu / len(watch.bound), 3))
        result["loadavg_1m"] = {"start": load0, "end": round(os.getloadavg()[0], 2)}
        result["apiserver_cpu_seconds"] = cpu_delta(cpu0[0], cpu1[0])
        result["etcd_cpu_seconds"] = cpu_delta(cpu0[1], cpu1[1])
        result["driver_cpu_seconds"] = cpu_delta(cpu0[2], cpu1[2])
        result["kwok_cpu_seconds"] = cpu_delta(cpu0[3], cpu1[3])
        result["scheduler_rss_mib"] = sched_rss
        result.update(self.memory())
        result["watch_relists"] = watch.relists
        use = await node_use(api, NAMESPACE, self.args.gpus_per_node, self.workload, self.zones)
        result.update({"bound": use.bound, "nodes_used": use.nodes_used, "overcommitted_nodes": use.overcommitted,
                       "placement": use.placement,
                       "all_bound": use.bound == len(self.pod_names) and not use.overcommitted and outcome == "ok"
                       and use.placement["valid"] is not False})
        if contestant is not None and outcome != "ok":
            result["log_tail"] = contestant.process.log_tail(15)
            result["unbound_reasons"] = await unbound_reasons(api, NAMESPACE)
            progress(f"  unbound pods say: {result['unbound_reasons']}")
        return result

    def _start(self, scheduler: str, settings: Settings | None, tag: str) -> Contestant:
        kubeconfig = self.plane.kubeconfig
        if scheduler in UNLIMITED:
            plan = self.workdir / f"raw-plan-{tag}.json"
            bindings = [[pod, self.nodes[i % len(self.nodes)]] for i, pod in enumerate(self.pod_names)]
            plan.write_bytes(orjson.dumps({
                "server": self.plane.server, "ca_file": str(self.plane.ca_file), "token_file": str(self.token_file),
                "namespace": NAMESPACE, "concurrency": self.args.binder_concurrency,
                "events": scheduler != CEILING, "bindings": bindings}))
            return start_raw_binder(self.workdir, plan, tag, scheduler)
        assert settings is not None
        config = scheduler_config(self.workdir / f"config-{settings.name}.yaml", scheduler_name=SCHEDULER_NAME,
                                  kubeconfig=kubeconfig, qps=settings.qps, burst=settings.burst,
                                  scores=(self.workload.score,) if self.workload.score else ())
        if scheduler == "tessera":
            cprofile = self.args.out / f"cprofile-{tag}.pstats" if self.args.profile == "cprofile" else None
            return start_tessera(self.workdir, config, kubeconfig, tag, cprofile)
        if scheduler == BASELINE:
            return start_tessera(self.workdir, config, kubeconfig, tag, tree=self.args.baseline_tree, name=BASELINE)
        binary = self.plane.binaries.kube_scheduler
        if binary is None:
            raise FileNotFoundError("kube-scheduler binary is not available")
        return start_kube_scheduler(binary, self.workdir, config, tag)

    async def _wait(self, watch: BindWatch, contestant: Contestant, start: float) -> str:
        """Until every pod is bound ("ok"), the process died ("exited"), or the round timed out."""
        deadline = start + self.args.timeout
        last_report = start
        while not watch.done.is_set():
            if watch.failed:
                return "watch-failed"
            now = time.monotonic()
            if now > deadline:
                return "timeout"
            if not contestant.running():
                if contestant.name in UNLIMITED and contestant.process.returncode() == 0:
                    # all Bindings accepted; give the watch a moment to see the last ones
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(watch.done.wait(), 10)
                    return "ok" if watch.done.is_set() else "incomplete"
                return "exited"
            if now - last_report >= 10:
                last_report = now
                progress(f"  {contestant.name}: {len(watch.bound)}/{len(watch.expected)} bound after {now - start:.0f} s")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(watch.done.wait(), 0.25)
        return "ok"

    async def close(self) -> None:
        for contestant in list(self.running):
            await asyncio.to_thread(contestant.stop, 5.0)
        self.running.clear()
        if self.api is not None:
            await self.api.close()


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _run(args: argparse.Namespace, plane: LocalControlPlane, workdir: Path,
               settings: list[Settings], schedulers: list[str]) -> dict[str, Any]:
    bench = Bench(args, plane, workdir, settings)
    rounds: list[dict[str, Any]] = []
    try:
        setup = await bench.setup()
        order = plan_rounds(schedulers, settings, args.runs)
        for index, (run, scheduler, s) in enumerate(order):
            label = s.label if s else "no rate limit"
            progress(f"round {index + 1}/{len(order)}: run {run + 1}, {scheduler}, {label}")
            result = await bench.round(run, scheduler, s, index)
            rounds.append(result)
            progress(round_line(result))
            if "cprofile" in result and result["cprofile"].get("landmarks"):
                prof = result["cprofile"]
                marks = ", ".join(f"{m['what']} {m['pct']}%" for m in prof["landmarks"] if m["pct"] >= 1)
                progress(f"  cProfile: {_seconds(prof['cpu_seconds'])} CPU s; {marks}")
            if "profile" in result and result["profile"].get("samples"):
                prof = result["profile"]
                top = ", ".join(f"{e['function']} {e['pct']}%" for e in prof["self"][:5])
                progress(f"  profile: idle {prof['idle_pct']}%; top self: {top}")
    finally:
        await bench.close()
    return {"setup": setup, "rounds": rounds}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.nodes, args.pods, args.runs = 50, 300, 1
    schedulers = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    if args.baseline_tree is not None:
        if not (args.baseline_tree / "scheduler" / "__main__.py").is_file():
            print(f"--baseline-tree {args.baseline_tree}: not a Tessera checkout (no scheduler/__main__.py)",
                  file=sys.stderr)
            return 2
        args.baseline_tree = args.baseline_tree.resolve()
        if BASELINE not in schedulers:
            schedulers.insert(schedulers.index("tessera") + 1 if "tessera" in schedulers else 0, BASELINE)
    elif BASELINE in schedulers:
        print(f"{BASELINE} runs the checkout given with --baseline-tree", file=sys.stderr)
        return 2
    unknown = sorted(set(schedulers) - set(SCHEDULERS))
    known_settings = {"default": Settings("default", 50, 100),
                      "raised": Settings("raised", args.raised_qps, args.raised_burst)}
    settings_names = [s.strip() for s in args.settings.split(",") if s.strip()]
    if unknown or not schedulers:
        print(f"unknown scheduler(s) {unknown}; choose from {', '.join(SCHEDULERS)}", file=sys.stderr)
        return 2
    if not settings_names or any(s not in known_settings for s in settings_names):
        print(f"--settings takes a subset of {', '.join(known_settings)}", file=sys.stderr)
        return 2
    workload = WORKLOADS[args.workload]
    if workload.group and args.nodes < workload.group:
        print(f"--workload {workload.name}: groups of {workload.group} pods need as many nodes", file=sys.stderr)
        return 2
    if args.pods > args.nodes * args.gpus_per_node:
        print(f"{args.pods} one-GPU pods do not fit on {args.nodes} x {args.gpus_per_node} GPUs", file=sys.stderr)
        return 2
    settings = [known_settings[s] for s in settings_names]
    binaries = find_binaries()
    if "kube-scheduler" in schedulers and binaries.kube_scheduler is None:
        print("kube-scheduler binary not found (run hack/build-control-plane.sh)", file=sys.stderr)
        return 2

    if args.kwok and binaries.kwok is None:
        print("kwok binary not found (run hack/build-control-plane.sh)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    progress("starting the control plane")
    compile_tessera_bytecode()
    if args.baseline_tree is not None:
        compile_tessera_bytecode(args.baseline_tree)
    with bench_plane(args.workdir, "tessera-bench-live-", binaries, with_controller_manager=False,
                     with_kwok=args.kwok) as (plane, workdir):
        progress(f"control plane up in {plane.startup_seconds:.1f} s at {plane.server} (in {workdir})")
        data = asyncio.run(_run(args, plane, workdir, settings, schedulers))

    labels = {s.name: s.label for s in settings}
    summary = summarize(data["rounds"], [s.name for s in settings])
    results = {
        "benchmark": "live",
        "config": {
            "nodes": args.nodes, "gpus_per_node": args.gpus_per_node, "pods": args.pods, "runs": args.runs,
            "schedulers": schedulers, "settings": {s.name: {"qps": s.qps, "burst": s.burst} for s in settings},
            "binder_concurrency": args.binder_concurrency, "create_concurrency": args.create_concurrency,
            "create_mode": "before-scheduler-start", "with_devices": args.with_devices, "kwok": args.kwok,
            "scheduler_name": SCHEDULER_NAME, "scoring": "NodeResourcesFit MostAllocated cpu/memory/nvidia.com/gpu 1/1/1",
            "workload": {"name": workload.name, "upstream": workload.upstream, "zones": workload.zones,
                         "score": workload.score, "group": workload.group},
            "kubernetes_version": K8S_VERSION, "timeout_seconds": args.timeout, "quick": args.quick,
        },
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_seconds": round(time.time() - started, 1),
        "setup": data["setup"],
        "summary": summary,
        "rounds": data["rounds"],
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    title = (f"Live throughput ({workload.name}): {args.pods} pods, {args.nodes} nodes x {args.gpus_per_node} GPUs, "
             f"{args.runs} run(s), {os.cpu_count()} CPUs, k8s {K8S_VERSION}")
    plot(summary, labels, args.out / "throughput.png", title)
    print(f"## {title}\n")
    print(markdown_table(summary, labels))
    print(f"\nresults: {args.out / 'results.json'}, plot: {args.out / 'throughput.png'}")
    failed = [r for r in data["rounds"] if not r.get("all_bound")]
    if failed:
        progress(f"{len(failed)} round(s) did not bind every pod: "
                 + ", ".join(f"run {r['run'] + 1} {r['scheduler']}/{r['settings']} ({r['outcome']})" for r in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
