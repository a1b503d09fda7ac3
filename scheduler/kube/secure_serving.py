"""`tessera run --secure-port`: the probe/metrics server over HTTPS with delegated authentication
and authorization, as kube-scheduler serves the same paths on its secure port 10259.

Why: on the plain-HTTP port (scheduler/kube/serving.py) whoever reaches the pod reads `/configz`
and `/metrics`. Platform teams expect kube-scheduler's arrangement instead, and this module copies
it (k8s.io/apiserver `DelegatingAuthenticationOptions`/`DelegatingAuthorizationOptions` with
kube-scheduler's defaults, the handler chain of `app.buildHandlerChain`):

* TLS with `--tls-cert-file`/`--tls-private-key-file` (PEM; loaded again when they change,
  `ServingCertificate`), or, without them, a certificate made
  in memory at start, as upstream's `MaybeDefaultWithSelfSignedCerts("localhost", ...)`: a
  throwaway CA `localhost-ca@<unix time>` signs `localhost@<unix time>` for `localhost` and
  `127.0.0.1`. EC P-256 (scheduler/kube/controlplane/certs.py), not upstream's RSA-2048: the key
  takes microseconds, not tens of milliseconds, on the way to the first Binding.
* Authentication: `Authorization: Bearer <token>` is checked with a TokenReview
  (authentication.k8s.io/v1). Without a bearer token the request is `system:anonymous` in
  `system:unauthenticated` (upstream's delegated authentication allows anonymous requests) and
  goes on to authorization. A token the review does not authenticate, or a review that cannot
  be made, is `401 Unauthorized` (upstream's `unionauth.NewFailOnError`: an error of the token
  authenticator is never downgraded to anonymous).
* Authorization: a path in `--authorization-always-allow-paths` (default `/healthz,/readyz,/livez`;
  a trailing `*` matches a prefix, as upstream's path authorizer) and a user in `system:masters`
  need no review; any other request is a SubjectAccessReview (authorization.k8s.io/v1) with the
  authenticated user's name, uid, groups and extra and `nonResourceAttributes {path, verb}`. The
  verb is the request's method in lower case, as k8s.io/apiserver's `RequestInfoFactory` has it for
  a non-resource path: `HEAD /metrics` asks for `head`, not `get`. A denial is 403 with upstream's
  metav1.Status (`forbidden: User "system:anonymous" cannot get path "/metrics"`), a review that
  cannot be made is 500 (upstream's `InternalError`; the error's text goes to the log, not to
  whoever asked).
* Caches as upstream's: a TokenReview's answer (authenticated or not) for 10 s, a SubjectAccessReview's
  for 10 s allowed and 10 s denied; a failed review is not cached. A failed review is logged once per
  change (`serving.review_failed`, then `serving.review_recovered`, per kind of review), not once per scrape.
* At most `REVIEWS_IN_FLIGHT` reviews are out at once, and one that waits for its turn and its
  answer longer than the review timeout has failed: anyone who reaches the port can send made-up
  tokens, each a TokenReview on the scheduler's own apiserver client, whose connection pool the
  Binder and the Lease renewals need (upstream's reviews have a client of their own, 200 QPS).
* Single flight as upstream's: requests with the same token that miss the cache at once share one
  TokenReview (`cachedTokenAuthenticator`'s singleflight group), and each gets its answer or its
  failure; the review is detached from the request that started it, so a scrape that goes away does
  not fail the others waiting on it. SubjectAccessReviews are not merged: upstream's webhook
  authorizer has a response cache and no singleflight, so identical ones in flight are each made.

Not in scope: client-certificate authentication (`--client-ca-file`) and the front proxy's
request headers (`--requestheader-*`): a request with only a client certificate is anonymous here.
The reviews go through the scheduler's own apiserver client (its kubeconfig's identity, which
needs `system:auth-delegator`), not a separate `--authentication-kubeconfig`; they do not take the
scheduling loop's write tokens (`limited=False`), so scrapes cannot slow Bindings down.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import anyio
import orjson
import structlog
from aiohttp import web

from scheduler.kube.http import Response
from scheduler.kube.serving import _HEADERS
from scheduler.quoted import go_quote

log = structlog.get_logger("tessera.serving")

ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")  # kube-scheduler's --authorization-always-allow-paths
ALWAYS_ALLOW_GROUPS = ("system:masters",)  # k8s.io/apiserver DelegatingAuthorizationOptions' default
AUTHN_CACHE_SECONDS = 10.0  # DelegatingAuthenticationOptions.CacheTTL, for both answers
AUTHZ_ALLOW_SECONDS = 10.0  # DelegatingAuthorizationOptions.AllowCacheTTL
AUTHZ_DENY_SECONDS = 10.0  # DelegatingAuthorizationOptions.DenyCacheTTL
REVIEW_TIMEOUT_SECONDS = 10.0  # TokenRequestTimeout / ClientTimeout
CERT_RELOAD_SECONDS = 60.0  # dynamiccertificates' resync period for the serving certificate files
# reviews out at once: they share the scheduler's apiserver connection pool (100) with the Binder
# (64 in flight) and the Lease renewals, and anyone who reaches the port can send made-up tokens
REVIEWS_IN_FLIGHT = 8
CACHE_ENTRIES = 8192  # upstream's webhook authorizer cache size; past it, the oldest answers go first
ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
# k8s.io/apiserver responsewriters: "Avoid emitting errors that look like valid HTML. Quotes are okay."
_SANITIZE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


class Reviewer(Protocol):
    """What the reviews need of the apiserver client (scheduler/kube/http.py `KubeHttp`)."""

    async def request(self, method: str, path: str, *, body: Any = None, timeout: float = 30.0,
                      limited: bool = True) -> Response: ...


@dataclass(frozen=True, slots=True)
class User:
    """An authenticated (or anonymous) requester, as a TokenReview's `status.user` names it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


