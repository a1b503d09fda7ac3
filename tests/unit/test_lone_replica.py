"""A replica started with `leaderElect: false` while another replica leads through the same Lease.

From a new user's trial: the README's dev-cluster flow runs `tessera run --config config/binpack.yaml`
(leader election off: one replica in the demo), and a second `tessera run` with the built-in
configuration (leader election on) took the free Lease and led at once. Both scheduled the same
pods — every pending pod got two FailedScheduling Events, one per replica, Bindings raced (HTTP 409
"already assigned"), and the two device ledgers could hand one GPU to two pods, each replica
choosing before it saw the other's Binding. kube-scheduler with `leaderElect: false` never looks at
the Lease (it trusts the operator to run one replica); Tessera's promise is the GPU, so a replica
without leader election first looks: a holder that renews the Lease is a live leader, and this
replica refuses to start beside it. A holder whose record does not change for its lease duration
(on this process's clock, as a standby judges it: `scheduler/kube/leader.py`) is gone, and a
released or missing Lease is free. Each test failed before the check existed.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import anyio
import pytest
import yaml

from scheduler.kube.leader import LeaderElector, micro_time
from scheduler.kube.lone_replica import live_leader
from tests.fakelease import Clock, LeaseServer


def _lease(server: LeaseServer, holder: str, duration: int = 15) -> None:
    now = micro_time(dt.datetime.now(dt.timezone.utc))
    server.rv += 1
    server.lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "tessera", "namespace": "kube-system", "resourceVersion": str(server.rv)},
                    "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": now,
                             "renewTime": now, "leaseTransitions": 0}}


async def _check(server: LeaseServer, clock: Clock, *, renewing: bool) -> tuple[str | None, float]:
    """`live_leader` against the server, with a leader that renews every 2 s when `renewing`;
    returns its answer and how long (on the fake clock) it watched."""
    start = clock.t

    async def sleep(seconds: float) -> None:
        clock.t += seconds
        if renewing and server.lease is not None:
            spec = server.lease["spec"]
            spec["renewTime"] = micro_time(dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=clock.t))
            server.rv += 1
            server.lease["metadata"]["resourceVersion"] = str(server.rv)

    holder = await live_leader(server.client("lone"), namespace="kube-system", name="tessera",  # type: ignore[arg-type]
                               retry_period=2.0, clock=clock, sleep=sleep)
    return holder, clock.t - start


async def test_a_leader_that_renews_is_named_within_a_couple_of_retry_periods() -> None:
    server, clock = LeaseServer(), Clock()
    _lease(server, "replica-a")
    holder, watched = await _check(server, clock, renewing=True)
    assert holder == "replica-a" and watched <= 4.0


async def test_a_real_electors_lease_is_a_live_leader() -> None:
    """Against the elector itself: while it leads, the check names it; once it released, it does not."""
    server = LeaseServer()
    elector = LeaderElector(server.client("replica-a"), namespace="kube-system", name="tessera",  # type: ignore[arg-type]
                            identity="replica-a", lease_duration=1.0, renew_deadline=0.8, retry_period=0.1)
    async with anyio.create_task_group() as group:
        group.start_soon(elector.run)
        with anyio.fail_after(5):
            while not elector.is_leader:
                await anyio.sleep(0.01)
        assert await live_leader(server.client("lone"), namespace="kube-system", name="tessera",  # type: ignore[arg-type]
                                 retry_period=0.1) == "replica-a"
        group.cancel_scope.cancel()
    await elector.release()
    assert await live_leader(server.client("lone"), namespace="kube-system", name="tessera",  # type: ignore[arg-type]
                             retry_period=0.1) is None


async def test_a_holder_that_stopped_renewing_is_gone_after_its_lease_duration() -> None:
    server, clock = LeaseServer(), Clock()
    _lease(server, "crashed", duration=15)
    holder, watched = await _check(server, clock, renewing=False)
    assert holder is None and 15.0 <= watched <= 18.0


@pytest.mark.parametrize("state", ["missing", "released"])
async def test_a_free_lease_is_not_waited_for(state: str) -> None:
    server, clock = LeaseServer(), Clock()
    if state == "released":
        _lease(server, "", duration=1)
    holder, watched = await _check(server, clock, renewing=False)
    assert holder is None and watched == 0.0


async def test_a_lease_that_cannot_be_read_does_not_stop_the_replica() -> None:
    """A deployment without leader election may not be allowed to read Leases (the chart grants them
    only with election on): the check cannot tell, and the replica starts as kube-scheduler would."""
    from scheduler.kube.http import Response

    server, clock = LeaseServer(), Clock()
    _lease(server, "replica-a")
    server.fail = lambda method, who: Response(403, b'{"message":"leases is forbidden"}')
    holder, watched = await _check(server, clock, renewing=True)
    assert holder is None and watched == 0.0


async def test_run_without_leader_election_refuses_beside_a_live_leader(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`tessera run`'s own start-up (`run_cli._run`) with a replica leading through a real elector:
    refused with exit 2 before it lists anything (its only requests: GET /version, then the Lease), one line on
    stderr saying why."""
    from scheduler.api.config import load_config
    from scheduler.kube import run_cli

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False, "leaseDuration": "1s", "renewDeadline": "800ms",
                           "retryPeriod": "100ms"}}))
    config = load_config(str(path))
    server = LeaseServer()
    leader = LeaderElector(server.client("replica-a"), namespace="kube-system", name="tessera",  # type: ignore[arg-type]
                           identity="replica-a", lease_duration=1.0, renew_deadline=0.8, retry_period=0.1)
    lone = server.client("lone")
    args = argparse.Namespace(identity="lone", port=0, bind_address="127.0.0.1", gpu_map=False)
    async with anyio.create_task_group() as group:
        group.start_soon(leader.run)
        with anyio.fail_after(5):
            while not leader.is_leader:
                await anyio.sleep(0.01)
            assert await run_cli._run(args, config, lone, lone, None) == 2  # type: ignore[arg-type]
        group.cancel_scope.cancel()
    assert {call for call in server.calls if call[0] == "lone"} <= {("lone", "GET")}
    assert ("tessera: refusing to run: leaderElect is false, and replica-a leads through the Lease "
            "kube-system/tessera: both would schedule the same pods and could give one GPU to two pods. "
            "Stop that replica, or run this one with leader election on (it then stands by)\n") in capsys.readouterr().err


