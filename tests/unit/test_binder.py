"""The binder against a fake HTTP layer: every outcome, and no release while a Binding may land.

The soak found a V100 given to two pods: a Binding failed with `ServerDisconnectedError`, yet the
request had reached the apiserver late; the binder had read the pod back (still unbound), reported
"not bound", the core released the device and gave it to another pod. A read-back that shows the
pod unbound settles nothing while an earlier request may still land, so the binder now sends the
same Binding again until the answer is certain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import aiohttp
import anyio
import pytest
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.kube.binder import Binder, Binding, BindResult, Outcome
from scheduler.kube.http import KubeHttp, RateLimiter, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi

DEVICES = '{"version":1,"containers":{"main":{"class.tessera.dev/v100":[{"id":"GPU-1","device":"n.gpu-1"}]}}}'


def _setup(deliver_on_sleep: bool = False, term: Callable[[], object | None] = lambda: 1,
           late_landing: float = 90.0,
           deliver_after: float | None = None) -> tuple[FakeApi, Binder, list[BindResult], list[float]]:
    """A fake apiserver with pod default/p, a binder on it whose backoff sleeps are recorded and
    move its clock (and, with `deliver_on_sleep`, let held requests reach the server meanwhile;
    with `deliver_after`, once that much time has been slept)."""
    api = FakeApi()
    api.add_pod(b.pod("p"))
    results: list[BindResult] = []
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if deliver_on_sleep or (deliver_after is not None and sum(sleeps) >= deliver_after):
            api.deliver_held()

    binder = Binder(api, results.append, sleep=sleep, term=term,  # type: ignore[arg-type]
                    clock=lambda: sum(sleeps), late_landing_seconds=late_landing)
    return api, binder, results, sleeps


def _binding(node: str = "n") -> Binding:
    pod = b.pod("p")
    return Binding(pod["metadata"]["uid"], "default", "p", node, {ann.DEVICES: DEVICES})


def _land_held_after_the_second_post(api: FakeApi) -> Callable[[str, str], None]:
    """The held first request reaches the server at the read-back after the second send's answer."""
    def land(method: str, path: str) -> None:
        if method == "GET" and len(api.of("POST")) == 2:
            api.deliver_held()
    return land


def _after_a_503(term_at: Callable[[int], object | None], late_landing: float, *, held: bool = False,
                 deliver_after: float | None = None) -> tuple[FakeApi, Binder, list[BindResult], list[float]]:
    """A binder whose first POST gets an ambiguous 503 (or, `held`, a broken connection while the
    request is on its way) and whose leadership term is ``term_at(reads)``, ``reads`` being the
    pod reads so far (0 at submit and the first send)."""
    reads = [0]
    api, binder, results, sleeps = _setup(term=lambda: term_at(reads[0]), late_landing=late_landing,
                                          deliver_after=deliver_after)
    if held:
        api.fail_next("POST", "/binding", hold=True)
    else:
        api.fail_next("POST", "/binding", status=503)

    def count_reads(method: str, path: str) -> None:
        if method == "GET":
            reads[0] += 1

    api.before = count_reads
    return api, binder, results, sleeps


async def _bind(binder: Binder, binding: Binding | None = None) -> None:
    """Run the binder for one Binding, until it is settled."""
    async with anyio.create_task_group() as group:
        await group.start(binder.run)
        binder.submit(binding or _binding())
        assert await binder.drain(5)
        group.cancel_scope.cancel()


async def test_a_created_binding_is_bound_with_its_annotations() -> None:
    api, binder, results, _ = _setup()
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.BOUND]
    pod = api.pod("default", "p")
    assert pod["spec"]["nodeName"] == "n" and pod["metadata"]["annotations"][ann.DEVICES] == DEVICES
    body = api.of("POST")[0].body
    assert body["metadata"]["uid"] == b.pod("p")["metadata"]["uid"] and body["target"]["name"] == "n"


async def test_a_request_delivered_after_the_read_back_is_never_reported_unbound() -> None:
    """The soak's double allocation, replayed without the fault proxy."""
    api, binder, results, _ = _setup(deliver_on_sleep=True)
    api.fail_next("POST", "/binding", hold=True)  # connection breaks; the request arrives later
    await _bind(binder)
    # read back unbound -> (the held request lands meanwhile) -> same Binding again -> 409 ->
    # read back: bound to our node with our devices
    assert [r.outcome for r in results] == [Outcome.BOUND]
    assert results[0].sends == 2
    assert [c.method for c in api.calls] == ["POST", "GET", "POST", "GET"]
    assert api.of("POST")[0].body == api.of("POST")[1].body  # the very same Binding
    assert results[0].observed is not None and results[0].observed["spec"]["nodeName"] == "n"


async def test_an_ambiguous_failure_with_the_pod_still_unbound_sends_the_same_binding_again() -> None:
    api, binder, results, sleeps = _setup()
    api.fail_next("POST", "/binding", error=aiohttp.ServerDisconnectedError())
    api.fail_next("POST", "/binding", status=503)
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.BOUND]
    assert results[0].sends == 3 and len(sleeps) == 2 and sleeps[1] > sleeps[0]
    assert api.pod("default", "p")["spec"]["nodeName"] == "n"


