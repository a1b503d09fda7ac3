"""Preemption's live execution (scheduler/kube/evictor.py, its use in loop.py) against kube-scheduler
v1.36.3. A review found these; each test failed before its fix, for the reason its docstring gives.

Upstream references (k8s.io/kubernetes@v1.36.3):
- pkg/scheduler/framework/preemption/executor.go: `NewExecutor` (its `PreemptPod`),
  `prepareCandidateAsync`, `prepareCandidate`, `IsPodRunningPreemption`;
- pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go: `SelectVictimsOnNode`,
  `isPreemptionAllowed`, `IsEligiblePod` (default: every lower-priority pod in the NodeInfo);
- pkg/scheduler/util/utils.go: `PatchPodStatus` (retry.DefaultBackoff, 4 steps, on `Retriable`),
  `DeletePod` (one call, no retry);
- pkg/api/v1/pod/util.go: `CalculatePodConditionObservedGeneration`; pkg/features/kube_features.go:
  PodObservedGenerationTracking GA and locked on in 1.35;
- cmd/kube-scheduler/app/server.go: `OnStoppedLeading` exits the process;
- k8s.io/apiserver@v0.36.3 pkg/endpoints/handlers/patch.go and pkg/registry/rest/update.go
  (`BeforeUpdate` → `validateCommonFields`): a PATCH carrying another uid is 422, not 409.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import aiohttp
import anyio
import orjson
import pytest

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.core.objects import parse_pod
from scheduler.core.scheduler import Scheduler
from scheduler.kube.evictor import Eviction, Evictor
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.recorder import micro_time
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi
from tests.helpers import run_for_a_while
from tests.unit.test_evictor import _HoldFirst, _no_failure, _victim


async def _until(condition: Callable[[], bool], seconds: float) -> bool:
    """Wait until `condition()` holds, at most `seconds`; whether it did."""
    with anyio.move_on_after(seconds):
        while not condition():
            await anyio.sleep(0.005)
        return True
    return False


def _preemption_cluster(victim_generation: int | None = None) -> FakeApi:
    """One 1-GPU node, the GPU taken by `low` (priority 0, running), and `high` (priority 1000)
    pending for a GPU: `high` preempts `low`."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    low = b.pod("low", limits={"nvidia.com/gpu": 1}, priority=0, node_name="n", phase="Running")
    low["status"]["startTime"] = "2026-01-01T00:00:00Z"
    if victim_generation is not None:
        low["metadata"]["generation"] = victim_generation
    api.add_pod(low)
    api.add_pod(b.pod("high", limits={"nvidia.com/gpu": 1}, priority=1000))
    return api


