"""Review of the Binding path (binder, the loop's use of it, the core's outcome handling).

Each test failed before its fix (a review found them); its docstring says what upstream does (or
why Tessera's promise — never one GPU for two pods — breaks) and what Tessera does instead.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import anyio

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.kube.http import KubeHttp, RateLimiter
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from scheduler.view.cluster import build_view
from tests.fakeapi import FakeApi

V100 = "class.tessera.dev/v100"


def _gpu_cluster(gpus: int = 2) -> list[dict[str, Any]]:
    """A node with `gpus` V100s published by an agent (no heartbeat: no allocation gate) and the class."""
    return [b.node("n", gpus=gpus), *(b.device("n", i) for i in range(gpus)),
            b.resource_class("v100", match_labels={"model": "V100"})]


def _bound(pod: dict[str, Any], node: str, annotations: dict[str, str], rv: int) -> dict[str, Any]:
    """The pod as the watch shows it once a Binding (anybody's) landed."""
    out = copy.deepcopy(pod)
    out["spec"]["nodeName"] = node
    out["metadata"]["annotations"] = {**(out["metadata"].get("annotations") or {}), **annotations}
    out["metadata"]["resourceVersion"] = str(rv)
    return out


def _devices_of(annotations: Any) -> str:
    """The device names an attempt's annotation grants, as one sorted string."""
    decoded = ann.decode_devices(dict(annotations)[ann.DEVICES])
    return ",".join(sorted(g.device for by_res in decoded.values() for grants in by_res.values() for g in grants))


async def _bind_all(loop: SchedulerLoop, attempts: list[Any]) -> None:
    """Hand the placed attempts to the loop (its binder running) until every Binding is settled."""
    async with anyio.create_task_group() as group:
        await group.start(loop.binder.run)
        for attempt in attempts:
            loop._handle(attempt, 0.0)
        assert await loop.binder.drain(5)
        group.cancel_scope.cancel()


# --- 1. a deposed binder's "not sent" for a gang member another leader has bound -----------------

async def test_a_gang_member_bound_by_the_next_leader_keeps_its_gpu_after_our_unsent_binding_fails() -> None:
    """Leader A decides gang g (two members, one V100 each) and hands both Bindings to its binder,
    which waits for write tokens (a backlog drains the bucket). Meanwhile A loses the Lease, B
    takes over, binds both members itself (the watch shows them bound, with B's devices), and A's
    binder, no longer leading, reports "not the leader any more; the Binding was not sent"
    (Outcome.RETRY). The loop hands that to `core.binding_failed`, and `BindingOutcomes.failed`
    — not asking whether the placement is still an *assumption* — puts a nominated-preemptor
    `hold` on top of the member's real, bound placement (its gang has members on nodes). The
    ledger keeps holders in a set, so the hold adds nothing; but when the hold is dropped (the
    member's next update, e.g. Running) `uncharge` removes the member from its GPU: the GPU reads
    free while the member runs on it, and the next GPU pod is given it.

    Upstream: a Binding error forgets only an *assumed* pod (`cacheImpl.ForgetPod`: "Only assumed
    pod can be forgotten", an error otherwise) and `handleSchedulingFailure` does not requeue a
    pod the informer shows assigned; nothing of a bound pod's accounting is touched."""
    api = FakeApi()
    term: list[int | None] = [1]
    flipped = [False]
    loop: SchedulerLoop

    async def throttled(seconds: float) -> None:  # the bucket is empty: meanwhile the Lease moves to B
        if not flipped[0]:
            flipped[0] = True
            term[0] = None
            loop.lost_leadership()
            for i, attempt in enumerate(placed):  # B binds both members; our watch shows it
                loop._on_event("MODIFIED", _bound(pods[attempt.pod.meta.name], "n", dict(attempt.annotations),
                                                  200 + i))
        await anyio.sleep(0)

    limiter = RateLimiter(qps=1.0, burst=1, sleep=throttled)
    limiter._tokens = 0.0
    loop = SchedulerLoop(load_config(None), KubeHttp(api, limiter), KubeHttp(api),  # type: ignore[arg-type]
                         identity="A", leader_term=lambda: term[0])
    for obj in _gpu_cluster(2):
        loop._apply("ADDED", obj)
    pods = {f"g-{i}": b.pod(f"g-{i}", limits={V100: 1}, labels=b.gang_labels("g", 2)) for i in range(2)}
    for i, pod in enumerate(pods.values()):
        pod["metadata"]["resourceVersion"] = str(100 + i)
        api.add_pod(pod)
        loop._apply("ADDED", pod)
    placed = loop.core.schedule_next(0.0) or []
    assert [a.node for a in placed] == ["n", "n"]
    await _bind_all(loop, placed)
    assert api.of("POST", "/binding") == []  # nothing sent by A: B bound them
    core = loop.core
    assert {p.key: p.assumed for p in core.placements()} == {"default/g-0": False, "default/g-1": False}
    # the members start: their next updates
    for i, name in enumerate(pods):
        running = _bound(pods[name], "n", dict(placed[i].annotations), 300 + i)
        running["status"]["phase"] = "Running"
        loop._on_event("MODIFIED", running)
    # A leads again later; a new GPU pod must not be given a running member's GPU
    term[0] = 2
    loop._apply("ADDED", b.pod("q", limits={V100: 1}))
    now = time.time()
    tried = [a for t in range(1, 40) for a in core.schedule_next(now + t) or ()]
    given = [_devices_of(a.annotations) for a in tried if a.pod.meta.name == "q" and a.node is not None]
    taken = {_devices_of(a.annotations) for a in placed}
    assert not set(given) & taken, f"q was given a GPU a running gang member holds: {given}"
    summary = build_view(core, source="live", now=now).summary
    assert summary.free == 0, f"GPUs of running pods read free: {summary.line()}"


# --- 2. a pod being deleted is scheduled again after its Binding was refused ----------------------

async def test_a_pod_being_deleted_is_not_scheduled_again_after_its_binding_is_refused() -> None:
    """Pod p (a Job's pod: it carries a finalizer, so deletion leaves it with a deletionTimestamp)
    is placed and its Binding goes out; meanwhile its namespace is deleted: p gets its
    deletionTimestamp and the Binding is refused for good (NamespaceLifecycle answers 403 "unable
    to create new content in namespace ... because it is being terminated"). The loop reports the
    refusal to `core.binding_failed`, whose `ClusterState.forget` puts every unbound pod of ours
    back into `pending` without asking whether it is being deleted (`_on_pod` never makes a
    deleting pod pending), so the next cycles place p again — its GPU assumed, another Binding
    POSTed, refused again, for as long as the finalizer stays.

    Upstream: `skipPodSchedule` (schedule_one.go) never schedules a pod with a deletionTimestamp
    ("skip schedule deleting pod"); Tessera's own intake agrees (`waiting = ... and not
    pod.meta.deleting`)."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="A")  # type: ignore[arg-type]
    loop._apply("ADDED", b.node("n", gpus=1))
    pod = b.pod("p", requests={"nvidia.com/gpu": 1})
    pod["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    pod["metadata"]["resourceVersion"] = "100"
    api.add_pod(pod)
    loop._apply("ADDED", pod)
    placed = loop.core.schedule_next(0.0) or []
    assert [a.node for a in placed] == ["n"]
    deleting = copy.deepcopy(pod)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z"
    deleting["metadata"]["resourceVersion"] = "101"
    api.fail_next("POST", "/binding", status=403)

    def namespace_deleted(method: str, path: str) -> None:  # the namespace goes while the POST is out
        if method == "POST" and api.before is not None:
            api.before = None
            api.add_pod(deleting)
            loop._on_event("MODIFIED", deleting)

    api.before = namespace_deleted
    await _bind_all(loop, placed)
    assert len(api.of("POST", "/binding")) == 1
    now = time.time()  # the loop stamps the refusal's backoff with the wall clock
    again = [a for t in range(1, 40) for a in loop.core.schedule_next(now + t) or () if a.node is not None]
    assert again == [], f"a pod being deleted was placed again: {[(a.pod.key, a.node) for a in again]}"
    assert not loop.core.is_pending("default/p")


# --- 3. no PodScheduled=False after a failed Binding ---------------------------------------------

async def test_a_refused_binding_marks_the_pod_podscheduled_false_scheduler_error() -> None:
    """Upstream `handleBindingCycleError` -> `handleSchedulingFailure` (schedule_one.go): a Bind
    error (reason SchedulerError, not Unschedulable) still patches the pod's condition to
    PodScheduled=False, reason `SchedulerError`, message the error, and clears the nomination
    (`clearNominatedNode`), for a pod that exists and is not assigned. Tessera records the
    FailedScheduling Event only: no condition is wished, so a pod whose Bindings are refused (a
    webhook, RBAC) shows no PodScheduled condition at all — or, after the allocation gate, keeps
    "WaitingForAllocation ... the Binding waits until the node agent has allocated" while it is
    really back in backoff. The status writer cannot even express it: `_pod_version` accepts
    only the reason `waiting_reason` gives (Unschedulable / WaitingForAllocation)."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="A")  # type: ignore[arg-type]
    loop._apply("ADDED", b.node("n", gpus=1))
    pod = b.pod("p", requests={"nvidia.com/gpu": 1})
    pod["metadata"]["resourceVersion"] = "100"
    api.add_pod(pod)
    loop._apply("ADDED", pod)
    placed = loop.core.schedule_next(0.0) or []
    api.fail_next("POST", "/binding", status=403)
    await _bind_all(loop, placed)
    conditions = [c for (path, _), body in loop.statuses._dirty.items() if path.endswith("/pods/p/status")
                  for c in body["status"].get("conditions", [])]
    assert [(c["status"], c["reason"]) for c in conditions] == [("False", "SchedulerError")], conditions
