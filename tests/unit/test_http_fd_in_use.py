"""uvloop's "File descriptor N is used by transport" is a failed connect, not a crash.

Found live (adversary round 6): a new leader's burst of status writes through a path that reset
connections made uvloop's `sock_connect` raise `RuntimeError: File descriptor 13 is used by
transport <TCPTransport closed=False reading=True …>` (MagicStack/uvloop#653, open; aiohappyeyeballs
re-raises it on purpose). `TRANSPORT_ERRORS` had no RuntimeError, so it escaped the status writer's
task group and ended the process (7 of 18 takeovers through a resetting proxy crashed ~100 ms after
`leader.caught_up`; the Lease was left to expire), and the informers relisted with backoff. The
request never reached the apiserver: it is a transport error like a refused connect, retried as one.
"""

from __future__ import annotations

import anyio
import pytest
from structlog.testing import capture_logs

from scheduler.kube.http import TRANSPORT_ERRORS, KubeHttp
from scheduler.kube.status import StatusWriter
from scheduler.logs import describe_error
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi

UVLOOP = "File descriptor 13 is used by transport <TCPTransport closed=False reading=True 0x7f0c2c0e5a60>"


async def test_a_transport_still_holding_the_socket_is_a_transport_error() -> None:
    api = FakeApi()
    api.fail_next("GET", "/version", error=RuntimeError(UVLOOP))
    with pytest.raises(TRANSPORT_ERRORS) as raised:
        await KubeHttp(api).request("GET", "/version")  # type: ignore[arg-type]
    assert UVLOOP in str(raised.value)
    # any other RuntimeError is a bug of ours, not the network's: it is not disguised
    api.fail_next("GET", "/version", error=RuntimeError("something else"))
    with pytest.raises(RuntimeError, match="something else"):
        await KubeHttp(api).request("GET", "/version")  # type: ignore[arg-type]


async def test_a_status_write_that_meets_it_fails_and_the_writer_goes_on() -> None:
    api = FakeApi()
    pod = b.pod("p", requests={"nvidia.com/gpu": 1})
    pod["metadata"]["resourceVersion"] = "7"
    api.add_pod(pod)
    api.fail_next("PATCH", "/pods/p/status", error=RuntimeError(UVLOOP))
    writer = StatusWriter(KubeHttp(api), lambda namespace, name, reason: "7")  # type: ignore[arg-type]
    with capture_logs() as logs:
        async with anyio.create_task_group() as group:
            group.start_soon(writer.run)
            writer.pod_waiting("default", "p", "Unschedulable", "0/1 nodes are available")
            with anyio.fail_after(5):
                while not any(e["event"] == "status.write_failed" for e in logs):
                    await anyio.sleep(0.01)
            group.cancel_scope.cancel()
    [failed] = [e for e in logs if e["event"] == "status.write_failed"]
    assert UVLOOP in failed["error"]


def test_an_exception_group_is_described_by_what_it_holds() -> None:
    """The crash's only log line said `ExceptionGroup: unhandled errors in a TaskGroup (1
    sub-exception)`: the cause was hidden."""
    group = ExceptionGroup("unhandled errors in a TaskGroup", [RuntimeError(UVLOOP)])
    assert describe_error(group) == f"RuntimeError: {UVLOOP}"
    two = ExceptionGroup("unhandled errors in a TaskGroup", [RuntimeError("a"), ValueError("b")])
    assert describe_error(two) == "RuntimeError: a; ValueError: b"