async def _disruption_mark(api: FakeApi) -> dict[str, Any]:
    """Run a scheduler loop on `_preemption_cluster` until `high` marks `low`: the one
    DisruptionTarget condition that mark wrote."""
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t", seed=0)  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        marked = await _until(lambda: bool(api.of("PATCH", "/pods/low/status")), 10.0)
        owner.cancel_scope.cancel()
    assert marked, "high did not preempt low"
    condition: dict[str, Any]
    [condition] = [c for call in api.of("PATCH", "/pods/low/status")
                   for c in call.body["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    return condition


# --- 1. a lapse of is_leader() inside one term loses the eviction for good ------------------------

async def test_a_write_that_meets_a_lapse_of_the_lease_is_not_lost_for_the_rest_of_the_term() -> None:
    """`LeaderElector.is_leader` turns False by its time bound (no write confirmed for
    `renew_deadline`) *without* `on_stopped_leading`, and turns True again, in the same term, when
    a late renewal lands (leader.py `is_leader`/`_renew_once`; the binder carries on in the same
    term, test_live_loop's "lapses and comes back"). Upstream never has such a state: an executor's
    goroutine (`prepareCandidateAsync`) always runs to its end and removes the preemptor from
    `preempting`, and a lost lease ends the process (server.go `OnStoppedLeading`).

    Tessera: `Evictor.run.write` asks `allowed()` right before the request and, when it falls in
    the lapse, just returns — the eviction stays in `_preemptions` with no step queued or retried,
    so it is never written, and a later decision for the same victim is skipped by `submit` as
    "already being evicted". The victim runs on; the core counts it as leaving (the preemptor is
    refused "a terminating pod on the nominated node" for ever)."""
    api = FakeApi()
    eviction = _victim(api)
    answers = iter([1, None])  # submitted while leading; the write's own check falls in the lapse
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure,  # type: ignore[arg-type]
                      term=lambda: next(answers, 1), retry_seconds=0.05)
    evictor.submit([eviction])
    await run_for_a_while(evictor.run, rounds=5)
    evictor.submit([eviction])  # the lease is back (same term): the loop decides the victim again
    await run_for_a_while(evictor.run, lambda: (eviction, True) in done, rounds=100)
    assert (eviction, True) in done, "the victim was never evicted after a lapse of the lease"
    assert ("default", "victim") not in api.pods


async def test_a_lapse_of_the_lease_in_the_loop_does_not_strand_the_preemption() -> None:
    """The same lapse seen by the evictor's batch check: `Evictor.run` calls its own `abandon()`
    (queue and `_preemptions` dropped) but nothing tells the core, which keeps the victim in
    `state.preempting` (only `SchedulerLoop.lost_leadership` → `abandon_evictions` clears it, and
    that runs only on `on_stopped_leading`). When the lease comes back in the same term, nothing
    ever evicts `low`, and `high` is never eligible to preempt again (`ineligible`: its
    nominated node has a victim "terminating"): the GPU stays with the lower-priority pod for good.
    Upstream (executor.go `prepareCandidateAsync`) the eviction completes, or fails and
    `Activate`s the preemptor; the preemptor is blocked only while the goroutine runs."""
    api = _preemption_cluster()
    term: list[int | None] = [1]
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t",  # type: ignore[arg-type]
                         leader_term=lambda: term[0], seed=0)
    submit = loop.evictor.submit
    lapsed = [False]

    def submit_into_a_lapse(evictions: Any) -> None:
        submit(evictions)
        if not lapsed[0] and evictions:
            lapsed[0] = True
            term[0] = None  # a renewal is late: is_leader() is False for a moment ...

    loop.evictor.submit = submit_into_a_lapse  # type: ignore[method-assign]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        assert await _until(lambda: lapsed[0], 10.0), "high did not preempt"
        await anyio.sleep(0.2)
        term[0] = 1  # ... and it lands: the same term, on_stopped_leading never ran
        loop.core.flush_unschedulable(time.time() + 3600)  # high is tried again (after its backoff)
        loop.wake()
        deleted = await _until(lambda: bool(api.of("DELETE", "/pods/low")), 4.0)
        owner.cancel_scope.cancel()
    assert deleted, "after the lease came back in the same term, the victim was never evicted"


# --- 2. a previous term's answer cancels the new term's eviction of the same victim ---------------

async def test_an_old_terms_mark_answered_late_does_not_cancel_the_new_terms_eviction() -> None:
    """The lease is lost while a mark (PATCH) is out and taken again at once (leader.py
    `_renew_once`'s "term_interrupted" path stops and restarts leading); the new term decides the
    same victim again before the old PATCH answers. The old `_mark` finds its preemption
    `failed` and writes `_pending[uid] = WITHDRAW` — keyed by the victim's uid, over the new
    term's MARK — so the new term's eviction never gets a step (stuck in `_preemptions`, never
    deleted, never reported), and the old term's withdrawal goes out in the new term. Upstream
    each preemption is its own goroutine (executor.go `prepareCandidateAsync`) whose calls
    never touch another's."""
    api = _HoldFirst("PATCH")
    victim = _victim(api)
    term: list[int | None] = [1]
    done: list[tuple[Eviction, bool]] = []
    failed: list[tuple[Eviction, str]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)),  # type: ignore[arg-type]
                      lambda e, reason: failed.append((e, reason)), term=lambda: term[0], retry_seconds=0.05)
    evictor.submit([victim])
    async with anyio.create_task_group() as group:
        group.start_soon(evictor.run)
        with anyio.fail_after(5):
            await api.holding.wait()  # the old term's mark is out
        term[0] = None
        evictor.abandon()  # lost_leadership()
        term[0] = 2  # a new term at once
        evictor.submit([victim])  # which decides the same victim again
        api.release.set()  # the old mark answers (it was applied)
        finished = await _until(lambda: bool(done or failed), 2.0)
        group.cancel_scope.cancel()
    assert finished, "the new term's eviction never went anywhere (neither evicted nor failed)"
    assert done == [(victim, True)] and ("default", "victim") not in api.pods


