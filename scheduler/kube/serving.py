"""`/healthz`, `/livez`, `/readyz` and `/metrics` over HTTP, or HTTPS with `--secure-port` (aiohttp).

The probes answer as kube-scheduler's (k8s.io/apiserver `healthz.handleRootHealth`): each path runs
its named checks; all passing is `200 ok` (with `?verbose`, one `[+]<check> ok` line per check and
`<path> check passed`); any failing is `500` with every check's line, a failing one as
`[-]<check> failed: reason withheld`, and `<path> check failed`. The reason is withheld because
these paths are unauthenticated; it goes to the log instead (`probe.failed`, once per change).
`?exclude=<check>` skips a check, as upstream.

Why these checks:

* `/healthz`: `ping` and `scheduling-loop` ("is the process loop alive?") — the kubelet's liveness
  probe restarts a wedged scheduler. A standby is healthy: losing an election is not a reason to
  be restarted.
* `/livez`: `ping` only, as kube-scheduler installs it (no checks).
* `/readyz`: `shutdown` (not ready from SIGTERM on, as `healthz.NewShutdownHealthz`) and
  `informer-sync` (the informers have delivered their initial lists, `NewInformerSyncHealthz`),
  so a rollout waits for a warm standby.
* `/metrics` is the Prometheus text exposition of the scheduler's own registry (OpenMetrics when
  the scraper asks for it), gzipped when the scraper accepts it, as upstream's promhttp handler.
* `routes` adds read-only pages beside them (`tessera run --gpu-map`: scheduler/kube/gpu_map.py),
  only when the operator asks for them.
* `/configz` (`configz_route`) is the effective configuration as JSON, as kube-scheduler serves
  its own: it holds no secret (a kubeconfig's path, never its content), so it is served like
  `/metrics`: on `--port` to whoever reaches it, on `--secure-port` to whom the apiserver allows.
* Otherwise responses carry nothing but those answers: no kubeconfig, no tokens, no exception
  texts, no apiserver messages.

Why the default bind address is `127.0.0.1:10251`: nothing is exposed beyond the host unless the
operator asks for it (the Deployment passes `--bind-address 0.0.0.0` so the kubelet and Prometheus
can reach the pod). 10251 is the port kube-scheduler used for its former plain-HTTP endpoint; the
upstream secure port 10259 is for HTTPS with delegated authentication, which `tessera run
--secure-port` serves instead of `--port` (the same routes, behind `tls` and the `middlewares` of
scheduler/kube/secure_serving.py). Port 0 binds a free port; `HealthServer.port` tells which.
On the HTTPS port a plain-HTTP request is answered `400` as Go's net/http answers it (scheduler/kube/https_site.py).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Middleware
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from scheduler.kube.https_site import HttpsSite
from scheduler.quoted import go_quote

log = structlog.get_logger("tessera.serving")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10251
KEEPALIVE_SECONDS = 30.0  # an idle or half-sent connection is closed after this long
_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = tuple[str, Handler]  # an extra GET path served beside the probes (the opt-in GPU map)
GPU_MAP_PAGE = "/gpu-map"  # `tessera run --gpu-map` (scheduler/kube/gpu_map.py)
GPU_MAP_DATA = "/gpu-map.json"
# a named health check: its name (`[+]name ok`) and why it fails now (None while it passes)
Check = tuple[str, Callable[[], "str | None"]]
PING: Check = ("ping", lambda: None)
# gzip's fastest level: 2.2 MB of GPU-map JSON (1,000 8-GPU nodes) become 0.30 MB in 8 ms, against
# 0.26 MB in 21 ms at the default level 6 — on the scheduler's own event loop, cheaper is better
GZIP_LEVEL = 1
VARY = {"Vary": "Accept-Encoding"}


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether a request's `Accept-Encoding` lets the answer be gzipped (RFC 9110 §12.5.3): `gzip`
    with a q-value above 0 or, when gzip is not named, `*` with one."""
    named: float | None = None
    anything: float | None = None
    for item in accept_encoding.split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        weight = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:  # an unreadable weight is no consent
                    weight = 0.0
        if coding.lower() in ("gzip", "x-gzip"):
            named = weight
        elif coding == "*":
            anything = weight
    chosen = named if named is not None else anything
    return chosen is not None and chosen > 0


