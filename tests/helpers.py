"""Shared test helpers: configurations and a replay driver over builder objects."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypedDict

import anyio
import orjson
import pytest

from scheduler.api.config import SchedulerConfig, load_config, parse_config
from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.core.state import ClusterState
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.snapshot import ClusterListing
from scheduler.kubectl import cli
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.sim.snapshot import load
from scheduler.view.cluster import gpu_counts
from scheduler.view.model import GpuCounts
from tests.fakeapi import FakeApi

BINPACK = "config/binpack.yaml"
# why a gang with fewer pods than its minimum waits (`capacity.too_few_members`), written out once for
# the tests that expect the whole sentence; `field` is the minimum's name (minMember, minCount, min-available)
TOO_FEW_WHY = ("fewer than {field} were created or remain: a Job's parallelism below it, a ResourceQuota refusing the rest "
               "(the Job's FailedCreate Events say so; the members waiting keep the quota they hold, so it does not "
               "clear), members deleted (a node deleted, PodGC, a drain) and not re-created by their controller, "
               "or a controller still creating them; raise what limits them, re-create the deleted ones, or lower {field}")
SPREAD = "config/spread.yaml"

Line = tuple[str | None, dict[str, str], str]  # a pod's last attempt: node, annotations, message


class LeaseTimings(TypedDict, total=False):
    """A test's LeaderElector timings, passed as keywords (`**timings`): typed so mypy checks them."""

    lease_duration: float
    renew_deadline: float
    retry_period: float


def budget_protected_cluster() -> list[dict[str, Any]]:
    """Two full 8-GPU nodes: `a-kept` (priority 100) under a PodDisruptionBudget that allows no
    disruption, `b-other` (priority 200) under none, and the pending 8-GPU `high` (priority 1000).
    Upstream's victim order takes the lower-priority `a-kept` unless the budget is known; the
    budget comes last, as a listing delivers it (kind by kind, budgets after pods)."""
    def running(name: str, node: str, app: str, priority: int) -> dict[str, Any]:
        return b.pod(name, node_name=node, phase="Running", limits={"nvidia.com/gpu": 8}, labels={"app": app},
                     priority=priority)
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "keep", "namespace": "default", "uid": b.uid_for("PodDisruptionBudget", "default", "keep")},
              "spec": {"selector": {"matchLabels": {"app": "keep"}}}, "status": {"disruptionsAllowed": 0}}
    return [b.node("n1", gpus=8), b.node("n2", gpus=8), running("a-kept", "n1", "keep", 100),
            running("b-other", "n2", "other", 200), b.pod("high", limits={"nvidia.com/gpu": 8}, priority=1000), budget]


def overruled_recording(path: Path) -> tuple[Path, str]:
    """An events file whose recorded Binding overrules the replay: binpack places `g` on the
    fuller n1, the recording binds it to n2. The file, and what the replay says of `g`."""
    gpu = {"nvidia.com/gpu": 1}
    events = [b.event("ADDED", b.node("n1", gpus=4)), b.event("ADDED", b.node("n2", gpus=4)),
              b.event("ADDED", b.pod("a", node_name="n1", phase="Running", limits=gpu)),
              b.event("ADDED", b.pod("g", limits=gpu)), b.event("MODIFIED", b.pod("g", node_name="n2", limits=gpu))]
    path.write_bytes(b"\n".join(orjson.dumps(event) for event in events) + b"\n")
    return path, "the recording binds it to n2, where this replay had placed it on n1"


def config(path: str | None = BINPACK) -> SchedulerConfig:
    return load_config(path)


def fit_config(strategy: dict[str, Any], extra_profile: dict[str, Any] | None = None,
               **top: Any) -> SchedulerConfig:
    """A v1 config with only NodeResourcesFit scoring, using `strategy`."""
    profile: dict[str, Any] = {
        "schedulerName": "tessera",
        "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit", "weight": 1}]}},
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}],
    }
    profile.update(extra_profile or {})
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [profile], **top}
    return parse_config(raw, "test")


