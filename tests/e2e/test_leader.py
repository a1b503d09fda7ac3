"""Leader election against a real kube-apiserver: one leader at a time, a fast handover on release,
a takeover only after the lease expired on the candidate's OWN clock, and a leader that cannot
renew steps down and later comes back.

Short timings (lease 3 s, renew deadline 2 s, retry 0.5 s) keep this quick; they satisfy client-go's
constraints (lease > renew deadline > 1.2 × retry period)."""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import KubeHttp, connect
from scheduler.kube.leader import LeaderElector, lease_config_digest

NAMESPACE = "kube-system"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3.0, 2.0, 0.5
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class Candidate:
    """One elector running in its own task, counting its callbacks."""

    def __init__(self, http: KubeHttp, lease: str, name: str, digest: str = "") -> None:
        self.started = 0
        self.stopped = 0
        self.leaders: list[str] = []
        self.elector = LeaderElector(
            http, namespace=NAMESPACE, name=lease, identity=f"{name}_{secrets.token_hex(4)}",
            lease_duration=LEASE_DURATION, renew_deadline=RENEW_DEADLINE, retry_period=RETRY_PERIOD,
            on_started_leading=self._on_started, on_stopped_leading=self._on_stopped,
            on_new_leader=self.leaders.append, config_digest=digest)
        self.task: asyncio.Task[None] | None = None

    def _on_started(self) -> None:
        self.started += 1

    def _on_stopped(self) -> None:
        self.stopped += 1

    @property
    def leading(self) -> bool:
        return self.elector.is_leader

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run())

    async def crash(self) -> None:
        """Cancel `run()` without releasing: the Lease is left to expire."""
        if self.task is None:
            return
        if self.task.done():  # `release()` ended the campaign: run() returned
            assert self.task.cancelled() or self.task.exception() is None
            return
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        assert self.task.cancelled()


@pytest_asyncio.fixture
async def http(control_plane: LocalControlPlane) -> AsyncIterator[KubeHttp]:
    api = await connect(str(control_plane.kubeconfig))
    async with api:
        yield KubeHttp(api)


@pytest_asyncio.fixture
async def lease(http: KubeHttp) -> AsyncIterator[str]:
    name = f"tessera-test-{secrets.token_hex(3)}"
    yield name
    try:
        await http.request("DELETE", f"{LEASES}/{name}", limited=False)
    except Exception as err:  # noqa: BLE001 - e.g. the apiserver test failed with the server down
        print(f"lease {name} cleanup failed: {err!r}")


async def _spec(http: KubeHttp, lease: str) -> dict[str, Any]:
    response = await http.request("GET", f"{LEASES}/{lease}", limited=False)
    assert response.ok, response.message()
    spec: dict[str, Any] = response.json()["spec"]
    return spec