async def test_a_replica_without_election_says_so_when_another_starts_leading() -> None:
    """The trial's other order: the replica without election started first (the Lease free), then a
    replica with election took the Lease and led. The first cannot be stopped by the second; it now
    watches the Lease for its whole life and logs one error per new holder that renews it."""
    from structlog.testing import capture_logs

    from scheduler.kube.lone_replica import watch_for_a_leader

    server = LeaseServer()
    leader = LeaderElector(server.client("replica-a"), namespace="kube-system", name="tessera",  # type: ignore[arg-type]
                           identity="replica-a", lease_duration=1.0, renew_deadline=0.8, retry_period=0.1)
    with capture_logs() as logs:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: watch_for_a_leader(server.client("lone"), namespace="kube-system",  # type: ignore[arg-type]
                                                        name="tessera", retry_period=0.1, every=0.2))
            await anyio.sleep(0.5)
            assert not [e for e in logs if e["event"] == "leader_election.rival"]  # nobody leads yet
            group.start_soon(leader.run)
            with anyio.fail_after(5):
                while not [e for e in logs if e["event"] == "leader_election.rival"]:
                    await anyio.sleep(0.05)
            await anyio.sleep(0.6)  # more looks at the same leader: no second error
            group.cancel_scope.cancel()
    rivals = [e for e in logs if e["event"] == "leader_election.rival"]
    assert len(rivals) == 1 and rivals[0]["log_level"] == "error" and rivals[0]["holder"] == "replica-a"
    assert rivals[0]["lease"] == "kube-system/tessera"


def test_a_standby_says_whom_it_stands_by_for() -> None:
    """The trial's second replica with leader election logged only `leader.observed … me: false`."""
    from structlog.testing import capture_logs

    from scheduler.kube.run_cli import standing_by

    said = standing_by("me", "kube-system/tessera", lambda: 19.4, lambda: None)  # no readable renewTime
    with capture_logs() as logs:
        for holder in ("replica-a", "me", ""):
            said(holder)
    assert [(e["event"], e["holder"]) for e in logs] == [("leader.standing_by", "replica-a")]
    assert logs[0]["message"] == ("replica-a leads: this replica keeps its cache warm and schedules only if it "
                                  "takes over, at the latest in 19.4 s if replica-a renews the Lease no more")


async def test_a_transport_error_reading_the_lease_does_not_end_the_start(tmp_path: Path) -> None:
    """Review: the start-up check let a transport error on the Lease GET (a reset, a timeout)
    escape, and `tessera run` ended in an exception group's traceback. It cannot tell then, as when
    the Lease may not be read: it warns and starts, and the periodic look
    (`watch_for_a_leader`) tries again."""
    import aiohttp

    from scheduler.api.config import load_config
    from scheduler.kube import run_cli
    from scheduler.kube.apiserver_wait import ApiserverWait

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                    "kind": "KubeSchedulerConfiguration", "leaderElection": {"leaderElect": False}}))
    server = LeaseServer()
    _lease(server, "replica-a")
    gets = []

    def reset_the_lease_get(method: str, who: str) -> None:
        gets.append(method)
        if len(gets) == 2:  # GET /version answers; the Lease's GET meets a reset connection
            raise aiohttp.ServerDisconnectedError()
        return None

    server.fail = reset_the_lease_get
    with anyio.fail_after(5):
        outcome = await run_cli._before_start(ApiserverWait(), server.client("lone"), None,  # type: ignore[arg-type]
                                              load_config(str(path)))
    assert outcome is None and len(gets) == 2
