"""Binding pods: POST `pods/{name}/binding` with the device annotations, many at once.

Bindings run concurrently (bounded) while the next cycle runs; the pod is already *assumed* in the
core, so nothing it holds can be handed out twice meanwhile. Outcomes (DESIGN.md §3):
- 201: bound; the watch event confirms the assumption.
- 409 (already bound, being deleted) / 404 (gone): the apiserver's view wins; drop the pod.
- anything else (5xx, timeouts, resets) is ambiguous — the bind may have happened. We GET the pod
  before deciding: bound to our node → success; bound elsewhere or gone → drop; still unbound →
  forget and retry with backoff. Until that is known the assumption (and its devices) is kept,
  because releasing devices of a pod that *was* bound is how double allocation happens.
"""

from __future__ import annotations

import asyncio
import enum
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import aiohttp
import structlog

from scheduler.core.annotations import DEVICES
from scheduler.kube.http import KubeHttp

log = structlog.get_logger("tessera.binder")

_TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError, OSError)


class Outcome(enum.Enum):
    BOUND = "success"
    CONFLICT = "conflict"  # bound elsewhere or being deleted: drop
    NOT_FOUND = "not_found"  # gone: drop
    RETRY = "error"  # not bound: forget and back off


@dataclass(frozen=True, slots=True)
class Binding:
    uid: str
    namespace: str
    name: str
    node: str
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BindResult:
    binding: Binding
    outcome: Outcome
    message: str
    seconds: float


class Binder:
    def __init__(self, http: KubeHttp, on_result: Callable[[BindResult], None], *, max_in_flight: int = 64,
                 timeout: float = 30.0, allowed: Callable[[], bool] = lambda: True) -> None:
        self.http = http
        self.on_result = on_result
        self.allowed = allowed  # checked right before each POST: a deposed leader must not bind
        self.timeout = timeout
        self._slots = asyncio.Semaphore(max_in_flight)
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def submit(self, binding: Binding) -> None:
        task = asyncio.get_running_loop().create_task(self._bind(binding), name=f"bind {binding.namespace}/{binding.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout: float) -> bool:
        """Wait for in-flight bindings (graceful shutdown); True if all finished."""
        if not self._tasks:
            return True
        done, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        return not pending

    async def _bind(self, binding: Binding) -> None:
        start = time.monotonic()
        async with self._slots:
            outcome: Outcome | None
            if not self.allowed():
                outcome, message = Outcome.RETRY, "not the leader any more; the Binding was not sent"
            else:
                outcome, message = await self._post(binding)
            if outcome is None:
                outcome, message = await self._resolve(binding, message)
        result = BindResult(binding, outcome, message, time.monotonic() - start)
        try:
            self.on_result(result)
        except Exception:  # the callback is ours; a bug there must not kill the binder
            log.exception("binder.callback_failed", pod=f"{binding.namespace}/{binding.name}")

    async def _post(self, binding: Binding) -> tuple[Outcome | None, str]:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": binding.name, "namespace": binding.namespace, "uid": binding.uid,
                         "annotations": dict(binding.annotations)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": binding.node},
        }
        path = f"/api/v1/namespaces/{binding.namespace}/pods/{binding.name}/binding"
        try:
            response = await self.http.request("POST", path, body=body, timeout=self.timeout)
        except _TRANSPORT_ERRORS as err:
            return None, f"{type(err).__name__}: {err}"
        if response.ok:
            return Outcome.BOUND, ""
        if response.status == 409:
            return Outcome.CONFLICT, response.message()
        if response.status == 404:
            return Outcome.NOT_FOUND, response.message()
        return None, f"HTTP {response.status}: {response.message()}"

    async def _resolve(self, binding: Binding, error: str) -> tuple[Outcome, str]:
        """After an ambiguous failure: read the pod until we know whether the bind happened."""
        path = f"/api/v1/namespaces/{binding.namespace}/pods/{binding.name}"
        delay = 0.2
        while True:
            try:
                response = await self.http.request("GET", path, timeout=self.timeout, limited=False)
            except _TRANSPORT_ERRORS:
                response = None
            if response is not None and response.status == 404:
                return Outcome.NOT_FOUND, error
            if response is not None and response.ok:
                pod = response.json() or {}
                meta = pod.get("metadata") or {}
                node = (pod.get("spec") or {}).get("nodeName") or ""
                if meta.get("uid") != binding.uid:
                    return Outcome.NOT_FOUND, error
                ours = binding.annotations.get(DEVICES)
                if node == binding.node and (ours is None or (meta.get("annotations") or {}).get(DEVICES) == ours):
                    log.info("binder.bound_despite_error", pod=f"{binding.namespace}/{binding.name}", error=error)
                    return Outcome.BOUND, ""
                if node:
                    return Outcome.CONFLICT, f"pod is bound to {node}"
                return Outcome.RETRY, error
            await asyncio.sleep(delay * (1 + random.random() * 0.2))
            delay = min(delay * 2, 5.0)
