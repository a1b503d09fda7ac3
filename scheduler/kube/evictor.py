"""Preemption's evictions, as kube-scheduler's PreemptPod does them: first the victim's
`DisruptionTarget` condition (reason `PreemptionByScheduler`, so the pod's owners and the
preemptor's next cycle know why it goes), then DELETE with the victim's uid as precondition (a pod
recreated under the same name is not evicted by mistake). A victim already gone (404), or
recreated (409 on the uid), counts as done. Other failures are retried after `retry_seconds`.

Writes go out in the background (at most `concurrency` at a time), so a cycle never waits on the
apiserver; `on_evicted(eviction, deleted)` is called for each victim that is gone or going (`deleted`: by
us, and the loop records the upstream `Preempted` Event on the victim; False when it was already
gone or its name now belongs to a new pod). An eviction the apiserver refuses for good (400, 401,
403, 405, 422) is given up and reported to `on_failed`. Only the leader evicts (`allowed`): a
replica that lost its lease drops what it had queued; the new leader decides again.
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
    def __init__(self, http: KubeHttp, on_evicted: Callable[[Eviction, bool], None],
                 on_failed: Callable[[Eviction, str], None], *, allowed: Callable[[], bool] = lambda: True,
                 concurrency: int = 8, retry_seconds: float = 1.0) -> None:
        self.http = http
        self.on_evicted = on_evicted
        self.on_failed = on_failed
        self.allowed = allowed
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
            if batch and not self.allowed():
                log.info("evictor.not_leader", dropped=len(batch))
                continue
            async with anyio.create_task_group() as group:
                for eviction in batch.values():
                    group.start_soon(evict, eviction)

    async def _evict(self, eviction: Eviction) -> None:
        path = f"/api/v1/namespaces/{eviction.namespace}/pods/{eviction.name}"
        condition = {"type": "DisruptionTarget", "status": "True", "reason": REASON, "message": eviction.message,
                     "lastTransitionTime": micro_time().split(".")[0] + "Z"}
        patch = {"metadata": {"uid": eviction.uid}, "status": {"conditions": [condition]}}  # uid: a precondition
        try:
            patched = await self.http.request("PATCH", f"{path}/status", body=patch, content_type=STRATEGIC_PATCH)
            if patched.status in (404, 409):  # gone, or the name is a new pod's now
                self._done(eviction, deleted=False)
                return
            if not patched.ok:
                raise _Refused(patched.status, patched.message())
            deleted = await self.http.request("DELETE", path, body={"apiVersion": "v1", "kind": "DeleteOptions",
                                                                   "preconditions": {"uid": eviction.uid}})
            if deleted.ok or deleted.status in (404, 409):
                self._done(eviction, deleted=deleted.ok)
                return
            raise _Refused(deleted.status, deleted.message())
        except _Refused as err:
            if err.status in _FINAL:
                log.warning("evictor.refused", pod=f"{eviction.namespace}/{eviction.name}", error=str(err))
                self.on_failed(eviction, str(err))
                return
            self._later(eviction, err)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            self._later(eviction, err)

    def _later(self, eviction: Eviction, err: BaseException) -> None:
        log.warning("evictor.failed", pod=f"{eviction.namespace}/{eviction.name}", error=str(err),
                    retry_in=self._retry_seconds)
        self._retry[eviction.uid] = eviction
        if self._retry_at is None:
            self._retry_at = anyio.current_time() + self._retry_seconds

    def _done(self, eviction: Eviction, *, deleted: bool) -> None:
        self.evicted += deleted
        log.info("evictor.evicted" if deleted else "evictor.already_gone", pod=f"{eviction.namespace}/{eviction.name}",
                 node=eviction.node, preemptor=eviction.preemptor_uid)
        self.on_evicted(eviction, deleted)


_FINAL = frozenset({400, 401, 403, 405, 422})  # retrying cannot help


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
