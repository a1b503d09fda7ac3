"""Leader election and the hand-over of work between replicas: cases a review found (each failed before its fix)."""

from __future__ import annotations

from typing import Any

import anyio
import structlog.testing

from scheduler.kube.http import KubeHttp, RateLimiter, Response
from scheduler.kube.leader import LeaderElector
from scheduler.kube.status import UNSCHEDULABLE, StatusWriter
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.fakelease import Clock, LeaseServer


def _elector(server: LeaseServer, who: str, clock: Any, **kw: Any) -> LeaderElector:
    return LeaderElector(server.client(who), namespace="kube-system", name="tessera", identity=who,  # type: ignore[arg-type]
                         clock=clock, lease_duration=15.0, renew_deadline=10.0, retry_period=2.0, **kw)


async def _a_leads_b_watches(server: LeaseServer, clock: Clock, **kw: Any) -> tuple[LeaderElector, LeaderElector]:
    a, b_ = _elector(server, "A", clock, **kw), _elector(server, "B", clock)
    await a._acquire()
    a._start_leading()
    assert not await b_._try_acquire_or_renew()  # B sees A's valid record
    return a, b_


async def _b_leads_then_releases_while_a_is_paused(a: LeaderElector, b_: LeaderElector, clock: Clock) -> None:
    clock.t += 30  # A's process is paused (GC, SIGSTOP, CPU starvation): its renew loop does not run
    assert a.term is None  # correctly: A must not act now
    assert await b_._try_acquire_or_renew()  # A's record expired on B's clock: B takes over (leaseTransitions 1)
    b_._start_leading()
    clock.t += 5  # B schedules: it may give the devices A had chosen for a pod to another pod
    assert await b_.release()  # then B is shut down gracefully (rolling update): holderIdentity ""
    assert b_.observed_holder == ""


async def test_a_leader_that_resumes_after_another_replica_led_does_not_continue_its_old_term() -> None:
    """A paused past its lease, B led and released, A resumes: A's renew loop takes the empty Lease
    as a mere renewal, never stops leading (no on_stopped_leading, so no lost_leadership()) and
    reports the term it had before B led. Work decided in that old term (an ambiguous Binding,
    queued evictions, remembered statuses) goes on as if nobody else had led in between."""
    clock, server = Clock(), LeaseServer()
    a, b_ = await _a_leads_b_watches(server, clock)
    old_term = a.term
    assert old_term is not None
    await _b_leads_then_releases_while_a_is_paused(a, b_, clock)
    still_leading = await a._renew_once()  # A's renew loop wakes up
    assert server.lease is not None and server.lease["spec"]["leaseTransitions"] == 2  # B's term came between
    # Expected: either A steps down (renewal failed -> on_stopped_leading) or it leads in a NEW term.
    assert not (still_leading and a.term == old_term), \
        "A continues the term it held before B led (leaseTransitions went 0 -> 1 -> 2)"


async def test_a_binding_decided_before_another_leaders_term_is_not_resent_after_a_pause() -> None:
    """The consequence for the binder: A's Binding got an ambiguous 503 (pod read back unbound), A
    paused, B led (and may have given the pod's devices to another pod), released; A resumes and
    its binder, seeing the same term, POSTs the Binding decided before B's term again."""
    from scheduler.core import annotations as ann
    from scheduler.kube.binder import Binder, Binding, BindResult

    clock, server = Clock(), LeaseServer()
    a, b_ = await _a_leads_b_watches(server, clock)
    api = FakeApi()
    pod = b.pod("p")
    api.add_pod(pod)
    api.fail_next("POST", "/binding", status=503)
    results: list[BindResult] = []
    paused = [False]

    async def sleep(seconds: float) -> None:  # the binder's backoff after reading the pod back unbound
        if not paused[0]:
            paused[0] = True
            await _b_leads_then_releases_while_a_is_paused(a, b_, clock)
            await a._renew_once()  # A wakes: its renew loop runs before the binder's next send
        await anyio.sleep(0)

    binder = Binder(api, results.append, term=lambda: a.term, sleep=sleep,  # type: ignore[arg-type]
                    clock=lambda: clock.t, late_landing_seconds=0.0)
    binding = Binding(pod["metadata"]["uid"], "default", "p", "n", {ann.DEVICES: "{}"})
    async with anyio.create_task_group() as group:
        await group.start(binder.run)
        binder.submit(binding)
        assert await binder.drain(5)
        group.cancel_scope.cancel()
    assert paused[0]
    assert len(api.of("POST", "/binding")) == 1, "the Binding decided before B's term was sent again after it"


