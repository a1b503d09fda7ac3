"""The benchmark's own view of the apiserver for `bench.live`: create and delete pods in bulk, and
watch them get bound.

Why a separate, minimal aiohttp client and not the scheduler's `KubeHttp`: the driver must not
share code paths (or a rate limiter) with one of the contestants, and it should cost as little CPU
as possible on a 2-core machine where the apiserver, etcd and the scheduler under test compete
for the same cores. The clock is the driver's `time.monotonic()` for every timestamp (pod created,
scheduler started, pod bound): `creationTimestamp` and the PodScheduled condition's
`lastTransitionTime` have one-second resolution, too coarse for rounds that last seconds.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

__all__ = ["Api", "BindWatch", "NodeUse", "PodWatch", "create_pods", "delete_pods", "node_use", "pod_object", "unbound_reasons"]

GPU = "nvidia.com/gpu"
POD_LABEL = "tessera.dev/bench"


def pod_object(name: str, namespace: str, scheduler_name: str) -> dict[str, Any]:
    """One benchmark pod: 1 plain `nvidia.com/gpu` (count semantics, so kube-scheduler can place it
    too) and cpu 100m. No kubelet runs it; terminationGracePeriodSeconds 0 so it can be deleted."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {POD_LABEL: "live"}},
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", GPU: "1"}, "limits": {GPU: "1"}},
            }],
        },
    }


class ApiError(RuntimeError):
    pass


