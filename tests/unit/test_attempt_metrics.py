"""What the scheduling metrics count around a Binding (review findings, each a failing test
first), as upstream's binding cycle (pkg/scheduler/schedule_one.go) does: a pod is "scheduled" once
its Binding lands, with the Binding's time in the attempt's duration, and counted once; a refused
Binding is result="error" and the pod keeps its first-queued time (the SLI) and attempts."""

from __future__ import annotations

import anyio
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.api.config import load_config
from scheduler.core.framework.attempt import Attempt
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.kube.run_cli import MetricsHooks
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi


def _value(metrics: Metrics, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return s.value
    return 0.0


class Recorder(MetricsHooks):
    def __init__(self, metrics: Metrics, loop: SchedulerLoop) -> None:
        super().__init__(metrics, loop)
        self.scheduled: list[tuple[int, float]] = []

    def on_attempt(self, result: str, profile: str, seconds: float, attempt: Attempt) -> None:
        if result in ("scheduled", "error"):
            self.scheduled.append((attempt.attempts, attempt.queued_at))
        super().on_attempt(result, profile, seconds, attempt)


class SlowBindApi(FakeApi):
    async def _call(self, call: Call) -> Response:
        if call.method == "POST" and call.path.endswith("/binding"):
            await anyio.sleep(0.5)
        return await super()._call(call)


async def _run_until_bound(api: FakeApi) -> tuple[Metrics, Recorder]:
    metrics = Metrics(profiles=["tessera"])
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    hooks = Recorder(metrics, loop)
    loop.hooks = hooks
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while not api.pod("default", "p")["spec"].get("nodeName"):
                await anyio.sleep(0.01)
            await anyio.sleep(0.05)
        owner.cancel_scope.cancel()
    return metrics, hooks


def _refused_once() -> FakeApi:
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=4)]
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    api.fail_next("POST", "/binding", status=422)  # refused: nothing bound, retried after backoff
    return api


async def test_a_refused_binding_counts_one_scheduled_and_one_error() -> None:
    api = _refused_once()
    metrics, _ = await _run_until_bound(api)
    assert len(api.of("POST", "/binding")) == 2  # one refused, one bound: ONE pod scheduled
    got = {
        "scheduled": _value(metrics, "scheduler_schedule_attempts_total", result="scheduled", profile="tessera"),
        "error": _value(metrics, "scheduler_schedule_attempts_total", result="error", profile="tessera"),
        "sli_count": sum(_value(metrics, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts=a)
                         for a in ("1", "2")),
        "attempts_count": _value(metrics, "scheduler_pod_scheduling_attempts_count"),
    }
    assert got == {"scheduled": 1, "error": 1, "sli_count": 1, "attempts_count": 1}


async def test_the_sli_clock_survives_a_refused_binding() -> None:
    _, hooks = await _run_until_bound(_refused_once())
    (first_attempts, first), (second_attempts, second) = hooks.scheduled  # the refused, then the bound
    assert second == first, f"SLI start moved by {second - first:.4f}s: re-queued as a brand-new pod"
    assert (first_attempts, second_attempts) == (1, 2)


async def test_attempt_duration_includes_binding_as_its_help_says() -> None:
    api = SlowBindApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=4)]
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    metrics, _ = await _run_until_bound(api)
    total = _value(metrics, "scheduler_scheduling_attempt_duration_seconds_sum", result="scheduled", profile="tessera")
    # HELP: "Scheduling attempt latency in seconds (scheduling algorithm + binding)"; the Binding took 0.5 s
    assert total >= 0.5, f"attempt duration {total:.4f}s excludes the 0.5 s Binding"


def test_a_refused_binding_is_not_a_second_podadd_into_activeq() -> None:
    """Upstream: a failed binding cycle puts the pod into backoffQ once (ScheduleAttemptFailure);
    here `requeue_after_error` re-`add`s it as a new pod first (engine.py:67-69)."""
    from scheduler.core.scheduler import Scheduler

    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=4), 0.0)
    pod = b.pod("p", requests={"nvidia.com/gpu": 1})
    core.apply("ADDED", pod, 0.0)
    [attempt] = core.schedule_next(0.0) or []
    assert attempt.node == "n"
    assert core.take_queue_incoming() == {("active", "UnschedulablePodAdd"): 1}
    core.binding_failed(pod["metadata"]["uid"], 5.0)
    assert core.take_queue_incoming() == {("backoff", "ScheduleAttemptFailure"): 1}


def _pending(m: Metrics) -> dict[str, float]:
    return {s.labels["queue"]: s.value
            for f in text_string_to_metric_families(generate_latest(m.registry).decode())
            for s in f.samples if s.name == "scheduler_pending_pods"}


async def test_pending_pods_do_not_stay_frozen_on_a_replica_that_lost_the_lease() -> None:
    """Regression (review): the queue gauges froze at the last leader values on a replica that
    lost the lease (kube-scheduler exits then, so its series go away): alerts by job fired for ever."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    pod = b.pod("big", requests={"nvidia.com/gpu": 2})  # never fits
    api.add_pod(pod)
    term: list[object] = [1]
    metrics = Metrics(profiles=["tessera"])
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t",  # type: ignore[arg-type]
                         leader_term=lambda: term[0])
    loop.hooks = MetricsHooks(metrics, loop)
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while _pending(metrics)["unschedulable"] != 1:
                await anyio.sleep(0.01)
        term[0] = None  # another replica leads now
        loop.lost_leadership()
        loop._on_event("DELETED", pod)  # the watch: the pod is gone, nothing is pending anywhere
        await anyio.sleep(1.5)  # > IDLE_WAKE_SECONDS
        owner.cancel_scope.cancel()
    assert not loop.core.state.pending
    assert _pending(metrics)["unschedulable"] == 0, f"standby still exports {_pending(metrics)}"
