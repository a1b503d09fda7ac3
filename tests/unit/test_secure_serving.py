"""`tessera run --secure-port`: HTTPS with delegated authentication and authorization, as
kube-scheduler's port 10259 (scheduler/kube/secure_serving.py), against a fake apiserver that
answers TokenReviews and SubjectAccessReviews."""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
import structlog
from cryptography import x509
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.cli import build_parser
from scheduler.kube import run_cli, secure_serving
from scheduler.kube.controlplane.certs import CertificateAuthority
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.metrics import Metrics
from scheduler.kube.secure_serving import (ACCESS_REVIEWS, AUTHENTICATED, REVIEWS_IN_FLIGHT, TOKEN_REVIEWS, DelegatedAuth,
                                           ReviewFailed, ServingCertificate, User, bearer_token, path_allowed,
                                           path_problem, tls_context)
from scheduler.kube.serving import PING, HealthServer, serve
from tests.fakeapi import FakeApi
from tests.helpers import until
from tests.unit.test_runcli_upstream import Signals



class FakeReviews:
    """The apiserver's review endpoints: `users` maps a token to its user, `allowed` says who may
    get what (user, path, verb); `down` makes every review a transport error."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, Any]] = {}
        self.allowed: set[tuple[str, str, str]] = set()
        self.reason = ""
        self.down = False
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, path: str, *, body: Any = None, timeout: float = 30.0,
                      limited: bool = True) -> Response:
        assert (method, limited) == ("POST", False)  # never the scheduling loop's write tokens
        self.calls.append((path, body))
        if self.down:
            raise aiohttp.ClientConnectionError("connection refused")
        spec = body["spec"]
        if path == TOKEN_REVIEWS:
            user = self.users.get(spec["token"])
            status: dict[str, Any] = {"authenticated": True, "user": user} if user else {"authenticated": False}
        else:
            assert path == ACCESS_REVIEWS
            attributes = spec["nonResourceAttributes"]
            allowed = (spec["user"], attributes["path"], attributes["verb"]) in self.allowed
            status = {"allowed": allowed, **({"reason": self.reason} if self.reason and not allowed else {})}
        return Response(201, json.dumps({**body, "status": status}).encode())

    def of(self, path: str) -> list[dict[str, Any]]:
        return [body["spec"] for called, body in self.calls if called == path]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def reviews() -> FakeReviews:
    fake = FakeReviews()
    fake.users["good"] = {"username": "system:serviceaccount:mon:prometheus", "uid": "u-1",
                          "groups": ["system:serviceaccounts", "system:serviceaccounts:mon"],
                          "extra": {"authentication.kubernetes.io/pod-name": ["prom-0"]}}
    fake.users["other"] = {"username": "system:serviceaccount:mon:other", "uid": "u-2",
                           "groups": ["system:serviceaccounts", "system:authenticated"]}
    fake.users["admin"] = {"username": "admin", "groups": ["system:masters"]}
    fake.allowed.add(("system:serviceaccount:mon:prometheus", "/metrics", "get"))
    return fake


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def base(reviews: FakeReviews, clock: Clock) -> AsyncIterator[str]:
    auth = DelegatedAuth(reviews, clock=clock)
    async with serve("127.0.0.1", 0, healthz=[PING], readyz=[PING], registry=Metrics(profiles=["tessera"]).registry,
                     tls=tls_context(None, None), middlewares=[auth.middleware]) as server:
        assert server.url.startswith("https://127.0.0.1:")
        yield server.url


async def _get(url: str, token: str | None = None, method: str = "GET") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with aiohttp.ClientSession() as session:
        async with session.request(method, url, headers=headers, ssl=False) as response:
            return response.status, await response.text()


def _forbidden(message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "Forbidden", "details": {}, "code": 403}


UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized",
                "reason": "Unauthorized", "code": 401}


async def test_anonymous_requests_reach_the_probes_but_not_the_metrics(base: str, reviews: FakeReviews) -> None:
    assert await _get(f"{base}/healthz") == (200, "ok")
    assert await _get(f"{base}/readyz?verbose") == (200, "[+]ping ok\nreadyz check passed\n")
    assert reviews.calls == []  # always-allowed paths: no review
    for path in ("/metrics", "/configz"):
        status, body = await _get(base + path)
        assert (status, json.loads(body)) == (
            403, _forbidden(f'forbidden: User "system:anonymous" cannot get path "{path}"'))
    assert reviews.of(ACCESS_REVIEWS)[0] == {"user": "system:anonymous", "groups": ["system:unauthenticated"],
                                             "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    assert reviews.of(TOKEN_REVIEWS) == []


async def test_a_token_the_apiserver_allows_reads_the_metrics(base: str, reviews: FakeReviews) -> None:
    status, body = await _get(f"{base}/metrics", "good")
    assert status == 200 and "scheduler_pending_pods" in body
    assert reviews.of(TOKEN_REVIEWS) == [{"token": "good"}]
    assert reviews.of(ACCESS_REVIEWS) == [{
        "user": "system:serviceaccount:mon:prometheus", "uid": "u-1",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:mon", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["prom-0"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}]


async def test_a_token_without_the_role_is_forbidden_with_the_reviews_reason(base: str, reviews: FakeReviews) -> None:
    status, body = await _get(f"{base}/metrics", "other")
    assert (status, json.loads(body)) == (
        403, _forbidden('forbidden: User "system:serviceaccount:mon:other" cannot get path "/metrics"'))
    reviews.reason = "no RBAC policy matched"
    status, body = await _get(f"{base}/configz", "other")
    assert json.loads(body)["message"] == \
        'forbidden: User "system:serviceaccount:mon:other" cannot get path "/configz": no RBAC policy matched'
    # HEAD is verb "head" for a non-resource path (k8s.io/apiserver RequestInfoFactory), not "get"
    assert (await _get(f"{base}/metrics", "good", method="HEAD"))[0] == 403
    assert reviews.of(ACCESS_REVIEWS)[-1]["nonResourceAttributes"] == {"path": "/metrics", "verb": "head"}


async def test_a_token_the_apiserver_does_not_authenticate_is_401_on_every_path(base: str, reviews: FakeReviews) -> None:
    for path in ("/metrics", "/healthz"):  # as upstream: authentication runs before the always-allowed paths
        status, body = await _get(base + path, "forged")
        assert (status, json.loads(body)) == (401, UNAUTHORIZED)
    assert reviews.of(ACCESS_REVIEWS) == []
    # no token after "Bearer", or another scheme: no token at all, so anonymous
    assert [bearer_token(h) for h in ("Bearer ", "Basic abc", "bearer t", "Bearer  t", "Bearer t x")] == \
        [None, None, "t", None, "t"]


async def test_system_masters_need_no_access_review(base: str, reviews: FakeReviews) -> None:
    assert (await _get(f"{base}/metrics", "admin"))[0] == 200
    assert reviews.of(ACCESS_REVIEWS) == []


async def test_answers_are_cached_for_ten_seconds(base: str, reviews: FakeReviews, clock: Clock) -> None:
    for _ in range(3):
        assert (await _get(f"{base}/metrics", "good"))[0] == 200
        assert (await _get(f"{base}/metrics", "forged"))[0] == 401
        assert (await _get(f"{base}/metrics"))[0] == 403
    assert len(reviews.of(TOKEN_REVIEWS)) == 2 and len(reviews.of(ACCESS_REVIEWS)) == 2
    clock.now += 9.9
    assert (await _get(f"{base}/metrics", "good"))[0] == 200
    assert len(reviews.calls) == 4
    clock.now += 0.1
    reviews.allowed.clear()  # the role was taken away: seen once the cached answer expires
    assert (await _get(f"{base}/metrics", "good"))[0] == 403
    assert len(reviews.of(TOKEN_REVIEWS)) == 3 and len(reviews.of(ACCESS_REVIEWS)) == 3


async def test_a_review_that_cannot_be_made_is_401_or_500_and_logged_once(base: str, reviews: FakeReviews) -> None:
    reviews.down = True
    with capture_logs() as logs:
        for _ in range(3):
            assert await _get(f"{base}/metrics?x=1") == (
                500, 'Internal Server Error: "/metrics?x=1": the SubjectAccessReview failed\n')
            assert await _get(f"{base}/healthz", "good") == (401, json.dumps(UNAUTHORIZED, separators=(",", ":")) + "\n")
        assert (await _get(f"{base}/healthz"))[0] == 200  # no review needed: served while the apiserver is down
        reviews.down = False
        assert (await _get(f"{base}/metrics", "good"))[0] == 200  # a failure is not cached
    said = [(entry["event"], entry["review"]) for entry in logs if entry["event"].startswith("serving.review")]
    assert said == [("serving.review_failed", "subjectaccessreviews"), ("serving.review_failed", "tokenreviews"),
                    ("serving.review_recovered", "tokenreviews"), ("serving.review_recovered", "subjectaccessreviews")]


def test_always_allowed_paths_are_exact_or_a_prefix_with_a_star() -> None:
    patterns = ["/healthz", "/debug/*"]
    assert [path_allowed(p, patterns) for p in ("/healthz", "/healthz/", "/debug/pprof", "/debugx", "/metrics")] == \
        [True, False, True, False, False]


def test_always_allowed_paths_take_upstreams_optional_leading_slash(capsys: pytest.CaptureFixture[str]) -> None:
    # k8s.io/apiserver's path authorizer: "A leading / is optional", and a * before the end is refused
    assert [path_allowed(p, ["healthz", "debug/*"]) for p in ("/healthz", "/debug/pprof", "/metrics")] == \
        [True, True, False]
    with pytest.raises(SystemExit):
        build_parser("run").parse_args(["run", "--secure-port", "0", "--authorization-always-allow-paths",
                                        "/healthz,/debug/*/x"])
    assert 'only trailing * allowed in "debug/*/x"' in capsys.readouterr().err
    assert [path_problem(p) for p in ("/debug/*", "debug/*", "*")] == [None, None, None]  # a trailing * is the prefix form


async def test_the_self_signed_certificate_is_upstreams_localhost_one() -> None:
    server = HealthServer("127.0.0.1", 0, healthz=[PING], readyz=[PING], registry=Metrics(profiles=["t"]).registry,
                          tls=tls_context(None, None))
    async with server:
        client = ssl.create_default_context()
        client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
        _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=client, server_hostname="localhost")
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
    assert der is not None
    cert = x509.load_der_x509_certificate(der)
    subject = cert.subject.rfc4514_string()
    assert subject.startswith("CN=localhost@") and cert.issuer.rfc4514_string() == \
        subject.replace("CN=localhost@", "CN=localhost-ca@")
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_secure_port_and_port_are_one_or_the_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser("run").parse_args(["run", "--port", "10251", "--secure-port", "0"])
    assert "argument --secure-port: not allowed with argument --port" in capsys.readouterr().err
    args = build_parser("run").parse_args(["run", "--secure-port", "10259"])
    assert (args.secure_port, args.authorization_always_allow_paths) == (10259, ["/healthz", "/readyz", "/livez"])
    assert build_parser("run").parse_args(["run"]).secure_port is None


@pytest.mark.parametrize(("flags", "error"), [
    (["--tls-cert-file", "c.pem", "--tls-private-key-file", "k.pem"],
     "--tls-cert-file and --tls-private-key-file need --secure-port"),
    (["--secure-port", "0", "--tls-cert-file", "c.pem"], "--tls-cert-file and --tls-private-key-file go together"),
])
def test_tls_flags_need_the_secure_port_and_each_other(flags: list[str], error: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    args: argparse.Namespace = build_parser("run").parse_args(["run", *flags])
    try:
        assert run_cli.run(args) == 2
    finally:
        structlog.reset_defaults()  # run() configured logging before it refused
    assert capsys.readouterr().err == f"tessera run: error: {error}\n"


def test_tls_files_that_cannot_be_used_are_one_line_and_exit_1(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    pair = CertificateAuthority.generate().issue_serving()
    cert, _ = pair.write(tmp_path, "tls")
    other_key = CertificateAuthority.generate().as_key_pair().write(tmp_path, "other")[1]
    assert tls_context(str(cert), str(tmp_path / "tls.key")).minimum_version == ssl.TLSVersion.TLSv1_2
    for key in (tmp_path / "missing.key", other_key):
        args = build_parser("run").parse_args(["run", "--secure-port", "0", "--tls-cert-file", str(cert),
                                               "--tls-private-key-file", str(key)])
        try:
            assert run_cli.run(args) == 1
        finally:
            structlog.reset_defaults()
        error = capsys.readouterr().err
        assert error.startswith("tessera: cannot serve with TLS: ") and error.count("\n") == 1, error


class SlowReviews(FakeReviews):
    """Reviews that take their time (an apiserver under load), counting how many are out at once."""

    def __init__(self) -> None:
        super().__init__()
        self.out = self.peak = 0

    async def request(self, method: str, path: str, *, body: Any = None, timeout: float = 30.0,
                      limited: bool = True) -> Response:
        self.out += 1
        self.peak = max(self.peak, self.out)
        try:
            await asyncio.sleep(0.01)
            return await super().request(method, path, body=body, timeout=timeout, limited=limited)
        finally:
            self.out -= 1


async def test_a_flood_of_unknown_tokens_keeps_few_reviews_in_flight() -> None:
    # Whoever reaches the port can send any number of made-up tokens, each a TokenReview on the
    # scheduler's own apiserver client, whose connection pool (100) the Binder and the Lease
    # renewals use too: the reviews out at once are bounded, the rest wait their turn.
    slow = SlowReviews()
    auth = DelegatedAuth(slow)
    users = await asyncio.gather(*(auth.authenticate(f"made-up-{n}") for n in range(200)))
    assert users == [None] * 200 and len(slow.calls) == 200
    assert slow.peak == REVIEWS_IN_FLIGHT


async def test_a_review_waiting_past_the_timeout_for_its_turn_has_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secure_serving, "REVIEW_TIMEOUT_SECONDS", 0.05)
    hung = asyncio.Event()

    class Hung(FakeReviews):
        async def request(self, method: str, path: str, *, body: Any = None, timeout: float = 30.0,
                          limited: bool = True) -> Response:
            self.calls.append((path, body))
            await hung.wait()  # an apiserver that never answers (the client's own timeout aside)
            raise AssertionError("unreachable")

    hanging = Hung()
    auth = DelegatedAuth(hanging)
    results = await asyncio.gather(*(auth.authenticate(f"t{n}") for n in range(REVIEWS_IN_FLIGHT + 1)),
                                   return_exceptions=True)
    assert all(isinstance(result, ReviewFailed) for result in results)
    # the last one's timeout ran out while it waited for a slot: it never reached the apiserver
    assert len(hanging.calls) == REVIEWS_IN_FLIGHT


async def test_certificate_files_that_change_are_served_from_the_next_handshake(tmp_path: Path) -> None:
    # upstream's DynamicServingContentFromFiles: a rotated Secret (cert-manager) reaches the kubelet's
    # mounted files, and the scheduler serves it without a restart; a pair that does not load keeps
    # the one served
    def serials() -> int:
        return x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes()).serial_number

    CertificateAuthority.generate().issue_serving().write(tmp_path, "tls")
    cert, key = str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")
    context = tls_context(cert, key)
    files = ServingCertificate(context, cert, key)
    server = HealthServer("127.0.0.1", 0, healthz=[PING], readyz=[PING], registry=Metrics(profiles=["t"]).registry,
                          tls=context)

    async def served() -> int:
        client = ssl.create_default_context()
        client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
        _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=client)
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        return x509.load_der_x509_certificate(der).serial_number

    async with server:
        first = serials()
        assert await served() == first and files.reload() is False  # unchanged: nothing to do
        CertificateAuthority.generate().issue_serving().write(tmp_path, "tls")
        second = serials()
        with capture_logs() as logs:
            assert files.reload() is True
            assert await served() == second
            other_key = CertificateAuthority.generate().as_key_pair().write(tmp_path, "other")[1]
            (tmp_path / "tls.key").write_bytes(other_key.read_bytes())  # half-way through a rotation
            assert files.reload() is False and files.reload() is False
            assert await served() == second
        assert [entry["event"] for entry in logs] == ["serving.certificate_reloaded", "serving.certificate_not_reloaded"]


async def test_tessera_run_serves_its_rotated_certificate_files(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setattr(secure_serving, "CERT_RELOAD_SECONDS", 0.05)
    signals = Signals()
    monkeypatch.setattr(run_cli, "stop_on_signal", signals)
    CertificateAuthority.generate().issue_serving().write(tmp_path, "tls")
    cert, key = str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")
    args = argparse.Namespace(identity="me", gpu_map=False, bind_address="127.0.0.1", port=10251, secure_port=0,
                              tls_cert_file=cert, tls_private_key_file=key,
                              authorization_always_allow_paths=["/healthz", "/readyz", "/livez"])
    api = FakeApi()
    result: list[int] = []

    async def run() -> None:
        result.append(await run_cli._run(args, load_config(None), KubeHttp(api), KubeHttp(api), None,  # type: ignore[arg-type]
                                         tls_context(cert, key)))

    with capture_logs() as logs:
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await until(lambda: any(line["event"] == "serving.started" for line in logs))
            CertificateAuthority.generate().issue_serving().write(tmp_path, "tls")
            await until(lambda: any(line["event"] == "serving.certificate_reloaded" for line in logs))
            signals.send()
            await until(lambda: bool(result))
    assert result == [0]


async def test_identical_token_reviews_in_flight_are_one_review_and_each_waiter_gets_its_answer() -> None:
    # upstream's cachedTokenAuthenticator merges the lookups of one token in flight (singleflight):
    # a scrape burst with one ServiceAccount token is one TokenReview, not one per connection
    slow = SlowReviews()
    slow.users["good"] = {"username": "prom"}
    auth = DelegatedAuth(slow)
    users = await asyncio.gather(*(auth.authenticate(token) for token in ["good"] * 20 + ["forged"] * 20))
    assert users == [secure_serving.User("prom", groups=("system:authenticated",))] * 20 + [None] * 20
    assert sorted(spec["token"] for spec in slow.of(TOKEN_REVIEWS)) == ["forged", "good"]
    slow.down = True  # a failure is every waiter's, and not remembered: the next lookup asks again
    results = await asyncio.gather(*(auth.authenticate("new") for _ in range(20)), return_exceptions=True)
    assert all(isinstance(result, ReviewFailed) for result in results) and len(slow.calls) == 3
    assert isinstance((await asyncio.gather(auth.authenticate("new"), return_exceptions=True))[0], ReviewFailed)
    assert len(slow.calls) == 4


async def test_a_waiter_that_gives_up_leaves_the_shared_token_review_to_the_others() -> None:
    # upstream detaches the shared lookup from the request that started it: a scrape that is cancelled
    # (its client went away) does not fail the scrapes waiting on the same review
    slow = SlowReviews()
    slow.users["good"] = {"username": "prom"}
    auth = DelegatedAuth(slow)
    first = asyncio.ensure_future(auth.authenticate("good"))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(auth.authenticate("good"))
    await asyncio.sleep(0)
    first.cancel()
    assert (await second) == secure_serving.User("prom", groups=("system:authenticated",))
    assert len(slow.calls) == 1


async def test_identical_access_reviews_in_flight_are_each_made_as_upstreams_webhook_authorizer() -> None:
    # k8s.io/apiserver's webhook authorizer has a response cache and no singleflight: two requests
    # that miss the cache at once are two SubjectAccessReviews (kept, not merged)
    slow = SlowReviews()
    auth = DelegatedAuth(slow)
    await asyncio.gather(*(auth.authorize(secure_serving.ANONYMOUS_USER, "/metrics", "get") for _ in range(3)))
    assert len(slow.of(ACCESS_REVIEWS)) == 3


async def test_plain_http_to_the_secure_port_is_answered_as_gos_https_server() -> None:
    # net/http: a first record that looks like an HTTP request ("GET /", "HEAD ", "POST ", "PUT /",
    # "OPTIO") is answered on the bare connection, so curl and Go clients say what went wrong
    # (curl's "Empty reply from server" and Go's EOF did not); anything else that is not TLS is closed
    server = HealthServer("127.0.0.1", 0, healthz=[PING], readyz=[PING], registry=Metrics(profiles=["t"]).registry,
                          tls=tls_context(None, None))

    async def plain(*chunks: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(0.02)  # a request line in two TCP segments
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        return answer

    async with server:
        for request in (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", b"HEAD / HTTP/1.1\r\n\r\n",
                        b"OPTIONS * HTTP/1.1\r\n\r\n"):
            assert await plain(request) == \
                b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
        assert await plain(b"G", b"ET /healthz HTTP/1.1\r\n\r\n") == \
            b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
        assert await plain(b"DELETE / HTTP/1.1\r\n\r\n") == b""  # not one of Go's five: closed
        assert await plain(b"\x00\x01\x02\x03\x04\x05") == b""
        assert await _get(f"{server.url}/healthz") == (200, "ok")  # TLS is served as before


class ByGroup(FakeReviews):
    """SubjectAccessReviews that grant `get /metrics` to the group `ops` alone, whatever the user's name."""

    async def request(self, method: str, path: str, *, body: Any = None, timeout: float = 30.0,
                      limited: bool = True) -> Response:
        self.calls.append((path, body))
        spec = body["spec"]
        allowed = "ops" in spec["groups"] and spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return Response(201, json.dumps({**body, "status": {"allowed": allowed}}).encode())


