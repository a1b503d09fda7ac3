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

`--fence`: the term fence instead (`scheduler/kube/fence.py`, after the catch-up at a takeover
from another replica): one pods/status PATCH of `tessera.dev/term` per pending Tessera pod, as
the loop sends them (64 at once, outside the client's rate limiter), on a KubeHttp whose limiter
is the default 50 qps / burst 100 and on one raised to 500 / 1,000 (the same, since the fence
does not take tokens). Beside it, side by side each round: the baseline first Pod LIST, and what
the same writes would wait for tokens at 50 qps had they gone through the limiter ((N - burst) /
qps: client-go's token bucket). `bench/out/catch_up/fence.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench.live_cluster import pod_object
from bench.live_procs import bench_plane
from scheduler.kube.controlplane import find_binaries
from scheduler.kube.fence import FencedPod, fence
from scheduler.kube.http import KubeHttp, RateLimiter, connect
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


def _ignore(pod: dict[str, Any]) -> None:
    """The bench has no core to feed the written pods to."""


async def _measure_fence(kubeconfig: Path, args: argparse.Namespace) -> dict[str, Any]:
    api, watch_api = await connect(str(kubeconfig)), await connect(str(kubeconfig))
    http, watch = KubeHttp(api), KubeHttp(watch_api)
    limits = {"qps 50 / burst 100": (50.0, 100), "qps 500 / burst 1000": (500.0, 1000)}
    try:
        print(f"creating {args.pods} Tessera pods and {args.others} others", file=sys.stderr)
        await _populate(http, args.pods, args.others)
        listed = (await http.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods",
                                     query=[("fieldSelector", "spec.schedulerName=tessera")])).json()["items"]
        pods = [FencedPod(p["metadata"]["uid"], NAMESPACE, p["metadata"]["name"]) for p in listed]
        baseline: list[float] = []
        fenced: dict[str, list[float]] = {name: [] for name in limits}
        for round_ in range(args.rounds):
            _, seconds, task = await _synced(watch)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            baseline.append(seconds)
            for name, (qps, burst) in limits.items():
                limited = KubeHttp(api, RateLimiter(qps, burst))
                started = time.perf_counter()
                outcome = await fence(limited, pods, f"bench/{round_}/{name}", round_, partial(int, round_),
                                      _ignore, set())
                fenced[name].append(time.perf_counter() - started)
                if outcome.failed or outcome.written != len(pods):
                    raise RuntimeError(f"fence: {outcome.written}/{len(pods)} written, failed {outcome.failed[:3]}")
            print(f"  round {round_ + 1}/{args.rounds}: first LIST {seconds:.3f} s, fence "
                  + ", ".join(f"{name} {values[-1]:.3f} s" for name, values in fenced.items()), file=sys.stderr)
    finally:
        await api.close()
        await watch_api.close()
    medians = {name: statistics.median(values) for name, values in fenced.items()}
    return {"pods": args.pods, "others": args.others, "rounds": args.rounds, "first_list_seconds": baseline,
            "fence_seconds": fenced, "median_first_list": statistics.median(baseline), "median_fence": medians,
            "ratio": {name: value / statistics.median(baseline) for name, value in medians.items()},
            "through_the_limiter_at_50_qps_seconds": max(0.0, (len(pods) - 100) / 50.0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=5000, help="pending Tessera pods (default 5,000)")
    parser.add_argument("--others", type=int, default=1000, help="pods of the default scheduler (default 1,000)")
    parser.add_argument("--bound", type=int, default=50, help="pods bound behind the watch per round (default 50)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fence", action="store_true", help="measure the term fence instead of the catch-up read")
    args = parser.parse_args(argv)
    with bench_plane(None, "tessera-bench-catch-up-", find_binaries(), with_controller_manager=False) as (plane, _):
        result = asyncio.run((_measure_fence if args.fence else _measure)(plane.kubeconfig, args))
    OUT.mkdir(parents=True, exist_ok=True)
    if args.fence:
        (OUT / "fence.json").write_text(json.dumps(result, indent=2))
        print("| pending Tessera pods (+ other) | first Pod LIST (baseline) | fence, qps 50 | fence, qps 500 "
              "| fence / baseline | through the limiter at 50 qps |\n|---|---|---|---|---|---|")
        fence_50, fence_500 = result["median_fence"].values()
        print(f"| {args.pods} + {args.others} | {result['median_first_list']:.3f} s | {fence_50:.3f} s "
              f"| {fence_500:.3f} s | {fence_50 / result['median_first_list']:.1f} "
              f"| {result['through_the_limiter_at_50_qps_seconds']:.0f} s |")
        return 0
    (OUT / "results.json").write_text(json.dumps(result, indent=2))
    print(f"| pods (Tessera + other) | first Pod LIST (baseline) | catch-up read | catch-up / baseline |\n"
          f"|---|---|---|---|\n"
          f"| {args.pods} + {args.others} | {result['median_first_list']:.3f} s | {result['median_catch_up']:.3f} s "
          f"| {result['ratio']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
