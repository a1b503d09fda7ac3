"""A replica that starts before its apiserver answers waits for it instead of exiting.

kube-scheduler's informers and leader election retry with backoff until the apiserver answers
(client-go tools/cache/reflector.go: 800 ms doubling to a 30 s cap, jitter 1.0); `tessera run`
exited at once with "cannot reach the apiserver … connection refused" — a scheduler pod started
during a control-plane restart went into CrashLoopBackOff. `ApiserverWait` against the fake HTTP
layer: refused, reset, timed out and 5xx are waited out with one warning per attempt; any other
answer (401/403 included: the caller judges those) ends the wait; a certificate the kubeconfig
does not trust is no reason to wait.
"""

from __future__ import annotations

import ssl
from types import SimpleNamespace

import aiohttp
import pytest
from structlog.testing import capture_logs

from scheduler.kube.apiserver_wait import BACKOFF_MAX, ApiserverWait, backoff
from scheduler.kube.http import ConnectError, KubeHttp, Response, Unreachable
from tests.fakeapi import FakeApi

SERVER = "https://10.0.0.1:6443"


def _api() -> FakeApi:
    api = FakeApi(configuration=SimpleNamespace(host=SERVER))
    api.handlers.append(lambda call: Response(200, b'{"gitVersion": "v1.36.3"}') if call.path == "/version" else None)
    return api


def test_the_backoff_is_the_reflectors() -> None:
    assert [backoff(n, 0.0) for n in range(1, 8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]
    assert backoff(100, 0.0) == BACKOFF_MAX and backoff(1, 0.5) == pytest.approx(1.2)


async def test_refused_reset_timed_out_and_5xx_are_waited_out_with_one_warning_each() -> None:
    api = _api()
    api.fail_next("GET", "/version", error=ConnectionRefusedError(111, "Connect call failed ('10.0.0.1', 6443)"))
    api.fail_next("GET", "/version", error=aiohttp.ServerDisconnectedError())
    api.fail_next("GET", "/version", error=TimeoutError())
    api.fail_next("GET", "/version", status=503)
    pauses: list[float] = []
    reasons: list[str | None] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        reasons.append(waiting.reason)

    waiting = ApiserverWait(sleep=sleep, jitter=lambda: 0.0)
    with capture_logs() as logs:
        answer = await waiting.until_answered(KubeHttp(api), "/etc/kubeconfig")  # type: ignore[arg-type]
    assert answer.status == 200 and answer.json() == {"gitVersion": "v1.36.3"}
    assert len(api.of("GET", "/version")) == 5 and pauses == [0.8, 1.6, 3.2, 6.4]
    warnings = [line for line in logs if line["event"] == "apiserver.unreachable"]
    assert [(w["log_level"], w["server"], w["attempt"], w["retry_in"]) for w in warnings] == [
        ("warning", SERVER, 1, 0.8), ("warning", SERVER, 2, 1.6), ("warning", SERVER, 3, 3.2), ("warning", SERVER, 4, 6.4)]
    assert [w["error"] for w in warnings] == [
        "[Errno 111] Connect call failed ('10.0.0.1', 6443)", "Server disconnected", "no answer within 10 s",
        "HTTP 503: injected HTTP 503"]
    # /readyz's reason while waiting, none once answered
    assert reasons[0] == f"cannot reach the apiserver at {SERVER}: [Errno 111] Connect call failed ('10.0.0.1', 6443)"
    assert waiting.reason is None and waiting.attempts == 5


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_any_answer_below_500_ends_the_wait_at_once(status: int) -> None:
    api = _api()
    api.fail_next("GET", "/version", status=status)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    with capture_logs() as logs:
        answer = await ApiserverWait(sleep=sleep).until_answered(KubeHttp(api), None)  # type: ignore[arg-type]
    assert answer.status == status and slept == [] and logs == []


async def test_a_certificate_the_kubeconfig_does_not_trust_is_no_reason_to_wait() -> None:
    api = _api()
    key = SimpleNamespace(host="10.0.0.1", port=6443, ssl=True)  # a stand-in for aiohttp's ConnectionKey
    api.fail_next("GET", "/version", error=aiohttp.ClientConnectorCertificateError(
        key,  # type: ignore[arg-type]
        ssl.SSLCertVerificationError(1, "certificate verify failed: unable to get local issuer certificate")))
    with pytest.raises(ConnectError) as raised:
        await ApiserverWait().until_answered(KubeHttp(api), None)  # type: ignore[arg-type]
    assert not isinstance(raised.value, Unreachable)
    assert str(raised.value) == (f"cannot reach the apiserver at {SERVER}: certificate verify failed: "
                                 "unable to get local issuer certificate")  # was "operation not permitted"
    assert len(api.calls) == 1