async def test_a_binding_that_landed_despite_the_error_is_bound() -> None:
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", hold=True)
    api.before = lambda method, path: api.deliver_held() if method == "GET" else None  # lands before the read
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 1)]


async def test_conflict_with_another_node_is_dropped_with_the_pod_as_read() -> None:
    api, binder, results, _ = _setup()
    api.pod("default", "p")["spec"]["nodeName"] = "elsewhere"
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.CONFLICT]
    assert results[0].observed is not None and results[0].observed["spec"]["nodeName"] == "elsewhere"


async def test_a_binding_whose_send_timed_out_and_found_the_pod_bound_elsewhere_says_where_and_by_whom() -> None:
    """A re-trial froze a leader mid-gang and resumed it after the takeover: 17 `binder.failed`
    lines read `"message": "TimeoutError"`, though each pod had been bound to another node by the
    new leader's term: the read-back knew where and by whom, and the message kept only the first
    send's error. It names the node the pod is bound to and the term it carries (the first error
    stays, as the detail)."""
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", error=TimeoutError())

    def bound_elsewhere(method: str, path: str) -> None:
        if method == "GET":
            pod = api.pod("default", "p")
            pod["spec"]["nodeName"] = "elsewhere"
            pod["metadata"].setdefault("annotations", {})[ann.TERM] = "rep-b/4/2026-01-01T00:02:00.000000Z"

    api.before = bound_elsewhere
    await _bind(binder)
    [result] = results
    assert result.outcome is Outcome.CONFLICT
    assert result.message == ("the pod is bound to elsewhere (tessera.dev/term rep-b/4/2026-01-01T00:02:00.000000Z), "
                              "not to n as this Binding asked")
    assert result.detail == "TimeoutError"


async def test_conflict_on_the_same_node_with_other_devices_is_not_ours() -> None:
    api, binder, results, _ = _setup()
    pod = api.pod("default", "p")
    pod["spec"]["nodeName"] = "n"
    pod["metadata"]["annotations"] = {ann.DEVICES: DEVICES.replace("GPU-1", "GPU-2")}
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.CONFLICT]
    assert results[0].message == "the pod is bound to n (tessera.dev/term none), with other devices than this Binding asked"


async def test_a_pod_being_deleted_is_dropped() -> None:
    api, binder, results, _ = _setup()
    api.pod("default", "p")["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.CONFLICT]
    assert len(api.of("POST")) == 1


async def test_gone_or_replaced_pods_are_not_found() -> None:
    api, binder, results, _ = _setup()
    api.pods.clear()
    await _bind(binder)
    api.add_pod({**b.pod("p"), "metadata": {**b.pod("p")["metadata"], "uid": "another"}})
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.NOT_FOUND, Outcome.NOT_FOUND]


async def test_an_ambiguous_failure_then_the_pod_gone_is_not_found() -> None:
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", status=500)
    api.fail_next("GET", "/pods/p", error=aiohttp.ClientConnectionError())
    api.before = lambda method, path: api.pods.clear() if method == "GET" and not api.faults else None
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.NOT_FOUND]
    assert [c.method for c in api.calls] == ["POST", "GET", "GET"]  # the read is retried until it answers


@pytest.mark.parametrize("status", [400, 403, 422])
async def test_a_refusal_is_certain_and_not_read_back(status: int) -> None:
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", status=status)
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.RETRY]
    assert f"HTTP {status}" in results[0].message
    assert [c.method for c in api.calls] == ["POST"]


@pytest.mark.parametrize("status", [429, 500, 504])
async def test_throttling_and_server_errors_are_ambiguous(status: int) -> None:
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", status=status)
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 2)]


async def test_a_refusal_after_an_ambiguous_send_settles_nothing() -> None:
    """A refusal answers for its own request only: an earlier one of ours may still be on its way
    and land. Reporting it (the core then frees the devices) gave one GPU to two pods when the
    earlier request landed after a new pod had been given them (found in review)."""
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", hold=True)   # the connection dies; the request is still on its way
    api.fail_next("POST", "/binding", status=403)  # the resend is refused (a token or webhook blip)

    api.before = _land_held_after_the_second_post(api)
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 2)]
    assert [c.method for c in api.calls] == ["POST", "GET", "POST", "GET"]
    assert api.pod("default", "p")["spec"]["nodeName"] == "n"


async def test_a_refusal_after_an_ambiguous_send_is_sent_again_until_certain() -> None:
    api, binder, results, sleeps = _setup()
    api.fail_next("POST", "/binding", status=503)
    api.fail_next("POST", "/binding", status=403)
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 3)]
    assert len(sleeps) == 2


