"""A Binding refused because someone else changed the pod between decision and Binding.

Every Binding is conditional on the pod's resourceVersion as decided (the term fence's guarantee:
a newer leader's fence write changes the pod, so a deposed leader's Binding can never land). A
label or annotation edit by another controller refuses it the same way. The round-8 adversary
edited every pending pod at ~135 edits/s: 106 of 222 Bindings were refused, each one an
error-level line, a FailedScheduling Warning and the error backoff (median wait 2.35 s), where
kube-scheduler's unconditional Binding is not affected at all. Such a pod — unbound at a newer
version, its `tessera.dev/term` unchanged — is now decided again at once from the version read
back (a whole new decision: its labels may have changed its gang or anything a plugin reads),
with an info line; only a pod refused so `REDECIDED_AT_ONCE` times in a row backs off as before,
so a controller editing a pod in a tight loop cannot keep the scheduler busy with it.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import anyio
import structlog
from structlog.testing import capture_logs
from structlog.typing import EventDict

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.outcomes import REDECIDED_AT_ONCE
from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.kube.binder import CHANGED, Binder, Binding, BindResult, Outcome
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.kube.run_cli import MetricsHooks
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi
from tests.helpers import BINPACK, config, until


def _edited(pod: dict[str, Any], version: int) -> dict[str, Any]:
    """The pod as another controller's label edit left it (a newer resourceVersion)."""
    edited = copy.deepcopy(pod)
    edited["metadata"]["resourceVersion"] = str(version)
    edited["metadata"].setdefault("labels", {})["churn"] = str(version)
    return edited


def _placed(core: Scheduler, now: float) -> list[str]:
    return sorted(f"{a.pod.meta.name}@{a.node}" for a in core.schedule_next(now) or [] if a.node)


def _one_pod() -> tuple[Scheduler, dict[str, Any]]:
    core = Scheduler(config(BINPACK))
    pod = b.pod("p", limits={"nvidia.com/gpu": 1})
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    core.apply("ADDED", copy.deepcopy(pod), 0.0)
    assert _placed(core, 0.0) == ["p@n"]
    return core, pod


def test_a_pod_changed_since_its_decision_is_decided_again_at_once_from_the_new_version() -> None:
    core, pod = _one_pod()
    uid = pod["metadata"]["uid"]
    core.apply("MODIFIED", _edited(pod, 20), 3.0)  # the read-back: unbound at a newer version
    assert core.binding_outdated(uid, 3.0) is True
    [again] = core.schedule_next(3.0) or []  # no backoff: the same instant
    assert again.node == "n" and again.pod.meta.resource_version == "20"
    assert again.pod.meta.labels["churn"] == "20"  # decided from the pod as it is now
    assert core.state.placements[uid].assumed


def test_a_refusal_that_is_an_error_still_backs_off() -> None:
    """The contrast: binding_failed (a webhook's 422, a withdrawn Binding) is the error backoff."""
    core, pod = _one_pod()
    core.binding_failed(pod["metadata"]["uid"], 3.0)
    assert core.schedule_next(3.0) is None
    expiry = core.next_backoff_expiry()
    assert expiry is not None and expiry > 3.0


def test_a_pod_refused_so_too_many_times_in_a_row_backs_off_as_before() -> None:
    core, pod = _one_pod()
    uid = pod["metadata"]["uid"]
    now = 3.0
    for i in range(REDECIDED_AT_ONCE):
        core.apply("MODIFIED", _edited(pod, 20 + i), now)
        assert core.binding_outdated(uid, now) is True, i
        assert _placed(core, now) == ["p@n"], i
    core.apply("MODIFIED", _edited(pod, 40), now)
    assert core.binding_outdated(uid, now) is False  # one more in a row: the error backoff
    assert core.schedule_next(now) is None
    expiry = core.next_backoff_expiry()
    assert expiry is not None and expiry > now
    # and it stays so while the edits go on: the backoff grows as for any error
    assert _placed(core, expiry) == ["p@n"]
    core.apply("MODIFIED", _edited(pod, 41), expiry)
    assert core.binding_outdated(uid, expiry) is False
    later = core.next_backoff_expiry()
    assert later is not None and later - expiry > expiry - now - 1.0


