"""The term fence against a fake HTTP layer: a Binding an earlier leader sent can never land.

Found live (a proxy held the old leader's Binding POSTs past its Lease; the new leader bound
other pods to the same GPUs; the link healed and both Bindings landed: 16 GPUs doubled). Each
Binding is now conditional on the pod's resourceVersion, and a leader that took over writes
`tessera.dev/term` onto every pod it schedules that an earlier term could have bound, before its
first decision: the write changes the resourceVersion, so the old Binding is refused (409).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import anyio
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.outcomes import REDECIDED_AT_ONCE
from scheduler.kube.binder import Binding, BindResult, Outcome
from scheduler.kube.fence import FencedPod, FenceOutcome, TermFence, fence
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.leader import LeaderElector
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.kube.apiserver_wait import ApiserverWait
from scheduler.kube.run_cli import StateGauges, _readyz_checks
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi
from tests.fakelease import Clock, LeaseServer
from tests.helpers import until

TOKEN = "rep-a/3/2026-01-01T00:02:00.000000Z"


def _gpu_pod(name: str, resource_version: str, created: str = "2026-01-01T00:00:00Z", **extra: Any) -> dict[str, Any]:
    pod = b.pod(name, requests={"nvidia.com/gpu": 1}, priority=0, created=created, **extra)
    pod["metadata"]["resourceVersion"] = resource_version
    return pod


def _old_binding(api: FakeApi, name: str, resource_version: str, node: str = "n") -> dict[str, Any]:
    """The Binding the old leader decided for `name` at `resource_version` (as Tessera sends it)."""
    pod = api.pod("default", name)
    return {"metadata": {"name": name, "namespace": "default", "uid": pod["metadata"]["uid"],
                         "resourceVersion": resource_version, "annotations": {}},
            "target": {"name": node}}


def _fence_writes(api: FakeApi) -> list[str]:
    return sorted(call.path.split("/")[-2] for call in api.of("PATCH", "/status")
                  if ann.TERM in ((call.body or {}).get("metadata") or {}).get("annotations", {}))


def _bound_to(api: FakeApi, node: str) -> list[str]:
    return sorted(name for (_, name), pod in api.pods.items() if pod["spec"].get("nodeName") == node)


async def _take_over(api: FakeApi, fence: Callable[[], str | None], *, until_done: Callable[[SchedulerLoop], bool],
                     term: list[Hashable | None] | None = None,
                     after_sync: Callable[[], None] = lambda: None,
                     after_lead: Callable[[SchedulerLoop], None] = lambda loop: None) -> SchedulerLoop:
    """A standby lists the cluster, then leads (term 1, `fence` its fence token) until `until_done`."""
    term = term if term is not None else [None]
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="rep-a",  # type: ignore[arg-type]
                         leader_term=lambda: term[0], term_fence=fence)
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: loop.informers.synced)
        after_sync()
        term[0] = term[0] if term[0] is not None else 1
        loop.leadership_started()
        after_lead(loop)
        await until(lambda: until_done(loop))
        owner.cancel_scope.cancel()
    return loop


async def test_a_late_binding_of_the_old_leader_is_refused_after_the_new_leader_fenced_the_pod() -> None:
    """The live break, replayed: one node with one GPU, pods `pp` (the old leader decided it and
    its Binding is stuck on the way) and `pq` (older, so the new leader's first pick). The new
    leader sees `pp` unbound and gives the GPU to `pq`; then the stuck Binding arrives. Before the
    fence it landed: two pods on a one-GPU node."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod("pq", "11", created="2026-01-01T00:00:00Z"))
    api.add_pod(_gpu_pod("pp", "12", created="2026-01-01T00:01:00Z"))
    stuck = _old_binding(api, "pp", "12")
    await _take_over(api, lambda: TOKEN,
                     until_done=lambda loop: loop.stats.scheduled >= 1 and loop.binder.in_flight == 0)
    assert _bound_to(api, "n") == ["pq"]
    late = api.bind("default", "pp", stuck)  # the healed link delivers the old leader's Binding
    assert late.status == 409 and "Precondition failed: ResourceVersion" in late.message()
    assert _bound_to(api, "n") == ["pq"], "the old leader's late Binding doubled the GPU"
    assert api.pod("default", "pp")["metadata"]["annotations"][ann.TERM] == TOKEN


async def test_the_fence_writes_exactly_the_pods_an_earlier_term_could_bind_before_any_binding() -> None:
    """Unbound, not being deleted, not finished, not gated, of this scheduler's names: fenced.
    Bound pods, another scheduler's, a gated one, a finished one and one being deleted: not. Every
    fence write precedes the first Binding, and the Binding carries the version the fence's
    answer gave (fed to the core), not the one listed."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=4)]
    api.add_pod(_gpu_pod("a", "11"))
    api.add_pod(_gpu_pod("bound", "12", node_name="n"))
    api.add_pod(_gpu_pod("other", "13", scheduler="default-scheduler"))
    api.add_pod(_gpu_pod("gated", "14", spec_extra={"schedulingGates": [{"name": "wait"}]}))
    api.add_pod(_gpu_pod("done", "15", phase="Failed"))
    deleting = _gpu_pod("deleting", "16")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    api.add_pod(deleting)
    await _take_over(api, lambda: TOKEN,
                     until_done=lambda loop: loop.stats.scheduled >= 1 and loop.binder.in_flight == 0)
    assert _fence_writes(api) == ["a"]
    [write] = [i for i, call in enumerate(api.calls) if call.method == "PATCH" and call.path.endswith("/a/status")]
    [bind] = [i for i, call in enumerate(api.calls) if call.method == "POST" and call.path.endswith("/binding")]
    assert write < bind
    fenced_version = api.pod("default", "a")["metadata"]["resourceVersion"]  # bumped again by the Binding
    binding = api.calls[bind].body["metadata"]
    assert binding["resourceVersion"] not in ("", "11") and int(binding["resourceVersion"]) < int(fenced_version)
    assert _bound_to(api, "n") == ["a", "bound"]
    assert api.calls[write].body == {"metadata": {"uid": api.pod("default", "a")["metadata"]["uid"],
                                                  "annotations": {ann.TERM: TOKEN}}}


async def test_a_term_that_needs_no_fence_writes_nothing() -> None:
    """The Lease held this process's own record (or no leader election): nobody else led."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod("a", "11"))
    await _take_over(api, lambda: None,
                     until_done=lambda loop: loop.stats.scheduled >= 1 and loop.binder.in_flight == 0)
    assert _fence_writes(api) == [] and _bound_to(api, "n") == ["a"]


async def test_a_failed_fence_write_means_no_decision_until_it_is_written() -> None:
    """A 500 on one pod's write: nothing is decided at that wake; the next one writes only the
    pods not fenced yet, then decides."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=2)]
    api.add_pod(_gpu_pod("a", "11"))
    api.add_pod(_gpu_pod("c", "12"))
    bindings_at_failure: list[int] = []

    def fail_c_once(call: Call) -> Response | None:
        if call.method == "PATCH" and call.path.endswith("/c/status") and not bindings_at_failure:
            bindings_at_failure.append(len(api.of("POST", "/binding")))
            return Response(500, b'{"kind":"Status","code":500,"message":"etcdserver: leader changed"}')
        return None

    api.handlers.append(fail_c_once)
    await _take_over(api, lambda: TOKEN,
                     until_done=lambda loop: loop.stats.scheduled >= 2 and loop.binder.in_flight == 0)
    assert bindings_at_failure == [0]
    writes = [call.path.split("/")[-2] for call in api.of("PATCH", "/status")
              if ann.TERM in (call.body["metadata"].get("annotations") or {})]
    assert sorted(writes) == ["a", "c", "c"]  # `a` once, `c` again after its failure
    first_bind = next(i for i, call in enumerate(api.calls) if call.method == "POST" and call.path.endswith("/binding"))
    last_write = max(i for i, call in enumerate(api.calls) if call.method == "PATCH" and "/status" in call.path
                     and ann.TERM in (call.body["metadata"].get("annotations") or {}))
    assert last_write < first_bind
    assert _bound_to(api, "n") == ["a", "c"]


async def test_a_term_change_during_the_fence_aborts_it_and_the_next_term_fences_again() -> None:
    """Deposed (and re-elected: a new term) while the fence is written: the rest of the writes
    are not sent, nothing is decided in the old term, and the new term fences every pod again
    with its own token."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod("a", "11"))
    term: list[Hashable | None] = [None]
    tokens = {1: "rep-a/1/t1", 2: "rep-a/2/t2"}
    decided_in: list[Hashable | None] = []

    def change_term_on_first_write(call: Call) -> Response | None:
        if call.method == "PATCH" and term[0] == 1:
            term[0] = 2
        if call.method == "POST" and call.path.endswith("/binding"):
            decided_in.append(term[0])
        return None

    api.handlers.append(change_term_on_first_write)
    def token() -> str | None:
        current = term[0]
        return tokens.get(current) if isinstance(current, int) else None

    await _take_over(api, token, term=term,
                     until_done=lambda loop: loop.stats.scheduled >= 1 and loop.binder.in_flight == 0)
    values = [call.body["metadata"]["annotations"][ann.TERM] for call in api.of("PATCH", "/status")
              if ann.TERM in (call.body["metadata"].get("annotations") or {})]
    assert values == ["rep-a/1/t1", "rep-a/2/t2"] and decided_in == [2]


# --- which terms are fenced: the elector's token -------------------------------------------------

def _elector(server: LeaseServer, who: str, clock: Clock) -> LeaderElector:
    return LeaderElector(server.client(who), namespace="kube-system", name="tessera", identity=who,  # type: ignore[arg-type]
                         clock=clock, lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)


async def test_a_takeover_from_another_holders_record_is_fenced_with_a_token_of_its_own() -> None:
    clock, server = Clock(), LeaseServer()
    a, b_ = _elector(server, "A", clock), _elector(server, "B", clock)
    await a._acquire()  # the Lease was absent (first start, or deleted by hand): fenced too
    a._start_leading()
    first = a.fence_token
    assert first is not None and first.startswith("kube-system/tessera/A/0/")
    assert not await b_._try_acquire_or_renew()
    clock.t += 16  # A paused past its lease
    await b_._acquire()
    b_._start_leading()
    token = b_.fence_token
    assert token is not None and token.startswith("kube-system/tessera/B/1/") and token != first
    assert not a.is_leader and a.fence_token is None


async def test_leading_again_on_its_own_record_is_the_same_term_with_the_same_token() -> None:
    """The Lease still held this process's record (its renewals failed, nobody took over): no
    other replica led, so it is the same term, and it keeps the term's token: a fence the term
    had not finished before it stepped down is finished with it (the loop skips a fence it has
    finished in this term), not dropped."""
    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock)
    await a._acquire()
    a._start_leading()
    first, token = a.term, a.fence_token
    assert token is not None
    a._stop_leading()  # renewDeadline passed without a successful renewal
    clock.t += 11
    await a._acquire()
    a._start_leading()
    assert a.term == first and a.fence_token == token