async def test_a_deposed_leader_sends_nothing_more_but_holds_on_until_the_pod_is_settled() -> None:
    """Not the leader any more after an ambiguous send: no more POSTs (a deposed leader must not
    bind), but the earlier one may still land, so the devices stay held (the pod read back until
    bound or gone). Reporting "not bound" freed them, and this replica, leading again after the
    blip, gave them to another pod before the first request landed (found in review)."""
    leading = [True]
    api, binder, results, _ = _setup(term=lambda: 1 if leading[0] else None)
    api.fail_next("POST", "/binding", hold=True)  # the connection breaks; the request is on its way
    reads = [0]

    def depose_then_land(method: str, path: str) -> None:
        if method == "GET":
            reads[0] += 1
            leading[0] = False  # the lease could not be renewed in the same blip
            if reads[0] == 3:
                api.deliver_held()

    api.before = depose_then_land
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 1)]
    assert len(api.of("POST")) == 1 and reads[0] == 3
    assert api.pod("default", "p")["spec"]["nodeName"] == "n"


async def test_a_leader_again_never_resends_what_it_decided_before_it_was_deposed() -> None:
    """Review: leading again after the blip, the binder sent the Binding it had decided before —
    with devices the other leader may have given away meanwhile. It reads back until an earlier
    request can no longer land, then reports "not bound" so the pod is decided afresh. (Another
    leader held the lease in between: a new term.)"""
    api, binder, results, sleeps = _after_a_503(lambda reads: 1 if reads == 0 else 2 if reads > 2 else None,
                                                late_landing=10.0)
    await _bind(binder)
    assert len(api.of("POST")) == 1
    assert [r.outcome for r in results] == [Outcome.RETRY]
    assert "HTTP 503" in results[0].message and "not the leader" in results[0].message
    assert sum(sleeps) >= 10.0 and not api.pod("default", "p")["spec"].get("nodeName")


async def test_leading_again_in_the_same_term_sends_the_binding_again() -> None:
    """Soak seed 29000: the leader's lease lapsed for two seconds during a partition and came back
    with nobody else having held it; its ambiguous Binding then waited out the whole late-landing
    window (90 s), the pod pending and its devices held. Leading again in the same term (the Lease
    still names us, no transition), no other leader can have given the devices away: send again."""
    api, binder, results, sleeps = _after_a_503(lambda reads: None if 0 < reads <= 2 else 7, late_landing=60.0)
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 2)]
    assert api.pod("default", "p")["spec"]["nodeName"] == "n" and sum(sleeps) < 5.0


async def test_a_binding_whose_term_ended_before_its_first_send_is_never_sent() -> None:
    """The term is taken when the Binding is submitted: a replica that decided while leading but
    whose first send finds another term never sends it."""
    terms = iter([1, 2])
    api, binder, results, _ = _setup(term=lambda: next(terms, 2), late_landing=0.0)
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.RETRY, 0)] and api.of("POST") == []


async def test_once_another_term_began_the_binding_is_never_sent_again() -> None:
    """Another term is final, even if a later read showed the first one's value again."""
    api, binder, results, _ = _after_a_503(lambda reads: {0: 1, 1: 2}.get(reads, 1), late_landing=10.0)
    await _bind(binder)
    assert len(api.of("POST")) == 1 and [r.outcome for r in results] == [Outcome.RETRY]


async def test_a_request_that_lands_as_the_window_closes_is_bound_not_released() -> None:
    """Review: not leading, the binder read the pod back every few seconds and, once an earlier
    request could no longer land, reported "not bound" from the last read, which could predate a
    request that landed just before the window closed: its devices were released while the pod
    was bound. One more read decides."""
    # not leading from the first read on; the held request lands during the last wait
    api, binder, results, _ = _after_a_503(lambda reads: None if reads else 1, late_landing=10.0, held=True,
                                           deliver_after=10.0)
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 1)]
    assert api.pod("default", "p")["spec"]["nodeName"] == "n"


async def test_a_refusal_long_after_the_last_ambiguous_send_is_certain() -> None:
    """Review: a timeout, then 403 for good (RBAC revoked, a webhook): it resent forever, holding
    the devices. Once an earlier request can no longer land, the refusal is taken as it is."""
    api, binder, results, sleeps = _setup(late_landing=10.0)
    api.fail_next("POST", "/binding", error=TimeoutError())
    for _ in range(50):
        api.fail_next("POST", "/binding", status=403)
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.RETRY] and "HTTP 403" in results[0].message
    assert 2 < len(api.of("POST")) < 10 and sum(sleeps) >= 10.0


async def test_a_deposed_leader_that_never_sent_reports_not_sent() -> None:
    api, binder, results, _ = _setup(term=lambda: None)
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.RETRY, 0)]
    assert "not the leader" in results[0].message and api.calls == []


async def test_a_404_after_an_ambiguous_send_is_read_back() -> None:
    """A 404 from a proxy on the resend said "gone" and freed the devices while the first request
    could still land (found in review); the read-back decides."""
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", hold=True)
    api.fail_next("POST", "/binding", status=404)

    api.before = _land_held_after_the_second_post(api)
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 2)]


async def test_a_failing_callback_does_not_break_the_binder() -> None:
    api = FakeApi()
    api.add_pod(b.pod("p"))

    def explode(result: BindResult) -> None:
        raise RuntimeError("bug in the callback")

    binder = Binder(api, explode)  # type: ignore[arg-type]
    await _bind(binder)
    assert api.pod("default", "p")["spec"]["nodeName"] == "n"


