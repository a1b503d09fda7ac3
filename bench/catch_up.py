"""`python -m bench.catch_up`: what a new leader's catch-up read costs, beside a replica's first Pod LIST.

Before its first decision a new leader reads the pods Tessera schedules as the apiserver holds
them (`SchedulerLoop._catch_up`: one consistent LIST per scheduler name, `fieldSelector=
spec.schedulerName=<name>`), so the old leader's last Bindings count even when its watch lags.
That read is on the failover path (a term whose Pod LIST was sent after it began, as at a
process's start, skips it): this measures how long it takes.

Method: a LocalControlPlane (etcd + kube-apiserver) in a temp dir; `--pods` pending Tessera pods
and `--others` pods of the default scheduler (which the field selector leaves out). Each round,
side by side on the same apiserver: (a) baseline — a fresh Pod informer lists every pod until it
is synced, what every replica does at start; (b) catch-up — `--bound` of the Tessera pods are
bound behind that informer's back (the old leader's last Bindings, which its watch has not
shown), then `Informer.catch_up` of that informer reads them. Reported: the median seconds of
each over the rounds and the ratio catch-up / baseline (`bench/out/catch_up/results.json`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.live_cluster import pod_object
from bench.live_procs import bench_plane
from scheduler.kube.controlplane import find_binaries
from scheduler.kube.http import KubeHttp, connect
from scheduler.kube.informers import PODS, Informer

OUT = Path(__file__).resolve().parent / "out" / "catch_up"
NAMESPACE = "catch-up"
NODE = "catch-up-node"


async def _bounded(concurrency: int, jobs: list[Any], work: Any) -> None:
    iterator = iter(jobs)

    async def worker() -> None:
        for job in iterator:
            await work(job)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _ok(http: KubeHttp, method: str, path: str, body: Any) -> None:
    for attempt in range(5):
        response = await http.request(method, path, body=body, limited=False)
        if response.ok:
            return
        if attempt == 4 or response.status not in (429, 500, 503):
            raise RuntimeError(f"{method} {path}: HTTP {response.status}: {response.message()}")
        await asyncio.sleep(0.2 * (attempt + 1))


async def _populate(http: KubeHttp, pods: int, others: int) -> None:
    await _ok(http, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": NAMESPACE}})
    jobs = [(f"t-{i}", "tessera") for i in range(pods)] + [(f"o-{i}", "default-scheduler") for i in range(others)]
    done = [0]

    async def one(job: tuple[str, str]) -> None:
        await _ok(http, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod_object(job[0], NAMESPACE, job[1]))
        done[0] += 1
        if done[0] % 1000 == 0:
            print(f"  created {done[0]}/{len(jobs)} pods", file=sys.stderr)

    await _bounded(32, jobs, one)


async def _synced(watch: KubeHttp) -> tuple[Informer, float, asyncio.Task[None]]:
    """A fresh Pod informer run until synced: (it, seconds, its task — still watching)."""
    informer = Informer(watch, PODS, lambda event_type, obj: None)
    started = time.perf_counter()
    task = asyncio.create_task(informer.run())
    await informer.synced.wait()
    return informer, time.perf_counter() - started, task


async def _bind_behind(http: KubeHttp, names: list[str]) -> None:
    async def one(name: str) -> None:
        await _ok(http, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding",
                  {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}})

    await _bounded(16, names, one)


async def _measure(kubeconfig: Path, args: argparse.Namespace) -> dict[str, Any]:
    api, watch_api = await connect(str(kubeconfig)), await connect(str(kubeconfig))
    http, watch = KubeHttp(api), KubeHttp(watch_api)
    try:
        print(f"creating {args.pods} Tessera pods and {args.others} others", file=sys.stderr)
        await _populate(http, args.pods, args.others)
        baseline: list[float] = []
        catch_up: list[float] = []
        changed: list[int] = []
        for round_ in range(args.rounds):
            names = [f"t-{i}" for i in range(round_ * args.bound, (round_ + 1) * args.bound)]
            informer, seconds, task = await _synced(watch)
            task.cancel()  # the watch stops here: it lags behind everything that follows
            await asyncio.gather(task, return_exceptions=True)
            await _bind_behind(http, names)
            started = time.perf_counter()
            changed.append(await informer.catch_up("spec.schedulerName=tessera"))
            catch_up.append(time.perf_counter() - started)
            baseline.append(seconds)
            print(f"  round {round_ + 1}/{args.rounds}: first LIST {seconds:.3f} s, catch-up {catch_up[-1]:.3f} s "
                  f"({changed[-1]} pods newer)", file=sys.stderr)
    finally:
        await api.close()
        await watch_api.close()
    return {"pods": args.pods, "others": args.others, "bound_behind_the_watch": args.bound, "rounds": args.rounds,
            "first_list_seconds": baseline, "catch_up_seconds": catch_up, "pods_newer": changed,
            "median_first_list": statistics.median(baseline), "median_catch_up": statistics.median(catch_up),
            "ratio": statistics.median(catch_up) / statistics.median(baseline)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=5000, help="pending Tessera pods (default 5,000)")
    parser.add_argument("--others", type=int, default=1000, help="pods of the default scheduler (default 1,000)")
    parser.add_argument("--bound", type=int, default=50, help="pods bound behind the watch per round (default 50)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with bench_plane(None, "tessera-bench-catch-up-", find_binaries(), with_controller_manager=False) as (plane, _):
        result = asyncio.run(_measure(plane.kubeconfig, args))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(result, indent=2))
    print(f"| pods (Tessera + other) | first Pod LIST (baseline) | catch-up read | catch-up / baseline |\n"
          f"|---|---|---|---|\n"
          f"| {args.pods} + {args.others} | {result['median_first_list']:.3f} s | {result['median_catch_up']:.3f} s "
          f"| {result['ratio']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