def test_an_unschedulable_attempt_starts_the_count_again() -> None:
    """In a row: an attempt that ends otherwise (the pod did not fit) starts the count afresh."""
    core, pod = _one_pod()
    uid = pod["metadata"]["uid"]
    now = 3.0
    for i in range(REDECIDED_AT_ONCE):
        core.apply("MODIFIED", _edited(pod, 20 + i), now)
        assert core.binding_outdated(uid, now) is True
        if i < REDECIDED_AT_ONCE - 1:
            assert _placed(core, now) == ["p@n"]
    # the GPU is taken by a pod bound by someone else meanwhile: p does not fit
    core.apply("ADDED", b.pod("other", limits={"nvidia.com/gpu": 1}, node_name="n"), now)
    assert _placed(core, now) == []
    core.apply("DELETED", b.pod("other", limits={"nvidia.com/gpu": 1}, node_name="n"), now + 1)
    now += 30.0
    core.flush_unschedulable(now)
    assert _placed(core, now) == ["p@n"]
    core.apply("MODIFIED", _edited(pod, 60), now)
    assert core.binding_outdated(uid, now) is True


def test_a_gang_member_changed_since_its_decision_keeps_its_room_and_is_decided_again_at_once() -> None:
    """All-or-nothing: its sibling's Binding is out (or landed), so the member's room is held for
    it (no pod of its priority takes it meanwhile, as after any refused Binding), and it is
    decided again at once into it."""
    core = Scheduler(config(BINPACK))
    core.apply("ADDED", b.node("n", gpus=2), 0.0)
    members = [b.pod(f"g{i}", limits={"nvidia.com/gpu": 1}, labels=b.gang_labels("train", 2)) for i in range(2)]
    for member in members:
        core.apply("ADDED", copy.deepcopy(member), 0.0)
    assert _placed(core, 0.0) == ["g0@n", "g1@n"]
    g0 = members[0]["metadata"]["uid"]
    core.apply("MODIFIED", _edited(members[0], 30), 2.0)
    # a pod of the same priority arrives for the room g0 had
    core.apply("ADDED", b.pod("rival", limits={"nvidia.com/gpu": 1}), 2.0)
    assert core.binding_outdated(g0, 2.0) is True
    assert g0 in core.state.holds  # the room stays the member's
    placed = []
    while (attempts := core.schedule_next(2.0)) is not None:
        placed += [f"{a.pod.meta.name}@{a.node}" for a in attempts]
    assert "g0@n" in placed and "rival@n" not in placed, placed
    assert core.state.placements[members[1]["metadata"]["uid"]].assumed  # the sibling untouched


# --- the live loop, against the fake HTTP layer -----------------------------------------------------


def _labelled_before_bindings(api: FakeApi, times: int, sent: list[tuple[str, float]]) -> None:
    """Another controller labels pod `a` just before each of its first `times` Bindings arrives."""

    def handler(call: Call) -> Response | None:
        if call.method == "POST" and call.path.endswith("/a/binding"):
            sent.append((call.body["metadata"]["resourceVersion"], time.monotonic()))
            if len(sent) <= times:
                pod = api.pod("default", "a")
                pod["metadata"].setdefault("labels", {})["team"] = f"x{len(sent)}"
                api._bump(pod)
        return None

    api.handlers.append(handler)


async def _lead_until_bound(api: FakeApi) -> SchedulerLoop:
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="rep-a")  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: api.pod("default", "a")["spec"].get("nodeName") == "n" and loop.binder.in_flight == 0)
        owner.cancel_scope.cancel()
    return loop