async def test_drain_waits_without_cancelling_and_cancelling_the_owner_ends_every_binding() -> None:
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", stall=True)  # no answer, ever
    async with anyio.create_task_group() as owner:
        await owner.start(binder.run)
        binder.submit(_binding())
        assert binder.in_flight == 1
        assert not await binder.drain(0.05)  # graceful shutdown gives up waiting...
        assert api.stalled == 1  # ...and leaves the Binding to its owner
        owner.cancel_scope.cancel()
    assert api.stalled == 0 and binder.in_flight == 0 and results == []
    with pytest.raises(RuntimeError, match="not running"):
        binder.submit(_binding())  # nothing would own it


# --- answers that are not the apiserver's (from a review of the live shell) ---------------------

async def test_a_404_on_the_first_send_is_read_back() -> None:
    """A 404 that is not the apiserver's (a proxy, a load balancer) dropped a pod that still
    existed: nothing brought it back until the pod changed."""
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", status=404)
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 2)]


@pytest.mark.parametrize("answer", [
    Response(404, b'{"kind":"Status","code":404,"message":"not found"}'),  # no NotFound naming the pod
    Response(404, b"<html>404 Not Found</html>"),
    Response(200, b""),
    Response(200, b"<html>502 Bad Gateway</html>"),
    Response(200, b'{"kind":"Status","status":"Success"}'),
], ids=["proxy-404-json", "proxy-404-html", "empty-200", "html-200", "not-a-pod-200"])
async def test_a_read_back_that_is_not_the_apiservers_answer_settles_nothing(answer: Response) -> None:
    """After a cut send, such an answer read as "gone" (or, not JSON, crashed the loop) while the
    cut request could still land: the devices were freed and given to another pod. It is a failed
    read: read again."""
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", hold=True)
    answered = [False]

    def once(call: Call) -> Response | None:
        if call.method == "GET" and not answered[0]:
            answered[0] = True
            api.deliver_held()  # the cut request lands meanwhile
            return answer
        return None

    api.handlers.append(once)
    await _bind(binder)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 1)]


async def test_a_real_not_found_is_trusted() -> None:
    api, binder, results, _ = _setup()
    api.fail_next("POST", "/binding", hold=True)
    api.pods.clear()
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.NOT_FOUND]


async def test_no_binding_is_sent_by_a_replica_deposed_while_it_waited_for_a_token() -> None:
    """The term was read before the rate limiter's wait: a replica deposed during the wait (seconds
    when Bindings, status writes and evictions drain the bucket) still sent what it had decided."""
    api = FakeApi()
    api.add_pod(b.pod("p"))
    term: list[object | None] = ["A"]
    sent_in: list[object | None] = []

    async def throttled(seconds: float) -> None:  # the bucket is empty; the Lease is lost meanwhile
        term[0] = None
        await anyio.sleep(0)

    limiter = RateLimiter(qps=1.0, burst=1, sleep=throttled)
    limiter._tokens = 0.0  # drained by the writes before this one
    api.before = lambda method, path: sent_in.append(term[0]) if method == "POST" else None
    results: list[BindResult] = []
    binder = Binder(KubeHttp(api, limiter), results.append, term=lambda: term[0],  # type: ignore[arg-type]
                    late_landing_seconds=0.0)
    await _bind(binder)
    assert sent_in == [] and [r.outcome for r in results] == [Outcome.RETRY]


async def test_a_deposed_terms_read_backs_hold_no_slot_from_the_next_terms_bindings() -> None:
    """A replica deposed with a Binding whose answer was ambiguous reads the pod back until that
    request can no longer land (90 s by default). Its read-backs waited between reads holding one
    of the binder's request slots, so once this replica led again in a new term, its new Bindings
    queued behind them for the whole window (with 64 such Bindings, every slot). A slot is now
    held for one request at a time: the new term's Binding goes out at once, while the old one
    is still being read back. (Here one slot: the deposed term's read-back and the new term's
    POST take turns.)"""
    api = FakeApi()
    old, new = b.pod("old"), b.pod("new")
    api.add_pod(old)
    api.add_pod(new)
    api.fail_next("POST", "/old/binding", status=503)  # ambiguous: the old term's request may land
    term: list[object] = [1]
    reads = [0]

    def count(method: str, path: str) -> None:
        if method == "GET":
            reads[0] += 1
            term[0] = 2  # another replica led in between: a new term, this Binding is not sent again

    api.before = count
    results: list[BindResult] = []
    clock = [0.0]

    async def sleep(seconds: float) -> None:
        clock[0] += seconds
        await anyio.sleep(0)

    binder = Binder(api, results.append, max_in_flight=1, term=lambda: term[0],  # type: ignore[arg-type]
                    sleep=sleep, clock=lambda: clock[0], late_landing_seconds=60.0)
    async with anyio.create_task_group() as group:
        await group.start(binder.run)
        binder.submit(Binding(old["metadata"]["uid"], "default", "old", "n", {ann.DEVICES: DEVICES}))
        while not reads[0]:
            await anyio.sleep(0)
        binder.submit(Binding(new["metadata"]["uid"], "default", "new", "n", {}))
        assert await binder.drain(5)
        group.cancel_scope.cancel()
    assert [(r.binding.name, r.outcome) for r in results] == [("new", Outcome.BOUND), ("old", Outcome.RETRY)]
    assert clock[0] >= 60.0  # the old Binding was still read back for its whole window


