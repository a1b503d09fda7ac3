"""What the leader-election log lines tell an operator at a takeover (a day-2 trial, finding E):
`leader.acquired` named nobody and never said why the Lease was free, a resumed old leader logged
`leader.standing_by` before `leader.lost`, and `leader.attempt_failed` said only "TimeoutError"."""

from __future__ import annotations

from collections.abc import MutableMapping
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import structlog.testing

from scheduler.kube.leader import LeaderElector
from scheduler.kube.run_cli import standing_by
from tests.fakelease import Clock, LeaseServer, a_real_newer_holder_deposes

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera"


def _elector(server: LeaseServer, who: str, clock: Clock) -> LeaderElector:
    elector = LeaderElector(server.client(who), namespace="kube-system", name="tessera", identity=who,  # type: ignore[arg-type]
                            clock=clock, wall_clock=lambda: datetime.fromtimestamp(clock.t, timezone.utc),
                            lease_duration=15.0, renew_deadline=10.0, retry_period=2.0,
                            on_new_leader=standing_by(who, "kube-system/tessera", lambda: elector.takes_over_within(),
                                                      lambda: elector.unrenewed_for()))
    return elector


def _events(logs: list[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


async def _b_took_over_while_a_was_paused() -> tuple[LeaseServer, LeaderElector, LeaderElector]:
    """A leads; B sees A's record, and takes the Lease after A went unrenewed for longer than the lease."""
    clock, server = Clock(), LeaseServer()
    a, b = _elector(server, "A", clock), _elector(server, "B", clock)
    await a._acquire()
    a._start_leading()
    assert not await b._try_acquire_or_renew()  # B sees A's record
    clock.t += 16
    assert await b._try_acquire_or_renew()  # B took over while A was paused
    return server, a, b


async def _standby_after(seconds: float) -> tuple[LeaseServer, Clock, LeaderElector, MutableMapping[str, Any]]:
    """A leads and renews no more (kill -9); B starts `seconds` later, sees A's record and stands by:
    the server, the clock, B, and B's `leader.standing_by` entry."""
    clock, server = Clock(), LeaseServer()
    a, b = _elector(server, "A", clock), _elector(server, "B", clock)
    await a._acquire()
    a._start_leading()
    clock.t += seconds
    with structlog.testing.capture_logs() as logs:
        assert not await b._try_acquire_or_renew()
        b._report_transition()
    [standing] = _events(logs, "leader.standing_by")
    return server, clock, b, standing


async def test_the_first_leader_says_there_was_no_lease() -> None:
    clock, server = Clock(), LeaseServer()
    with structlog.testing.capture_logs() as logs:
        await _elector(server, "A", clock)._acquire()
    [acquired] = _events(logs, "leader.acquired")
    assert acquired["previous_holder"] == "<none>" and acquired["previous_record"] == "absent"


async def test_a_takeover_from_a_paused_leader_names_it_and_says_its_record_expired() -> None:
    clock, server = Clock(), LeaseServer()
    a, b = _elector(server, "A", clock), _elector(server, "B", clock)
    await a._acquire()
    a._start_leading()
    assert not await b._try_acquire_or_renew()  # B sees A's record
    clock.t += 16  # A is SIGSTOPped: no renewal for longer than the lease
    with structlog.testing.capture_logs() as logs:
        await b._acquire()
    [acquired] = _events(logs, "leader.acquired")
    assert acquired["identity"] == "B"
    assert acquired["previous_holder"] == "A" and acquired["previous_record"] == "expired"
    assert acquired["unrenewed_for_seconds"] == 16.0 and acquired["lease_duration_seconds"] == 15


async def test_a_takeover_after_a_release_names_who_released_it() -> None:
    clock, server = Clock(), LeaseServer()
    a, b = _elector(server, "A", clock), _elector(server, "B", clock)
    await a._acquire()
    a._start_leading()
    assert not await b._try_acquire_or_renew()
    assert await a.release()
    clock.t += 2
    with structlog.testing.capture_logs() as logs:
        await b._acquire()
    [acquired] = _events(logs, "leader.acquired")
    assert acquired["previous_holder"] == "A" and acquired["previous_record"] == "released"


async def test_a_resumed_leader_logs_that_it_lost_the_lease_before_it_stands_by() -> None:
    _, a, _ = await _b_took_over_while_a_was_paused()
    with structlog.testing.capture_logs() as logs:
        await a._renew()  # A wakes up: its renewal finds B's record
    order = [entry["event"] for entry in logs if entry["event"] in ("leader.lost", "leader.standing_by")]
    assert order == ["leader.lost", "leader.standing_by"]
    [lost] = _events(logs, "leader.lost")
    assert lost["holder"] == "B"


async def test_a_standby_says_when_it_takes_over_at_the_latest_if_the_holder_is_gone() -> None:
    """A user trial: after `kill -9` the restarted replica logged `leader.standing_by "<dead
    holder> leads: ..."` and was silent for ~15 s. It says when it takes over if the holder renews
    no more: the rest of the record's leaseDurationSeconds on its own clock (from when it saw the
    record: a candidate never reads renewTime against its clock), and one retry period's longest
    wait (2 s * (1 + 1.2))."""
    _, clock, b, standing = await _standby_after(3)  # A renews no more (kill -9); B starts 3 s later and sees A's record
    assert standing["holder"] == "A" and standing["takes_over_within_seconds"] == 19.4
    assert standing["message"] == ("A leads (its Lease unrenewed for 3 s by this host's clock): this replica keeps its "
                                   "cache warm and schedules only if it takes over, at the latest in 19.4 s if A renews "
                                   "the Lease no more")
    clock.t += 10
    assert b.takes_over_within() == 9.4
    clock.t += 20  # the record's lease ran out on B's clock: one retry's longest wait is all that is left
    assert b.takes_over_within() == 4.4


async def test_a_failed_attempt_says_what_failed_and_which_request() -> None:
    clock, server = Clock(), LeaseServer()

    def time_out(method: str, who: str) -> None:
        raise TimeoutError()  # what KubeHttp raises when the timeout passes: no message of its own

    server.fail = time_out
    a = _elector(server, "A", clock)
    with structlog.testing.capture_logs() as logs:
        assert not await a._try_acquire_or_renew()
    [failed] = _events(logs, "leader.attempt_failed")
    assert failed["error"] == "TimeoutError: no answer within 5 s"
    assert failed["request"] == f"GET {LEASE_PATH}"


async def test_a_failed_attempt_keeps_the_exceptions_own_message() -> None:
    clock, server = Clock(), LeaseServer()

    def refuse(method: str, who: str) -> None:
        raise ConnectionRefusedError(111, "Connect call failed ('10.0.0.1', 6443)")

    server.fail = refuse
    with structlog.testing.capture_logs() as logs:
        assert not await _elector(server, "A", clock)._try_acquire_or_renew()
    [failed] = _events(logs, "leader.attempt_failed")
    assert failed["error"] == "ConnectionRefusedError: [Errno 111] Connect call failed ('10.0.0.1', 6443)"
    assert failed["request"] == f"GET {LEASE_PATH}"


async def test_a_leader_taking_back_its_own_record_after_a_blip_names_itself_not_the_last_takeover() -> None:
    """A lease blip (a day-2 trial): A took the Lease B had released, then its renewals failed
    until it stepped down, and its next attempt took back its own record, still valid, on the fast
    path, in the same term (leaseTransitions unchanged). `leader.acquired` said
    previous_holder=B previous_record=released, the first takeover's; it is A's own record."""
    clock, server = Clock(), LeaseServer()
    a, b = _elector(server, "A", clock), _elector(server, "B", clock)
    await b._acquire()
    b._start_leading()
    assert not await a._try_acquire_or_renew()  # A sees B's record
    assert await b.release()
    await a._acquire()
    a._start_leading()
    transitions = server.lease["spec"]["leaseTransitions"]  # type: ignore[index]

    def refuse(method: str, who: str) -> None:
        raise TimeoutError()

    server.fail = refuse
    clock.t += 2
    assert not await a._try_acquire_or_renew()  # the blip: A cannot renew ...
    a._stop_leading()  # ... and steps down at its renewDeadline
    server.fail = None
    clock.t += 8  # its record is still valid on its clock (15 s lease)
    with structlog.testing.capture_logs() as logs:
        await a._acquire()
    [acquired] = _events(logs, "leader.acquired")
    assert server.lease["spec"]["leaseTransitions"] == transitions  # type: ignore[index]
    assert acquired["previous_holder"] == "A" and acquired["previous_record"] == "own"


async def test_a_renewal_refused_for_its_credentials_is_a_warning_once_not_info_each_retry() -> None:
    """A revoked token (a day-2 trial): every renewal got HTTP 401 and `leader.fast_renew_failed`
    logged at info on each retry, below what an operator's alerting reads, until the replica
    stepped down. A 401/403 on a renewal is a warning, with what to check; the same refusal again
    is info (not a warning every retry period), and a different one is a warning again."""
    from scheduler.kube.http import Response

    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock)
    await a._acquire()
    a._start_leading()
    denied = {"status": 401}

    def refuse_writes(method: str, who: str) -> Response | None:
        if method == "PUT":
            return Response(denied["status"], b'{"kind":"Status","reason":"Unauthorized","code":401,'
                                              b'"message":"Unauthorized"}')
        return None

    server.fail = refuse_writes
    with structlog.testing.capture_logs() as logs:
        clock.t += 2
        assert not await a._try_acquire_or_renew()
        clock.t += 2
        assert not await a._try_acquire_or_renew()
        denied["status"] = 403
        clock.t += 2
        assert not await a._try_acquire_or_renew()
    failed = [entry for entry in logs if entry["event"] in ("leader.fast_renew_failed", "leader.update_failed")]
    assert [(entry["event"], entry["status"], entry["log_level"]) for entry in failed[:2]] == \
        [("leader.fast_renew_failed", 401, "warning"), ("leader.update_failed", 401, "info")], failed
    assert "credentials" in failed[0]["hint"]
    assert all(entry["log_level"] == "info" for entry in failed[1:] if entry["status"] == 401), failed
    assert [entry["log_level"] for entry in failed if entry["status"] == 403][0] == "warning", failed
    assert "Leases" in next(entry for entry in failed if entry["status"] == 403)["hint"]


async def test_a_lease_create_refused_for_its_credentials_is_a_warning_once_not_each_retry() -> None:
    """The Lease's create (no Lease yet) warned on every retry period when refused with a 401 or
    403, unlike the renewal and the update: a warning once per such status, info while it stays
    the same, a warning again for another one; and the other two writes share that memory."""
    from scheduler.kube.http import Response

    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock)
    denied = {"status": 403}

    def refuse_creates(method: str, who: str) -> Response | None:
        if method == "POST":
            return Response(denied["status"], b'{"kind":"Status","reason":"Forbidden","message":"forbidden"}')
        return None

    server.fail = refuse_creates
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            clock.t += 2
            assert not await a._try_acquire_or_renew()
        denied["status"] = 401
        clock.t += 2
        assert not await a._try_acquire_or_renew()
    failed = _events(logs, "leader.create_failed")
    assert [(entry["status"], entry["log_level"]) for entry in failed] == \
        [(403, "warning"), (403, "info"), (403, "info"), (401, "warning")], failed
    assert "Leases" in failed[0]["hint"] and "credentials" in failed[-1]["hint"]


