"""An answer of 429 or 5xx carrying an integer `Retry-After` is sent again after that many seconds,
up to 10 times, as client-go's REST client does for every request kube-scheduler makes
(k8s.io/client-go rest/with_retry.go `IsNextRetry` and `checkWait`, request.go `retryAfterSeconds`;
`maxRetries: 10`). The apiserver's priority-and-fairness and max-in-flight filters answer an
overloaded moment with 429 and `Retry-After: 1`; before, every such answer reached the binder,
the status writer, the evictor and the event recorder as a failure (an Event was dropped, a
Binding read back and resent on the binder's own, slower backoff).

Writes that belong to a leadership term are sent again only while that term lasts: the caller's
`resend` check runs after the wait and the write token (client-go retries whatever the caller's
leadership; kube-scheduler exits when it loses the Lease, Tessera keeps running as a standby).

Each test failed before the change (no retry at all), against a real aiohttp server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from scheduler.kube.binder import Binder, Binding, BindResult, Outcome
from scheduler.kube.http import KubeHttp, RateLimiter, connect
from tests.helpers import write_kubeconfig

Answer = tuple[int, dict[str, str]]


class Script:
    """The answers the server gives, in order (the last one repeats), and the requests it saw."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.seen: list[tuple[str, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path))
        if request.method == "GET" and "/namespaces/" in request.path:  # the binder reads its pod back
            return web.json_response({"kind": "Pod", "apiVersion": "v1", "spec": {},
                                      "metadata": {"name": "p", "namespace": "a", "uid": "uid-p"}})
        status, headers = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"busy","code":%d}' % status
        if status < 300:
            body = b'{"kind":"Status","apiVersion":"v1","status":"Success"}'
        return web.Response(status=status, body=body, headers=headers, content_type="application/json")


@asynccontextmanager
async def served(script: Script, tmp_path: Path, *, limiter: RateLimiter | None = None,
                 sleeps: list[float] | None = None) -> AsyncIterator[KubeHttp]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", script.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    recorded = sleeps if sleeps is not None else []

    async def sleep(seconds: float) -> None:
        recorded.append(seconds)

    try:
        api = await connect(str(write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{port}")))
        async with api:
            yield KubeHttp(api, limiter, sleep=sleep)
    finally:
        await runner.cleanup()


BUSY: Answer = (429, {"Retry-After": "1"})
OK: Answer = (201, {})


async def test_a_429_with_retry_after_is_sent_again_after_the_wait(tmp_path: Path) -> None:
    script = Script(BUSY, OK)
    sleeps: list[float] = []
    async with served(script, tmp_path, sleeps=sleeps) as http:
        response = await http.request("POST", "/api/v1/namespaces/a/pods/p/binding", body={})
    assert response.status == 201
    assert len(script.seen) == 2
    assert sleeps == [1.0]


async def test_any_5xx_with_retry_after_is_sent_again(tmp_path: Path) -> None:
    script = Script((503, {"Retry-After": "2"}), (500, {"Retry-After": "0"}), OK)
    sleeps: list[float] = []
    async with served(script, tmp_path, sleeps=sleeps) as http:
        response = await http.request("GET", "/api/v1/pods")
    assert response.status == 201
    assert sleeps == [2.0, 0.0]


@pytest.mark.parametrize("answer", [(500, {}), (429, {}), (429, {"Retry-After": "Fri, 31 Dec 1999 23:59:59 GMT"}),
                                    (409, {"Retry-After": "1"}), (404, {"Retry-After": "1"})])
async def test_no_retry_without_an_integer_retry_after_on_429_or_5xx(tmp_path: Path, answer: Answer) -> None:
    """checkWait: only 429 and >= 500, and only with a Retry-After that strconv.Atoi reads."""
    script = Script(answer, OK)
    async with served(script, tmp_path) as http:
        response = await http.request("GET", "/api/v1/pods")
    assert response.status == answer[0]
    assert len(script.seen) == 1


async def test_at_most_ten_retries(tmp_path: Path) -> None:
    script = Script((429, {"Retry-After": "0"}))
    async with served(script, tmp_path) as http:
        response = await http.request("GET", "/api/v1/pods")
    assert response.status == 429
    assert len(script.seen) == 11  # the request and client-go's maxRetries (10) more


async def test_no_wait_runs_past_the_request_timeout(tmp_path: Path) -> None:
    """client-go bounds the retries by the request's context; here by `timeout`, and the caller
    gets the last answer rather than a wait that outlives what it asked for."""
    script = Script((429, {"Retry-After": "30"}), OK)
    sleeps: list[float] = []
    async with served(script, tmp_path, sleeps=sleeps) as http:
        response = await http.request("GET", "/api/v1/pods", timeout=10.0)
    assert response.status == 429
    assert sleeps == []


async def test_every_resend_of_a_throttled_request_takes_a_token(tmp_path: Path) -> None:
    """withRetry.Before: a retry is throttled by the client's rate limiter like any request."""
    taken: list[int] = []

    class Counting(RateLimiter):
        async def acquire(self) -> None:
            taken.append(1)

    script = Script(BUSY, BUSY, OK)
    async with served(script, tmp_path, limiter=Counting(5, 10)) as http:
        response = await http.request("POST", "/apis/events.k8s.io/v1/namespaces/a/events", body={})
    assert response.status == 201
    assert len(taken) == 3


async def test_a_resend_the_caller_no_longer_wants_is_not_made(tmp_path: Path) -> None:
    script = Script(BUSY, OK)
    asked: list[int] = []

    def still_leading() -> bool:
        asked.append(1)
        return False

    async with served(script, tmp_path) as http:
        response = await http.request("PATCH", "/api/v1/namespaces/a/pods/p/status", body={},
                                      resend=still_leading)
    assert response.status == 429
    assert len(script.seen) == 1 and asked == [1]


async def test_the_binder_does_not_resend_a_binding_once_its_term_has_ended(tmp_path: Path) -> None:
    """A Binding decided in term 1 that met a 429 is not sent again by the transport after the
    Lease moved on: the devices it carries may have been given away by the new leader."""
    term = [1]
    script = Script(BUSY, OK)
    results: list[BindResult] = []

    async with served(script, tmp_path) as http:
        original = http._sleep

        async def deposing_sleep(seconds: float) -> None:
            term[0] = 2  # the Lease moves on while the transport waits out Retry-After
            await original(seconds)

        http._sleep = deposing_sleep

        async def no_wait(seconds: float) -> None:
            return None

        binder = Binder(http, results.append, term=lambda: term[0], sleep=no_wait, late_landing_seconds=0.0)
        binding = Binding("uid-p", "a", "p", "node-1")
        result = await binder._settle(binding, 1)
    binds = [seen for seen in script.seen if seen[1].endswith("/binding")]
    assert len(binds) == 1
    assert result.outcome is not Outcome.BOUND