async def _eventually(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Wait until ``condition()``; return the seconds it took."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            pytest.fail(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.05)
    return time.monotonic() - start


async def test_one_leader_and_the_lease_names_it(http: KubeHttp, lease: str) -> None:
    a, b = Candidate(http, lease, "a"), Candidate(http, lease, "b")
    a.start()
    b.start()  # both race to create the missing Lease
    try:
        await _eventually(lambda: a.leading or b.leading, 10, "a leader")
        deadline = time.monotonic() + 4 * RETRY_PERIOD * 2.2
        while time.monotonic() < deadline:
            assert not (a.leading and b.leading)
            await asyncio.sleep(0.02)
        leader, standby = (a, b) if a.leading else (b, a)
        assert leader.leading and not standby.leading
        assert (leader.started, leader.stopped, standby.started) == (1, 0, 0)

        spec = await _spec(http, lease)
        assert spec["holderIdentity"] == leader.elector.identity
        assert spec["leaseDurationSeconds"] == int(LEASE_DURATION)
        assert spec["leaseTransitions"] == 0
        assert MICRO_TIME.match(spec["acquireTime"]) and MICRO_TIME.match(spec["renewTime"])
        assert standby.elector.observed_holder == leader.elector.identity
        assert standby.leaders == [leader.elector.identity]

        await asyncio.sleep(2 * RETRY_PERIOD + 0.2)
        later = await _spec(http, lease)
        assert later["renewTime"] > spec["renewTime"]  # the leader renews...
        assert later["acquireTime"] == spec["acquireTime"]  # ...without re-acquiring
        assert later["holderIdentity"] == leader.elector.identity
    finally:
        await a.crash()
        await b.crash()


async def test_the_holder_records_its_configuration_digest(http: KubeHttp, lease: str) -> None:
    """What `kubectl tessera explain` compares with the ConfigMap: the leader's configuration
    digest, on the Lease through a real apiserver's create and update; a standby taking over
    writes its own."""
    a, b = Candidate(http, lease, "a", "aaaaaaaaaaaa"), Candidate(http, lease, "b", "bbbbbbbbbbbb")
    a.start()
    try:
        await _eventually(lambda: a.leading, 10, "a leads")
        await asyncio.sleep(2 * RETRY_PERIOD)  # renewed since it created the Lease
        response = await http.request("GET", f"{LEASES}/{lease}", limited=False)
        assert lease_config_digest(response.json()) == "aaaaaaaaaaaa"
        b.start()
        await a.crash()
        assert await a.elector.release()
        await _eventually(lambda: b.leading, 10, "b takes over")
        response = await http.request("GET", f"{LEASES}/{lease}", limited=False)
        assert lease_config_digest(response.json()) == "bbbbbbbbbbbb"
    finally:
        await a.crash()
        await b.crash()


async def test_release_hands_over_at_the_next_retry(http: KubeHttp, lease: str) -> None:
    a, b = Candidate(http, lease, "a"), Candidate(http, lease, "b")
    a.start()
    try:
        await _eventually(lambda: a.leading, 10, "a leads")
        a_term = a.elector.term
        b.start()
        await asyncio.sleep(1.0)
        assert not b.leading

        await a.crash()
        assert (a.started, a.stopped) == (1, 1)
        assert await a.elector.release()
        # An empty holder can be taken at the standby's next attempt (≤ 2.2 retry periods), long
        # before the lease duration would have run out.
        took = await _eventually(lambda: b.leading, 10, "b takes over")
        assert took < LEASE_DURATION
        spec = await _spec(http, lease)
        assert spec["holderIdentity"] == b.elector.identity
        assert spec["leaseTransitions"] == 1
        assert b.elector.term == (1, spec["acquireTime"]) and b.elector.term != a_term
        assert spec["leaseDurationSeconds"] == int(LEASE_DURATION)
        assert b.leaders == [a.elector.identity, b.elector.identity]
        assert await a.elector.release()  # not ours any more: nothing to do
        assert (await _spec(http, lease))["holderIdentity"] == b.elector.identity
    finally:
        await a.crash()
        await b.crash()


async def test_release_writes_what_client_go_writes(http: KubeHttp, lease: str) -> None:
    a = Candidate(http, lease, "a")
    a.start()
    try:
        await _eventually(lambda: a.leading, 10, "a leads")
        before = await _spec(http, lease)
        # release() while run() is still going: it stops the campaign first, so the emptied Lease
        # is not immediately re-acquired.
        assert await a.elector.release()
        assert a.task is not None and a.task.done()
        assert (a.started, a.stopped) == (1, 1) and not a.leading
        spec = await _spec(http, lease)
        assert spec["holderIdentity"] == ""
        assert spec["leaseDurationSeconds"] == 1
        assert spec["acquireTime"] == spec["renewTime"] > before["renewTime"]
        assert spec["leaseTransitions"] == before["leaseTransitions"]
        await asyncio.sleep(3 * RETRY_PERIOD)
        assert (await _spec(http, lease))["holderIdentity"] == ""
    finally:
        await a.crash()


async def test_crash_without_release_waits_for_the_lease_to_expire(http: KubeHttp, lease: str) -> None:
    a, b = Candidate(http, lease, "a"), Candidate(http, lease, "b")
    a.start()
    try:
        await _eventually(lambda: a.leading, 10, "a leads")
        a_term = a.elector.term
        b.start()
        await asyncio.sleep(1.0)
        await a.crash()
        assert a.stopped == 1  # cancelling run() still tells the scheduler to stop
        took = await _eventually(lambda: b.leading, 15, "b takes over")
        # b restarts its clock whenever it sees a renewal, at most a couple of jittered retries
        # (≤ 1.1 s each) before the crash, and then waits the full lease duration on that clock.
        # (The exact "one lease duration after the last observation" is checked with the ghost
        # holder below.)
        assert took > LEASE_DURATION - 2 * (1 + 1.2) * RETRY_PERIOD - 0.1
        spec = await _spec(http, lease)
        assert spec["holderIdentity"] == b.elector.identity
        assert spec["leaseTransitions"] == 1
        assert b.elector.term == (1, spec["acquireTime"]) and b.elector.term != a_term
    finally:
        await a.crash()
        await b.crash()


@pytest.mark.parametrize("renew_time", ["2000-01-01T00:00:00.000000Z", "2999-01-01T00:00:00.000000Z"])
async def test_remote_timestamps_are_not_trusted(http: KubeHttp, lease: str, renew_time: str) -> None:
    """A Lease renewed "long ago" (or "in the future") by a holder we never saw renew: the candidate
    waits exactly one lease duration from ITS first observation, whatever renewTime says."""
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease, "namespace": NAMESPACE},
            "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": int(LEASE_DURATION),
                     "acquireTime": renew_time, "renewTime": renew_time, "leaseTransitions": 5}}
    created = await http.request("POST", LEASES, body=body, limited=False)
    assert created.ok, created.message()
    b = Candidate(http, lease, "b")
    b.start()
    try:
        took = await _eventually(lambda: b.leading, 15, "b takes over from the ghost")
        assert took >= LEASE_DURATION - 0.05
        spec = await _spec(http, lease)
        assert spec["holderIdentity"] == b.elector.identity
        assert spec["leaseTransitions"] == 6
        assert b.leaders[0] == "ghost"
    finally:
        await b.crash()