def least_allocated_attempt(*objs: dict[str, Any]) -> Attempt:
    """The one attempt of a fresh core (NodeResourcesFit LeastAllocated, explain on) given `objs`
    as ADDED events at time 0: a pod's requests as the filter and score see them."""
    core = Scheduler(fit_config({"type": "LeastAllocated"}), explain=True)
    for obj in objs:
        core.apply("ADDED", copy.deepcopy(obj), 0.0)
    attempts = core.schedule_next(0.0)
    assert attempts is not None and len(attempts) == 1
    return attempts[0]


class Run:
    """Replays events and keeps every attempt and the final one per pod."""

    def __init__(self, cfg: SchedulerConfig | None = None, explain: bool = False, seed: int = 0) -> None:
        self.replay = Replay(cfg or config(), explain=explain, seed=seed)
        self.attempts: list[Attempt] = []

    def feed(self, *events: dict[str, Any]) -> list[Attempt]:
        new = list(self.replay.run(WatchEvent(e["type"], e["object"]) for e in events))
        self.attempts += new
        return new

    def add(self, *objects: dict[str, Any]) -> list[Attempt]:
        return self.feed(*(b.event("ADDED", o) for o in objects))

    @property
    def scheduler(self):  # type: ignore[no-untyped-def]
        return self.replay.scheduler

    @property
    def state(self):  # type: ignore[no-untyped-def]
        return self.replay.scheduler.state

    def node_of(self, name: str, namespace: str = "default") -> str | None:
        state: ClusterState = self.state
        pod = state.pod_by_key(f"{namespace}/{name}")
        assert pod is not None, name
        return state.node_of(pod.uid)

    def last(self, name: str, namespace: str = "default") -> Attempt:
        return self.replay.stats.final[f"{namespace}/{name}"]

    def notices(self) -> list[str]:
        return [f"{n.reason}: {n.message}" for n in self.replay.stats.notices]


def real_gpus_in_use(run: Run, node: str, resource: str = "nvidia.com/gpu") -> int:
    """The GPUs of `resource` real holders (bound or assumed pods, never a nominated preemptor's
    hold) use on the node, recomputed from their placements: each device their grants name once,
    plus their plain count requests."""
    state = run.state
    devices: set[str] = set()
    plain = 0
    for uid in state.nodes[node].pods:
        placement = state.placements[uid]
        devices.update(name for name in placement.devices if state.ledger.counted_as(name) == resource)
        plain += placement.requests.get(resource, 0)
    return len(devices) + plain


def assert_real_gpu_counts_within(run: Run, resource: str = "nvidia.com/gpu") -> None:
    """No node has more GPUs in use by real holders than it allocates (a hold may keep room
    beside its running victims; a pod in use never may)."""
    for name, info in run.state.nodes.items():
        if info.node is not None and resource in info.node.allocatable:
            assert real_gpus_in_use(run, name, resource) <= info.node.allocatable[resource], (
                name, sorted(run.state.pods[uid].key for uid in info.pods))


def write_kubeconfig(path: Path, server: str, *, skip_tls_verify: bool = False) -> Path:
    """A well-formed kubeconfig with one cluster (`server`), a bearer token `abc`, and its context current."""
    skip = ", insecure-skip-tls-verify: true" if skip_tls_verify else ""
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "{server}"{skip}}}
users:
- name: u
  user: {{token: abc}}
contexts:
- name: x
  context: {{cluster: c, user: u}}
