"""A Binding whose read-back shows the pod bound by another leader's Binding is not this process's.

Day-2 trial (item 5): after SIGSTOP and SIGCONT the old leader logged `binder.bound_despite_error`
and `binder.bound` for 20 pods the new leader had bound (their Events and `tessera.dev/term` named
the new term) and counted them in `tessera_bindings_total{result="success"}` on a standby; with two
installs the second one also wrote a duplicate "Successfully assigned" Event after its 409. The
read-back compared the node and the devices only: a newer leader decides the same pod the same way,
so both matched. Every Binding of a term carries the term's token, and the apiserver copies a
Binding's annotations onto the pod it binds: a pod bound to our node with our devices whose token
is not our Binding's (another term of our Lease, another install's Lease, none at all, or the one
it carried when we decided) was bound by someone else. That is a `conflict` (bound by another
Binding: ours can never land, nothing to retry), logged `binder.bound_by_other`; the pod as read
back is handed to the core, which counts it as the other leader's binding of those very devices.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.kube.binder import Binder, Binding, BindResult, Outcome
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.kube.run_cli import MetricsHooks
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi
from tests.helpers import until

DEVICES = '{"version":1,"containers":{"main":{"class.tessera.dev/v100":[{"id":"GPU-1","device":"n.gpu-1"}]}}}'
OURS = "kube-system/tessera/rep-a/4/2026-01-01T00:01:00.000000Z"
NEWER = "kube-system/tessera/rep-b/5/2026-01-01T00:02:00.000000Z"  # the next term of our Lease
OTHER_INSTALL = "tessera-system/tessera/rep-z/3/2026-01-01T00:02:00.000000Z"
DECIDED_WITH = "kube-system/tessera/rep-a/3/2026-01-01T00:00:00.000000Z"  # the pod's token when we decided


def _setup(term: list[int]) -> tuple[FakeApi, Binder, list[BindResult], Binding]:
    api = FakeApi()
    api.add_pod(b.pod("p"))
    pod = api.pod("default", "p")
    pod["metadata"]["resourceVersion"] = "7"
    pod["metadata"]["annotations"] = {ann.TERM: DECIDED_WITH}
    results: list[BindResult] = []
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    binder = Binder(api, results.append, sleep=sleep, term=lambda: term[0],  # type: ignore[arg-type]
                    clock=lambda: sum(sleeps), late_landing_seconds=5.0)
    binding = Binding(pod["metadata"]["uid"], "default", "p", "n", {ann.DEVICES: DEVICES, ann.TERM: OURS},
                      resource_version="7", term_as_decided=DECIDED_WITH)
    return api, binder, results, binding


def _bind_as(api: FakeApi, token: str | None) -> None:
    """Another leader binds pod p to node n with the very devices ours names, its Binding carrying
    `token` (None: no `tessera.dev/term`, a scheduler without leader election, on a pod none wrote to)."""
    pod = api.pod("default", "p")
    if token is None:
        pod["metadata"]["annotations"].pop(ann.TERM)
    annotations = {ann.DEVICES: DEVICES, **({ann.TERM: token} if token is not None else {})}
    body = {"metadata": {"uid": pod["metadata"]["uid"], "resourceVersion": pod["metadata"]["resourceVersion"],
                         "annotations": annotations}, "target": {"name": "n"}}
    assert api.bind("default", "p", body).status == 201


async def _run(binder: Binder, binding: Binding) -> None:
    async with anyio.create_task_group() as group:
        await group.start(binder.run)
        binder.submit(binding)
        assert await binder.drain(5)
        group.cancel_scope.cancel()


@pytest.mark.parametrize("token", [NEWER, OTHER_INSTALL, None, DECIDED_WITH])
async def test_a_pod_another_binding_bound_to_our_node_with_our_devices_is_not_ours(token: str | None) -> None:
    """The trial's deposed leader: its Binding held on its way while the next term fenced the pod
    and bound it the same way; the held request lands (409) and the read-back shows our node and
    our devices, under another token."""
    term = [1]
    api, binder, results, binding = _setup(term)
    api.fail_next("POST", "/binding", hold=True)

    def deposed_then_bound(method: str, path: str) -> None:
        if method == "POST":
            term[0] = 2  # the Lease moved while the POST was held
        if method == "GET" and api.held:
            _bind_as(api, token)
            [late] = api.deliver_held()
            assert late.status == 409

    api.before = deposed_then_bound
    with capture_logs() as logs:
        await _run(binder, binding)
    [result] = results
    assert result.outcome is Outcome.CONFLICT
    assert result.bound_by_other and result.bound_by == (token or "")
    assert result.observed is not None and result.observed["spec"]["nodeName"] == "n"
    assert not [e for e in logs if e["event"] == "binder.bound_despite_error"]


async def test_a_two_installs_409_read_back_is_not_ours() -> None:
    """The second install, still leading on its own Lease: the first install bound the pod first,
    our only send is refused (409) and the read-back shows our node and devices under its token."""
    api, binder, results, binding = _setup([1])
    api.before = lambda method, path: _bind_as(api, OTHER_INSTALL) if method == "POST" else None
    await _run(binder, binding)
    [result] = results
    assert (result.outcome, result.bound_by_other, result.bound_by, result.sends) == \
        (Outcome.CONFLICT, True, OTHER_INSTALL, 1)


async def test_our_own_binding_that_landed_despite_the_error_is_still_ours() -> None:
    """The contrast: the held request was ours and landed; the pod carries our Binding's token."""
    api, binder, results, binding = _setup([1])
    api.fail_next("POST", "/binding", hold=True)

    def land_before_the_read(method: str, path: str) -> None:
        if method == "GET":
            api.deliver_held()

    api.before = land_before_the_read
    await _run(binder, binding)
    [result] = results
    assert (result.outcome, result.bound_by_other) == (Outcome.BOUND, False)