# --- leader.lost says why: the reason it gives is the one that ended the term ------------------------

def _lost_reason(logs: list[MutableMapping[str, Any]]) -> str:
    [lost] = _events(logs, "leader.lost")
    return str(lost["reason"])


async def test_a_doubt_whose_write_finds_a_real_newer_holder_says_that_holder_took_the_lease() -> None:
    """Session 50's closing note: a pod's term fence made A doubt, the Lease write it sent at once
    found B's record, and A logged `leader.lost reason="failed to renew lease within renewDeadline"`
    within a millisecond of doubting, its deadline 10 s away. It lost because B took the Lease:
    say so and name B, in client-go's words (`lock is held by %v and has not yet expired`)."""
    server, slow, real = LeaseServer(), Clock(), Clock()
    with structlog.testing.capture_logs() as logs:
        await a_real_newer_holder_deposes(server, _elector(server, "A", slow), _elector(server, "B", real), real)
    [lost] = _events(logs, "leader.lost")
    assert lost["holder"] == "B"
    assert lost["reason"] == "lock is held by B and has not yet expired: another holder took the Lease"


async def test_a_leader_resumed_after_a_pause_says_who_took_the_lease() -> None:
    _, a, _ = await _b_took_over_while_a_was_paused()
    with structlog.testing.capture_logs() as logs:
        await a._renew()
    assert _lost_reason(logs) == "lock is held by B and has not yet expired: another holder took the Lease"


