"""Leader election against an in-memory Lease endpoint: never two replicas acting at once.

From a review: leading was a flag the renew loop clears, so a leader paused past its lease (a GC
pause, SIGSTOP, a starved VM) woke up still reporting its term to the binder and the evictor while
a successor led; a Lease deleted or taken over by hand kept the old leader leading until its renew
deadline while a standby created a new one at once; and failed writes pushed the Lease's real
record out of the leader's memory of its own writes, so it disowned its own Lease.
"""

from __future__ import annotations

import time
from typing import Any, Unpack

import anyio
import pytest

from scheduler.kube.http import Response
from scheduler.kube.leader import LeaderElector
from tests.fakelease import Clock, LeaseServer
from tests.helpers import LeaseTimings


def _elector(server: LeaseServer, who: str, clock: Any = time.monotonic, **timings: Unpack[LeaseTimings]) -> LeaderElector:
    timings = timings or {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}
    return LeaderElector(server.client(who), namespace="kube-system", name="tessera", identity=who,  # type: ignore[arg-type]
                         clock=clock, **timings)


async def _leading(server: LeaseServer, clock: Clock) -> tuple[LeaderElector, LeaderElector]:
    a, b = _elector(server, "A", clock), _elector(server, "B", clock)
    await a._acquire()
    a._start_leading()
    assert not await b._try_acquire_or_renew()  # B watches A's valid Lease
    return a, b


async def test_a_paused_leader_reports_no_term_past_its_renew_deadline() -> None:
    clock, server = Clock(), LeaseServer()
    a, b = await _leading(server, clock)
    clock.t += 30  # A's process paused; its renew loop has not run since
    assert await b._try_acquire_or_renew()
    b._start_leading()
    assert a.term is None and not a.is_leader  # what A's binder and evictor read when they resume


async def test_a_renewal_answered_after_a_pause_longer_than_the_lease_does_not_keep_leading() -> None:
    clock, server = Clock(), LeaseServer()
    a, b = await _leading(server, clock)
    clock.t += 2
    fired = False

    async def after(method: str, who: str, response: Response) -> None:
        nonlocal fired
        if who != "A" or method != "PUT" or fired:
            return
        fired = True
        assert not await b._try_acquire_or_renew()  # A's renewal is committed; B sees it at once
        clock.t += 16  # and A is paused before it reads the answer
        assert await b._try_acquire_or_renew()  # expired on B's clock: B takes over, rightly
        b._start_leading()

    server.after = after
    await a._renew_once()  # A reads "200 OK" for a write it sent 16 s ago
    assert a.term is None or b.term is None


@pytest.mark.parametrize("edit", ["delete", "empty-holder"])
async def test_a_lease_deleted_or_emptied_by_hand_never_gives_two_leaders(edit: str) -> None:
    server = LeaseServer()
    timings: LeaseTimings = {"lease_duration": 1.0, "renew_deadline": 0.9, "retry_period": 0.1}
    a, b = _elector(server, "A", **timings), _elector(server, "B", **timings)
    broken = {"on": False}  # A cannot write for a while after the edit; reads work
    server.fail = lambda method, who: (Response(503, b'{"message":"unavailable"}')
                                       if who == "A" and broken["on"] and method in ("PUT", "POST") else None)
    both = 0
    async with anyio.create_task_group() as group:
        group.start_soon(a.run)
        await anyio.sleep(0.3)
        group.start_soon(b.run)
        await anyio.sleep(0.3)
        assert a.is_leader and not b.is_leader
        broken["on"] = True
        assert server.lease is not None
        if edit == "delete":
            server.lease = None
        else:
            server.lease["spec"]["holderIdentity"] = ""
            server.rv += 1
            server.lease["metadata"]["resourceVersion"] = str(server.rv)
        start = time.monotonic()
        while time.monotonic() - start < 2:
            both += a.term is not None and b.term is not None
            await anyio.sleep(0.01)
        group.cancel_scope.cancel()
    if edit == "delete":
        assert both == 0  # the standby waits out the record it saw; A's term ends by its renew deadline
    else:
        # a holder cleared by hand reads exactly like a release, which a standby takes at once (as
        # client-go's does): the old leader steps down at its next look, one retry period
        assert both * 0.01 <= 2 * 0.1


async def test_failed_renewals_do_not_make_the_leader_disown_its_own_lease() -> None:
    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock)
    await a._acquire()
    a._start_leading()
    server.fail = lambda method, who: (Response(500, b'{"message":"etcdserver: mvcc: database space exceeded"}')
                                       if method == "PUT" else None)
    for _ in range(5):  # five attempts fit in one 10 s renew deadline, two writes each
        assert not await a._try_acquire_or_renew()
        clock.t += 1
    assert not a._usurped()
    server.fail = None  # writes work again, within the lease: still ours, the same term
    term = a._term
    assert await a._try_acquire_or_renew()
    assert a.term == term


async def test_a_renewal_that_takes_the_slow_path_is_counted() -> None:
    """client-go tryAcquireOrRenew calls metrics.slowpathExercised(name) when the leader's
    optimistic write fails and it renews through GET + update (leaderelection.go, step 3, when
    IsLeader): kube-scheduler exports it as `leader_election_slowpath_total{name}` (component-base
    metrics/prometheus/clientgo/leaderelection). Tessera's elector has both paths but counted none."""
    from scheduler.kube.metrics import Metrics
    from scheduler.kube.run_cli import count_slow_renewals

    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock)
    metrics = Metrics(lease_name="tessera")
    metrics.on_scrape(count_slow_renewals(a, metrics))
    await a._acquire()
    a._start_leading()
    assert await a._try_acquire_or_renew()  # the fast path
    writes = iter([Response(409, b'{"message":"the object has been modified"}')])
    server.fail = lambda method, who: next(writes, None) if method == "PUT" else None
    clock.t += 1
    assert await a._try_acquire_or_renew()  # the optimistic write refused: GET + update
    from prometheus_client import generate_latest
    text = generate_latest(metrics.registry).decode()
    assert 'leader_election_slowpath_total{name="tessera"} 1.0' in text
    assert "# HELP leader_election_slowpath_total [ALPHA] Total number of slow path exercised in renewing leader " \
           "leases. 'name' is the string used to identify the lease. Please make sure to group by name." in text


async def test_a_lease_the_scheduler_may_not_read_says_which_namespace_to_configure() -> None:
    """config/gpu-cluster.yaml copied into deploy/'s ConfigMap puts the Lease in kube-system, where
    the Role grants nothing: the replica never leads. The warning says why and what to change, not
    only `status=403`."""
    from structlog.testing import capture_logs

    server = LeaseServer()
    server.fail = lambda method, who: Response(
        403, b'{"message":"leases.coordination.k8s.io \\"tessera\\" is forbidden: User '
             b'\\"system:serviceaccount:tessera-system:tessera-scheduler\\" cannot get resource \\"leases\\" in '
             b'API group \\"coordination.k8s.io\\" in the namespace \\"kube-system\\""}')
    a = _elector(server, "A", Clock())
    with capture_logs() as logs:
        assert not await a._try_acquire_or_renew()
    [warning] = [entry for entry in logs if entry["log_level"] == "warning"]
    assert "leaderElection.resourceNamespace" in warning["hint"] and "kube-system" in warning["hint"]
