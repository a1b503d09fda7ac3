"""Raw JSON access to the apiserver, on kubernetes-asyncio's authenticated connection.

Why not the generated typed client: the scheduler reads every Pod and Node in the cluster and the
core wants the apiserver's JSON as-is (that is also what `simulate` replays). Deserialising into
generated models and back would cost more than the scheduling itself, and the Binding call's typed
response cannot even be decoded (kubernetes-client/python#825). kubernetes-asyncio still does what
it is good at: kubeconfig / in-cluster loading, TLS, tokens and their refresh.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client, config

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class RateLimiter:
    """client-go's token bucket (`flowcontrol.NewTokenBucketRateLimiter(qps, burst)`).

    Like golang.org/x/time/rate, a caller reserves its token first (the bucket may go negative)
    and then waits for it, so time spent elsewhere is never lost from the rate.
    """

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = clock()

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1
        if self._tokens < 0:
            await self._sleep(-self._tokens / self.qps)


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def message(self) -> str:
        """The apiserver's Status message, or the raw body."""
        try:
            doc = self.json()
        except orjson.JSONDecodeError:
            return self.body.decode(errors="replace")[:300]
        if isinstance(doc, dict) and isinstance(doc.get("message"), str):
            return str(doc["message"])
        return self.body.decode(errors="replace")[:300]


async def connect(kubeconfig: str | None) -> client.ApiClient:
    """An authenticated ApiClient from a kubeconfig file, or the in-cluster service account."""
    if kubeconfig:
        return await config.new_client_from_config(config_file=kubeconfig)
    config.load_incluster_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()


class KubeHttp:
    def __init__(self, api: client.ApiClient, limiter: RateLimiter | None = None) -> None:
        self.api = api
        self.limiter = limiter

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (),
                      body: Any = None, content_type: str = "application/json",
                      timeout: float = 30.0, limited: bool = True) -> Response:
        """One request; transport errors raise `aiohttp.ClientError` / `asyncio.TimeoutError`."""
        if limited and self.limiter is not None:
            await self.limiter.acquire()
        response = await self.api.call_api(
            path, method, query_params=list(query), header_params={"Content-Type": content_type,
                                                                   "Accept": "application/json"},
            body=body, auth_settings=["BearerToken"], _preload_content=False,
            _request_timeout=timeout)
        try:
            data = await response.read()
        finally:
            response.release()
        return Response(response.status, data)

    @asynccontextmanager
    async def stream(self, path: str, query: Sequence[tuple[str, str]], read_timeout: float) -> AsyncIterator[aiohttp.ClientResponse]:
        """A long-running GET (watch); the caller reads lines. Dead connections time out on read."""
        response = await self.api.call_api(
            path, "GET", query_params=list(query), header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"], _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout))
        try:
            yield response
        finally:
            response.release()