async def test_no_status_write_is_sent_by_a_replica_deposed_while_it_waited_for_a_token() -> None:
    """The binder and the evictor wait for their write token first and only then ask whether they
    still lead; the status writer asks first and then waits for the token inside `request()`
    (limited=True), so a replica deposed during that wait (seconds when Bindings, evictions and
    statuses drain the bucket) still PATCHes after `lost_leadership()` ran."""
    api = FakeApi()
    pod = b.pod("p")
    pod["metadata"]["resourceVersion"] = "100"
    api.add_pod(pod)
    leading = [True]

    async def throttled(seconds: float) -> None:  # the bucket is empty; the Lease is lost meanwhile
        leading[0] = False
        await anyio.sleep(0)

    limiter = RateLimiter(qps=1.0, burst=1, sleep=throttled)
    limiter._tokens = 0.0  # drained by the writes before this one
    writer = StatusWriter(KubeHttp(api, limiter), lambda ns, name, reason: "100",  # type: ignore[arg-type]
                          allowed=lambda: leading[0])
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available")
    with anyio.move_on_after(0.5):
        await writer.run()
    assert not leading[0]  # the token wait happened
    assert api.of("PATCH") == [], "a status PATCH went out after leadership was lost"


async def test_a_leader_does_not_disown_its_own_renewal_whose_answer_was_lost() -> None:
    """A renewal PUT lands but its answer is lost (timeout); the next PUTs fail (etcd write
    timeouts: 503) while GETs work. Each attempt remembers two more records in `_sent`
    (maxlen 8), so after four attempts the record the Lease really holds — A's own — is forgotten:
    A takes its own Lease for another process with the same --identity (`leader.identity_in_use`
    error), steps down and, when writes recover, cannot renew its own record (same term) but waits
    for it to expire. client-go treats a record naming its identity as its own (IsLeader) and
    renews it."""
    clock, server = Clock(), LeaseServer()
    a, _ = await _a_leads_b_watches(server, clock)
    phase = {"lost_answer": True, "writes_fail": False}

    async def after(method: str, who: str, response: Response) -> None:
        if who == "A" and method == "PUT" and phase["lost_answer"]:
            phase["lost_answer"], phase["writes_fail"] = False, True
            raise TimeoutError("the renewal was applied; its answer never came back")

    server.after = after
    server.fail = lambda method, who: (Response(503, b'{"message":"etcdserver: request timed out"}')
                                       if who == "A" and method == "PUT" and phase["writes_fail"] else None)
    clock.t += 2
    assert not await a._try_acquire_or_renew()  # R1 is on the Lease now
    landed = server.lease["spec"] if server.lease else None
    for _ in range(4):  # fits in one renew deadline (10 s at a 2 s retry period)
        clock.t += 2
        assert not await a._try_acquire_or_renew()
    assert server.lease is not None and server.lease["spec"] == landed  # nobody else wrote: A's own record
    assert not a._usurped(), "A disowns the record it wrote itself and reports a duplicate --identity"


def test_a_fractional_lease_duration_that_would_let_a_successor_in_while_the_leader_acts_is_refused() -> None:
    """`leaseDuration: 10.5s, renewDeadline: 10.2s`: the Lease stores int(10.5) = 10 s while
    `is_leader` trusts the last write for renew_deadline = 10.2 s, so a standby could take over
    while the old leader still acts. (client-go truncates the same way.) Refused: the whole seconds
    on the Lease must exceed the renew deadline."""
    import pytest

    with pytest.raises(ValueError, match="whole seconds"):
        LeaderElector(LeaseServer().client("A"), namespace="kube-system", name="tessera", identity="A",  # type: ignore[arg-type]
                      clock=Clock(), lease_duration=10.5, renew_deadline=10.2, retry_period=2.0)


def test_a_lease_duration_whose_whole_seconds_do_not_exceed_the_renew_deadline_is_refused(tmp_path: Any) -> None:
    import pytest

    from scheduler.api.config import ConfigError, load_config

    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    "leaderElection: {leaderElect: true, leaseDuration: 10.5s, renewDeadline: 10.2s, retryPeriod: 2s}\n")
    with pytest.raises(ConfigError, match="in whole seconds"):
        load_config(path)


async def test_a_restart_with_a_fixed_identity_is_not_called_another_process() -> None:
    """A platform engineer's trial: a replica restarted with a fixed --identity (a StatefulSet's pod
    name) before its Lease expired logged `another process runs with the same --identity`
    although none did. What the process knows is that the Lease names its identity in a record it
    did not write: an earlier run of this replica, or another process with that identity."""
    clock, server = Clock(), LeaseServer()
    a, _ = await _a_leads_b_watches(server, clock)
    restarted = _elector(server, "A", clock)  # same identity, a new process: it wrote nothing yet
    clock.t += 2
    with structlog.testing.capture_logs() as logs:
        assert not await restarted._try_acquire_or_renew()
    [said] = [e for e in logs if e["event"] == "leader.identity_in_use"]
    assert said["message"] == (
        "the Lease names this replica's identity 'A' in a record this process did not write: an earlier run of "
        "this replica (restarted before the Lease expired), or another process started with the same --identity "
        "(give every replica its own); this one waits until that record expires before it leads")
    assert "another process runs" not in said["message"]
