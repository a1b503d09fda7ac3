"""Waiting at start-up for an apiserver that cannot be reached yet.

A scheduler or node-agent pod often starts before its apiserver answers: a control-plane restart,
a node whose network is not ready. kube-scheduler does not exit then: its informers' reflectors
and its leader election retry with backoff until the apiserver answers (client-go
tools/cache/reflector.go: 800 ms doubling to a 30 s cap, jittered by up to 100 %). `tessera run`
and `tessera agent` do the same with their first request, GET /version: while it finds no
apiserver — refused, reset, timed out, or a 5xx answer (an apiserver still starting) — they log
one `apiserver.unreachable` warning per attempt and try again; any other answer ends the wait.
What no retry mends still ends the process at once: an unusable kubeconfig (raised before this
wait), a certificate the kubeconfig does not trust, and for the agent a 401/403.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import anyio
import structlog

from scheduler.kube.http import KubeHttp, Response, Unreachable, check_apiserver

log = structlog.get_logger("tessera.apiserver")

# client-go's reflector backoff (tools/cache/reflector.go defaultBackoffInit/Max, Factor 2, Jitter 1.0)
BACKOFF_INITIAL = 0.8
BACKOFF_MAX = 30.0


def backoff(attempt: int, jitter: float) -> float:
    """The pause after failed attempt number `attempt` (1, 2, ...): 0.8 s doubling up to 30 s,
    stretched by `jitter` (0 <= jitter < 1) times itself, as `wait.Backoff` with Jitter 1.0."""
    return min(BACKOFF_MAX, BACKOFF_INITIAL * (1 << min(attempt - 1, 16))) * (1.0 + jitter)


class ApiserverWait:
    """The start-up wait and what it tells the probes: `reason` is why the apiserver is not
    answered yet (None before the first failure and once it answers) — /readyz's reason."""

    def __init__(self, *, sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 jitter: Callable[[], float] = random.random) -> None:
        self.reason: str | None = None
        self.attempts = 0
        self._sleep = sleep
        self._jitter = jitter

    async def until_answered(self, http: KubeHttp, kubeconfig: str | None) -> Response:
        """GET /version until the apiserver answers with anything but a 5xx: that answer (a 401
        or 403 included, for the caller to judge). Other `ConnectError`s propagate."""
        while True:
            self.attempts += 1
            try:
                response = await check_apiserver(http, kubeconfig)
            except Unreachable as err:
                server, error = err.server, err.reason
            else:
                if response.status < 500:
                    self.reason = None
                    return response
                server = str(http.api.configuration.host)
                error = f"HTTP {response.status}: {response.message()}"
            pause = backoff(self.attempts, self._jitter())
            self.reason = f"cannot reach the apiserver at {server}: {error}"
            log.warning("apiserver.unreachable", server=server, error=error, attempt=self.attempts,
                        retry_in=round(pause, 2), message="retrying until the apiserver answers")
            await self._sleep(pause)