async def test_a_leader_that_cannot_reach_the_lease_still_says_its_renew_deadline_passed() -> None:
    clock, server = Clock(), LeaseServer()
    a = LeaderElector(server.client("A"), namespace="kube-system", name="tessera", identity="A",  # type: ignore[arg-type]
                      clock=clock, lease_duration=3.0, renew_deadline=1.0, retry_period=0.2)
    await a._acquire()
    a._start_leading()

    def time_out(method: str, who: str) -> None:
        clock.t += 0.2
        raise TimeoutError()

    server.fail = time_out
    with structlog.testing.capture_logs() as logs:
        with anyio.fail_after(5):
            await a._renew()
    assert _lost_reason(logs) == "failed to renew lease within renewDeadline"


async def test_a_renewal_that_had_to_take_the_lease_anew_says_the_term_was_interrupted() -> None:
    """B took the Lease while A was paused and released it again: A's renewal takes it anew
    (`leader.term_interrupted`); the term ended, not for a deadline, and nobody holds it against A."""
    server, a, b = await _b_took_over_while_a_was_paused()
    b._start_leading()
    assert await b.release()
    with structlog.testing.capture_logs() as logs:
        await a._renew()
    assert server.holder == "A"
    assert _lost_reason(logs) == ("the term was interrupted: another holder's record (or none) was on the Lease, "
                                  "so this replica took it anew and starts a new term")


