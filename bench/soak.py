"""`python -m bench.soak --minutes 10 [--seed N]`: randomized fault schedules against Tessera.

Why a soak next to the CI scenarios (tests/e2e/test_faults.py): each CI scenario breaks one thing
at a chosen moment; real outages overlap and land at unlucky times. Here every run draws its own
schedule — which faults, when, for how long, one replica or two — from a seeded RNG, so a run that
finds a violation can be replayed with the same seed.

Each run, on a LocalControlPlane this script starts itself in a temp dir (loopback only): a fresh
cluster of fake GPU nodes and classes and a fresh namespace; Tessera replicas as subprocesses
behind the fault proxy; 2-3 waves of mixed pods (plain, class, shared, CPU-heavy, label and
PodGroup gangs, one gang that can never fit) at priority 0, and one urgent wave (whole-node pods at
priority 1000, for two thirds of the V100 nodes) that lands only by preempting them, so that
evictions, nominations and the preemptor's Binding meet the faults too; 2-5 faults drawn from

    proxy:   watch cuts, all-connection cuts, 410 storms, Binding failures (500 before/after
             forwarding, hangs), delays, connection resets
    process: kill -9 of a replica (a new one is started), kill of the leader, a partition of the
             leader (its own proxy resets everything it sends for a while)
    cluster: apiserver restart (etcd keeps its data), node deletion, ExtendedResource deletion,
             ResourceClass edits

then faults stop, the run waits for every pod that fits to be bound (a pod gone to preemption is
no longer expected; an urgent pod must be bound when the apiserver's state has room for it) and
checks the invariants (tessera_testing.invariants): a preemption must never leave a GPU to two
pods (a victim still counts until it is gone) nor a gang below its minimum. Bounded: no new run
starts when the time budget cannot fit it, and each run's convergence wait is capped.

Output: a table on stdout (per run and totals: runs, faults injected per type, pods scheduled,
violations per invariant) and `bench/out/soak/results.json`; the Tessera logs of runs with
violations are copied to `bench/out/soak/logs/`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from scheduler.kube.controlplane import LocalControlPlane
from tessera_testing.faultrun import FaultRun, RunReport
from tessera_testing.faultproxy import NO_FAULTS, FaultProxyThread, Faults
from tessera_testing.invariants import INVARIANTS

OUT = Path(__file__).resolve().parent / "out" / "soak"

PROXY_FAULTS = ("watch_cuts", "cut_all", "gone_storm", "bind_failures", "delays", "resets")
PROCESS_FAULTS = ("kill9", "leader_kill", "partition")
CLUSTER_FAULTS = ("apiserver_restart", "node_delete", "device_delete", "class_edit")
ALL_FAULTS = PROXY_FAULTS + PROCESS_FAULTS + CLUSTER_FAULTS
HA_ONLY = ("leader_kill", "partition")


@dataclass(frozen=True)
class Step:
    at: float  # seconds after the run's scheduler is ready
    kind: str
    duration: float = 0.0  # proxy faults and partitions
    faults: Faults = NO_FAULTS


@dataclass
class RunPlan:
    seed: int
    replicas: int
    waves: list[float]  # submission times
    agent_delay: tuple[float, float]  # a slow node agent keeps allocation gates closed longer
    steps: list[Step] = field(default_factory=list)
    urgent: float | None = None  # when the urgent (preempting) wave arrives

    def describe(self) -> str:
        parts = [(s.at, f"{s.kind}@{s.at:.0f}s") for s in self.steps]
        if self.urgent is not None:
            parts.append((self.urgent, f"urgent@{self.urgent:.0f}s"))
        return ", ".join(text for _, text in sorted(parts))


def _proxy_faults(kind: str, rng: random.Random) -> Faults:
    if kind == "watch_cuts":
        return Faults(cut_every=rng.uniform(1.0, 3.0), cut_watches_only=True)
    if kind == "cut_all":
        return Faults(cut_every=rng.uniform(1.5, 4.0), cut_watches_only=False)
    if kind == "gone_storm":
        return Faults(watch_gone=rng.uniform(0.4, 0.8), cut_every=rng.uniform(0.8, 2.0), cut_watches_only=True)
    if kind == "bind_failures":
        return Faults(bind_fail_before=rng.uniform(0.05, 0.15), bind_fail_after=rng.uniform(0.05, 0.15),
                      bind_hang_after=rng.uniform(0.0, 0.05), hang_seconds=rng.uniform(1.0, 4.0))
    if kind == "delays":
        return Faults(delay_request=rng.uniform(0.2, 0.6), delay_response=rng.uniform(0.1, 0.4),
                      delay_seconds=(0.05, rng.uniform(0.3, 1.5)))
    if kind == "resets":
        return Faults(reset=rng.uniform(0.03, 0.15))
    raise ValueError(kind)


def plan_run(seed: int, seconds: float, exclude: frozenset[str]) -> RunPlan:
    """A random schedule: when the waves arrive, which faults hit, when and for how long."""
    rng = random.Random(seed)
    replicas = rng.choice((1, 1, 2))
    waves = sorted([0.0] + [rng.uniform(2, seconds * 0.6) for _ in range(rng.choice((1, 1, 2)))])
    agent_delay = rng.choice(((0.05, 0.3), (0.05, 0.3), (1.0, 2.5)))
    kinds = [k for k in ALL_FAULTS if k not in exclude and (replicas > 1 or k not in HA_ONLY)]
    steps = []
    for _ in range(rng.randint(2, 5)):
        kind = rng.choice(kinds)
        at = rng.uniform(0.5, seconds * 0.75)
        duration = rng.uniform(3, 10) if kind in PROXY_FAULTS or kind == "partition" else 0.0
        steps.append(Step(at, kind, duration, _proxy_faults(kind, rng) if kind in PROXY_FAULTS else NO_FAULTS))
    urgent = rng.uniform(max(waves) + 1, seconds * 0.8)  # drawn last: the rest of a seed's schedule is as before
    return RunPlan(seed, replicas, waves, agent_delay, sorted(steps, key=lambda s: s.at), urgent)


def combine(active: list[Faults]) -> Faults:
    """Overlapping proxy faults: the strongest of each setting."""
    if not active:
        return NO_FAULTS
    values: dict[str, Any] = {}
    for f in dataclasses.fields(Faults):
        items = [getattr(a, f.name) for a in active]
        if f.name in ("cut_every", "pod_deletes_before_failing"):  # None: off; the smallest is the strongest
            present = [x for x in items if x is not None]
            values[f.name] = min(present) if present else None
        elif f.name == "cut_watches_only":
            values[f.name] = all(a.cut_watches_only for a in active if a.cut_every is not None)
        elif f.name == "delay_seconds":
            values[f.name] = (min(x[0] for x in items), max(x[1] for x in items))
        else:
            values[f.name] = max(items)
    return Faults(**values)


class Executor:
    """Plays one plan against one FaultRun."""

    def __init__(self, run: FaultRun, plan: RunPlan) -> None:
        self.run = run
        self.plan = plan
        self.rng = random.Random(plan.seed * 7919 + 1)
        self.active: dict[int, Faults] = {}
        self.wave_index = 0
        self.churned = 0
        self.errors: list[str] = []

    def _apply_proxy(self) -> None:
        self.run.proxy.configure(combine(list(self.active.values())))

    async def play(self, seconds: float) -> None:
        start = time.monotonic()
        actions: list[tuple[float, Callable[[], Awaitable[None]]]] = []
        for at in self.plan.waves:
            actions.append((at, self._wave))
        for i, step in enumerate(self.plan.steps):
            actions.append((step.at, self._make(i, step)))
        if self.plan.urgent is not None:
            actions.append((self.plan.urgent, self._urgent))
        tasks = [asyncio.create_task(self._guard(lambda: self._churn(start + seconds * 0.85)))]
        for at, action in sorted(actions, key=lambda a: a[0]):
            delay = start + at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(self._guard(action)))
        await asyncio.gather(*tasks)
        left = start + seconds - time.monotonic()
        if left > 0:
            await asyncio.sleep(left)
        self.active.clear()
        self._apply_proxy()
        await self._ensure_replica()

    async def _guard(self, action: Callable[[], Awaitable[None]]) -> None:
        try:
            await action()
        except Exception as err:  # a harness hiccup must not end the soak; it is reported
            self.errors.append(f"{type(err).__name__}: {err}")

    async def _wave(self) -> None:
        tag = "abc"[self.wave_index % 3] + str(self.wave_index // 3 or "")
        self.wave_index += 1
        # Paced, so that pods keep arriving while faults come and go.
        await self.run.submit(self.run.wave(tag, impossible_gang=self.wave_index == 1),
                              pause=self.rng.uniform(0.05, 0.3))

    async def _urgent(self) -> None:
        """Whole-node pods of a higher priority for two thirds of the V100 nodes: the waves are
        spread over the nodes by then, so most of these land only by preempting."""
        await self.run.submit_urgent("u", max(2, len(self.run.cluster.v100_nodes) * 2 // 3))

    async def _churn(self, until: float) -> None:
        """Workload churn: every few seconds a bound single pod finishes (is deleted) and a new
        one of a random kind arrives, so there is scheduling to disturb during the whole run."""
        kinds = ("plain", "exclusive", "big", "shared", "cpu_heavy")
        while time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(1.0, 3.0))
            ns = f"{self.run.namespace}/"
            single = sorted(k.removeprefix(ns) for k in self.run.bound_keys()
                            if any(f"-{kind}-" in k for kind in ("plain", "v100", "big", "slice", "cpu")))
            for name in self.rng.sample(single, min(len(single), self.rng.randint(1, 2))):
                await self.run.delete_pod(name)
                self.churned += 1
                mix = {kind: 0 for kind in kinds} | {self.rng.choice(kinds): 1}
                await self.run.submit(self.run.wave(f"r{self.churned}", label_gangs=0, podgroup_gangs=0, **mix))

    def _make(self, index: int, step: Step) -> Callable[[], Awaitable[None]]:
        async def act() -> None:
            if step.kind in PROXY_FAULTS:
                self.active[index] = step.faults
                self._apply_proxy()
                await asyncio.sleep(step.duration)
                self.active.pop(index, None)
                self._apply_proxy()
            else:
                await getattr(self, f"_{step.kind}")(step)
        return act

    async def _ensure_replica(self) -> None:
        if not self.run.alive_replicas():
            replica = self.run.add_replica()
            await replica.wait_ready()

    async def _kill9(self, step: Step) -> None:
        alive = self.run.alive_replicas()
        if alive:
            await self.run.kill(self.rng.choice(alive))
        await asyncio.sleep(self.rng.uniform(0.5, 3.0))
        await self.run.add_replica().wait_ready()

    async def _leader_kill(self, step: Step) -> None:
        leader = await self.run.leader()
        await self.run.kill(leader)
        await asyncio.sleep(self.rng.uniform(0.5, 2.0))
        self.run.add_replica()

    async def _partition(self, step: Step) -> None:
        leader = await self.run.leader()
        proxy: FaultProxyThread | None = leader.proxy
        if proxy is None:
            return
        proxy.configure(Faults(reset=1.0))
        self.run.count("partition")
        await asyncio.sleep(step.duration)
        proxy.configure(NO_FAULTS)

    async def _apiserver_restart(self, step: Step) -> None:
        await self.run.restart_apiserver()

    async def _node_delete(self, step: Step) -> None:
        nodes = self.run.cluster.v100_nodes
        if len(nodes) <= 4:
            return
        busy = [f.node for f in self.run.watcher.first_bound.values() if f.node in nodes]
        node = self.rng.choice(busy or nodes)
        await self.run.delete_node(node)
        nodes.remove(node)
        await self.run.add_nodes("v100", 1)

    async def _device_delete(self, step: Step) -> None:
        node = self.rng.choice(self.run.cluster.v100_nodes)
        for device in self.rng.sample(self.run.cluster.devices_of(node), self.rng.randint(1, 2)):
            await self.run.delete_device(device)

    async def _class_edit(self, step: Step) -> None:
        cluster = self.run.cluster
        if self.rng.random() < 0.5:
            model = self.rng.choice(("T4", "V100"))
            await self.run.edit_class(cluster.big_class, {"selector": {"matchLabels": {"model": model},
                                                                       "matchExpressions": None}})
        else:
            unit = self.rng.choice(("1Gi", "2Gi"))
            await self.run.edit_class(cluster.shared_class, {"sharing": {"dimension": "memory", "unit": unit}})


async def soak(minutes: float, seed: int, run_seconds: float, max_runs: int, exclude: frozenset[str],
               out: Path, plane_dir: Path, replay: int | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + minutes * 60
    reports: list[tuple[RunPlan, RunReport, list[str], int]] = []
    plane = LocalControlPlane(plane_dir / "plane", with_controller_manager=False)
    print(f"starting a local control plane in {plane_dir} ...", flush=True)
    await asyncio.to_thread(plane.start)
    logs = out / "logs"
    shutil.rmtree(logs, ignore_errors=True)  # logs of an earlier soak would mislead
    try:
        for index in range(max_runs):
            if time.monotonic() + run_seconds + 45 > deadline:
                break
            run_seed = seed * 1000 + index if replay is None else replay
            plan = plan_run(run_seed, run_seconds, exclude)
            print(f"run {index + 1} (seed {run_seed}, {plan.replicas} replica(s)): {plan.describe()}", flush=True)
            workdir = plane_dir / f"run-{index + 1}"
            # A wave needs about 11 V100 GPUs: 5 four-GPU nodes per wave keep every pod that
            # should fit comfortably placeable, even after node and device deletions.
            async with FaultRun(plane, workdir, seed=run_seed, replicas=plan.replicas, name=f"soak-{index + 1}",
                                proxy_per_replica=plan.replicas > 1, v100_nodes=5 * len(plan.waves) + 1,
                                t4_nodes=len(plan.waves) + 1,
                                agent_delay=plan.agent_delay) as run:
                executor = Executor(run, plan)
                await executor.play(run_seconds)
                remaining = max(20.0, deadline - time.monotonic() - 5)
                # Churn and class edits can outgrow the cluster: a pod left pending is a violation
                # only when the apiserver's state has room for it.
                report = await run.finish(bind_timeout=min(60.0, remaining), grace=5.0, only_if_room=True)
            reports.append((plan, report, executor.errors, executor.churned))
            print("  " + report.summary().replace("\n", "\n  "), flush=True)
            if report.violations:
                target = logs / f"run-{index + 1}"
                target.mkdir(parents=True, exist_ok=True)
                for path in report.logs:
                    shutil.copy(path, target)
            if executor.errors:
                print(f"  harness errors: {executor.errors}", flush=True)
            if plane.dead_components():
                print(f"  control plane components died: {plane.dead_components()}; stopping", flush=True)
                break
    finally:
        await asyncio.to_thread(plane.stop)
    return summarize(reports, minutes, seed, run_seconds)


def summarize(reports: list[tuple[RunPlan, RunReport, list[str], int]], minutes: float, seed: int,
              run_seconds: float) -> dict[str, Any]:
    faults: Counter[str] = Counter()
    violations: Counter[str] = Counter({name: 0 for name in INVARIANTS})
    for _, report, _, _ in reports:
        faults.update(report.faults)
        violations.update(v.invariant for v in report.violations)
    # Pods scheduled: every pod ever bound (churned ones included) — the watcher's count.
    return {
        "minutes": minutes, "seed": seed, "run_seconds": run_seconds, "runs": len(reports),
        "pods_created": sum(len(r.first_bound) + r.pods - r.bound for _, r, _, _ in reports),
        "pods_scheduled": sum(len(r.first_bound) for _, r, _, _ in reports),
        "pods_churned": sum(c for _, _, _, c in reports),
        "pods_evicted": sum(r.evicted for _, r, _, _ in reports),
        "pods_left_pending_that_fit": sum(1 for _, r, _, _ in reports for v in r.violations if v.invariant == "unbound"),
        "faults": {k: faults[k] for k in sorted(faults)}, "faults_total": sum(faults.values()),
        "violations": dict(violations), "violations_total": sum(violations.values()),
        "runs_detail": [{**report.as_dict(), "replicas": plan.replicas, "schedule": plan.describe(),
                         "agent_delay": plan.agent_delay, "pods_churned": churned, "harness_errors": errors}
                        for plan, report, errors, churned in reports],
    }


def print_table(result: dict[str, Any]) -> None:
    print()
    print("| run | seed | replicas | agent delay | schedule | pods scheduled | evicted | faults | violations |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, run in enumerate(result["runs_detail"], 1):
        low, high = run["agent_delay"]
        print(f"| {i} | {run['seed']} | {run['replicas']} | {low:g}-{high:g}s | {run['schedule']} | "
              f"{run['scheduled']} | {run['evicted']} | {sum(run['faults'].values())} | {len(run['violations'])} |")
    print()
    print(f"runs: {result['runs']}   pods scheduled: {result['pods_scheduled']} (of {result['pods_created']} created; "
          f"{result['pods_churned']} deleted again as churn, {result['pods_evicted']} evicted by preemption)   "
          f"faults injected: {result['faults_total']}   "
          f"invariant violations: {result['violations_total']}")
    print()
    print("| fault | injected |")
    print("|---|---|")
    for name, count in result["faults"].items():
        if count:
            print(f"| {name} | {count} |")
    print()
    print("| invariant | violations |")
    print("|---|---|")
    for name, count in result["violations"].items():
        print(f"| {name} | {count} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="time budget (default 10)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fault schedules (default 1)")
    parser.add_argument("--run-seconds", type=float, default=30.0, help="fault phase of each run (default 30)")
    parser.add_argument("--max-runs", type=int, default=1000, help="stop after this many runs")
    parser.add_argument("--replay", type=int, metavar="RUN_SEED",
                        help="run the plan of this run seed (as printed per run) --max-runs times")
    parser.add_argument("--exclude", default="", help=f"comma-separated fault kinds to leave out ({', '.join(ALL_FAULTS)})")
    parser.add_argument("--out", type=Path, default=OUT, help="output directory (default bench/out/soak)")
    args = parser.parse_args(argv)
    exclude = frozenset(filter(None, (k.strip() for k in args.exclude.split(","))))
    unknown = exclude - set(ALL_FAULTS)
    if unknown:
        parser.error(f"unknown fault kinds: {', '.join(sorted(unknown))}")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tessera-soak-") as tmp:
        result = asyncio.run(soak(args.minutes, args.seed, args.run_seconds, args.max_runs, exclude, args.out,
                                  Path(tmp), args.replay))
    result["excluded"] = sorted(exclude)
    (args.out / "results.json").write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print_table(result)
    print(f"\nresults: {args.out / 'results.json'}")
    return 0 if result["violations_total"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
