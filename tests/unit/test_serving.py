"""The probe/metrics server: liveness, readiness flips, Prometheus exposition, nothing else."""

from __future__ import annotations

import gzip

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.kube.metrics import Metrics
from scheduler.kube.serving import (DEFAULT_HOST, DEFAULT_PORT, PING, Check, HealthServer, ServeError, accepts_gzip,
                                    serve)


class Flags:
    def __init__(self) -> None:
        self.alive = True
        self.synced = False
        self.reason = "informers have not finished their initial list"

    @property
    def healthz(self) -> list[Check]:
        return [PING, ("scheduling-loop", lambda: None if self.alive else "the loop is not running")]

    @property
    def readyz(self) -> list[Check]:
        return [("informer-sync", lambda: None if self.synced else self.reason)]


async def _get(session: aiohttp.ClientSession, url: str, **headers: str) -> tuple[int, str, str]:
    async with session.get(url, headers=headers) as response:
        return response.status, await response.text(), response.headers.get("Content-Type", "")


def test_defaults_are_loopback() -> None:
    assert (DEFAULT_HOST, DEFAULT_PORT) == ("127.0.0.1", 10251)


async def test_health_readiness_and_metrics() -> None:
    flags = Flags()
    metrics = Metrics(profiles=["tessera"])
    metrics.observe_attempt("scheduled", "tessera", 0.01)
    async with serve("127.0.0.1", 0, healthz=flags.healthz, readyz=flags.readyz, registry=metrics.registry) as server:
        assert server.port > 0
        base = server.url
        async with aiohttp.ClientSession() as session:
            assert await _get(session, f"{base}/healthz") == (200, "ok", "text/plain; charset=utf-8")
            assert (await _get(session, f"{base}/livez"))[:2] == (200, "ok")

            # upstream's healthz handler: a failing check's reason is withheld (the log has it)
            assert await _get(session, f"{base}/readyz") == (
                500, "[-]informer-sync failed: reason withheld\nreadyz check failed\n", "text/plain; charset=utf-8")
            flags.synced = True
            assert (await _get(session, f"{base}/readyz"))[:2] == (200, "ok")
            assert (await _get(session, f"{base}/readyz?verbose"))[:2] == (200, "[+]informer-sync ok\nreadyz check passed\n")
            assert (await _get(session, f"{base}/healthz?verbose=1"))[1] == \
                "[+]ping ok\n[+]scheduling-loop ok\nhealthz check passed\n"

            flags.alive = False
            assert (await _get(session, f"{base}/healthz"))[:2] == (
                500, "[+]ping ok\n[-]scheduling-loop failed: reason withheld\nhealthz check failed\n")
            assert (await _get(session, f"{base}/healthz?exclude=scheduling-loop&exclude=nope"))[:2] == (200, "ok")
            assert (await _get(session, f"{base}/healthz?exclude=scheduling-loop&exclude=nope&verbose"))[1] == (
                '[+]ping ok\n[+]scheduling-loop excluded: ok\n'
                'warn: some health checks cannot be excluded: no matches for "nope"\nhealthz check passed\n')
            assert (await _get(session, f"{base}/livez"))[:2] == (200, "ok")  # ping only, as kube-scheduler's

            status, text, content_type = await _get(session, f"{base}/metrics")
            assert status == 200 and content_type.startswith("text/plain")
            families = {f.name: f for f in text_string_to_metric_families(text)}
            assert {"scheduler_schedule_attempts", "scheduler_pending_pods", "tessera_devices",
                    "tessera_leader", "scheduler_pod_scheduling_sli_duration_seconds"} <= set(families)
            sample = next(s for s in families["scheduler_schedule_attempts"].samples
                          if s.labels.get("result") == "scheduled")
            assert sample.labels == {"result": "scheduled", "profile": "tessera"} and sample.value == 1
            pending = {s.labels["queue"] for s in families["scheduler_pending_pods"].samples}
            assert pending == {"active", "backoff", "unschedulable", "gated"}

            # Prometheus may negotiate OpenMetrics.
            status, text, content_type = await _get(
                session, f"{base}/metrics", Accept="application/openmetrics-text; version=1.0.0")
            assert status == 200 and content_type.startswith("application/openmetrics-text")
            assert text.rstrip().endswith("# EOF")

            assert (await _get(session, f"{base}/"))[0] == 404
            assert (await _get(session, f"{base}/configz"))[0] == 404
    with pytest.raises(RuntimeError):
        _ = HealthServer(healthz=flags.healthz, readyz=flags.readyz, registry=metrics.registry).port