async def test_our_binding_that_landed_before_our_withdrawal_is_still_ours() -> None:
    """Our own withdrawal token written over our Binding's (the written pod is bound): no evidence
    the Binding was another's, so it is ours, as before."""
    leading = [True]
    api, binder, results, binding = _setup([1])
    binder.term = lambda: 1 if leading[0] else None
    api.fail_next("POST", "/binding", hold=True)

    def step_down_then_land(method: str, path: str) -> None:
        if method == "POST":
            leading[0] = False
        if method == "PATCH" and path.endswith("/status"):
            assert [r.status for r in api.deliver_held()] == [201]

    api.before = step_down_then_land
    await _run(binder, binding)
    [result] = results
    assert (result.outcome, result.bound_by_other) == (Outcome.BOUND, False)
    assert result.observed is not None and result.observed["metadata"]["annotations"][ann.TERM] == \
        "tessera/withdrawn/7"


def _p_and_q_on_one_gpu() -> FakeApi:
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    api.add_pod(b.pod("q", requests={"nvidia.com/gpu": 1}, priority=0))  # waits for p's GPU
    return api


async def _lead_until(api: FakeApi, seen: Callable[[list[MutableMapping[str, Any]]], bool]
                      ) -> tuple[SchedulerLoop, Metrics, list[MutableMapping[str, Any]]]:
    """Run a loop leading with term token OURS until `seen(logs)`, then one more cycle for q."""
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="rep-a",  # type: ignore[arg-type]
                         leader_term=lambda: 1, term_fence=lambda: OURS)
    metrics = Metrics()
    loop.hooks = MetricsHooks(metrics, loop)
    with capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            await until(lambda: seen(logs))
            await anyio.sleep(0.2)  # q gets a cycle: it must not get p's GPU
            owner.cancel_scope.cancel()
    return loop, metrics, logs