ANONYMOUS_USER = User(ANONYMOUS, groups=(UNAUTHENTICATED,))


class ReviewFailed(Exception):
    """A review could not be made (transport error, timeout, an answer that is not a review)."""


def tls_context(cert_file: str | None, key_file: str | None) -> ssl.SSLContext:
    """The server's TLS context: the operator's PEM pair, or a self-signed one made now."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # kube-scheduler's default --tls-min-version
    if cert_file is not None and key_file is not None:
        context.load_cert_chain(cert_file, key_file)
        return context
    # imported only here: `cryptography` costs start-up time plain-HTTP serving does not pay
    from scheduler.kube.controlplane.certs import CertificateAuthority

    stamp = int(time.time())
    ca = CertificateAuthority.generate(f"localhost-ca@{stamp}")
    pair = ca.issue_serving(f"localhost@{stamp}", ips=("127.0.0.1",), dns_names=("localhost",))
    # ssl loads a chain from files only: a private directory, gone before this returns
    with tempfile.TemporaryDirectory(prefix="tessera-tls-") as directory:
        cert_path = Path(directory) / "tls.crt"
        cert_path.write_bytes(pair.cert_pem + ca.cert_pem)
        key_path = Path(directory) / "tls.key"
        key_path.touch(mode=0o600)
        key_path.write_bytes(pair.key_pem)
        context.load_cert_chain(cert_path, key_path)
    log.info("serving.self_signed", subject=f"localhost@{stamp}", issuer=f"localhost-ca@{stamp}",
             expires=(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=365)).date().isoformat())
    return context


class ServingCertificate:
    """`--tls-cert-file`/`--tls-private-key-file`, served again from the next handshake when they
    change, as upstream's `DynamicServingContentFromFiles` (a rotated Secret reaches the mounted
    files; kube-scheduler serves it without a restart). A pair that does not load (a key not the
    certificate's, half-way through a rotation) leaves the one served, said once per change."""

    def __init__(self, context: ssl.SSLContext, cert_file: str, key_file: str) -> None:
        self._context = context
        self._files = (cert_file, key_file)
        self._loaded = self._read()
        self._failure: str | None = None

    def _read(self) -> tuple[bytes, bytes]:
        return Path(self._files[0]).read_bytes(), Path(self._files[1]).read_bytes()

    def reload(self) -> bool:
        """Load the files again if they changed; whether the served pair is a new one now."""
        try:
            read = self._read()
            if read == self._loaded:
                return False
            # tried on a context of its own first: a failed load_cert_chain can leave the served
            # context with the new certificate and the old key
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(*self._files)
            self._context.load_cert_chain(*self._files)
        except OSError as err:  # ssl.SSLError too
            failure = f"{type(err).__name__}: {err}"
            if failure != self._failure:
                self._failure = failure
                log.warning("serving.certificate_not_reloaded", cert=self._files[0], error=failure)
            return False
        self._loaded, self._failure = read, None
        log.info("serving.certificate_reloaded", cert=self._files[0])
        return True

    async def run(self) -> None:
        """Look every `CERT_RELOAD_SECONDS` (upstream: on a file event and once a minute)."""
        while True:
            await anyio.sleep(CERT_RELOAD_SECONDS)
            self.reload()


def path_allowed(path: str, patterns: Sequence[str]) -> bool:
    """Upstream's path authorizer: an exact path, or a prefix when the pattern ends with `*`; the
    leading `/` of either is optional (upstream trims it from both)."""
    path = path.removeprefix("/")
    return any(path.startswith(pattern[:-1]) if pattern.endswith("*") else path == pattern
               for pattern in (pattern.removeprefix("/") for pattern in patterns))


def path_problem(pattern: str) -> str | None:
    """Why upstream's path authorizer refuses an always-allowed path (a `*` before its end), or None."""
    trimmed = pattern.removeprefix("/")
    return f"only trailing * allowed in {go_quote(trimmed)}" if "*" in trimmed[:-1] else None


def _status(code: int, reason: str, message: str, details: Mapping[str, object] | None = None) -> web.Response:
    """A metav1.Status body, as k8s.io/apiserver's `ErrorNegotiated` writes it in JSON."""
    doc: dict[str, object] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": message, "reason": reason}
    if details is not None:
        doc["details"] = dict(details)
    doc["code"] = code
    return web.Response(status=code, body=orjson.dumps(doc) + b"\n",
                        headers={**_HEADERS, "Content-Type": "application/json"})


def unauthorized() -> web.Response:
    """`genericapifilters.Unauthorized`: apierrors.NewUnauthorized("Unauthorized")."""
    return _status(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, path: str, reason: str) -> web.Response:
    """`responsewriters.Forbidden` for a non-resource path: apierrors.NewForbidden with an empty
    group and resource, so `forbidden: <message>` and empty details."""
    message = f"User {go_quote(user)} cannot {verb} path {go_quote(path)}".translate(_SANITIZE)
    if reason:
        message = f"{message}: {reason}"
    return _status(403, "Forbidden", f"forbidden: {message}", details={})


class _Cache:
    """Answers by key until their own expiry; past `CACHE_ENTRIES` the oldest entry is dropped."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._entries: dict[object, tuple[float, object]] = {}

    def get(self, key: object) -> object | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        return entry[1]

    def put(self, key: object, value: object, ttl: float) -> None:
        self._entries.pop(key, None)
        self._entries[key] = (self._clock() + ttl, value)
        if len(self._entries) > CACHE_ENTRIES:
            del self._entries[next(iter(self._entries))]


_T = TypeVar("_T")


class _SingleFlight(Generic[_T]):
    """golang.org/x/sync/singleflight's `DoChan` as upstream's cached token authenticator uses it:
    one call per key in flight, its result (or exception) every caller's. The call is a task of its
    own, not the first caller's: a caller that is cancelled stops waiting, the call goes on."""

    def __init__(self) -> None:
        self._calls: dict[object, asyncio.Future[_T]] = {}

    async def do(self, key: object, call: Callable[[], Awaitable[_T]]) -> _T:
        future = self._calls.get(key)
        if future is None:
            future = asyncio.ensure_future(call())
            self._calls[key] = future
            future.add_done_callback(lambda done: self._done(key, done))
        return await asyncio.shield(future)

    def _done(self, key: object, future: asyncio.Future[_T]) -> None:
        del self._calls[key]
        if not future.cancelled():
            future.exception()  # retrieved here too: every waiter may have gone before it ended


class DelegatedAuth:
    """The authentication and authorization filters in front of every route (`middleware`)."""

    def __init__(self, reviewer: Reviewer, *, always_allow_paths: Sequence[str] = ALWAYS_ALLOW_PATHS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._reviewer = reviewer
        self._always_allow = tuple(always_allow_paths)
        self._tokens = _Cache(clock)
        self._token_flights: _SingleFlight[User | None] = _SingleFlight()
        self._decisions = _Cache(clock)
        self._slots = anyio.Semaphore(REVIEWS_IN_FLIGHT)
        self._failing: dict[str, str] = {}  # review kind -> the failure last logged, until one succeeds

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        token = bearer_token(request.headers.get("Authorization", ""))
        if token is None:
            user = ANONYMOUS_USER
        else:
            try:
                authenticated = await self.authenticate(token)
            except ReviewFailed:
                return unauthorized()
            if authenticated is None:
                return unauthorized()
            user = authenticated
        verb = request.method.lower()
        if path_allowed(request.path, self._always_allow) or set(user.groups) & set(ALWAYS_ALLOW_GROUPS):
            return await handler(request)
        try:
            allowed, reason = await self.authorize(user, request.path, verb)
        except ReviewFailed:
            uri = go_quote(request.path_qs).translate(_SANITIZE)
            return web.Response(status=500, text=f"Internal Server Error: {uri}: the SubjectAccessReview failed\n",
                                headers=_HEADERS)
        if not allowed:
            return forbidden(user.name, verb, request.path, reason)
        return await handler(request)

    async def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the review says it is not authenticated."""
        key = hashlib.sha256(token.encode()).digest()  # as upstream's cache: no token kept in memory
        cached = self._tokens.get(key)
        if isinstance(cached, _Authn):
            return cached.user
        return await self._token_flights.do(key, lambda: self._review_token(key, token))

    async def _review_token(self, key: bytes, token: str) -> User | None:
        """The one TokenReview of a token in flight, its answer cached (`authenticate`)."""
        status = await self._review(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                                    "spec": {"token": token}})
        user = _user(status) if status.get("authenticated") is True else None
        self._tokens.put(key, _Authn(user), AUTHN_CACHE_SECONDS)
        return user

    async def authorize(self, user: User, path: str, verb: str) -> tuple[bool, str]:
        """Whether `user` may `verb` `path`, and the review's reason."""
        key = (user, path, verb)
        cached = self._decisions.get(key)
        if isinstance(cached, tuple):
            return bool(cached[0]), str(cached[1])
        spec: dict[str, object] = {"user": user.name, "groups": list(user.groups),
                                   "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {key: list(values) for key, values in user.extra}
        status = await self._review(ACCESS_REVIEWS, {"apiVersion": "authorization.k8s.io/v1",
                                                     "kind": "SubjectAccessReview", "spec": spec})
        allowed = status.get("allowed") is True
        reason = status.get("reason")
        decision = (allowed, reason if isinstance(reason, str) else "")
        self._decisions.put(key, decision, AUTHZ_ALLOW_SECONDS if allowed else AUTHZ_DENY_SECONDS)
        return decision

    async def _review(self, path: str, body: Mapping[str, object]) -> dict[str, Any]:
        """POST a review and return its `status`; ReviewFailed (logged once per change) otherwise."""
        try:
            with anyio.fail_after(REVIEW_TIMEOUT_SECONDS):  # the wait for a slot counts too
                async with self._slots:
                    response = await self._reviewer.request("POST", path, body=body, timeout=REVIEW_TIMEOUT_SECONDS,
                                                            limited=False)
            if not response.ok:
                raise ReviewFailed(f"HTTP {response.status}: {response.message()}")
            status = (response.json() or {}).get("status") or {}
            if not isinstance(status, dict):
                raise ReviewFailed("the answer has no review status")
        except ReviewFailed as err:
            self._failed(path, str(err))
            raise
        except Exception as err:  # noqa: BLE001 - transport errors, timeouts, an unreadable body
            self._failed(path, f"{type(err).__name__}: {err}")
            raise ReviewFailed(str(err)) from None
        review = path.rsplit("/", 1)[-1]
        if self._failing.pop(review, None) is not None:
            log.info("serving.review_recovered", review=review)
        return status

    def _failed(self, path: str, error: str) -> None:
        review = path.rsplit("/", 1)[-1]
        if self._failing.get(review) != error:
            self._failing[review] = error
            log.warning("serving.review_failed", review=review, error=error)


@dataclass(frozen=True, slots=True)
class _Authn:
    """A cached TokenReview answer (None: not authenticated), told apart from a cache miss."""

    user: User | None


def bearer_token(header: str) -> str | None:
    """k8s.io/apiserver's bearertoken authenticator: `Bearer <token>` (any case of `Bearer`);
    anything else, an empty token included, is no token at all (the request goes on anonymous)."""
    parts = header.strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def _user(status: Mapping[str, Any]) -> User:
    """A TokenReview's user, with `system:authenticated` added as upstream's AuthenticatedGroupAdder does."""
    raw = status.get("user") or {}
    groups = tuple(str(group) for group in raw.get("groups") or ())
    if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups and raw.get("username") != ANONYMOUS:
        groups = (*groups, AUTHENTICATED)
    extra = tuple(sorted((str(key), tuple(str(value) for value in values))
                         for key, values in (raw.get("extra") or {}).items()))
    return User(str(raw.get("username") or ""), str(raw.get("uid") or ""), groups, extra)
