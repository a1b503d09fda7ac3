"""A write that times out is logged with a description, not `"error": ""`.

An on-call trial read `status.write_failed` and `events.write_failed` lines with `"error": ""`:
a TimeoutError (an aiohttp request timeout) has an empty str(). Every transport failure of a
write is logged by `describe_error` (the type's name when the message is empty).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from scheduler.kube.http import KubeHttp
from scheduler.kube.status import StatusWriter
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.unit.test_event_recorder import EVENTS, POD, Clock, _recorder, running


async def _until_logged(logs: list[MutableMapping[str, Any]], event: str) -> MutableMapping[str, Any]:
    with anyio.fail_after(5):
        while not any(e["event"] == event for e in logs):
            await anyio.sleep(0.01)
    return next(e for e in logs if e["event"] == event)


async def test_a_status_write_that_times_out_logs_what_failed() -> None:
    api = FakeApi()
    pod = b.pod("p", requests={"nvidia.com/gpu": 1})
    pod["metadata"]["resourceVersion"] = "7"
    api.add_pod(pod)
    api.fail_next("PATCH", "/pods/p/status", error=TimeoutError())
    writer = StatusWriter(KubeHttp(api), lambda namespace, name, reason: "7")  # type: ignore[arg-type]
    with capture_logs() as logs:
        async with anyio.create_task_group() as group:
            group.start_soon(writer.run)
            writer.pod_waiting("default", "p", "Unschedulable", "0/1 nodes are available")
            failed = await _until_logged(logs, "status.write_failed")
            group.cancel_scope.cancel()
    assert failed["error"] == "TimeoutError", failed


async def test_an_event_write_that_times_out_logs_what_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    real_sleep = anyio.sleep

    async def instant(delay: float = 0, *args: Any, **kwargs: Any) -> None:
        await real_sleep(0)

    monkeypatch.setattr(anyio, "sleep", instant)
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    api.fail_next("POST", EVENTS, error=TimeoutError())
    with capture_logs() as logs:
        async with running(recorder, api):
            recorder.record(POD, "Normal", "Scheduled", "Binding", "Successfully assigned default/p to n")
            failed = await _until_logged(logs, "events.write_failed")
    assert failed["error"] == "TimeoutError", failed