async def test_a_lease_naming_us_that_we_did_not_write_is_waited_out_then_a_new_term(http: KubeHttp,
                                                                                     lease: str) -> None:
    """Review: a Lease that names our identity (another process started with the same
    --identity, a Lease restored from a backup) is not ours: client-go takes it over at once,
    Tessera waits until it expires on its own clock and then takes over as a new holder (a new
    transition and acquireTime: a new term)."""
    a = Candidate(http, lease, "a")
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease, "namespace": NAMESPACE},
            "spec": {"holderIdentity": a.elector.identity, "leaseDurationSeconds": int(LEASE_DURATION),
                     "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": "2026-01-01T00:00:00.000000Z",
                     "leaseTransitions": 5}}
    created = await http.request("POST", LEASES, body=body, limited=False)
    assert created.ok, created.message()
    a.start()
    try:
        waited = await _eventually(lambda: a.leading, 10, "a leads once the record naming it expired")
        assert waited >= LEASE_DURATION - RETRY_PERIOD, waited
        spec = await _spec(http, lease)
        assert spec["leaseTransitions"] == 6 and spec["acquireTime"] != "2026-01-01T00:00:00.000000Z"
        assert a.elector.term is not None
    finally:
        await a.crash()


async def test_two_processes_with_one_identity_never_lead_together(http: KubeHttp, lease: str) -> None:
    """A new user's trial: two replicas started with the same --identity both logged
    leader.acquired and both scheduled (client-go's rule: a Lease naming you is yours). The one
    that did not write the Lease's record must stay a standby while the other renews it."""
    a = Candidate(http, lease, "a")
    twin = Candidate(http, lease, "twin")
    twin.elector.identity = a.elector.identity
    a.start()
    try:
        await _eventually(lambda: a.leading, 10, "a leads")
        twin.start()
        both = 0
        for _ in range(int(4 * LEASE_DURATION / 0.05)):  # four lease durations, sampled
            both += a.leading and twin.leading
            await asyncio.sleep(0.05)
        assert both == 0 and a.leading and not twin.leading and twin.started == 0
        await a.crash()  # the holder goes away without a release: the twin takes over after expiry
        await _eventually(lambda: twin.leading, 3 * LEASE_DURATION, "the twin leads after the record expired")
    finally:
        await a.crash()
        await twin.crash()


async def test_leader_that_cannot_renew_steps_down_and_comes_back(
        control_plane: LocalControlPlane, http: KubeHttp, lease: str) -> None:
    a = Candidate(http, lease, "a")
    a.start()
    apiserver_down = False
    try:
        await _eventually(lambda: a.leading, 10, "a leads")
        before = await _spec(http, lease)
        term = a.elector.term
        assert term == (before["leaseTransitions"], before["acquireTime"])
        await asyncio.to_thread(control_plane.stop_apiserver, 0)
        apiserver_down = True
        # One renewal may retry for renewDeadline after the retry period: then a steps down.
        took = await _eventually(lambda: a.stopped == 1, 15, "a steps down")
        # the last renewal that fits starts a retry period before the deadline, and `took` counts
        # from when the apiserver's stop returned: not from the first failed renewal
        assert took >= RENEW_DEADLINE - RETRY_PERIOD - 0.2
        assert not a.leading and a.task is not None and not a.task.done()  # still campaigning
        assert a.elector.term is None

        await asyncio.to_thread(control_plane.start_apiserver)
        apiserver_down = False
        await _eventually(lambda: a.started == 2, 30, "a leads again")
        spec = await _spec(http, lease)
        assert spec["holderIdentity"] == a.elector.identity
        # Nobody else held it in between: the same holder re-acquires without a transition.
        assert spec["leaseTransitions"] == before["leaseTransitions"]
        assert spec["acquireTime"] == before["acquireTime"]
        assert spec["renewTime"] > before["renewTime"]
        assert a.elector.term == term  # the same term: work decided before the lapse may go on
    finally:
        await a.crash()
        if apiserver_down:
            await asyncio.to_thread(control_plane.start_apiserver)
