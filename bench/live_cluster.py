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

__all__ = ["WORKLOADS", "Api", "BindWatch", "NodeUse", "PodWatch", "Workload", "create_pods", "delete_pods", "node_use",
           "placement", "pod_object", "unbound_reasons", "zone_of"]

GPU = "nvidia.com/gpu"
POD_LABEL = "tessera.dev/bench"
GROUP_LABEL = "tessera.dev/bench-group"  # the pods one term or constraint selects
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Workload:
    """A pod shape of kube-scheduler's own scheduler_perf suite
    (test/integration/scheduler_perf/config/performance-config.yaml), on `bench.live`'s GPU pods.

    `zones`: how many `topology.kubernetes.io/zone` values the fake nodes are labelled into (0: no
    zone label). `score`: the score plugin the shape is for, enabled (upstream's default weight 2)
    in both schedulers' profile next to bench.live's three, as upstream's default profile has it.
    `group`: pods per value of the group label their term or constraint selects (0: one group, as
    upstream's one `color` label per template); anti-affinity needs groups no larger than the node
    count, or the round cannot fit."""

    name: str
    upstream: str
    zones: int = 0
    score: str | None = None
    group: int = 0

    def group_of(self, index: int) -> str:
        return f"g{index // self.group}" if self.group else "all"

    def shape(self, group: str) -> dict[str, Any]:
        """The spec fields the workload adds to a pod of `group`."""
        selector = {"matchLabels": {GROUP_LABEL: group}}
        if self.name in ("spread", "spread-soft"):
            # upstream: maxSkew 5 over 3 zones; here maxSkew 1 over 10 zones, the tightest constraint
            return {"topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": ZONE_LABEL, "labelSelector": selector,
                "whenUnsatisfiable": "DoNotSchedule" if self.name == "spread" else "ScheduleAnyway"}]}
        if self.name == "anti-affinity":
            return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector, "topologyKey": HOSTNAME_LABEL}]}}}
        if self.name == "affinity-soft":
            return {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"labelSelector": selector, "topologyKey": HOSTNAME_LABEL}}]}}}
        return {}


WORKLOADS = {w.name: w for w in (
    Workload("gpu", "SchedulingBasic"),
    Workload("spread", "TopologySpreading", zones=10, score="PodTopologySpread"),
    Workload("spread-soft", "PreferredTopologySpreading", zones=10, score="PodTopologySpread"),
    Workload("anti-affinity", "SchedulingPodAntiAffinity", score="InterPodAffinity", group=100),
    Workload("affinity-soft", "SchedulingPreferredPodAffinity", score="InterPodAffinity"),
)}
PLAIN = WORKLOADS["gpu"]


def zone_of(index: int, zones: int) -> str:
    """The zone of the index-th fake node: round-robin, so every zone has the same node count (±1)."""
    return f"zone-{index % zones}"


def pod_object(name: str, namespace: str, scheduler_name: str, workload: Workload = PLAIN,
               group: str = "all") -> dict[str, Any]:
    """One benchmark pod: 1 plain `nvidia.com/gpu` (count semantics, so kube-scheduler can place it
    too) and cpu 100m, plus the workload's terms. No kubelet runs it; terminationGracePeriodSeconds
    0 so it can be deleted."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {POD_LABEL: "live", GROUP_LABEL: group}},
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", GPU: "1"}, "limits": {GPU: "1"}},
            }],
            **workload.shape(group),
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
                      concurrency: int = 64, workload: Workload = PLAIN) -> dict[str, float]:
    """POST the pods concurrently; return name -> monotonic time the apiserver answered 201."""
    created: dict[str, float] = {}
    path = f"/api/v1/namespaces/{namespace}/pods"
    groups = {name: workload.group_of(i) for i, name in enumerate(names)}

    async def one(name: str) -> None:
        body = pod_object(name, namespace, scheduler_name, workload, groups[name])
        for attempt in range(5):
            try:
                await api.request("POST", path, body, ok=(201,))
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
    placement: dict[str, Any]


def placement(workload: Workload, pods: Iterable[tuple[str, str]], zones: dict[str, str]) -> dict[str, Any]:
    """Whether the bound pods, (group, node) each, keep the workload's rule; `valid` is None for a
    preferred rule (nothing to break). Spread: the largest skew over the zones of any group
    (matching pods in the fullest zone minus the emptiest, every zone counted, as the constraint
    counts them). Anti-affinity: the most pods of one group on one node (must be 1). Preferred
    affinity: the share of pods with a peer of their group on their node."""
    per_node: dict[tuple[str, str], int] = {}
    for group, node in pods:
        per_node[(group, node)] = per_node.get((group, node), 0) + 1
    if workload.zones:
        per_zone: dict[str, dict[str, int]] = {}
        for (group, node), count in per_node.items():
            counts = per_zone.setdefault(group, dict.fromkeys(sorted(set(zones.values())), 0))
            counts[zones[node]] += count
        skew = max((max(c.values()) - min(c.values()) for c in per_zone.values()), default=0)
        return {"max_zone_skew": skew, "valid": skew <= 1 if workload.name == "spread" else None}
    if workload.name == "anti-affinity":
        most = max(per_node.values(), default=0)
        return {"max_group_pods_per_node": most, "valid": most <= 1}
    if workload.name == "affinity-soft":
        total = sum(per_node.values())
        paired = sum(count for count in per_node.values() if count > 1)
        return {"pods_with_peer_on_node": round(paired / total, 3) if total else None, "valid": None}
    return {"valid": None}


async def node_use(api: Api, namespace: str, gpus_per_node: int, workload: Workload = PLAIN,
                   zones: dict[str, str] | None = None) -> NodeUse:
    """From a fresh LIST (the apiserver's word, not the watch's): how many pods are bound, on how
    many nodes, which nodes got more GPU pods than they have GPUs (must be none), and whether the
    placements keep the workload's rule (`placement`; `zones`: node -> zone label)."""
    pods, _ = await api.list_all(f"/api/v1/namespaces/{namespace}/pods")
    per_node: dict[str, int] = {}
    placed: list[tuple[str, str]] = []
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            per_node[node] = per_node.get(node, 0) + 1
            placed.append((((pod.get("metadata") or {}).get("labels") or {}).get(GROUP_LABEL, ""), node))
    over = sorted(n for n, count in per_node.items() if count > gpus_per_node)
    return NodeUse(sum(per_node.values()), len(per_node), over, placement(workload, placed, zones or {}))


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