def _gpu_pod_a() -> dict[str, Any]:
    pod = b.pod("a", requests={"nvidia.com/gpu": 1}, priority=0)
    pod["metadata"]["resourceVersion"] = "11"
    return pod


async def test_the_live_loop_decides_a_pod_changed_under_its_binding_again_at_once_without_an_error() -> None:
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod_a())
    sent: list[tuple[str, float]] = []
    _labelled_before_bindings(api, 3, sent)
    with capture_logs() as logs:
        loop = await _lead_until_bound(api)
    versions = [version for version, _ in sent]
    assert len(versions) == 4 and len(set(versions)) == 4 and versions[0] == "11"
    # no backoff: the error backoff alone is over a second per refusal (1 s, 2 s, 4 s)
    assert sent[-1][1] - sent[0][1] < 1.0, sent
    assert loop.stats.bind_errors == 0
    assert not [e for e in api.events.values() if e["reason"] == "FailedScheduling"]
    assert not [c for c in api.of("PATCH", "/a/status") if (c.body.get("status") or {}).get("conditions")]
    lines = [(e["event"], e["log_level"]) for e in logs if str(e["event"]).startswith("binder.")]
    assert lines == [("binder.pod_changed", "info")] * 3 + [("binder.bound", "info")], lines
    changed = [e for e in logs if e["event"] == "binder.pod_changed"]
    assert [e["detail"].split(";")[0] for e in changed] == [f"resourceVersion {a} -> {b}"
                                                           for a, b in zip(versions, versions[1:])]