@pytest.mark.parametrize(("header", "accepted"), [
    ("gzip", True), ("GZIP", True), ("x-gzip", True), ("gzip, deflate, br", True), ("deflate, gzip;q=0.5", True),
    ("*", True), ("br;q=1.0, *", True), ("", False), ("identity", False), ("br", False), ("gzip;q=0", False),
    ("gzip;q=0.000", False), ("*;q=0", False), ("gzip;q=0, *", False), ("*, gzip;q=0", False),
    ("gzip;q=nope", False), ("gzip ; q=0.1", True),
])
def test_accept_encoding_as_rfc_9110_reads_it(header: str, accepted: bool) -> None:
    assert accepts_gzip(header) is accepted


async def test_metrics_are_gzipped_when_the_scraper_accepts_it() -> None:
    """As upstream's promhttp handler (Prometheus sends `Accept-Encoding: gzip`)."""
    metrics = Metrics(profiles=["tessera"])
    async with serve("127.0.0.1", 0, healthz=[PING], readyz=[PING], registry=metrics.registry) as server, \
            aiohttp.ClientSession(auto_decompress=False) as session:
        async with session.get(f"{server.url}/metrics", headers={"Accept-Encoding": "gzip"}) as response:
            assert response.headers["Content-Encoding"] == "gzip" and response.headers["Vary"] == "Accept-Encoding"
            text = gzip.decompress(await response.read()).decode()
        async with session.get(f"{server.url}/metrics", headers={"Accept-Encoding": "identity"}) as response:
            assert "Content-Encoding" not in response.headers
            plain = await response.text()
    assert "scheduler_schedule_attempts" in text and "scheduler_schedule_attempts" in plain


async def test_failing_checks_leak_nothing() -> None:
    secret = "token=sk-very-secret"

    def broken() -> str | None:
        raise RuntimeError(secret)

    def refused() -> str | None:
        return f"the apiserver denied access ({secret})"

    server = HealthServer("127.0.0.1", 0, healthz=[("loop", broken)], readyz=[("informer-sync", refused)],
                          registry=Metrics().registry)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            status, text, _ = await _get(session, f"{server.url}/healthz")
            assert status == 500 and secret not in text
            status, text, _ = await _get(session, f"{server.url}/readyz")
            assert status == 500 and secret not in text
    finally:
        await server.stop()
    await server.stop()  # idempotent


async def test_stop_frees_the_port() -> None:
    flags = Flags()
    server = HealthServer("127.0.0.1", 0, healthz=flags.healthz, readyz=flags.readyz, registry=Metrics().registry)
    await server.start()
    port = server.port
    await server.stop()
    again = HealthServer("127.0.0.1", port, healthz=flags.healthz, readyz=flags.readyz, registry=Metrics().registry)
    async with again:
        assert again.port == port


@pytest.mark.parametrize("host, taken, expected", [
    ("127.0.0.1", True, ": Address already in use (choose another --port"),
    ("192.0.2.1", False, "cannot serve /healthz, /readyz and /metrics on 192.0.2.1:"),  # not ours (TEST-NET-1)
])
async def test_an_address_that_cannot_be_served_is_one_clear_error(host: str, taken: bool, expected: str) -> None:
    """A new user started a second scheduler on the default port and got a 41-line traceback
    from uvloop's create_server; start-up errors are one line."""
    flags = Flags()
    first = HealthServer("127.0.0.1", 0, healthz=flags.healthz, readyz=flags.readyz, registry=Metrics().registry)
    async with first:
        port = first.port if taken else 0
        second = HealthServer(host, port, healthz=flags.healthz, readyz=flags.readyz, registry=Metrics().registry)
        with pytest.raises(ServeError) as error:
            await second.start()
    message = str(error.value)
    assert expected in message and "\n" not in message
    assert "--port" in message and "--bind-address" in message


async def test_an_accept_header_the_metrics_library_cannot_read_gets_the_text_format() -> None:
    """Regression (review): choose_encoder raised on `version=abc`: a 500 and a logged traceback
    per request, for anyone who can reach the port."""
    async with serve("127.0.0.1", 0, healthz=[PING], readyz=[PING],
                     registry=Metrics().registry) as server:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{server.url}/metrics",
                                   headers={"Accept": "application/openmetrics-text; version=abc"}) as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain")


async def test_a_half_sent_request_is_dropped_within_half_a_minute() -> None:
    """Regression (review): aiohttp's default keeps an idle or half-sent connection for an hour,
    each a file descriptor the scheduler's apiserver connections need (kube-scheduler's server
    gives headers 32 s)."""
    import asyncio
    import socket

    async with serve("127.0.0.1", 0, healthz=[PING], readyz=[PING],
                     registry=Metrics().registry) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        await asyncio.sleep(0.2)
        [handler] = server._runner.server.connections  # type: ignore[union-attr]
        sock.close()
        assert handler.keepalive_timeout <= 32