# --- the resourceVersion a Binding is conditional on (the term fence, docs/running.md) ----------

def _versioned(api: FakeApi, version: str = "7") -> Binding:
    """The Binding as the core decides it: conditional on the pod's resourceVersion then."""
    api.pod("default", "p")["metadata"]["resourceVersion"] = version
    return Binding(b.pod("p")["metadata"]["uid"], "default", "p", "n", {ann.DEVICES: DEVICES},
                   resource_version=version)


async def test_the_binding_carries_the_resource_version_it_was_decided_at() -> None:
    """BindingREST.Create passes binding.ResourceVersion to GuaranteedUpdate as a precondition
    (pkg/registry/core/pod/storage/storage.go): the body must carry it."""
    api, binder, results, _ = _setup()
    await _bind(binder, _versioned(api))
    assert [r.outcome for r in results] == [Outcome.BOUND]
    assert api.of("POST")[0].body["metadata"]["resourceVersion"] == "7"


async def test_a_late_binding_after_the_pod_changed_is_refused_and_decided_again() -> None:
    """The live break: a Binding held on its way (a proxy) while a new leader fenced the pod (its
    resourceVersion changed). It lands with the old version: 409; the pod read back is unbound at
    a newer version, so no send of this Binding can ever land: decided again at once (RETRY, the
    pod as read handed on), not held for the whole late-landing window."""
    api, binder, results, sleeps = _setup()
    binding = _versioned(api)
    api.fail_next("POST", "/binding", hold=True)  # on its way

    def fence_then_land(method: str, path: str) -> None:
        if method == "GET" and api.held:
            api.pod("default", "p")["metadata"]["resourceVersion"] = "9"  # the term fence's PATCH
            [late] = api.deliver_held()
            assert late.status == 409  # the old version's Binding is refused whenever it lands

    api.before = fence_then_land
    await _bind(binder, binding)
    assert [r.outcome for r in results] == [Outcome.RETRY]
    assert results[0].observed is not None and results[0].observed["metadata"]["resourceVersion"] == "9"
    assert results[0].message == "the pod changed since it was decided; no Binding for the version it was " \
        "decided at can land"  # the same at every refusal: the pod's condition is written once
    assert results[0].detail.startswith("resourceVersion 7 -> 9")  # for the log
    assert not api.pod("default", "p")["spec"].get("nodeName")
    assert len(api.of("POST")) == 1 and not sleeps


async def test_a_precondition_conflict_on_a_resend_with_the_pod_unchanged_is_sent_again() -> None:
    """Unbound at the very version the Binding is conditional on settles nothing (an earlier send
    may still land): the same Binding goes again, as before."""
    api, binder, results, _ = _setup()
    binding = _versioned(api)
    api.fail_next("POST", "/binding", status=503)
    await _bind(binder, binding)
    assert [(r.outcome, r.sends) for r in results] == [(Outcome.BOUND, 2)]
    assert all(call.body["metadata"]["resourceVersion"] == "7" for call in api.of("POST"))


async def test_a_deposed_leaders_binding_refused_by_a_newer_terms_fence_says_so() -> None:
    """The old leader of the live break, after the fix: its held Binding answers 409 after a newer
    leader fenced the pod (`tessera.dev/term` written, resourceVersion bumped). It used to be
    reported like any failed Binding (`binder.failed`, error level, "the pod changed since it was
    decided"), which reads as a fault on call when it is the fence doing its job: the result now
    names the fencing term. A replica still leading whose pod changed is not "fenced"."""
    term = [1]
    api, binder, results, _ = _setup(term=lambda: term[0])
    binding = _versioned(api)
    api.fail_next("POST", "/binding", hold=True)  # on its way when the replica is deposed

    def deposed_then_fenced(method: str, path: str) -> None:
        if method == "POST":
            term[0] = 2  # another term leads now (the Lease moved while the POST was held)
        if method == "GET" and api.held:
            pod = api.pod("default", "p")
            pod["metadata"]["resourceVersion"] = "9"
            pod["metadata"].setdefault("annotations", {})[ann.TERM] = "rep-b/4/2026-01-01T00:02:00.000000Z"
            [late] = api.deliver_held()
            assert late.status == 409

    api.before = deposed_then_fenced
    await _bind(binder, binding)
    assert [r.outcome for r in results] == [Outcome.RETRY]
    assert results[0].fenced_by == "rep-b/4/2026-01-01T00:02:00.000000Z"
    # still leading: a pod that changed is decided again, not "fenced"
    api, binder, results, _ = _setup()
    binding = _versioned(api)
    api.fail_next("POST", "/binding", hold=True)

    def changed(method: str, path: str) -> None:
        if method == "GET" and api.held:
            pod = api.pod("default", "p")
            pod["metadata"]["resourceVersion"] = "9"
            pod["metadata"].setdefault("annotations", {})[ann.TERM] = "rep-a/1/2026-01-01T00:00:00.000000Z"
            api.deliver_held()

    api.before = changed
    await _bind(binder, binding)
    assert [(r.outcome, r.fenced_by) for r in results] == [(Outcome.RETRY, "")]