# --- 3. one slow request holds back every other preemption -----------------------------------------

async def test_a_slow_request_of_one_preemption_does_not_hold_back_another() -> None:
    """Upstream (executor.go `prepareCandidateAsync`) runs each preemption's API calls in a
    goroutine of its own: a victim whose PATCH or DELETE hangs delays only that preemptor.
    Tessera's `Evictor.run` takes the pending writes as one batch and waits for the whole batch's
    task group before it looks at anything new: one request that hangs (up to the 30 s request
    timeout, then retried) holds back every later preemption's marks and DELETEs, and even the
    DELETEs of preemptions whose marks are all written."""
    api = FakeApi()
    slow, other = _victim(api, "slow"), _victim(api, "other")
    other = Eviction(other.namespace, other.name, other.uid, "another-preemptor", "tessera", "n1")
    api.fail_next("PATCH", "/pods/slow/status", stall=True)  # this apiserver request never answers
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure)  # type: ignore[arg-type]
    evictor.submit([slow])
    async with anyio.create_task_group() as group:
        group.start_soon(evictor.run)
        with anyio.fail_after(5):
            while api.stalled == 0:
                await anyio.sleep(0.005)
        evictor.submit([other])  # another preemptor's victim, decided a moment later
        evicted = await _until(lambda: any(e.name == "other" for e, _ in done), 2.0)
        group.cancel_scope.cancel()
    assert evicted, "another preemption's victim waited behind one hanging request"


# --- 4. a persistent failure is retried for ever -----------------------------------------------------

@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
async def test_an_eviction_that_keeps_failing_is_given_up_so_the_preemptor_can_try_again(method: str) -> None:
    """Upstream `PreemptPod`: the DisruptionTarget PATCH (`util.PatchPodStatus`) is retried with
    `retry.DefaultBackoff` (4 attempts) only for `Retriable` errors, the DELETE (`util.DeletePod`)
    not at all; any other failure returns the error, the preemption fails and
    `prepareCandidateAsync` `Activate`s the preemptor, which is scheduled again (and may preempt
    elsewhere). Tessera retries every status not in `_FINAL` (500 from a failing admission webhook,
    503, 429, ...) every `retry_seconds` for ever and never calls `on_failed`: meanwhile the core
    keeps the victim in `preempting`, so the preemptor is refused "a terminating pod on the
    nominated node" and holds its room for as long as the apiserver refuses — and the victim is
    deleted whenever that ends, however long after its preemptor was placed elsewhere or gone."""
    api = FakeApi()
    eviction = _victim(api)
    refusal = Response(500, orjson.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500,
                                          "reason": "InternalError",
                                          "message": 'Internal error occurred: failed calling webhook "pods.example"'}))

    def refuse(call: Call) -> Response | None:
        return refusal if call.method == method and "/pods/victim" in call.path else None

    api.handlers.append(refuse)
    failed: list[tuple[Eviction, str]] = []
    evictor = Evictor(api, lambda e, deleted: None, lambda e, reason: failed.append((e, reason)),  # type: ignore[arg-type]
                      retry_seconds=0.005)
    evictor.submit([eviction])
    await run_for_a_while(evictor.run, lambda: bool(failed), rounds=150)
    tries = len(api.of(method, "/pods/victim"))
    assert failed, f"{tries} {method}s refused with HTTP 500 and the preemption is still not given up"


# --- 5. the DisruptionTarget condition lacks observedGeneration -------------------------------------