async def test_a_resumed_term_finishes_its_unfinished_fence_before_deciding() -> None:
    """A fence write fails (500); the same outage fails a renewal, so the leader steps down and
    gets the Lease back on its own record: the same term. Even if it is then told no token, the
    term does not decide until every pod is fenced with the token it began with: `c`, never
    fenced, could otherwise still take the old leader's late Binding."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=2)]
    api.add_pod(_gpu_pod("a", "11"))
    api.add_pod(_gpu_pod("c", "12"))
    token: list[str | None] = [TOKEN]

    def fail_c_and_resume(call: Call) -> Response | None:
        if call.method == "PATCH" and call.path.endswith("/c/status") and token[0] is not None:
            token[0] = None
            return Response(500, b'{"kind":"Status","code":500,"message":"etcdserver: leader changed"}')
        return None

    api.handlers.append(fail_c_and_resume)
    await _take_over(api, lambda: token[0],
                     until_done=lambda loop: loop.stats.scheduled >= 2 and loop.binder.in_flight == 0)
    assert api.pod("default", "c")["metadata"]["annotations"][ann.TERM] == TOKEN
    first_bind = next(i for i, call in enumerate(api.calls) if call.method == "POST" and call.path.endswith("/binding"))
    last_write = max(i for i, call in enumerate(api.calls) if call.method == "PATCH" and "/status" in call.path
                     and ann.TERM in (call.body["metadata"].get("annotations") or {}))
    assert last_write < first_bind


async def test_a_pod_changed_between_decision_and_binding_costs_a_retry_not_a_stuck_pod() -> None:
    """Someone labels the pod (or a status write of Tessera's own lands) after the cycle decided
    it and before its Binding arrives: 409 (the precondition); the pod read back, unbound at its
    newer version, goes to the core and is decided again from it — at once, no error counted
    (tests/unit/test_binding_pod_changed.py) — and bound."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod("a", "11"))
    sent_versions: list[str] = []

    def label_before_the_first_binding(call: Call) -> Response | None:
        if call.method == "POST" and call.path.endswith("/binding"):
            sent_versions.append(call.body["metadata"]["resourceVersion"])
            if len(sent_versions) == 1:
                pod = api.pod("default", "a")
                pod["metadata"].setdefault("labels", {})["team"] = "x"
                api._bump(pod)
        return None

    api.handlers.append(label_before_the_first_binding)
    loop = await _take_over(api, lambda: None,
                            until_done=lambda loop: _bound_to(api, "n") == ["a"] and loop.binder.in_flight == 0)
    assert len(sent_versions) == 2 and sent_versions[0] == "11" and int(sent_versions[1]) > 11
    assert loop.stats.bind_errors == 0


# --- answers that are not what they seem --------------------------------------------------------

async def _fence_a_with(answer: Response, *, on_pod: Callable[[dict[str, Any]], None] = lambda pod: None
                        ) -> tuple[FenceOutcome, set[str]]:
    """One fence of pod `a` whose first write gets `answer` (the rest go to the fake apiserver)."""
    api = FakeApi()
    api.add_pod(_gpu_pod("a", "11"))
    answered: list[int] = []

    def first(call: Call) -> Response | None:
        if call.method == "PATCH" and not answered:
            answered.append(1)
            return answer
        return None

    api.handlers.append(first)
    uid = api.pod("default", "a")["metadata"]["uid"]
    done: set[str] = set()
    outcome = await fence(KubeHttp(api), [FencedPod(uid, "default", "a")], TOKEN, 1,  # type: ignore[arg-type]
                          lambda: 1, on_pod, done)
    return outcome, done


async def test_a_2xx_that_is_not_a_pod_is_a_failed_write_not_a_crash() -> None:
    """A proxy's HTML page with 200 (or an empty body): not a Pod, so nothing says the pod's
    resourceVersion changed — the write is tried again, and the loop goes on (it crashed: orjson's
    JSONDecodeError escaped the task group)."""
    for body in (b"<html>ok</html>", b"", b'{"kind":"Status","status":"Success"}'):
        outcome, done = await _fence_a_with(Response(200, body))
        assert outcome.written == 0 and len(outcome.failed) == 1 and done == set(), body


async def test_a_non_json_200_does_not_end_the_loop() -> None:
    """The review's probe: the loop decides after the write is tried again."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=2)]
    api.add_pod(_gpu_pod("a", "11"))
    seen: list[int] = []

    def proxy_page(call: Call) -> Response | None:
        if call.method == "PATCH" and call.path.endswith("/a/status") and not seen:
            seen.append(1)
            return Response(200, b"<html>ok</html>")
        return None

    api.handlers.append(proxy_page)
    with anyio.fail_after(20):
        await _take_over(api, lambda: TOKEN,
                         until_done=lambda loop: loop.stats.scheduled >= 1 and loop.binder.in_flight == 0)
    assert _fence_writes(api) == ["a", "a"]


async def test_a_broken_on_pod_callback_does_not_end_the_fence() -> None:
    def broken(pod: dict[str, Any]) -> None:
        raise RuntimeError("bug")

    outcome, done = await _fence_a_with(Response(200, b'{"kind":"Pod","metadata":{"uid":"u","name":"a"}}'),
                                        on_pod=broken)
    assert outcome.written == 1 and done != set()


async def test_a_proxys_404_or_a_409_that_is_not_the_uid_precondition_is_not_gone() -> None:
    """Only the apiserver's NotFound for the pod, or its uid precondition's Conflict, means the pod
    is gone (or replaced under the name); a proxy's 404 page or another 409 is a write to try again."""
    not_ours = [Response(404, b"<html>404 Not Found</html>"),
                Response(404, b'{"kind":"Status","reason":"NotFound","details":{"name":"other","kind":"pods"}}'),
                Response(409, b'{"kind":"Status","reason":"Conflict","message":"Operation cannot be fulfilled on '
                              b'pods \\"a\\": the object has been modified"}')]
    for answer in not_ours:
        outcome, done = await _fence_a_with(answer)
        assert outcome.gone == 0 and len(outcome.failed) == 1 and done == set(), answer.body
    gone = [Response(404, b'{"kind":"Status","reason":"NotFound","code":404,'
                          b'"details":{"name":"a","kind":"pods"}}'),
            Response(409, b'{"kind":"Status","reason":"Conflict","code":409,"details":{"name":"a"},'
                          b'"message":"Operation cannot be fulfilled on Pod \\"a\\": Precondition failed: '
                          b'UID in precondition: u1, UID in object meta: u2"}')]
    for answer in gone:
        outcome, done = await _fence_a_with(answer)
        assert outcome.gone == 1 and outcome.failed == [] and len(done) == 1, answer.body


async def test_a_fence_that_keeps_failing_backs_off_and_says_how_many_pods_wait() -> None:
    """An admission webhook refuses every pods/status write for a while, and watch events wake
    the loop all the time: the fence is tried again with a growing delay (it was re-sent at every
    wake: hundreds of writes a second), `fence_pending` counts the pods still to fence and
    `fence_error` says why (the gauge and /readyz show them); once the webhook lets the writes
    through, the term is fenced and decides."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod("a", "11"))
    refusing = [True]
    refused = Response(403, b'{"kind":"Status","code":403,"reason":"Forbidden","message":"admission webhook '
                            b'\\"policy.example.com\\" denied the request"}')
    api.handlers.append(lambda call: refused if call.method == "PATCH" and refusing[0] else None)
    seen: list[tuple[float, str | None]] = []
    metrics = Metrics(profiles=["tessera"])

    def scrape(loop: SchedulerLoop) -> tuple[float, str | None]:
        """The gauge as a scrape reads it, and /readyz's term-fence check."""
        [check] = [check for name, check in _readyz_checks(loop, ApiserverWait()) if name == "term-fence"]
        return metrics.registry.get_sample_value("tessera_leader_fence_pending_pods") or 0.0, check()

    def busy_watch_then_let_through(loop: SchedulerLoop) -> None:
        metrics.on_scrape(StateGauges(loop, metrics))

        async def wake_often() -> None:
            for _ in range(150):  # 1.5 s of a busy watch stream
                loop.wake()
                await anyio.sleep(0.01)
            seen.append(scrape(loop))
            refusing[0] = False
        loop_group.start_soon(wake_often)

    loops: list[SchedulerLoop] = []
    async with anyio.create_task_group() as loop_group:
        loops.append(await _take_over(api, lambda: TOKEN, after_lead=busy_watch_then_let_through,
                                      until_done=lambda loop: loop.stats.scheduled >= 1 and loop.binder.in_flight == 0))
    attempts = len(api.of("PATCH", "/a/status"))
    assert 3 <= attempts <= 8, attempts  # 0.2 + 0.4 + 0.8 s of backoff in 1.5 s, then the write that lands
    [(pending, reason)] = seen
    assert pending == 1 and reason is not None and "HTTP 403" in reason and "policy.example.com" in reason
    assert scrape(loops[0]) == (0.0, None)
    assert _bound_to(api, "n") == ["a"]


async def test_refused_bindings_of_a_changing_pod_write_its_condition_once() -> None:
    """A Binding refused because the pod changed (409) writes PodScheduled=False and an Event, and
    a status write is itself a change of the pod. The message named the resourceVersions ("11 ->
    12"), so every 409 was a new message the status writer had to write — another change of the
    pod, which a Binding decided before its answer arrived would run into. The message names no
    version now (the log line keeps them): two 409s at different versions write the condition
    once. (The first `REDECIDED_AT_ONCE` in a row write none: decided again at once; these are
    the two after them, refused as errors.)"""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod("a", "11"))
    sent_versions: list[str] = []

    def label_before_the_first_two_bindings(call: Call) -> Response | None:
        if call.method == "POST" and call.path.endswith("/binding"):
            sent_versions.append(call.body["metadata"]["resourceVersion"])
            if len(sent_versions) <= REDECIDED_AT_ONCE + 2:
                pod = api.pod("default", "a")
                pod["metadata"].setdefault("labels", {})["team"] = f"x{len(sent_versions)}"
                api._bump(pod)
        return None

    api.handlers.append(label_before_the_first_two_bindings)
    loop = await _take_over(api, lambda: None,
                            until_done=lambda loop: _bound_to(api, "n") == ["a"] and loop.binder.in_flight == 0)
    assert len(sent_versions) == REDECIDED_AT_ONCE + 3 and len(set(sent_versions)) == REDECIDED_AT_ONCE + 3
    assert loop.stats.bind_errors == 2
    written = [call.body["status"]["conditions"][0] for call in api.of("PATCH", "/a/status")]
    assert len(written) == 1 and written[0]["reason"] == "SchedulerError", written
    assert "resourceVersion" not in written[0]["message"] and "11" not in written[0]["message"], written