# --- a Binding given up on is withdrawn first (one-pod fence) ------------------------------------

def _withdrawals(api: FakeApi) -> list[str]:
    """The `tessera.dev/term` tokens written through pods/status."""
    return [call.body["metadata"]["annotations"][ann.TERM] for call in api.of("PATCH", "/status")
            if ann.TERM in ((call.body or {}).get("metadata") or {}).get("annotations", {})]


def _held_then_stepped_down(also: Callable[[FakeApi, str, str], None] = lambda api, method, path: None
                            ) -> tuple[FakeApi, Binder, list[BindResult], list[float], Binding]:
    """The live break's opening: pod p decided at resourceVersion 7, its Binding POST held on its
    way (a TCP proxy), and the replica not leading from that POST on (all its Lease traffic held),
    so it only reads back until the late-landing window (5 s of the recorded sleeps) has passed.
    `also` runs before every call too (with the fake apiserver)."""
    leading = [True]
    api, binder, results, sleeps = _setup(term=lambda: 1 if leading[0] else None, late_landing=5.0)
    binding = _versioned(api)
    api.fail_next("POST", "/binding", hold=True)

    def step_down(method: str, path: str) -> None:
        if method == "POST":
            leading[0] = False
        also(api, method, path)

    api.before = step_down
    return api, binder, results, sleeps, binding


async def test_a_binding_given_up_on_is_withdrawn_so_it_can_never_land() -> None:
    """Live adversary (2 of 2): the deposed replica read the pod back unbound at the Binding's own
    resourceVersion until the 90 s window had passed, reported "not bound", took the Lease back on
    its own record (the same term: no fence), and gave the GPU to another pod; the proxy then
    delivered the first Binding: 201, nine pods on eight GPUs. The window assumes a request
    reaches the apiserver within our timeout; one in a proxy has no bound. Before giving up, the
    binder now writes `tessera.dev/term` onto the pod (uid precondition): the pod's version
    changes, so the held Binding, conditional on the old one, is refused whenever it arrives."""
    api, binder, results, sleeps, binding = _held_then_stepped_down()
    await _bind(binder, binding)
    assert sum(sleeps) >= 5.0  # the window was waited out (read-backs only)
    [late] = api.deliver_held()  # the proxy lets the first Binding through
    assert late.status == 409, "the Binding given up on landed: its GPU was handed out twice"
    assert not api.pod("default", "p")["spec"].get("nodeName")
    [token] = _withdrawals(api)
    assert token.endswith("/withdrawn/7") and token.split("/")[-2] == "withdrawn"
    assert len(api.of("POST")) == 1
    [result] = results
    assert result.outcome is Outcome.RETRY and result.sends == 1
    assert result.observed is not None
    assert result.observed["metadata"]["resourceVersion"] == api.pod("default", "p")["metadata"]["resourceVersion"]
    assert result.observed["metadata"]["resourceVersion"] != "7"
    assert result.message == ("not the leader any more; the Binding was withdrawn (the pod's resourceVersion "
                              "changed, so it can never land)")
    assert "7 ->" in result.detail and not result.fenced_by


@pytest.mark.parametrize("failure", ["503", "transport", "proxy-page"])
async def test_a_withdrawal_that_fails_holds_the_pod_until_one_succeeds(failure: str) -> None:
    """The withdrawal's answer must be certain before the devices go: a 503, a broken connection
    or a proxy's 200 page says nothing about the pod's version, so no result is given (the core
    keeps the assumption) until a later write returns the pod."""
    results_at_writes: list[int] = []
    api, binder, results, _, binding = _held_then_stepped_down(
        lambda api, method, path: results_at_writes.append(len(results)) if method == "PATCH" else None)
    if failure == "503":
        api.fail_next("PATCH", "/status", status=503)
    elif failure == "transport":
        api.fail_next("PATCH", "/status", error=aiohttp.ServerDisconnectedError())
    else:
        def proxy_page(call: Call) -> Response | None:
            return Response(200, b"<html>ok</html>") if call.method == "PATCH" and len(api.of("PATCH")) == 1 \
                else None

        api.handlers.append(proxy_page)
    await _bind(binder, binding)
    # the failed write, then the one that answered; nothing was reported before the second
    assert results_at_writes == [0, 0]
    assert len(_withdrawals(api)) == 2
    [result] = results
    assert result.outcome is Outcome.RETRY and result.observed is not None
    assert result.observed["metadata"]["resourceVersion"] != "7"
    [late] = api.deliver_held()
    assert late.status == 409 and not api.pod("default", "p")["spec"].get("nodeName")