async def test_the_disruption_target_condition_carries_the_victims_generation() -> None:
    """Upstream `PreemptPod` builds the condition with `ObservedGeneration:
    apipod.CalculatePodConditionObservedGeneration(&victim.Status, victim.Generation,
    DisruptionTarget)`, which is `victim.Generation` whenever PodObservedGenerationTracking is on
    — GA and locked on since 1.35 — and the apiserver keeps a new condition's 0 as 0
    (registry/core/pod/strategy.go `preserveOldObservedGeneration` only copies an old one; checked
    on the v1.36.3 kube-apiserver binary: the condition comes back without it, generation 1).
    Tessera's `Evictor._set_condition` writes no observedGeneration (an `Eviction` does not even
    carry the victim's generation), so a v1.36 client sees a condition that claims to describe
    no generation of the pod."""
    api = _preemption_cluster(victim_generation=3)
    condition = await _disruption_mark(api)
    assert condition["status"] == "True" and condition["reason"] == "PreemptionByScheduler"
    assert condition.get("observedGeneration") == 3


# --- 6. a pod waiting at the allocation gate (Permit) is never a victim -----------------------------

def test_a_lower_priority_pod_waiting_at_the_allocation_gate_is_the_victim_not_a_running_one() -> None:
    """Upstream `SelectVictimsOnNode` takes every pod of the NodeInfo with a lower priority
    (`isPreemptionAllowed`; the default `IsEligiblePod` accepts all) — assumed pods waiting at
    Permit included — removes them all, then reprieves the most important first. The executor's
    `PreemptPod` then rejects a waiting victim in memory (`waitingPod.Preempt`, Event "... (in
    kube-scheduler memory).") without any API call: it simply goes back to the queue.

    Here node n has two V100s: `a` (priority 500, bound, still `Allocating`) holds one and the
    node's allocation gate; `low` (priority 0) was placed on the other and waits at the gate
    (Tessera's Permit). `high` (priority 1000) needs one V100. Upstream: victims {a, low}
    removed, `a` reprieved (high fits without low), victim `low`, rejected in memory. Tessera's
    `units_for` skips every pod whose placement is still assumed (`_bound`), so it picks the
    running, more important `a`, which the evictor DELETEs, while `low` keeps its device."""
    v100 = "class.tessera.dev/v100"
    now = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()
    heartbeat = "2026-01-01T00:00:00Z"
    core = Scheduler(load_config("config/binpack.yaml"), seed=0)
    devices = [b.device("n", i, heartbeat=heartbeat) for i in range(2)]  # a node agent serves n
    for obj in (b.node("n", gpus=2), *devices, b.resource_class("v100", match_labels={"model": "V100"})):
        core.apply("ADDED", obj, now)
    a = b.pod("a", limits={v100: 1}, priority=500, node_name="n")
    grant = ann.DeviceGrant(devices[0]["spec"]["deviceID"], devices[0]["metadata"]["name"], None)
    a["metadata"]["annotations"] = {ann.DEVICES: ann.encode_devices({"main": {v100: (grant,)}}),
                                    ann.PHASE: ann.PHASE_ALLOCATING}
    core.apply("ADDED", a, now)
    core.apply("ADDED", b.pod("low", limits={v100: 1}, priority=0), now)
    [placed] = core.schedule_next(now) or []
    assert placed.pod.meta.name == "low" and placed.node == "n" and placed.deferred  # waiting at the gate
    core.apply("ADDED", b.pod("high", limits={v100: 1}, priority=1000), now + 1)
    [attempt] = core.schedule_next(now + 1) or []
    assert attempt.pod.meta.name == "high" and attempt.nominated_node == "n"
    assert [victim.meta.name for victim in attempt.preempted] == ["low"], \
        "a running pod of priority 500 was chosen over a waiting pod of priority 0"
    low = attempt.preempted[0]
    # taken back in memory: no eviction, its device free at once, the pod pending again
    assert attempt.rejected_waiting == {low.uid: "n"}
    assert low.uid not in core.state.placements and low.uid in core.state.pending
    assert low.uid not in core.state.preempting and not core.take_released()