async def test_a_cached_decision_answers_only_its_own_user_path_and_verb() -> None:
    # the cache must not widen a grant: an allowed `get /metrics` says nothing of another verb, another
    # path, or the same name with other groups (two tokens of one name, one of them in ops)
    granting = ByGroup()
    auth = DelegatedAuth(granting)
    ops = User("alice", "u-1", ("ops", AUTHENTICATED))
    assert (await auth.authorize(ops, "/metrics", "get"))[0] is True
    asked = [(ops, "/metrics", "post"), (ops, "/configz", "get"), (User("alice", "u-1", (AUTHENTICATED,)), "/metrics", "get")]
    assert [(await auth.authorize(*each))[0] for each in asked] == [False, False, False]
    assert len(granting.calls) == 4
    assert (await auth.authorize(ops, "/metrics", "get"))[0] is True and len(granting.calls) == 4  # that one is cached


async def test_a_token_review_that_omits_authenticated_does_not_authenticate() -> None:
    # the apiserver's TokenReviewStatus has `authenticated` omitempty: a token it does not
    # authenticate comes back with no such field at all, not "authenticated": false
    class Omitting(FakeReviews):
        async def request(self, method: str, path: str, *, body: Any = None, timeout: float = 30.0,
                          limited: bool = True) -> Response:
            return Response(201, json.dumps({**body, "status": {"user": {}, "error": "invalid bearer token"}}).encode())

    assert await DelegatedAuth(Omitting()).authenticate("forged") is None