def _pod_bound_by_the_next_term(api: FakeApi) -> Callable[[Call], Response | None]:
    """A handler: the first Binding of pod p finds it already bound to the same node with the same
    annotations by the next term (its token), as a new leader deciding the same way does."""
    def bind_first(call: Call) -> Response | None:
        if call.method == "POST" and call.path.endswith("/pods/p/binding") and not api.of("POST", "/binding")[1:]:
            annotations = {**call.body["metadata"]["annotations"], ann.TERM: NEWER}
            pod = api.pod("default", "p")
            assert api.bind("default", "p", {"metadata": {"uid": pod["metadata"]["uid"], "annotations": annotations},
                                             "target": call.body["target"]}).status == 201
        return None
    return bind_first


async def test_the_loop_takes_the_other_leaders_binding_as_the_pods_and_claims_nothing() -> None:
    """No "Successfully assigned" Event, no `binder.bound`, `result="conflict"` (not success), one
    warning line naming the other term; the pod is counted bound to n with its GPU (not freed,
    not assumed) — the other leader's binding of the very GPU this replica had assumed."""
    api = _p_and_q_on_one_gpu()
    api.handlers.insert(0, _pod_bound_by_the_next_term(api))
    loop, metrics, logs = await _lead_until(api, lambda logs: any(str(e["event"]).startswith("binder.") for e in logs))
    assert api.pod("default", "p")["metadata"]["annotations"][ann.TERM] == NEWER
    assert not [e for e in api.events.values() if e["reason"] == "Scheduled"]
    lines = [(e["event"], e["log_level"]) for e in logs if str(e["event"]).startswith("binder.")]
    assert lines == [("binder.bound_by_other", "warning")]
    [line] = [e for e in logs if e["event"] == "binder.bound_by_other"]
    assert line["term"] == NEWER and line["pod"] == "default/p" and line["outcome"] == "conflict"
    assert metrics.registry.get_sample_value("tessera_bindings_total", {"result": "conflict"}) == 1.0
    assert not metrics.registry.get_sample_value("tessera_bindings_total", {"result": "success"})
    uid = api.pod("default", "p")["metadata"]["uid"]
    placement = loop.core.state.placements[uid]
    assert placement.node == "n" and not placement.assumed
    assert not api.pod("default", "q")["spec"].get("nodeName") and len(api.of("POST", "/binding")) == 1


# --- a newer leader's fence written just after our late Binding landed ----------------------------

def _fence(api: FakeApi, token: str) -> None:
    """A newer leader's term fence onto pod p, its cache still showing the pod unbound: a merge
    patch through pods/status whose only precondition is the uid (scheduler/kube/term_write.py),
    so it lands on the pod our Binding has just bound and writes its token over ours."""
    pod = api.pod("default", "p")
    assert api._patch_status("default", "p", {"metadata": {"uid": pod["metadata"]["uid"],
                                                           "annotations": {ann.TERM: token}}}).status == 200


async def test_our_binding_answered_201_is_ours_whatever_token_a_fence_writes_after_it() -> None:
    """The fence lands between our Binding and its answer: the 201 is the apiserver saying this
    request bound the pod, whatever the pod carries afterwards (no read-back is done)."""
    api, binder, results, binding = _setup([1])

    def bind_then_fence(call: Call) -> Response | None:
        if call.method == "POST" and call.path.endswith("/pods/p/binding"):
            answer = api.bind("default", "p", call.body)
            _fence(api, NEWER)
            return answer
        return None

    api.handlers.insert(0, bind_then_fence)
    await _run(binder, binding)
    [result] = results
    assert (result.outcome, result.bound_by_other) == (Outcome.BOUND, False)
    assert api.pod("default", "p")["metadata"]["annotations"][ann.TERM] == NEWER