# --- 7. a victim recreated under its name: the real apiserver answers the mark with 422 -------------

def _immutable_uid(api: FakeApi) -> Callable[[Call], Response | None]:
    """kube-apiserver v1.36.3's answer to a pods/status PATCH whose metadata.uid is not the pod's:
    the patch handler has no uid precondition (handlers/patch.go: `DefaultUpdatedObjectInfo(nil)`),
    the patched object carries the other uid, and `rest.BeforeUpdate` → `validateCommonFields` →
    `ValidateObjectMetaAccessorUpdate` rejects it: 422 Invalid "metadata.uid: ... field is
    immutable" (checked on the kube-apiserver binary this repo builds; FakeApi answers 409)."""
    def answer(call: Call) -> Response | None:
        if call.method != "PATCH" or not call.path.endswith("/status") or "/pods/" not in call.path:
            return None
        name = call.path.rsplit("/", 2)[1]
        pod = api.pods.get(("default", name))
        wanted = ((call.body or {}).get("metadata") or {}).get("uid")
        if pod is None or wanted is None or wanted == pod["metadata"]["uid"]:
            return None
        message = f'Pod "{name}" is invalid: metadata.uid: Invalid value: "{wanted}": field is immutable'
        return Response(422, orjson.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422,
                                           "reason": "Invalid", "message": message}))
    return answer


async def test_a_victim_recreated_under_its_name_does_not_fail_the_whole_preemption() -> None:
    """The evictor's contract (module docstring): a victim "recreated (409 on the uid), counts as
    done" and the other victims go. That 409 is FakeApi's; kube-apiserver answers the mark's
    uid-guarded PATCH with 422 (see `_immutable_uid`), which `_FINAL` takes as "cannot be marked
    for good": `_fail` gives the whole preemption up — the other victims are not deleted, their
    marks are withdrawn, every victim gets a PreemptionFailed Warning and the preemptor loses its
    room. A StatefulSet pod is recreated under its name within seconds, so this is ordinary.
    Upstream `PreemptPod` (executor.go) treats a victim whose PATCH finds it gone as done
    ("Victim Pod is already deleted", return nil) and the preemption of the others goes on."""
    api = FakeApi()
    evictions = [_victim(api, f"member-{i}") for i in range(3)]
    api.pods[("default", "member-1")]["metadata"]["uid"] = "uid-of-the-recreated-pod"
    api.handlers.append(_immutable_uid(api))
    done: list[tuple[Eviction, bool]] = []
    failed: list[tuple[Eviction, str]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)),  # type: ignore[arg-type]
                      lambda e, reason: failed.append((e, reason)), retry_seconds=0.01)
    evictor.submit(evictions)
    await run_for_a_while(evictor.run, lambda: len(done) + len(failed) >= 3, rounds=100)
    assert not failed, f"the whole preemption failed: {sorted(e.name for e, _ in failed)} ({failed[0][1]})"
    assert sorted((e.name, deleted) for e, deleted in done) == [("member-0", True), ("member-1", False),
                                                                 ("member-2", True)]
    assert ("default", "member-1") in api.pods  # the new pod under the old name stays