current-context: x
""")
    return path


def plugins_gang_member(name: str, priority: int | None = None) -> dict[str, Any]:
    """A 4-GPU member of the scheduler-plugins PodGroup `big` (its label)."""
    return b.pod(name, labels={"scheduling.x-k8s.io/pod-group": "big"}, limits={"nvidia.com/gpu": 4},
                 priority=priority)


def workload_gang_member(name: str, priority: int | None = None) -> dict[str, Any]:
    """A 4-GPU member of the Workload API PodGroup `big` (its `spec.schedulingGroup`)."""
    return b.pod(name, limits={"nvidia.com/gpu": 4}, priority=priority,
                 spec_extra={"schedulingGroup": {"podGroupName": "big"}})


def fake_listing(api: Any, objs: list[dict[str, Any]]
                 ) -> Callable[[Target, Iterable[str]], Awaitable[tuple[Any, ClusterListing]]]:
    """A stand-in for `kubectl tessera`'s `cli._listing`: lists `objs` (read at each call, so a
    test may change them between commands) and hands back `api` for the follow-up reads, with a
    `close()` the command calls when it is done."""
    async def listing(target: Target, namespaces: Iterable[str] = ()) -> tuple[Any, ClusterListing]:
        async def close() -> None:
            return None
        api.api = SimpleNamespace(close=close)
        return api, ClusterListing(objs)
    return listing


class NotFoundApi:
    """The follow-up reads of a `fake_listing` command (the installed ConfigMap, the Lease, Events,
    PriorityClasses) against a cluster that has none of them: 404 for every one."""
    async def request(self, method: str, path: str, **_: Any) -> Response:
        return Response(404, orjson.dumps({"kind": "Status", "code": 404}))


async def what_if_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                      objs: list[dict[str, Any]], *argv: str) -> tuple[int, str, str]:
    """`kubectl tessera what-if --config BINPACK ARGV...` over the listed `objs` (`fake_listing`,
    `NotFoundApi`): its exit status, stdout and stderr."""
    monkeypatch.setattr(cli, "_listing", fake_listing(NotFoundApi(), objs))
    args = cli.build_parser().parse_args(["what-if", "--config", BINPACK, *argv])
    status = await cli._what_if(args, Target(None, None, "default"))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait until `condition()` holds, checked every 5 ms; fail (TimeoutError) after `seconds`."""
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.005)


async def run_for_a_while(run: Callable[[], Coroutine[Any, Any, None]], until: Callable[[], bool] = lambda: False,
                          rounds: int = 20) -> None:
    """Run a background writer's `run()` until `until()` holds (checked every 10 ms, at most
    `rounds` times), then cancel it."""
    task = asyncio.create_task(run())
    for _ in range(rounds):
        await asyncio.sleep(0.01)
        if until():
            break
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def last_attempts(scheduler: Scheduler, objects: list[dict[str, Any]]) -> dict[str, Line]:
    """Apply the objects in order (ADDED, at time 0), scheduling until idle after each; each pod's
    last attempt, by pod name."""
    last: dict[str, Line] = {}
    for obj in objects:
        scheduler.apply("ADDED", obj, 0.0)
        while (attempts := scheduler.schedule_next(0.0)) is not None:
            for a in attempts:
                last[a.pod.meta.name] = (a.node, dict(a.annotations), a.message)
    return last


def gpu_counts_of(*objs: dict[str, Any]) -> GpuCounts:
    """The GPU counts (`gpu_counts`, the numbers of `kubectl tessera nodes`' summary) of a core
    fed `objs` as a listing: what `Metrics.set_gpus` exports."""
    core = Scheduler(config())
    load(core, list(objs), 0.0)
    return gpu_counts(core, now=0.0)


def nested_paths(value: Any, out: list[tuple[Any, Any]]) -> None:
    """Every (container, key or index) below `value`, depth first in document order, appended to
    `out`: the places the fuzz and property strategies may damage an object at."""
    if isinstance(value, dict):
        for key in list(value):
            out.append((value, key))
            nested_paths(value[key], out)
    elif isinstance(value, list):
        for i in range(len(value)):
            out.append((value, i))
            nested_paths(value[i], out)


CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"


def class_conditions(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each ResourceClass's first status condition, by class name, as a leading SchedulerLoop that
    was sent `objs` (ADDED) would write them."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t",  # type: ignore[arg-type]
                         leader_term=lambda: 1)
    for obj in objs:
        loop._apply("ADDED", obj)
    loop._write_class_statuses()
    return {path.rsplit("/", 2)[-2]: body["status"]["conditions"][0]
            for (path, _), body in loop.statuses._dirty.items() if path.startswith(CLASSES)}
