"""Graceful shutdown (`tessera run` on SIGTERM): the Lease is handed over only when no Binding of
ours is still out. Handing it over at once lets the standby lead with the pod unbound and its
devices free while our Binding may still land with them (found in review); left to expire, the
Lease keeps the successor waiting `leaseDuration`, by which time the apiserver has answered."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from scheduler.kube.run_cli import step_down


class Calls:
    def __init__(self, drained: bool) -> None:
        self.drained = drained
        self.seen: list[str] = []

    def stop(self) -> None:
        self.seen.append("stop")

    async def drain(self, timeout: float) -> bool:
        self.seen.append(f"drain {timeout:g}")
        return self.drained

    async def release(self) -> None:
        self.seen.append("release")

    def in_flight(self) -> int:
        return 0 if self.drained else 3


async def test_the_lease_is_released_once_every_binding_is_settled() -> None:
    calls = Calls(drained=True)
    await step_down(calls.stop, calls.drain, calls.in_flight, calls.release, drain_seconds=10)
    assert calls.seen == ["stop", "drain 10", "release"]


async def test_with_bindings_still_out_the_lease_is_left_to_expire() -> None:
    calls = Calls(drained=False)
    with capture_logs() as logs:
        await step_down(calls.stop, calls.drain, calls.in_flight, calls.release, drain_seconds=10)
    assert calls.seen == ["stop", "drain 10"]
    [entry] = [e for e in logs if e["event"] == "leader.release_skipped"]
    assert entry["in_flight"] == 3 and entry["log_level"] == "warning"


async def test_without_leader_election_it_only_drains() -> None:
    calls = Calls(drained=False)
    await step_down(calls.stop, calls.drain, calls.in_flight, None, drain_seconds=10)
    assert calls.seen == ["stop", "drain 10"]


async def test_a_failing_release_does_not_break_the_shutdown() -> None:
    calls = Calls(drained=True)

    async def broken() -> None:
        raise ConnectionError("apiserver gone")

    with capture_logs() as logs:
        await step_down(calls.stop, calls.drain, calls.in_flight, broken, drain_seconds=10)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["leader.release_failed"]



async def test_after_a_crash_the_lease_is_left_to_expire_even_with_nothing_in_flight() -> None:
    """A crashed loop's task group cancels its Bindings mid-request and counts them out, so the
    drain found nothing in flight and the Lease was handed over at once, while the cut requests
    could still land (found in review)."""
    calls = Calls(drained=True)
    with capture_logs() as logs:
        await step_down(calls.stop, calls.drain, calls.in_flight, calls.release, drain_seconds=10, crashed=True)
    assert calls.seen == ["stop", "drain 10"]
    [entry] = [e for e in logs if e["event"] == "leader.release_skipped"]
    assert "crashed" in entry["message"]