def test_the_loop_does_not_evict_a_victim_taken_back_in_memory_and_says_so() -> None:
    """executor.go `PreemptPod`: a waiting victim gets no API call, and its Preempted Event says
    "Preempted by pod <uid> on node <node> (in kube-scheduler memory)."."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    preemptor = parse_pod(b.pod("high", limits={"nvidia.com/gpu": 1}, priority=1000))
    waiting = parse_pod(b.pod("low", limits={"nvidia.com/gpu": 1}))
    bound = parse_pod(b.pod("mid", limits={"nvidia.com/gpu": 1}, priority=500, node_name="n", phase="Running"))
    attempt = Attempt(preemptor, None, preempted=[waiting, bound], rejected_waiting={waiting.uid: "n"})
    submitted: list[list[Eviction]] = []
    loop.evictor.submit = submitted.append  # type: ignore[method-assign,assignment]
    recorded: list[tuple[str, str]] = []
    loop.events.record = lambda ref, type_, reason, action, note, related=None, **_: recorded.append((ref.name, note))  # type: ignore[method-assign]
    loop._evict(attempt)
    assert [[e.name for e in batch] for batch in submitted] == [["mid"]]
    assert recorded == [("low", f"Preempted by pod {preemptor.uid} on node n (in kube-scheduler memory)."),
                        ("low", "waiting on permit for pod: preempted"),  # its binding cycle's error
                        # Tessera's own, on the preemptor: its victims
                        ("high", "Preempting 2 lower-priority pods to make room: default/low on n, default/mid on n")]


def test_a_victim_taken_back_in_memory_for_a_podgroup_names_the_podgroup() -> None:
    """executor.go `PreemptPod` for a pod group (`podGroupExecutorPreemptor`): "Preempted by
    podgroup <PodGroup uid> on node <node> (in kube-scheduler memory).", related to the PodGroup."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    group = b.podgroup("big", 2)
    loop.core.apply("ADDED", group, 0.0)
    preemptor = parse_pod(b.pod("big-0", limits={"nvidia.com/gpu": 1}, priority=1000,
                                labels={"scheduling.x-k8s.io/pod-group": "big"}))
    waiting = parse_pod(b.pod("low", limits={"nvidia.com/gpu": 1}))
    attempt = Attempt(preemptor, None, preempted=[waiting], rejected_waiting={waiting.uid: "n"},
                      preemptor_type="podgroup")
    loop.evictor.submit = lambda evictions: None  # type: ignore[method-assign]
    recorded: list[tuple[str, str, Any]] = []
    loop.events.record = lambda ref, type_, reason, action, note, related=None, **_: recorded.append((ref.name, note, related))  # type: ignore[method-assign]
    loop._evict(attempt)
    uid = group["metadata"]["uid"]
    name, note, related = recorded[0]
    assert (name, note) == ("low", f"Preempted by podgroup {uid} on node n (in kube-scheduler memory).")
    assert (related.kind, related.api_version, related.name, related.uid) == (
        "PodGroup", "scheduling.x-k8s.io/v1alpha1", "big", uid)


