"""`tessera run` stopped by a signal before it schedules (scheduler/kube/run_cli.py `_run`): while it
waits for an apiserver it cannot reach yet (`ApiserverWait`, backoff up to 30 s), and, with
`leaderElect: false`, while it checks that no other replica leads through the Lease
(`live_leader`, up to the holder's lease duration). Both stops end the process with the
`tessera.stopped` line every other shutdown prints (an operator's log search for it, or a
harness waiting for it, found nothing), and the Lease check gives way to the signal at once
instead of holding the process for the lease duration. The real `_run` on the fake apiserver,
the signal as `stop_on_signal` delivers it. Each test failed before its fix."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
import yaml
from structlog.testing import capture_logs
from structlog.typing import EventDict

from scheduler.api.config import SchedulerConfig, load_config
from scheduler.kube import run_cli
from scheduler.kube.http import KubeHttp
from scheduler.kube.leader import micro_time
from tests.fakeapi import FakeApi
from tests.helpers import until
from tests.unit.test_runcli_upstream import Signals, _args, _serve_lease


async def test_a_signal_while_waiting_for_the_apiserver_ends_with_tessera_stopped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: exit 0 with no `tessera.stopped` line (the wait's way out returned early)."""
    api = FakeApi()
    for _ in range(5):
        api.fail_next("GET", "/version", error=ConnectionRefusedError(111, "Connect call failed"))
    result, logs, _ = await _stopped_by_a_signal(
        monkeypatch, api, load_config(None),
        lambda logs: any(line["event"] == "apiserver.unreachable" for line in logs), within=3)
    assert result == [0]
    events = [line["event"] for line in logs]
    assert events[-1] == "tessera.stopped", events
    [stopped] = [line for line in logs if line["event"] == "tessera.stopped"]
    assert stopped == {"event": "tessera.stopped", "log_level": "info"}  # the normal path's fields: none
    assert "tessera.starting" not in events  # nothing was started
    assert len(api.of("GET", "/version")) == 1 and len(api.calls) == 1


async def _stopped_by_a_signal(monkeypatch: pytest.MonkeyPatch, api: FakeApi, config: SchedulerConfig,
                               when: Callable[[list[EventDict]], bool],
                               within: float) -> tuple[list[int], list[EventDict], float]:
    """Run `tessera run`'s start-up and loop (`run_cli._run`) on `api`, send SIGTERM once `when`
    holds of the logs, and wait at most `within` seconds for it to return: its exit codes, its
    logs, and the seconds from the signal to the return."""
    signals = Signals()
    monkeypatch.setattr(run_cli, "stop_on_signal", signals)
    result: list[int] = []

    async def run() -> None:
        result.append(await run_cli._run(_args(), config, KubeHttp(api), KubeHttp(api), None))  # type: ignore[arg-type]

    with capture_logs() as logs:
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await until(lambda: when(logs))
            sent = time.monotonic()
            signals.send()
            with anyio.fail_after(within):
                await until(lambda: bool(result))
            took = time.monotonic() - sent
    return result, logs, took


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False, "retryPeriod": "100ms"}}))
    return path


async def test_a_signal_during_the_lone_replica_lease_check_ends_it_at_once(monkeypatch: pytest.MonkeyPatch,
                                                                              tmp_path: Path) -> None:
    """With `leaderElect: false` the start-up reads the Lease until its holder renews or its lease
    duration passes (a crashed leader's record: 15 s here, up to any leaseDurationSeconds). Before:
    the SIGTERM waited that check out — 15 s — and then the replica started its informers and
    scheduling only to stop again. Now the signal ends the check at once, nothing is listed, and
    `tessera.stopped` is the last line."""
    api = FakeApi()
    lease = _serve_lease(api)
    now = micro_time(dt.datetime.now(dt.timezone.utc))
    lease.lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "tessera", "namespace": "kube-system", "resourceVersion": "2"},
                   "spec": {"holderIdentity": "crashed", "leaseDurationSeconds": 15, "acquireTime": now,
                            "renewTime": now, "leaseTransitions": 0}}
    config = load_config(str(_config(tmp_path)))
    assert not config.leader_election.leader_elect
    result, logs, took = await _stopped_by_a_signal(  # once the check is watching the record
        monkeypatch, api, config, lambda _: len(api.of("GET", "/leases/")) >= 2, within=5)
    assert result == [0]
    assert took < 1.0, f"the Lease check held the stop for {took:.1f} s"
    events = [line["event"] for line in logs]
    assert events[-1] == "tessera.stopped", events
    assert "leader_election.disabled" in events
    # nothing but /version and the Lease was asked: no informer listed, no watch opened
    assert {call.path for call in api.calls} == {"/version", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera"}


async def test_with_the_lease_free_it_schedules_and_a_later_signal_stops_it_as_usual(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The check's way on is unchanged: a free Lease, then the informers list and the loop runs;
    the signal then takes the graceful shutdown (`tessera.stopping`, then `tessera.stopped`)."""
    api = FakeApi()
    _serve_lease(api)  # no Lease: 404
    result, logs, _ = await _stopped_by_a_signal(
        monkeypatch, api, load_config(str(_config(tmp_path))),
        lambda logs: any(line["event"] == "tessera.ready" for line in logs), within=5)
    assert result == [0]
    events = [line["event"] for line in logs]
    assert events.index("tessera.stopping") < events.index("tessera.stopped") == len(events) - 1, events
    assert api.of("GET", "/api/v1/nodes")  # it listed