async def test_a_review_answered_with_an_http_error_has_failed() -> None:
    # a 429 or 503 with no review in its body is no answer: not a denial (cached ten seconds) but a
    # failed review (401 or 500, not cached)
    class Refusing(FakeReviews):
        async def request(self, method: str, path: str, *, body: Any = None, timeout: float = 30.0,
                          limited: bool = True) -> Response:
            return Response(503, b"")

    auth = DelegatedAuth(Refusing())
    with pytest.raises(ReviewFailed):
        await auth.authenticate("good")
    with pytest.raises(ReviewFailed):
        await auth.authorize(User("alice", groups=(AUTHENTICATED,)), "/metrics", "get")


async def test_the_authenticated_group_is_added_as_upstreams_group_adder() -> None:
    # AuthenticatedGroupAdder: not to system:anonymous, nor to a user already in
    # system:authenticated or system:unauthenticated (whose permissions it must not gain)
    reviews = FakeReviews()
    reviews.users["anon"] = {"username": "system:anonymous"}
    reviews.users["unauth"] = {"username": "guest", "groups": ["system:unauthenticated"]}
    reviews.users["plain"] = {"username": "bob", "groups": ["dev"]}
    auth = DelegatedAuth(reviews)
    assert [(await auth.authenticate(token)) for token in ("anon", "unauth", "plain")] == [
        User("system:anonymous"), User("guest", groups=("system:unauthenticated",)),
        User("bob", groups=("dev", AUTHENTICATED))]


