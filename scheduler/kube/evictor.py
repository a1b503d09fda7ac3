"""Preemption's evictions, as kube-scheduler's PreemptPod does them: first the victim's
`DisruptionTarget` condition (reason `PreemptionByScheduler`, so the pod's owners and the
preemptor's next cycle know why it goes), then DELETE with the victim's uid as precondition (a pod
recreated under the same name is not evicted by mistake). A victim already gone (404), or
recreated (409 on the uid), counts as done. Other failures are retried after `retry_seconds`.

Writes go out in the background (at most `concurrency` at a time), so a cycle never waits on the
apiserver; `on_evicted` is called for each victim that is gone or going (the loop then records the
upstream `Preempted` Event on the victim).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
import anyio
import structlog

from scheduler.kube.concurrency import Wakeup
from scheduler.kube.http import STRATEGIC_PATCH, KubeHttp
from scheduler.kube.recorder import micro_time

log = structlog.get_logger("tessera.evictor")

REASON = "PreemptionByScheduler"


@dataclass(frozen=True, slots=True)
class Eviction:
    namespace: str
    name: str
    uid: str
    preemptor_uid: str
    preemptor_scheduler: str  # the preemptor's schedulerName, the condition message's prefix
    node: str  # where the room is made

    @property
    def message(self) -> str:
        return f"{self.preemptor_scheduler}: preempting to accommodate a higher priority pod"


class Evictor:
    def __init__(self, http: KubeHttp, on_evicted: Callable[[Eviction], None], *, concurrency: int = 8,
                 retry_seconds: float = 1.0) -> None:
        self.http = http
        self.on_evicted = on_evicted
        self._pending: dict[str, Eviction] = {}
        self._wake = Wakeup()
        self._concurrency = concurrency
        self._retry_seconds = retry_seconds
        self._retry: dict[str, Eviction] = {}
        self._retry_at: float | None = None
        self.evicted = 0

    def submit(self, eviction: Eviction) -> None:
        self._pending[eviction.uid] = eviction
        self._wake.set()

    async def run(self) -> None:
        """Evict what is submitted until cancelled."""
        slots = anyio.Semaphore(self._concurrency, fast_acquire=True)

        async def evict(eviction: Eviction) -> None:
            async with slots:
                await self._evict(eviction)

        while True:
            wait = math.inf if self._retry_at is None else self._retry_at - anyio.current_time()
            await self._wake.wait(wait)
            if self._retry_at is not None and anyio.current_time() >= self._retry_at:
                self._pending = {**self._retry, **self._pending}
                self._retry, self._retry_at = {}, None
            batch, self._pending = self._pending, {}
            async with anyio.create_task_group() as group:
                for eviction in batch.values():
                    group.start_soon(evict, eviction)

    async def _evict(self, eviction: Eviction) -> None:
        path = f"/api/v1/namespaces/{eviction.namespace}/pods/{eviction.name}"
        condition = {"type": "DisruptionTarget", "status": "True", "reason": REASON, "message": eviction.message,
                     "lastTransitionTime": micro_time().split(".")[0] + "Z"}
        try:
            patched = await self.http.request("PATCH", f"{path}/status", body={"status": {"conditions": [condition]}},
                                              content_type=STRATEGIC_PATCH)
            if patched.status == 404:
                self._done(eviction)
                return
            if not patched.ok:
                raise _Refused(patched.status, patched.message())
            deleted = await self.http.request("DELETE", path, body={"apiVersion": "v1", "kind": "DeleteOptions",
                                                                   "preconditions": {"uid": eviction.uid}})
            if deleted.ok or deleted.status in (404, 409):
                self._done(eviction)
                return
            raise _Refused(deleted.status, deleted.message())
        except (aiohttp.ClientError, TimeoutError, OSError, _Refused) as err:
            log.warning("evictor.failed", pod=f"{eviction.namespace}/{eviction.name}", error=str(err),
                        retry_in=self._retry_seconds)
            self._retry[eviction.uid] = eviction
            if self._retry_at is None:
                self._retry_at = anyio.current_time() + self._retry_seconds

    def _done(self, eviction: Eviction) -> None:
        self.evicted += 1
        log.info("evictor.evicted", pod=f"{eviction.namespace}/{eviction.name}", node=eviction.node,
                 preemptor=eviction.preemptor_uid)
        self.on_evicted(eviction)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