@pytest.mark.parametrize("deposed", [False, True])
async def test_our_late_binding_whose_answer_was_lost_is_ours_though_a_newer_fence_wrote_over_its_token(
        deposed: bool) -> None:
    """Session 50's closing note: our Binding lands (its answer lost: a broken connection), and a
    newer leader's fence, written from a cache that still showed the pod unbound, lands right
    after it and writes its token over our Binding's. The read-back shows our node, our devices
    and the newer term's token: read as the newer term's Binding (`bound_by_other`), with no
    "Successfully assigned" Event and no success anywhere — nobody else bound it. The pod as read
    cannot tell this from the fence followed by the newer leader's own Binding; its history can:
    our Binding is conditional on the version we decided at, so it bound the pod only if the
    first change after that version is the Binding, carrying our token."""
    term = [1]
    api, binder, results, binding = _setup(term)
    api.fail_next("POST", "/binding", hold=True)

    def land_then_fence(method: str, path: str) -> None:
        if method == "POST" and deposed:
            term[0] = 2
        if method == "GET" and api.held:
            [landed] = api.deliver_held()
            assert landed.status == 201
            _fence(api, NEWER)

    api.before = land_then_fence
    with capture_logs() as logs:
        await _run(binder, binding)
    [result] = results
    assert api.pod("default", "p")["metadata"]["annotations"][ann.TERM] == NEWER
    assert (result.outcome, result.bound_by_other) == (Outcome.BOUND, False)
    assert [e["event"] for e in logs if e["event"].startswith("binder.")][-1] == "binder.bound_despite_error"


async def test_a_history_the_watch_cache_no_longer_holds_leaves_the_pod_the_other_terms() -> None:
    """The same race, but the versions since our decision are gone from the watch cache (410):
    nothing proves the Binding was ours, so it is not claimed (as before)."""
    api, binder, results, binding = _setup([1])
    api.history_expired = True
    api.fail_next("POST", "/binding", hold=True)

    def land_then_fence(method: str, path: str) -> None:
        if method == "GET" and api.held:
            api.deliver_held()
            _fence(api, NEWER)

    api.before = land_then_fence
    await _run(binder, binding)
    [result] = results
    assert (result.outcome, result.bound_by_other, result.bound_by) == (Outcome.CONFLICT, True, NEWER)


def _our_binding_lands_then_the_next_terms_fence(api: FakeApi) -> Callable[[str, str], None]:
    """`before`: the first read after the held Binding delivers it (201, its answer lost) and
    then the next term's fence writes its token over ours."""
    def before(method: str, path: str) -> None:
        if method == "GET" and api.held:
            [landed] = api.deliver_held()
            assert landed.status == 201
            _fence(api, NEWER)
    return before


async def test_the_loop_counts_our_late_binding_under_a_newer_fence_as_its_success() -> None:
    """The loop: "Successfully assigned" Event, `binder.bound`, `result="success"`; the pod bound
    to n with its GPU, not freed for q."""
    api = _p_and_q_on_one_gpu()
    api.fail_next("POST", "/pods/p/binding", hold=True)
    api.before = _our_binding_lands_then_the_next_terms_fence(api)
    loop, metrics, logs = await _lead_until(
        api, lambda logs: any(e["event"] in ("binder.bound", "binder.bound_by_other") for e in logs))
    assert api.pod("default", "p")["metadata"]["annotations"][ann.TERM] == NEWER
    assert [e["note"] for e in api.events.values() if e["reason"] == "Scheduled"] == \
        ["Successfully assigned default/p to n"]
    assert not [e for e in logs if e["event"] == "binder.bound_by_other"]
    assert metrics.registry.get_sample_value("tessera_bindings_total", {"result": "success"}) == 1.0
    assert not metrics.registry.get_sample_value("tessera_bindings_total", {"result": "conflict"})
    uid = api.pod("default", "p")["metadata"]["uid"]
    placement = loop.core.state.placements[uid]
    assert placement.node == "n"
    assert not api.pod("default", "q")["spec"].get("nodeName")