async def test_a_binding_that_lands_just_before_its_withdrawal_is_bound() -> None:
    """The held Binding reaches the apiserver between the last read-back and the withdrawal: the
    written pod shows it bound to our node with our devices, so the pod is bound, not decided again."""
    landed: list[int] = []

    def land(api: FakeApi, method: str, path: str) -> None:
        if method == "PATCH" and path.endswith("/status"):
            landed.extend(response.status for response in api.deliver_held())

    api, binder, results, _, binding = _held_then_stepped_down(land)
    await _bind(binder, binding)
    assert landed == [201]
    [result] = results
    assert result.outcome is Outcome.BOUND and result.observed is not None
    assert result.observed["spec"]["nodeName"] == "n"
    assert len(_withdrawals(api)) == 1


async def test_a_binding_without_a_resource_version_is_not_withdrawn() -> None:
    """A Binding conditional on no version (none was known) cannot be withdrawn this way: as before."""
    leading = [True]
    api, binder, results, sleeps = _setup(term=lambda: 1 if leading[0] else None, late_landing=5.0)
    api.fail_next("POST", "/binding", hold=True)
    api.before = lambda method, path: leading.__setitem__(0, False) if method == "POST" else None
    await _bind(binder)
    assert [r.outcome for r in results] == [Outcome.RETRY] and api.of("PATCH") == []


def test_the_loop_gives_the_binder_its_identity_for_the_withdrawal_token() -> None:
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="rep-a")  # type: ignore[arg-type]
    assert loop.binder.withdrawal_token(Binding("u", "default", "p", "n", resource_version="7")) == \
        "rep-a/withdrawn/7"


def _held_then_refused() -> tuple[FakeApi, Binder, list[BindResult], list[float], Binding]:
    """A leader's first send held on its way (ambiguous), every resend refused (403) until the
    late-landing window (10 s) has passed."""
    api, binder, results, sleeps = _setup(late_landing=10.0)
    binding = _versioned(api)
    api.fail_next("POST", "/binding", hold=True)
    for _ in range(50):
        api.fail_next("POST", "/binding", status=403)
    return api, binder, results, sleeps, binding


async def test_a_refusal_after_the_window_withdraws_a_held_earlier_send_while_leading() -> None:
    """The withdrawal helper's open end: a leader's first send is held on its way (ambiguous);
    every resend is refused (403: a webhook, RBAC) until the late-landing window has passed, and
    the refusal was taken as certain — but it answers for that request only, and the held one
    could still land on the GPUs the retry hands out again. It is withdrawn first now."""
    api, binder, results, sleeps, binding = _held_then_refused()
    await _bind(binder, binding)
    assert [r.outcome for r in results] == [Outcome.RETRY] and sum(sleeps) >= 10.0
    [late] = api.deliver_held()
    assert late.status == 409, "the send held on its way landed after the pod was given up on"
    assert not api.pod("default", "p")["spec"].get("nodeName")
    assert [c.body["metadata"]["annotations"][ann.TERM] for c in api.of("PATCH", "/status")] == ["tessera/withdrawn/7"]


# --- what the loop logs of an outcome: the level an operator pages on must be true ------------------

def _logged(result: BindResult) -> list[tuple[str, str]]:
    """The `binder.*` lines (event, level) the scheduling loop logs for `result`."""
    loop = SchedulerLoop(load_config(None), KubeHttp(FakeApi()), KubeHttp(FakeApi()),  # type: ignore[arg-type]
                         identity="tessera")
    with capture_logs() as logs:
        loop._on_bound(result)
    return [(str(e["event"]), str(e["log_level"])) for e in logs if str(e["event"]).startswith("binder.")]


async def test_a_binding_withdrawn_after_losing_the_lead_is_no_failure() -> None:
    """Reviewer: after a withdrawal the RETRY result was logged `binder.failed` at error level,
    though nothing failed: this replica stopped leading, and the withdrawal made its Binding unable
    to land, as it should. One info line says so."""
    api, binder, results, sleeps, binding = _held_then_stepped_down()
    await _bind(binder, binding)
    [result] = results
    assert _logged(result) == [("binder.withdrawn", "info")]


async def test_a_binding_never_sent_by_a_replica_not_leading_is_no_failure() -> None:
    """The same for a Binding whose replica stopped leading before it was sent: given up, not failed."""
    api, binder, results, _ = _setup(term=lambda: None)
    await _bind(binder)
    [result] = results
    assert _logged(result) == [("binder.given_up", "info")]
    # its outcome reads as the metric counts it (tessera_bindings_total{result="given_up"}), not "error"
    loop = SchedulerLoop(load_config(None), KubeHttp(FakeApi()), KubeHttp(FakeApi()),  # type: ignore[arg-type]
                         identity="tessera")
    with capture_logs() as logs:
        loop._on_bound(result)
    assert [e["outcome"] for e in logs if e["event"] == "binder.given_up"] == ["given_up"]


async def test_a_binding_withdrawn_after_a_refusal_is_still_the_refusal() -> None:
    """A refusal (403: a webhook, RBAC) is a failure an operator must see, withdrawn or not: as
    upstream's handleSchedulingFailure logs every binding-cycle error, at error level."""
    api, binder, results, sleeps, binding = _held_then_refused()
    await _bind(binder, binding)
    [result] = results
    assert _logged(result) == [("binder.failed", "error")]