async def test_the_live_loop_backs_off_a_pod_changed_under_too_many_bindings_in_a_row() -> None:
    """The hot-loop guard: `REDECIDED_AT_ONCE` refusals in a row are decided again at once; the
    next one is today's refused Binding (binder.failed, a Warning, PodScheduled=False, the
    error backoff), and the pod is bound once the edits stop."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod_a())
    sent: list[tuple[str, float]] = []
    _labelled_before_bindings(api, REDECIDED_AT_ONCE + 1, sent)
    with capture_logs() as logs:
        loop = await _lead_until_bound(api)
    assert len(sent) == REDECIDED_AT_ONCE + 2
    lines = [(e["event"], e["log_level"]) for e in logs if str(e["event"]).startswith("binder.")]
    assert lines == [("binder.pod_changed", "info")] * REDECIDED_AT_ONCE + [("binder.failed", "error"),
                                                                          ("binder.bound", "info")], lines
    [failed] = [e for e in logs if e["event"] == "binder.failed"]
    assert f"more than {REDECIDED_AT_ONCE} times in a row" in failed["reason"]
    assert loop.stats.bind_errors == 1
    assert sent[-1][1] - sent[-2][1] >= 1.0  # the error backoff before the last one
    assert sent[-2][1] - sent[0][1] < 1.0, sent  # and none before
    [warning] = [e for e in api.events.values() if e["reason"] == "FailedScheduling"]
    assert warning["note"].startswith("Binding rejected: the pod changed since it was decided")


async def test_a_binding_refused_by_a_newer_terms_fence_is_not_decided_again_at_once() -> None:
    """Unbound at a newer version, but with another `tessera.dev/term` than the pod was decided
    with: a newer leader fenced it (this replica not yet aware it was deposed). Not an edit to
    decide again from: no `pod_changed`, so the loop keeps the refusal's path (which the token,
    seen, ends: `on_term_seen`)."""
    api = FakeApi()
    api.add_pod(_gpu_pod_a())
    results: list[BindResult] = []
    binder = Binder(KubeHttp(api), results.append, term=lambda: 1)  # type: ignore[arg-type]
    ours = {ann.TERM: "rep-a/1/t"}

    async def bind(binding: Binding, term: str) -> BindResult:
        def fence(call: Call) -> Response | None:
            if call.method == "POST" and call.path.endswith("/binding"):
                pod = api.pod("default", "a")
                pod["metadata"].setdefault("annotations", {})[ann.TERM] = term
                api._bump(pod)
            return None

        api.handlers[:] = [fence]
        async with anyio.create_task_group() as group:
            await group.start(binder.run)
            binder.submit(binding)
            await until(lambda: binder.in_flight == 0)
            group.cancel_scope.cancel()
        return results[-1]

    version = api.pod("default", "a")["metadata"]["resourceVersion"]
    uid = api.pod("default", "a")["metadata"]["uid"]
    binding = Binding(uid, "default", "a", "n", ours, resource_version=version)
    fenced = await bind(binding, "rep-b/2/t")
    assert fenced.outcome is Outcome.RETRY and not fenced.pod_changed and not fenced.fenced_by
    # an edit that leaves the token as it was (here: this term's own, which its status writes carry)
    version = api.pod("default", "a")["metadata"]["resourceVersion"]
    edited = await bind(replace(binding, resource_version=version, term_as_decided="rep-b/2/t"), "rep-b/2/t")
    assert edited.outcome is Outcome.RETRY and edited.pod_changed
    version = api.pod("default", "a")["metadata"]["resourceVersion"]
    ours_again = await bind(replace(binding, resource_version=version, term_as_decided="rep-b/2/t"), "rep-a/1/t")
    assert ours_again.pod_changed


def test_a_deposed_replicas_refusal_stays_fenced_and_a_victims_stays_a_refusal() -> None:
    """The fence path and the preemption path keep their lines and the backoff: a deposed
    replica's Binding the fence refused is `binder.fenced` (never decided again by it), and a
    preemption victim's Binding its own DisruptionTarget write refused is `binder.preempted`."""
    loop = SchedulerLoop(load_config(None), KubeHttp(FakeApi()), KubeHttp(FakeApi()),  # type: ignore[arg-type]
                         identity="rep-a", leader_term=lambda: None)
    binding = Binding("uid-p", "default", "p", "n", {}, resource_version="7")
    with capture_logs() as logs:
        loop._on_bound(BindResult(binding, Outcome.RETRY, CHANGED, 0.0, fenced_by="rep-b/2/t"))
    assert [(e["event"], e["log_level"]) for e in logs] == [("binder.fenced", "warning")]
    assert loop.stats.bind_errors == 1

    loop = SchedulerLoop(load_config(None), KubeHttp(FakeApi()), KubeHttp(FakeApi()),  # type: ignore[arg-type]
                         identity="test")
    low = b.pod("low", limits={"nvidia.com/gpu": 1}, priority=0)
    for obj in (b.node("n", gpus=1), low):
        loop._apply("ADDED", copy.deepcopy(obj))
    assert [a.node for a in loop.core.schedule_next(0.0) or []] == ["n"]
    loop._apply("ADDED", b.pod("high", limits={"nvidia.com/gpu": 1}, priority=1000))
    assert [v.meta.name for a in loop.core.schedule_next(0.0) or [] for v in a.preempted] == ["low"]
    read_back = {**copy.deepcopy(low), "metadata": {**low["metadata"], "resourceVersion": "2"}}
    victim = Binding(low["metadata"]["uid"], "default", "low", "n", resource_version="1")
    with capture_logs() as logs:
        loop._on_bound(BindResult(victim, Outcome.RETRY, CHANGED, 0.0, observed=read_back, pod_changed=True))
    assert [(e["event"], e["log_level"]) for e in logs if str(e["event"]).startswith("binder.")] == [
        ("binder.preempted", "info")]
    assert loop.stats.bind_errors == 1


# --- what the metrics count -------------------------------------------------------------------------