async def test_a_review_failing_again_after_a_recovery_is_logged_again(reviews: FakeReviews) -> None:
    auth = DelegatedAuth(reviews)
    with capture_logs() as logs:
        for down in (True, False, False, True):
            reviews.down = down
            try:
                await auth.authenticate(f"token-{len(reviews.calls)}")
            except ReviewFailed:
                pass
    assert [entry["event"] for entry in logs] == ["serving.review_failed", "serving.review_recovered",
                                                   "serving.review_failed"]


def test_a_certificate_failing_again_after_a_reload_is_logged_again(tmp_path: Path) -> None:
    # once per change: the same failure after a pair that loaded is a new one
    CertificateAuthority.generate().issue_serving().write(tmp_path, "tls")
    cert, key = str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")
    files = ServingCertificate(tls_context(cert, key), cert, key)
    other_key = CertificateAuthority.generate().as_key_pair().write(tmp_path, "other")[1]
    with capture_logs() as logs:
        for _ in range(2):
            CertificateAuthority.generate().issue_serving().write(tmp_path, "tls")
            pair_key = (tmp_path / "tls.key").read_bytes()
            (tmp_path / "tls.key").write_bytes(other_key.read_bytes())
            assert files.reload() is False
            (tmp_path / "tls.key").write_bytes(pair_key)
            assert files.reload() is True
    assert [entry["event"] for entry in logs] == ["serving.certificate_not_reloaded", "serving.certificate_reloaded"] * 2


def test_the_answer_cache_keeps_the_latest_entries_up_to_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secure_serving, "CACHE_ENTRIES", 2)
    cache = secure_serving._Cache(lambda: 0.0)
    for key in ("a", "b", "a", "c"):  # "a" answered again: the latest, so "b" is the oldest
        cache.put(key, key, 10.0)
    assert [cache.get(key) for key in ("a", "b", "c")] == ["a", None, "c"]