OUR_TERM = "tessera-system/tessera/rep-a/3/2026-01-01T00:00:00.000000Z"
NEXT_TERM = "tessera-system/tessera/rep-b/4/2026-01-01T00:02:00.000000Z"


async def _bound_elsewhere(deposed: bool, theirs: str = NEXT_TERM) -> BindResult:
    """A Binding of term `OUR_TERM` whose send timed out, the pod read back bound to another node
    with `tessera.dev/term` `theirs`; `deposed`: this replica's term ended while the send was out
    (a leader paused by SIGSTOP past its Lease, resumed after the takeover)."""
    term = [1]
    api, binder, results, _ = _setup(term=lambda: term[0])
    api.fail_next("POST", "/binding", error=TimeoutError())

    def bound_elsewhere(method: str, path: str) -> None:
        if method == "GET":
            if deposed:
                term[0] = 2
            pod = api.pod("default", "p")
            pod["spec"]["nodeName"] = "elsewhere"
            pod["metadata"].setdefault("annotations", {})[ann.TERM] = theirs

    api.before = bound_elsewhere
    binding = _binding()
    await _bind(binder, replace(binding, annotations={**binding.annotations, ann.TERM: OUR_TERM}))
    [result] = results
    assert result.outcome is Outcome.CONFLICT
    assert result.message == f"the pod is bound to elsewhere (tessera.dev/term {theirs or 'none'}), not to n as this Binding asked"
    return result


async def test_a_deposed_replicas_binding_the_newer_term_bound_elsewhere_is_a_warning() -> None:
    """A re-trial paused a leader by SIGSTOP past its term: on resume its Binding found the pod
    bound to another node by the newer term, and logged `binder.failed` at error level. Nothing
    failed: the newer leader decided the pod, as it must once this replica's term was over, as a
    newer term's fence (`binder.fenced`) or its Binding to our node (`binder.bound_by_other`) is
    logged — warning, `binder.superseded`. (kube-scheduler logs a binding-cycle error at error
    level, schedule_one.go handleSchedulingFailure "Error scheduling pod; retrying", but never
    binds once deposed: it logs "Leaderelection lost" and exits; ours logs `leader.lost`.) A pod
    bound elsewhere while this replica still led, or by another Lease's term (a second install),
    or by none, stays an error: two schedulers decided it."""
    assert _logged(await _bound_elsewhere(deposed=True)) == [("binder.superseded", "warning")]
    assert _logged(await _bound_elsewhere(deposed=False)) == [("binder.failed", "error")]
    other_lease = "other-ns/tessera/rep-c/9/2026-01-01T00:02:00.000000Z"
    assert _logged(await _bound_elsewhere(deposed=True, theirs=other_lease)) == [("binder.failed", "error")]
    assert _logged(await _bound_elsewhere(deposed=True, theirs="")) == [("binder.failed", "error")]


@pytest.mark.parametrize("how", ["deleted", "being_deleted"])
async def test_a_pod_deleted_while_its_binding_was_in_flight_is_no_failure(how: str) -> None:
    """Reviewer: a pod its user deleted while its Binding was out was logged `binder.failed` at
    error level. Nothing failed: there is no pod left to bind (kube-scheduler's own line for it is
    an info one, "Pod doesn't exist in informer cache", schedule_one.go handleSchedulingFailure).
    One info line says the pod went."""
    api, binder, results, _ = _setup()

    def delete_first(call: Call) -> Response | None:
        if call.method == "POST" and call.path.endswith("/binding"):
            if how == "deleted":
                api.pods.pop(("default", "p"))
            else:  # a finalizer keeps it: deletionTimestamp set, no Binding can land
                api.pod("default", "p")["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
                api.pod("default", "p")["metadata"]["finalizers"] = ["example.com/keep"]
        return None

    api.handlers.insert(0, delete_first)
    await _bind(binder)
    [result] = results
    assert result.outcome in (Outcome.NOT_FOUND, Outcome.CONFLICT)
    assert _logged(result) == [("binder.pod_gone", "info")]


@pytest.mark.parametrize("status", [400, 422])
async def test_a_refusal_of_a_conditional_binding_never_sent_before_is_not_withdrawn(status: int) -> None:
    """Withdrawing (a `tessera.dev/term` write onto the pod) is for a Binding whose earlier send
    may still land; a refusal of the first and only send is certain: RETRY, no read-back, no write
    to the pod (which would change its resourceVersion for nothing)."""
    api, binder, results, _ = _setup()
    version = "5"
    api.pod("default", "p")["metadata"]["resourceVersion"] = version
    api.fail_next("POST", "/binding", status=status)
    await _bind(binder, replace(_binding(), resource_version=version))
    assert [r.outcome for r in results] == [Outcome.RETRY]
    assert [c.method for c in api.calls] == ["POST"]
    assert api.pod("default", "p")["metadata"]["resourceVersion"] == version