def _count(metrics: Metrics, metric: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(metric, labels)
    assert value is not None, (metric, labels)
    return value


async def _lead_until_bound_counted(api: FakeApi) -> tuple[SchedulerLoop, Metrics, list[tuple[str, float]]]:
    """As `_lead_until_bound`, with the metrics hooks installed; also every attempt the loop
    reported ended (its result and duration)."""
    metrics = Metrics(profiles=["tessera"])
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="rep-a")  # type: ignore[arg-type]
    ended: list[tuple[str, float]] = []

    class Recording(MetricsHooks):
        def on_attempt(self, result: str, profile: str, seconds: float, attempt: Attempt) -> None:
            ended.append((result, seconds))
            super().on_attempt(result, profile, seconds, attempt)

    loop.hooks = Recording(metrics, loop)
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: api.pod("default", "a")["spec"].get("nodeName") == "n" and loop.binder.in_flight == 0)
        owner.cancel_scope.cancel()
    return loop, metrics, ended


async def test_a_binding_outdated_and_decided_again_at_once_counts_as_no_error() -> None:
    """A controller labelling each pod once made TesseraBindingErrors and TesseraSchedulingErrors
    fire on a healthy cluster: each refusal decided again at once still counted
    tessera_bindings_total{result="error"} and scheduler_schedule_attempts_total{result="error"}.
    It counts `outdated` among the Bindings, and no attempt of its own: the attempt goes on with the
    new decision and ends once, `scheduled`, its duration the whole time from the first decision."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod_a())
    sent: list[tuple[str, float]] = []
    _labelled_before_bindings(api, 3, sent)
    _, metrics, ended = await _lead_until_bound_counted(api)
    assert len(sent) == 4
    assert _count(metrics, "tessera_bindings_total", result="outdated") == 3
    assert _count(metrics, "tessera_bindings_total", result="error") == 0
    assert _count(metrics, "tessera_bindings_total", result="success") == 1
    assert _count(metrics, "scheduler_schedule_attempts_total", result="error", profile="tessera") == 0
    assert _count(metrics, "scheduler_schedule_attempts_total", result="scheduled", profile="tessera") == 1
    [(result, seconds)] = ended
    assert result == "scheduled" and seconds >= sent[-1][1] - sent[0][1]


@contextmanager
def _blocking_cycle_lines(seconds: float) -> Iterator[None]:
    """Every `cycle.scheduled` line of a pod decided again (its attempt past the first) blocks the
    process for `seconds`, as a log sink does at debug level when its pipe is full (a GC pause or
    a descheduled process does the same); the lines are captured, at debug level whatever an
    earlier test configured."""
    def blocking(_: Any, __: str, event: EventDict) -> EventDict:
        if event["event"] == "cycle.scheduled" and event.get("attempts", 1) > 1:
            time.sleep(seconds)
        return event

    level = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs(processors=[blocking]):
            yield
    finally:
        structlog.configure(wrapper_class=level)


async def test_an_attempt_decided_again_at_once_counts_the_time_its_new_decisions_took() -> None:
    """The attempt's duration is the whole time from its first decision to the Binding that
    landed, the time the loop spent on each new decision included. It was not: the time carried
    over was brought up to date as a new decision's handling began, and the new decision's own
    clock started only as it ended (after its `cycle.scheduled` line), so whatever came between
    was in neither: here 3 x 50 ms. The test above failed so in about one run in twelve (26 of 300
    back to back): a stall of a few milliseconds there (a GC pause, the process descheduled) made
    the duration shorter than the span of the Bindings."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod_a())
    sent: list[tuple[str, float]] = []
    _labelled_before_bindings(api, 3, sent)
    with _blocking_cycle_lines(0.05):
        _, _, ended = await _lead_until_bound_counted(api)
    assert len(sent) == 4
    span = sent[-1][1] - sent[0][1]
    assert span >= 3 * 0.05  # the three new decisions came between the first Binding and the last
    [(result, seconds)] = ended
    assert result == "scheduled" and seconds >= span, (seconds, span)