def test_the_old_leader_logs_its_fenced_binding_as_the_fence_not_as_a_failure() -> None:
    """A Binding refused by a newer term's fence is the fence working: `binder.fenced` at warning
    level naming the term, not `binder.failed` at error level (an on-call engineer read the
    latter as a fault). A refusal while still leading stays `binder.failed`, as upstream's
    handleSchedulingFailure logs it."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="rep-a",  # type: ignore[arg-type]
                         leader_term=lambda: None)
    binding = Binding("uid-p", "default", "p", "n", {}, resource_version="7")
    message = "the pod changed since it was decided; no Binding for the version it was decided at can land"
    with capture_logs() as logs:
        loop._on_bound(BindResult(binding, Outcome.RETRY, message, 0.0, fenced_by=TOKEN))
        loop._on_bound(BindResult(binding, Outcome.RETRY, message, 0.0))
    seen = [(entry["event"], entry["log_level"], entry.get("term")) for entry in logs
            if str(entry["event"]).startswith("binder.")]
    assert seen == [("binder.fenced", "warning", TOKEN), ("binder.failed", "error", None)]


async def test_a_pod_whose_fence_write_is_refused_is_told_why_once() -> None:
    """Adversary round 4: an admission policy refused the fence's writes; every pending pod showed
    `Events: <none>` and no condition, the reason only in the leader's log, /readyz and a metric.
    A pod whose write failed now gets one FailedScheduling Warning per term saying why nothing is
    scheduled, however many times the write is tried again."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=2)]
    api.add_pod(_gpu_pod("a", "11"))
    api.add_pod(_gpu_pod("c", "12"))
    refusals: list[int] = []

    def refuse_c_three_times(call: Call) -> Response | None:
        if call.method == "PATCH" and call.path.endswith("/c/status") and len(refusals) < 3:
            refusals.append(1)
            return Response(422, b'{"kind":"Status","code":422,"reason":"Invalid","message":"pods \\"c\\" is '
                            b'forbidden: ValidatingAdmissionPolicy \'deny-term\' denied request"}')
        return None

    api.handlers.append(refuse_c_three_times)
    await _take_over(api, lambda: TOKEN,
                     until_done=lambda loop: loop.stats.scheduled >= 2 and loop.binder.in_flight == 0)
    assert len(refusals) == 3
    told = [e for (ns, _), e in api.events.items() if e["regarding"]["name"] == "c" and e["reason"] == "FailedScheduling"]
    assert len(told) == 1 and told[0]["type"] == "Warning"
    assert told[0]["note"].startswith("no pod is scheduled until this scheduler's new leader has marked every pending "
                                      "pod (its term fence): writing tessera.dev/term through pods/status failed: "
                                      "HTTP 422: ")
    assert not [e for (ns, _), e in api.events.items() if e["regarding"]["name"] == "a"
                and e["reason"] == "FailedScheduling"]


async def test_a_replica_that_does_not_lead_is_never_ready_to_decide() -> None:
    """TermFence.ready answers for the current term: none (not leading) may not decide, whether a
    term was fenced before or never, and writes nothing (the one write is term 1's fence)."""
    api = FakeApi()
    api.add_pod(_gpu_pod("a", "11"))
    fence_ = TermFence(KubeHttp(api), lambda: TOKEN)  # type: ignore[arg-type]
    pods = [FencedPod(api.pod("default", "a")["metadata"]["uid"], "default", "a")]
    assert not await fence_.ready(lambda: None, lambda: pods, lambda pod: None)
    assert await fence_.ready(lambda: 1, lambda: pods, lambda pod: None)  # term 1 fenced
    assert not await fence_.ready(lambda: None, lambda: pods, lambda pod: None)  # deposed since
    assert len(_fence_writes(api)) == 1