async def test_a_leader_meeting_its_identity_in_a_record_it_did_not_write_says_so() -> None:
    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock)
    await a._acquire()
    a._start_leading()
    twin = _elector(server, "A", clock)  # another process with the same --identity
    assert not await twin._try_acquire_or_renew()  # it waits for A's record to expire ...
    clock.t += 16
    assert await twin._try_acquire_or_renew()  # ... and takes it: a record naming A that A did not write
    with structlog.testing.capture_logs() as logs:
        await a._renew()
    assert _lost_reason(logs) == ("the Lease names this replica's identity in a record this process did not write "
                                  "(see leader.identity_in_use)")


async def test_a_standby_says_how_long_the_holders_record_has_gone_unrenewed() -> None:
    """A re-trial: after `kill -9` of the leader, a replica started 3.1 s later said `A leads: ...`,
    naming the dead holder as leading with no word that its record had not been renewed since.
    It says how long, by the record's renewTime on this replica's clock, in `leader.acquired`'s
    field name (the observation clock has seen the record for no time at all then); a record
    without a readable renewTime leaves it out."""
    server, clock, _, standing = await _standby_after(3.1)  # A renews no more (kill -9); B starts 3.1 s later and sees A's record
    assert standing["unrenewed_for_seconds"] == 3.1 and standing["takes_over_within_seconds"] == 19.4
    assert standing["message"].startswith("A leads (its Lease unrenewed for 3.1 s by this host's clock): ")
    assert server.lease is not None
    server.lease["spec"]["renewTime"] = None
    c = _elector(server, "C", clock)
    with structlog.testing.capture_logs() as logs:
        assert not await c._try_acquire_or_renew()
        c._report_transition()
    [standing] = _events(logs, "leader.standing_by")
    assert standing["unrenewed_for_seconds"] is None and standing["message"].startswith("A leads: this replica")


async def test_a_standby_says_a_long_unrenewed_record_in_plain_seconds() -> None:
    """A Lease outlives its scheduler (`helm uninstall` leaves the Lease the election created): a
    replica installed again weeks later read `unrenewed for 2e+06 s` (`:g` keeps six digits)."""
    _, _, _, standing = await _standby_after(2_000_000.25)  # 23 days
    assert standing["unrenewed_for_seconds"] == 2_000_000.2
    assert standing["message"].startswith("A leads (its Lease unrenewed for 2000000.2 s by this host's clock): ")


def test_a_standby_says_a_record_renewed_just_now_and_whole_seconds_without_a_point() -> None:
    """A record renewed this very second is still said (0 s: the age is readable, and none is news
    too), and whole seconds read as the operator would write them (19 s, not 19.0 s)."""
    with structlog.testing.capture_logs() as logs:
        standing_by("B", "kube-system/tessera", lambda: 19.0, lambda: 0.0)("A")
    [standing] = _events(logs, "leader.standing_by")
    assert standing["message"] == ("A leads (its Lease unrenewed for 0 s by this host's clock): this replica keeps "
                                   "its cache warm and schedules only if it takes over, at the latest in 19 s if A "
                                   "renews the Lease no more")


async def test_unrenewed_for_reads_no_age_from_a_naive_or_future_renew_time() -> None:
    """A renewTime without a zone has no age on this clock (None: subtracting it would raise in the
    elector's callback), and one ahead of this host's clock (skew) reads 0, not a negative age."""
    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock)
    await a._acquire()
    a._start_leading()
    assert server.lease is not None
    now = datetime.fromtimestamp(clock.t, timezone.utc)
    for renew_time, expected in ((now.replace(tzinfo=None).isoformat(), None),
                                 ((now + timedelta(seconds=60)).isoformat().replace("+00:00", "Z"), 0.0)):
        server.lease["spec"]["renewTime"] = renew_time
        b = _elector(server, "B", clock)
        with structlog.testing.capture_logs() as logs:
            assert not await b._try_acquire_or_renew()
            b._report_transition()
        assert b.unrenewed_for() == expected, renew_time
        [standing] = _events(logs, "leader.standing_by")
        assert standing["unrenewed_for_seconds"] == expected