class Api:
    """Bearer-token JSON requests to one apiserver, many connections, no rate limit."""

    def __init__(self, server: str, ca_file: str, token: str, connections: int = 128) -> None:
        self.server = server.rstrip("/")
        context = ssl.create_default_context(cafile=ca_file)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=connections),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            trust_env=False,  # loopback only: never through a proxy
        )

    async def close(self) -> None:
        await self._session.close()

    async def request(self, method: str, path: str, body: Any = None, *, ok: Iterable[int] = (200, 201, 202),
                      content_type: str = "application/json", timeout: float = 60.0) -> Any:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if data is not None else None
        async with self._session.request(method, self.server + path, data=data, headers=headers,
                                         timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            raw = await response.read()
            if response.status not in tuple(ok):
                raise ApiError(f"{method} {path}: HTTP {response.status}: {raw[:300].decode(errors='replace')}")
            return orjson.loads(raw) if raw else None

    async def list_all(self, path: str, page: int = 1000) -> tuple[list[dict[str, Any]], str]:
        """Every item of a (paginated) LIST, and the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        cont = ""
        while True:
            sep = "&" if "?" in path else "?"
            query = f"{sep}limit={page}" + (f"&continue={cont}" if cont else "")
            doc = await self.request("GET", path + query)
            items.extend(doc.get("items") or [])
            meta = doc.get("metadata") or {}
            cont = meta.get("continue") or ""
            if not cont:
                return items, str(meta.get("resourceVersion", ""))

    def stream(self, path: str) -> Any:
        """A long-running GET (watch); the caller iterates `response.content` line by line."""
        return self._session.get(self.server + path, timeout=aiohttp.ClientTimeout(total=None, sock_read=120))


async def _bounded(concurrency: int, jobs: Sequence[Any], work: Any) -> None:
    """Run `await work(job)` for every job with at most `concurrency` in flight; first error wins."""
    iterator = iter(jobs)

    async def worker() -> None:
        for job in iterator:
            await work(job)

    async with asyncio.TaskGroup() as group:
        for _ in range(max(1, min(concurrency, len(jobs)))):
            group.create_task(worker())


async def create_pods(api: Api, namespace: str, names: Sequence[str], scheduler_name: str,
                      concurrency: int = 64) -> dict[str, float]:
    """POST the pods concurrently; return name -> monotonic time the apiserver answered 201."""
    created: dict[str, float] = {}
    path = f"/api/v1/namespaces/{namespace}/pods"

    async def one(name: str) -> None:
        for attempt in range(5):
            try:
                await api.request("POST", path, pod_object(name, namespace, scheduler_name), ok=(201,))
                created[name] = time.monotonic()
                return
            except (ApiError, aiohttp.ClientError, asyncio.TimeoutError):  # 429/5xx under load: retry
                if attempt == 4:
                    raise
                await asyncio.sleep(0.2 * (attempt + 1))

    await _bounded(concurrency, names, one)
    return created


async def delete_pods(api: Api, namespace: str, concurrency: int = 64, timeout: float = 300.0) -> int:
    """Delete every pod in the namespace at once (grace 0: no kubelet will confirm) and the Events
    the schedulers wrote, then wait until the namespace has no pods. Returns how many were deleted."""
    pods, _ = await api.list_all(f"/api/v1/namespaces/{namespace}/pods")
    names = [p["metadata"]["name"] for p in pods]

    async def one(name: str) -> None:
        await api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0",
                          ok=(200, 202, 404))

    await _bounded(concurrency, names, one)
    # Events pile up (one or two per pod per round); keep every round's apiserver state the same.
    await api.request("DELETE", f"/api/v1/namespaces/{namespace}/events", ok=(200, 202, 404), timeout=300)
    deadline = time.monotonic() + timeout
    while True:
        doc = await api.request("GET", f"/api/v1/namespaces/{namespace}/pods?limit=1")
        if not doc.get("items"):
            return len(names)
        if time.monotonic() > deadline:
            raise ApiError(f"pods in {namespace} still present {timeout:.0f} s after deletion")
        await asyncio.sleep(0.2)


class PodWatch:
    """Watches a namespace's pods (optionally a label selector) and hands every state it sees, with
    the driver's clock, to `observe`. LIST first, then WATCH from its resourceVersion; a 410 relists
    (states found by a relist are late by up to the gap: `relists` counts them), other answers and
    dropped streams are retried after a pause. If the loop dies anyway, `failed` says why, so a
    benchmark never reports figures from a watch that stopped halfway."""

    def __init__(self, api: Api, namespace: str, observe: Callable[[dict[str, Any], float], None],
                 selector: str = "") -> None:
        self.api = api
        self.namespace = namespace
        self.observe = observe
        self.selector = selector
        self.relists = 0
        self.failed: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._rv = ""

    def _path(self) -> str:
        query = f"?labelSelector={quote(self.selector)}" if self.selector else ""
        return f"/api/v1/namespaces/{self.namespace}/pods{query}"

    async def start(self) -> None:
        await self._list()
        self._task = asyncio.create_task(self._run(), name="pod-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _list(self) -> None:
        items, self._rv = await self.api.list_all(self._path())
        now = time.monotonic()
        for pod in items:
            self.observe(pod, now)

    async def _run(self) -> None:
        try:
            await self._watch()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - recorded for the round, which is then not reported as valid
            self.failed = f"{type(err).__name__}: {err}"

    async def _watch(self) -> None:
        sep = "&" if self.selector else "?"
        path = f"{self._path()}{sep}watch=1&allowWatchBookmarks=true&timeoutSeconds=900"
        while True:
            try:
                async with self.api.stream(f"{path}&resourceVersion={self._rv}") as response:
                    if response.status == 410:
                        raise _Gone
                    if response.status != 200:
                        await asyncio.sleep(0.5)
                        continue
                    async for line in response.content:
                        if not line.strip():
                            continue
                        now = time.monotonic()
                        event = orjson.loads(line)
                        obj = event.get("object") or {}
                        kind = event.get("type")
                        if kind == "ERROR":
                            if obj.get("code") == 410:
                                raise _Gone
                            break
                        rv = (obj.get("metadata") or {}).get("resourceVersion")
                        if rv:
                            self._rv = str(rv)
                        if kind in ("ADDED", "MODIFIED"):
                            self.observe(obj, now)
            except _Gone:
                self.relists += 1
                await self._list()
            except (aiohttp.ClientError, asyncio.TimeoutError, orjson.JSONDecodeError, ValueError):
                await asyncio.sleep(0.2)  # a dropped or cut stream: resume from the last resourceVersion


class BindWatch(PodWatch):
    """For each expected pod, when its `spec.nodeName` was first seen (driver clock) and on which
    node. `done` is set when all expected pods are bound."""

    def __init__(self, api: Api, namespace: str, expected: frozenset[str]) -> None:
        super().__init__(api, namespace, self._on_pod)
        self.expected = expected
        self.bound: dict[str, tuple[float, str]] = {}
        self.done = asyncio.Event()

    def _on_pod(self, pod: dict[str, Any], now: float) -> None:
        name = (pod.get("metadata") or {}).get("name")
        if name not in self.expected:
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node and name not in self.bound:
            self.bound[name] = (now, node)
            if len(self.bound) == len(self.expected):
                self.done.set()


class _Gone(Exception):
    pass


@dataclass(frozen=True)
class NodeUse:
    bound: int
    nodes_used: int
    overcommitted: list[str]


async def node_use(api: Api, namespace: str, gpus_per_node: int) -> NodeUse:
    """From a fresh LIST (the apiserver's word, not the watch's): how many pods are bound, on how
    many nodes, and which nodes got more GPU pods than they have GPUs (must be none)."""
    pods, _ = await api.list_all(f"/api/v1/namespaces/{namespace}/pods")
    per_node: dict[str, int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            per_node[node] = per_node.get(node, 0) + 1
    over = sorted(n for n, count in per_node.items() if count > gpus_per_node)
    return NodeUse(sum(per_node.values()), len(per_node), over)


async def unbound_reasons(api: Api, namespace: str) -> dict[str, int]:
    """Why the pods still unbound are: their PodScheduled condition's message, counted (a round
    that timed out says what the scheduler told the pods)."""
    pods, _ = await api.list_all(f"/api/v1/namespaces/{namespace}/pods")
    reasons: dict[str, int] = {}
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName"):
            continue
        conditions = (pod.get("status") or {}).get("conditions") or []
        message = next((str(c.get("message") or c.get("reason") or "") for c in conditions
                        if c.get("type") == "PodScheduled"), "") or "no PodScheduled condition"
        reasons[message] = reasons.get(message, 0) + 1
    return reasons