async def test_the_fallback_after_too_many_in_a_row_is_still_an_error() -> None:
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod_a())
    sent: list[tuple[str, float]] = []
    _labelled_before_bindings(api, REDECIDED_AT_ONCE + 1, sent)
    _, metrics, ended = await _lead_until_bound_counted(api)
    assert _count(metrics, "tessera_bindings_total", result="outdated") == REDECIDED_AT_ONCE
    assert _count(metrics, "tessera_bindings_total", result="error") == 1
    assert _count(metrics, "tessera_bindings_total", result="success") == 1
    assert [result for result, _ in ended] == ["error", "scheduled"]
    assert _count(metrics, "scheduler_schedule_attempts_total", result="error", profile="tessera") == 1


def test_a_binding_given_up_because_this_replica_stopped_leading_is_no_binding_error() -> None:
    """An on-call trial: a failover's `binder.given_up` (this replica stopped leading, so its
    Binding was not sent, or was withdrawn) counted in tessera_bindings_total{result="error"},
    what TesseraBindingErrors pages on, though it is the leadership machinery at work (an info
    line). It counts `given_up`; a refusal still counts `error`."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="a")  # type: ignore[arg-type]
    metrics = Metrics(profiles=["tessera"])
    hooks = MetricsHooks(metrics, loop)
    binding = Binding("uid-p", "default", "p", "n", {})
    hooks.on_bind(BindResult(binding, Outcome.RETRY, "this replica stopped leading", 0.1, not_leading=True))
    hooks.on_bind(BindResult(binding, Outcome.RETRY, "this replica stopped leading", 0.1, not_leading=True,
                             withdrawn=True))
    assert _count(metrics, "tessera_bindings_total", result="given_up") == 2
    assert _count(metrics, "tessera_bindings_total", result="error") == 0
    hooks.on_bind(BindResult(binding, Outcome.RETRY, "Internal error occurred", 0.1))
    assert _count(metrics, "tessera_bindings_total", result="error") == 1


def test_an_attempt_whose_binding_was_given_up_ends_as_no_scheduling_error() -> None:
    """The same failover counted the pod's attempt in scheduler_schedule_attempts_total{result=
    "error"} (what TesseraSchedulingErrors pages on) and in the loop's binding errors: the attempt
    did not fail, this replica stopped leading before it ended (kube-scheduler, whose process
    exits when it loses its lease, counts nothing then either); the new leader decides the pod
    and counts its attempt. No attempt ends here; a refusal still ends one as `error`."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="a")  # type: ignore[arg-type]
    metrics = Metrics(profiles=["tessera"])
    ended: list[str] = []

    class Recording(MetricsHooks):
        def on_attempt(self, result: str, profile: str, seconds: float, attempt: Attempt) -> None:
            ended.append(result)
            super().on_attempt(result, profile, seconds, attempt)

    loop.hooks = Recording(metrics, loop)
    core, pod = _one_pod()
    loop.core = core
    uid = pod["metadata"]["uid"]
    binding = Binding(uid, "default", "p", "n", {})
    attempt = Attempt(core.state.pods[uid], "n")
    loop._binding_attempts[uid] = ("tessera", 0.01, attempt, time.monotonic())
    loop._on_bound(BindResult(binding, Outcome.RETRY, "this replica stopped leading; the Binding was not sent", 0.0,
                              not_leading=True))
    assert ended == []
    assert _count(metrics, "scheduler_schedule_attempts_total", result="error", profile="tessera") == 0
    assert loop.stats.bind_errors == 0
    assert uid not in core.state.placements  # forgotten all the same, and back in the queue
    assert uid in core.state.pending
    loop._binding_attempts[uid] = ("tessera", 0.01, attempt, time.monotonic())
    loop._on_bound(BindResult(binding, Outcome.RETRY, "Internal error occurred", 0.0))
    assert ended == ["error"]
    assert loop.stats.bind_errors == 1
