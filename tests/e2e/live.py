"""Helpers for end-to-end tests that run Tessera against the real control plane."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import yaml

from scheduler.kube.http import KubeHttp, Response, connect
from tessera_testing.faultrun import SchedulerProcess

REPO = Path(__file__).resolve().parents[2]
ERS = "/apis/tessera.dev/v1alpha1/extendedresources"


def fast_lease_config(tmp_path: Path, lease: str) -> Path:
    """config/binpack.yaml with leader election on a Lease of its own (`default/<lease>`) and short
    timings (4 s lease, 3 s renew deadline, 1 s retry), written under `tmp_path`."""
    raw = yaml.safe_load((REPO / "config/binpack.yaml").read_text())
    raw["leaderElection"] = {"leaderElect": True, "leaseDuration": "4s", "renewDeadline": "3s",
                             "retryPeriod": "1s", "resourceNamespace": "default", "resourceName": lease}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def creatable(obj: dict[str, Any]) -> dict[str, Any]:
    """A builder object as a user would POST it: no uid, timestamps or status."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = dict(out["metadata"])
    for key in ("uid", "creationTimestamp", "resourceVersion"):
        meta.pop(key, None)
    out["metadata"] = meta
    return out


class Kube:
    """A small async client for tests (JSON in, JSON out; raises on unexpected status)."""

    def __init__(self, http: KubeHttp) -> None:
        self.http = http

    @classmethod
    async def connect(cls, kubeconfig: Path) -> Kube:
        # its own user agent (= field manager): tests check that what Tessera writes says "tessera"
        return cls(KubeHttp(await connect(str(kubeconfig), user_agent="tessera-e2e")))

    async def close(self) -> None:
        await self.http.api.close()

    async def call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201),
                   content_type: str = "application/json") -> Response:
        response = await self.http.request(method, path, body=body, content_type=content_type, limited=False)
        if response.status not in ok:
            raise AssertionError(f"{method} {path}: HTTP {response.status}: {response.message()}")
        return response

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
        pod = creatable(pod)
        pod["metadata"]["namespace"] = namespace
        return (await self.call("POST", f"/api/v1/namespaces/{namespace}/pods", pod)).json()  # type: ignore[no-any-return]

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        return (await self.call("POST", path, creatable(obj))).json()  # type: ignore[no-any-return]

    async def pods(self, namespace: str) -> dict[str, dict[str, Any]]:
        items = (await self.call("GET", f"/api/v1/namespaces/{namespace}/pods")).json()["items"]
        return {p["metadata"]["name"]: p for p in items}

    async def events(self, namespace: str) -> list[dict[str, Any]]:
        return (await self.call("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")).json()["items"]  # type: ignore[no-any-return]


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 30.0, interval: float = 0.2) -> Any:
    """Poll until `check` returns something truthy (and return it); fail with the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}")


async def bound_nodes(kube: Kube, namespace: str) -> dict[str, str]:
    return {name: p["spec"].get("nodeName", "") for name, p in (await kube.pods(namespace)).items()}


class TesseraProcess(SchedulerProcess):
    """`python -m scheduler run` as a child process (for kill -9, restart and HA tests): the fault
    harness's process wrapper, without a fault proxy."""

    def __init__(self, kubeconfig: Path, config: Path, log_dir: Path, name: str = "tessera") -> None:
        super().__init__(kubeconfig, config, log_dir, name)

    def log(self) -> str:
        return self.log_tail(4000)


class BackgroundLoop:
    """A test helper's `_run()` loop as a task for the duration of an `async with` block."""

    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> BackgroundLoop:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        raise NotImplementedError  # subclasses define the loop


class FakeAgent(BackgroundLoop):
    """Plays the node agent: heartbeats every ExtendedResource and, while `allocate` is on, marks
    bound pods' devices `Allocated`.

    Without the heartbeat Tessera holds no allocation gate on a node (no agent would open it); with
    it but without `Allocated` (no kubelet calls Allocate in these tests) the gate rightly keeps a
    second pod with the same resource name on a node from being bound.
    """

    HEARTBEAT_SECONDS = 2.0

    def __init__(self, kube: Kube, namespace: str, allocate: bool = True) -> None:
        self.kube = kube
        self.namespace = namespace
        self.allocate = allocate
        self.allocated: list[str] = []

    async def __aenter__(self) -> FakeAgent:
        await self.heartbeat()  # devices count as agent-served before the first pod is placed
        await super().__aenter__()
        return self

    async def heartbeat(self) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for device in (await self.kube.call("GET", ERS)).json()["items"]:
            await self.kube.call("PATCH", f"{ERS}/{device['metadata']['name']}/status",
                                 {"status": {"lastHeartbeatTime": now}}, ok=(200, 404),
                                 content_type="application/merge-patch+json")

    async def _run(self) -> None:
        next_heartbeat = time.monotonic() + self.HEARTBEAT_SECONDS
        while True:
            try:
                if time.monotonic() >= next_heartbeat:
                    await self.heartbeat()
                    next_heartbeat = time.monotonic() + self.HEARTBEAT_SECONDS
                pods = await self.kube.pods(self.namespace) if self.allocate else {}
            except Exception:  # the apiserver may be restarting in fault tests
                await asyncio.sleep(0.5)
                continue
            for name, pod in pods.items():
                annotations = pod["metadata"].get("annotations") or {}
                if pod["spec"].get("nodeName") and annotations.get("tessera.dev/phase") == "Allocating":
                    patch = {"metadata": {"annotations": {"tessera.dev/phase": "Allocated"}}}
                    response = await self.kube.http.request(
                        "PATCH", f"/api/v1/namespaces/{self.namespace}/pods/{name}", body=patch,
                        content_type="application/merge-patch+json", limited=False)
                    if response.ok:
                        self.allocated.append(name)
                    else:
                        print(f"fake agent: PATCH {name}: HTTP {response.status}: {response.message()}")
            await asyncio.sleep(0.2)


class _HeldBack:
    """A watch response whose body reaches the reader only while `flowing` is set."""

    def __init__(self, response: Any, flowing: asyncio.Event) -> None:
        self._response, self._flowing = response, flowing
        self.status = response.status
        self.content = self

    async def read(self) -> bytes:
        return cast(bytes, await self._response.read())

    async def readany(self) -> bytes:
        chunk = cast(bytes, await self._response.content.readany())
        await self._flowing.wait()
        return chunk


class LaggingPodWatch:
    """A KubeHttp whose Pod watch streams can be held back (`hold()` / `release()`)."""

    def __init__(self, http: KubeHttp) -> None:
        self._http = http
        self.flowing = asyncio.Event()
        self.flowing.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._http, name)

    @asynccontextmanager
    async def stream(self, path: str, query: Any, read_timeout: float) -> AsyncIterator[Any]:
        async with self._http.stream(path, query, read_timeout) as response:
            yield _HeldBack(response, self.flowing) if path == "/api/v1/pods" else response
