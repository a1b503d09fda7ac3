"""`/healthz`, `/livez`, `/readyz` and `/metrics` over plain HTTP (aiohttp).

Why these semantics:

* `/healthz` (and its alias `/livez`) answers "is the process loop alive?" — the kubelet's
  liveness probe restarts a wedged scheduler. A standby is healthy: losing an election is not a
  reason to be restarted. Failure is 500, as the healthz handlers of Kubernetes components answer.
* `/readyz` answers "is the cache complete?" (informers have delivered their initial lists):
  503 with a one-line reason until then, so a rollout waits for a warm standby.
* `/metrics` is the Prometheus text exposition of the scheduler's own registry (OpenMetrics when
  the scraper asks for it).
* `routes` adds read-only pages beside them (`tessera run --gpu-map`: scheduler/kube/gpu_map.py),
  only when the operator asks for them.
* Responses carry nothing but those answers: no configuration, no kubeconfig, no tokens, no
  exception texts (a failing check is logged, and answered with a generic reason). A readiness
  reason is our own short sentence, truncated and flattened to one line.

Why the default bind address is `127.0.0.1:10251`: nothing is exposed beyond the host unless the
operator asks for it (the Deployment passes `--bind-address 0.0.0.0` so the kubelet and Prometheus
can reach the pod). 10251 is the port kube-scheduler used for its former plain-HTTP endpoint; the
upstream secure port 10259 is for HTTPS with delegated authentication, which this server does not do.
Port 0 binds a free port; `HealthServer.port` tells which.
"""

from __future__ import annotations

import os

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from types import TracebackType

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

log = structlog.get_logger("tessera.serving")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10251
KEEPALIVE_SECONDS = 30.0  # an idle or half-sent connection is closed after this long
_MAX_REASON = 200
_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = tuple[str, Handler]  # an extra GET path served beside the probes (the opt-in GPU map)


class ServeError(Exception):
    """The probe/metrics address cannot be served (port taken, address not ours, unknown host):
    a start-up error, worded as one line for the user."""


def _one_line(reason: str) -> str:
    flat = " ".join(reason.split())
    return flat[:_MAX_REASON]


class HealthServer:
    """The probe and metrics endpoint. `start()` binds, `stop()` closes; also an async context manager."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, healthy: Callable[[], bool],
                 ready: Callable[[], tuple[bool, str]], registry: CollectorRegistry,
                 routes: Sequence[Route] = ()) -> None:
        self.host = host
        self.requested_port = port
        self._healthy = healthy
        self._ready = ready
        self._registry = registry
        self._routes = tuple(routes)
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
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application()
        app.router.add_get("/healthz", self._health)
        app.router.add_get("/livez", self._health)
        app.router.add_get("/readyz", self._readiness)
        app.router.add_get("/metrics", self._metrics)
        for path, handler in self._routes:
            app.router.add_get(path, handler)
        # No access log: probes hit these paths every few seconds. An idle or half-sent connection
        # is dropped after KEEPALIVE_SECONDS (aiohttp's default is an hour, and every one held is a
        # file descriptor the scheduler's own apiserver connections need; kube-scheduler's server
        # gives a request's headers 32 s).
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0,
                               keepalive_timeout=KEEPALIVE_SECONDS)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.requested_port)
            await site.start()
        except OSError as err:  # socket.gaierror included: an unknown host name
            await runner.cleanup()
            # the errno's own words: uvloop's strerror repeats the address ("error while attempting to bind ...")
            reason = os.strerror(err.errno) if err.errno and err.errno > 0 else (err.strerror or str(err))
            raise ServeError(f"cannot serve /healthz, /readyz and /metrics on {self.host}:{self.requested_port}: "
                             f"{reason} (choose another --port, 0 for any free one, or --bind-address)") from None
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

    async def _health(self, request: web.Request) -> web.Response:
        try:
            alive = bool(self._healthy())
        except Exception:  # noqa: BLE001 - a broken check is a failed check, never a 500 traceback
            log.exception("serving.health_check_failed")
            alive = False
        if alive:
            return web.Response(text="ok", headers=_HEADERS)
        return web.Response(status=500, text="unhealthy: the scheduling loop is not running", headers=_HEADERS)

    async def _readiness(self, request: web.Request) -> web.Response:
        try:
            ready, reason = self._ready()
        except Exception:  # noqa: BLE001
            log.exception("serving.readiness_check_failed")
            ready, reason = False, "readiness check failed"
        if ready:
            return web.Response(text="ok", headers=_HEADERS)
        return web.Response(status=503, text=f"not ready: {_one_line(reason) or 'no reason given'}",
                            headers=_HEADERS)

    async def _metrics(self, request: web.Request) -> web.Response:
        try:
            encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        except (TypeError, ValueError):  # an Accept header prometheus_client cannot read: the text format
            encoder, content_type = choose_encoder("")
        body = encoder(self._registry)
        return web.Response(body=body, headers={**_HEADERS, "Content-Type": content_type})


@asynccontextmanager
async def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, healthy: Callable[[], bool],
                ready: Callable[[], tuple[bool, str]], registry: CollectorRegistry,
                routes: Sequence[Route] = ()) -> AsyncIterator[HealthServer]:
    """`async with serve(...) as server:` — started on entry (``server.port`` is bound), stopped on exit."""
    server = HealthServer(host, port, healthy=healthy, ready=ready, registry=registry, routes=routes)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