def gzipped(body: bytes) -> bytes:
    return gzip.compress(body, GZIP_LEVEL)


def configz_route(body: Mapping[str, object]) -> Route:
    """`/configz`: `body` (scheduler/api/config_effective.py `configz`) as JSON, encoded once — the
    configuration does not change while the process runs."""
    encoded = json.dumps(body, indent=2, sort_keys=True).encode() + b"\n"

    async def answer(request: web.Request) -> web.StreamResponse:
        return web.Response(body=encoded, headers={**_HEADERS, "Content-Type": "application/json"})

    return ("/configz", answer)


def turned_off(paths: Sequence[str], hint: str) -> list[Route]:
    """404 on `paths`, with `hint` as the body: a page that is off by default says how to turn it
    on instead of aiohttp's bare "404: Not Found"."""

    async def answer(request: web.Request) -> web.StreamResponse:
        return web.Response(status=404, text=f"404: {hint}\n", headers=_HEADERS)

    return [(path, answer) for path in paths]


class _RequestErrors(logging.Handler):
    """aiohttp's server log, into ours: a request it cannot parse (a bad header line, an unknown
    HTTP version, a URL over its limit) is answered 400 and not logged, as Go's net/http does for
    kube-scheduler (anyone who reaches the port could otherwise write tracebacks into the log at
    will); anything else is one structured line, not a raw multi-line traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            return
        log.error("serving.request_failed", message=record.getMessage(),
                  error=f"{type(error).__name__}: {error}" if error is not None else None)


_SERVER_LOG = logging.getLogger("tessera.serving.http")
_SERVER_LOG.propagate = False
_SERVER_LOG.setLevel(logging.WARNING)
_SERVER_LOG.addHandler(_RequestErrors())


class ServeError(Exception):
    """The probe/metrics address cannot be served (port taken, address not ours, unknown host):
    a start-up error, worded as one line for the user."""


class HealthServer:
    """The probe and metrics endpoint. `start()` binds, `stop()` closes; also an async context manager."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, healthz: Sequence[Check],
                 readyz: Sequence[Check], registry: CollectorRegistry, routes: Sequence[Route] = (),
                 tls: ssl.SSLContext | None = None, middlewares: Sequence[Middleware] = (),
                 port_flag: str = "--port") -> None:
        self.host = host
        self.requested_port = port
        self._checks: dict[str, tuple[Check, ...]] = {"healthz": tuple(healthz) or (PING,), "livez": (PING,),
                                                      "readyz": tuple(readyz) or (PING,)}
        self._failing: dict[str, str] = {}  # probe -> the failures last logged for it
        self._registry = registry
        self._routes = tuple(routes)
        # `tessera run --secure-port` (scheduler/kube/secure_serving.py): HTTPS, and the delegated
        # authentication and authorization filters in front of every route
        self._tls = tls
        self._middlewares = tuple(middlewares)
        self._port_flag = port_flag
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The port actually bound (differs from the requested one when that was 0)."""
        if self._port is None:
            raise RuntimeError("HealthServer is not started")
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self._tls is not None else 'http'}://{host}:{self.port}"

    async def start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application(middlewares=self._middlewares)
        for probe in self._checks:
            app.router.add_get(f"/{probe}", self._probe)
        app.router.add_get("/metrics", self._metrics)
        for path, handler in self._routes:
            app.router.add_get(path, handler)
        # No access log: probes hit these paths every few seconds. An idle or half-sent connection
        # is dropped after KEEPALIVE_SECONDS (aiohttp's default is an hour, and every one held is a
        # file descriptor the scheduler's own apiserver connections need; kube-scheduler's server
        # gives a request's headers 32 s).
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0,
                               keepalive_timeout=KEEPALIVE_SECONDS, logger=_SERVER_LOG)
        await runner.setup()
        try:
            site: web.BaseSite = web.TCPSite(runner, self.host, self.requested_port) if self._tls is None \
                else HttpsSite(runner, self.host, self.requested_port, ssl_context=self._tls, idle_seconds=KEEPALIVE_SECONDS)
            await site.start()
        except OSError as err:  # socket.gaierror included: an unknown host name
            await runner.cleanup()
            # the errno's own words: uvloop's strerror repeats the address ("error while attempting to bind ...")
            reason = os.strerror(err.errno) if err.errno and err.errno > 0 else (err.strerror or str(err))
            raise ServeError(f"cannot serve /healthz, /readyz and /metrics on {self.host}:{self.requested_port}: "
                             f"{reason} (choose another {self._port_flag}, 0 for any free one, or --bind-address)") from None
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        log.info("serving.started", address=self.url)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
            log.info("serving.stopped")

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    # --- handlers -----------------------------------------------------------------------------

    async def _probe(self, request: web.Request) -> web.Response:
        probe = request.path.strip("/")
        excluded = set(request.query.getall("exclude", []))
        unknown = set(excluded)
        lines: list[str] = []
        failures: list[str] = []
        for name, check in self._checks[probe]:
            if name in excluded:
                unknown.discard(name)
                lines.append(f"[+]{name} excluded: ok")
                continue
            reason = _run(name, check)
            if reason is None:
                lines.append(f"[+]{name} ok")
            else:
                lines.append(f"[-]{name} failed: reason withheld")
                failures.append(f"[-]{name} failed: {reason}")
        if unknown:
            quoted = ",".join(go_quote(name) for name in sorted(unknown))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        self._log_change(probe, failures)
        if failures:
            return web.Response(status=500, text="".join(f"{line}\n" for line in lines) + f"{probe} check failed\n",
                                headers=_HEADERS)
        if "verbose" not in request.query:
            return web.Response(text="ok", headers=_HEADERS)
        return web.Response(text="".join(f"{line}\n" for line in lines) + f"{probe} check passed\n", headers=_HEADERS)

    def _log_change(self, probe: str, failures: list[str]) -> None:
        """The withheld reasons, in the log: once each time a probe's failures change."""
        now = "; ".join(failures)
        if now == self._failing.get(probe, ""):
            return
        if now:
            self._failing[probe] = now
            log.info("probe.failed", probe=probe, failures=now)
        else:
            del self._failing[probe]
            log.info("probe.passed", probe=probe)

    async def _metrics(self, request: web.Request) -> web.Response:
        try:
            encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        except (TypeError, ValueError):  # an Accept header prometheus_client cannot read: the text format
            encoder, content_type = choose_encoder("")
        body = encoder(self._registry)
        headers = {**_HEADERS, **VARY, "Content-Type": content_type}
        if accepts_gzip(request.headers.get("Accept-Encoding", "")):
            return web.Response(body=gzipped(body), headers={**headers, "Content-Encoding": "gzip"})
        return web.Response(body=body, headers=headers)


@asynccontextmanager
async def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, healthz: Sequence[Check],
                readyz: Sequence[Check], registry: CollectorRegistry,
                routes: Sequence[Route] = (), tls: ssl.SSLContext | None = None,
                middlewares: Sequence[Middleware] = (), port_flag: str = "--port") -> AsyncIterator[HealthServer]:
    """`async with serve(...) as server:` — started on entry (``server.port`` is bound), stopped on exit."""
    server = HealthServer(host, port, healthz=healthz, readyz=readyz, registry=registry, routes=routes, tls=tls,
                          middlewares=middlewares, port_flag=port_flag)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _run(name: str, check: Callable[[], str | None]) -> str | None:
    """A check's failure reason; a check that raises has failed (logged, never a 500 traceback)."""
    try:
        return check()
    except Exception:  # noqa: BLE001
        log.exception("serving.check_raised", check=name)
        return "the check raised an error"