def test_a_victim_taken_back_at_the_allocation_gate_ends_its_attempt_as_upstreams_binding_cycle_error() -> None:
    """A victim held at Permit (the allocation gate) and taken back in memory never sends its
    Binding. Its attempt stayed in the loop's `_binding_attempts` (counted nowhere, until the pod
    was placed again or deleted) and its status kept saying it waited for the gate. Upstream
    (executor.go `PreemptPod` → `waitingPod.Preempt`, an Error status; schedule_one.go
    `bindingCycle`: WaitOnPermit returns "waiting on permit for pod: preempted",
    `handleBindingCycleError` → `handleSchedulingFailure`): schedule_attempts_total{result="error"}
    with the attempt's duration, a FailedScheduling Warning and PodScheduled=False SchedulerError
    with that message."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    preemptor = parse_pod(b.pod("high", limits={"nvidia.com/gpu": 1}, priority=1000))
    waiting = parse_pod(b.pod("low", limits={"nvidia.com/gpu": 1}))
    held = Attempt(waiting, "n", deferred=True)
    loop._binding_attempts[waiting.uid] = ("tessera", 0.5, held, time.monotonic())
    attempts: list[tuple[str, str, Attempt]] = []
    loop.hooks.on_attempt = lambda result, profile, seconds, attempt: attempts.append((result, profile, attempt))  # type: ignore[method-assign]
    loop.evictor.submit = lambda evictions: None  # type: ignore[method-assign]
    recorded: list[tuple[str, str, str]] = []
    loop.events.record = lambda ref, type_, reason, action, note, related=None, **_: recorded.append((ref.name, reason, note))  # type: ignore[method-assign]
    statuses: list[tuple[str, str, str]] = []
    loop.statuses.pod_waiting = lambda namespace, name, reason, message, **_: statuses.append((name, reason, message))  # type: ignore[method-assign]
    loop._evict(Attempt(preemptor, None, preempted=[waiting], rejected_waiting={waiting.uid: "n"}))
    assert attempts == [("error", "tessera", held)] and waiting.uid not in loop._binding_attempts
    assert ("low", "FailedScheduling", "waiting on permit for pod: preempted") in recorded
    assert statuses == [("low", "SchedulerError", "waiting on permit for pod: preempted")]


# --- 7. marking a victim again keeps the mark's lastTransitionTime ---------------------------------

async def test_a_victim_already_marked_keeps_the_marks_transition_time() -> None:
    """Upstream `PreemptPod` writes the condition through `apipod.UpdatePodCondition`
    (pkg/api/v1/pod/util.go:363-386), which keeps the old condition's LastTransitionTime when the
    status does not change: a victim that already carries DisruptionTarget=True (an earlier
    preemption's DELETE failed) is marked again without moving the mark's time, so the disruption
    controller's 2-minute clock and Tessera's own finishing rule, both read from that time, are
    not restarted."""
    api = _preemption_cluster()
    since = "2026-01-01T00:05:00Z"
    api.pod("default", "low")["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
         "message": "tessera: preempting to accommodate a higher priority pod", "lastTransitionTime": since}]
    condition = await _disruption_mark(api)
    assert condition["status"] == "True" and condition["lastTransitionTime"] == since


async def test_a_mark_tried_again_carries_the_time_of_its_first_try(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mark whose answer was lost (the write may have landed) is sent again: the retry is the
    same transition, so it carries the same lastTransitionTime (upstream computes the condition
    once per victim, and a retried PATCH of it is the same body)."""
    clock = iter(range(1_700_000_000, 1_800_000_000, 7))
    monkeypatch.setattr("scheduler.kube.evictor.micro_time", lambda now=None: micro_time(next(clock)))
    api = FakeApi()
    eviction = _victim(api)
    api.fail_next("PATCH", "/pods/victim/status", error=aiohttp.ServerDisconnectedError())
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure)  # type: ignore[arg-type]
    evictor.submit([eviction])
    await run_for_a_while(evictor.run, lambda: bool(done), 200)
    assert done == [(eviction, True)]
    times = [c["lastTransitionTime"] for call in api.of("PATCH", "/pods/victim/status")
             for c in call.body["status"]["conditions"]]
    assert len(times) == 2 and times[0] == times[1]


# --- 8. a whole gang's preemption names a podgroup, as upstream's workload-aware preemption ---------

async def test_a_gangs_victims_are_marked_for_a_higher_priority_podgroup() -> None:
    """Upstream v1.36 writes the victim's condition message as `"%s: preempting to accommodate a
    higher priority %s", preemptor.SchedulerName(), preemptor.Type()`
    (pkg/scheduler/framework/preemption/executor.go:130), where Type() is "pod" for a pod
    (executor.go:467) and "podgroup" when a whole pod group preempts (executor.go:510,
    WorkloadAwarePreemption). A gang of two that needs both GPUs, each taken by a low pod, preempts
    as one: its victims read "podgroup"; a single pod's still read "pod" (test_evictor.py)."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n1", gpus=1), b.node("n2", gpus=1)]
    for i, node in enumerate(("n1", "n2")):
        low = b.pod(f"low-{i}", limits={"nvidia.com/gpu": 1}, priority=0, node_name=node, phase="Running")
        low["status"]["startTime"] = "2026-01-01T00:00:00Z"
        api.add_pod(low)
    for i in range(2):
        api.add_pod(b.pod(f"member-{i}", limits={"nvidia.com/gpu": 1}, priority=1000, labels=b.gang_labels("g", 2)))
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t", seed=0)  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        marked = await _until(lambda: len(api.of("PATCH", "/pods/low-")) >= 2, 10.0)
        owner.cancel_scope.cancel()
    assert marked, "the gang did not preempt both low pods"
    messages = {c["message"] for call in api.of("PATCH", "/pods/low-") for c in call.body["status"]["conditions"]
                if c["type"] == "DisruptionTarget"}
    assert messages == {"tessera: preempting to accommodate a higher priority podgroup"}
