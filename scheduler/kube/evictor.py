"""Preemption's evictions, as kube-scheduler's PreemptPod does them: first the victim's
`DisruptionTarget` condition (reason `PreemptionByScheduler`, so the pod's owners and the
preemptor's next cycle know why it goes), then DELETE with the victim's uid as precondition (a pod
recreated under the same name is not evicted by mistake). A victim already gone (404), or
recreated (409 on the uid), counts as done. Other failures are retried after `retry_seconds`.

One preemption's victims are marked *all* before any is deleted: the apiserver deletes one pod per
request, and a leader that dies between two DELETEs of a gang would otherwise leave no trace of
the rest of its decision. With every mark written first, the next leader finds the gang's marked
members still running and finishes the eviction (`plugins/preemption/unfinished.py`). A victim
that cannot be marked for good (400, 401, 403, 405, 422) fails the whole preemption: nothing of it
is deleted, every victim is reported to `on_failed`, and the marks already written are withdrawn
(set False, best effort: the disruption controller would after 2 min).

Writes go out in the background (at most `concurrency` at a time), so a cycle never waits on the
apiserver; `on_evicted(eviction, deleted)` is called for each victim that is gone or going (`deleted`: by
us, and the loop records the upstream `Preempted` Event on the victim; False when it was already
gone or its name now belongs to a new pod). A DELETE refused for good is reported to `on_failed`.
Only the leader evicts (`allowed`, read right before each request, after its write token): a
replica that lost its lease drops what it had queued; the new leader decides again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import aiohttp
import anyio
import structlog

from scheduler.kube.concurrency import Wakeup
from scheduler.kube.http import STRATEGIC_PATCH, KubeHttp, Response
from scheduler.kube.recorder import micro_time

log = structlog.get_logger("tessera.evictor")

REASON = "PreemptionByScheduler"


@dataclass(frozen=True, slots=True)
class Eviction:
    namespace: str
    name: str
    uid: str
    preemptor_uid: str  # "" when finishing a gang's eviction begun by another replica
    preemptor_scheduler: str  # the preemptor's schedulerName, the condition message's prefix
    node: str  # where the victim runs (the room it makes)
    finishing_gang: str = ""  # the gang whose half-done eviction this finishes

    @property
    def message(self) -> str:
        return f"{self.preemptor_scheduler}: preempting to accommodate a higher priority pod"


class _Step(Enum):
    MARK = "mark"
    DELETE = "delete"
    WITHDRAW = "withdraw"  # a failed preemption's marks set False (best effort, once)


@dataclass(slots=True, eq=False)
class _Preemption:
    """One preemption's victims: none is deleted before all are marked (or gone)."""

    evictions: list[Eviction]
    unmarked: set[str] = field(default_factory=set)
    failed: bool = False
    first_marked: float | None = None  # when the first of the current round of marks was written
    written: set[str] = field(default_factory=set)  # victims whose mark reached the apiserver


class Evictor:
    def __init__(self, http: KubeHttp, on_evicted: Callable[[Eviction, bool], None],
                 on_failed: Callable[[Eviction, str], None], *, allowed: Callable[[], bool] = lambda: True,
                 concurrency: int = 8, retry_seconds: float = 1.0, remark_after: float = 60.0) -> None:
        self.http = http
        self.on_evicted = on_evicted
        self.on_failed = on_failed
        self.allowed = allowed
        self._pending: dict[str, tuple[_Step, Eviction]] = {}
        self._preemptions: dict[str, _Preemption] = {}  # victim uid -> its preemption, until done
        self._wake = Wakeup()
        self._concurrency = concurrency
        self._retry_seconds = retry_seconds
        self._remark_after = remark_after
        self._retry: dict[str, tuple[_Step, Eviction]] = {}
        self._retry_at: float | None = None
        self.evicted = 0

    def submit(self, evictions: Sequence[Eviction]) -> None:
        """One preemption's victims (a victim another preemption is already evicting stays there).
        A victim that finishes a gang's eviction already carries its mark: it is only deleted
        (marking it again would restart the mark's 2-minute clock at every try)."""
        fresh = [eviction for eviction in evictions if eviction.uid not in self._preemptions]
        if not fresh:
            return
        preemption = _Preemption(fresh, {eviction.uid for eviction in fresh if not eviction.finishing_gang})
        for eviction in fresh:
            self._preemptions[eviction.uid] = preemption
            self._pending[eviction.uid] = (_Step.DELETE if eviction.finishing_gang else _Step.MARK, eviction)
        self._wake.set()

    def abandon(self) -> None:
        """The lease is lost: nothing queued or being retried is ours to write any more, and a later
        term may be handed the same victims again."""
        self._pending, self._retry, self._retry_at = {}, {}, None
        for preemption in set(self._preemptions.values()):
            preemption.failed = True  # a write still out finds it given up
        self._preemptions.clear()

    async def run(self) -> None:
        """Evict what is submitted until cancelled."""
        slots = anyio.Semaphore(self._concurrency, fast_acquire=True)

        async def write(step: _Step, eviction: Eviction) -> None:
            async with slots:
                # the write token, then leadership and the eviction still ours, right before the request:
                # a write that waited for a slot or a token past a lost lease must not go out
                await self.http.acquire()
                if not self.allowed() or (step is not _Step.WITHDRAW and eviction.uid not in self._preemptions):
                    return
                if step is _Step.MARK:
                    await self._mark(eviction)
                elif step is _Step.DELETE:
                    await self._delete(eviction)
                else:
                    await self._withdraw(eviction)

        while True:
            wait = math.inf if self._retry_at is None else self._retry_at - anyio.current_time()
            await self._wake.wait(wait)
            if self._retry_at is not None and anyio.current_time() >= self._retry_at:
                self._pending = {**self._retry, **self._pending}
                self._retry, self._retry_at = {}, None
            batch, self._pending = self._pending, {}
            if batch and not self.allowed():
                log.info("evictor.not_leader", dropped=len(batch))
                self.abandon()
                continue
            async with anyio.create_task_group() as group:
                for step, eviction in batch.values():
                    group.start_soon(write, step, eviction)

    async def _set_condition(self, eviction: Eviction, marked: bool) -> Response:
        """The victim's DisruptionTarget condition: True with upstream's reason and message, or
        False without them (null deletes them in a strategic merge); the uid is a precondition, so
        a new pod under the same name is never marked."""
        condition = {"type": "DisruptionTarget", "status": "True" if marked else "False",
                     "reason": REASON if marked else None, "message": eviction.message if marked else None,
                     "lastTransitionTime": micro_time().split(".")[0] + "Z"}
        return await self.http.request("PATCH", f"/api/v1/namespaces/{eviction.namespace}/pods/{eviction.name}/status",
                                       body={"metadata": {"uid": eviction.uid}, "status": {"conditions": [condition]}},
                                       content_type=STRATEGIC_PATCH, limited=False)

    async def _mark(self, eviction: Eviction) -> None:
        preemption = self._preemptions.get(eviction.uid)
        try:
            patched = await self._set_condition(eviction, marked=True)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            self._later(_Step.MARK, eviction, err)
            return
        if preemption is None:
            return
        if preemption.failed:  # given up meanwhile (another victim's mark was refused, or the lease lost)
            if patched.ok:
                self._pending[eviction.uid] = (_Step.WITHDRAW, eviction)
                self._wake.set()
            return
        if patched.ok:
            preemption.written.add(eviction.uid)
        if patched.status in (404, 409):  # gone, or the name is a new pod's now: nothing to delete
            preemption.evictions.remove(eviction)
            self._done(eviction, deleted=False)
        elif not patched.ok:
            if patched.status not in _FINAL:
                self._later(_Step.MARK, eviction, _Refused(patched.status, patched.message()))
                return
            self._fail(preemption, str(_Refused(patched.status, patched.message())))
            return
        now = anyio.current_time()
        preemption.unmarked.discard(eviction.uid)
        if preemption.first_marked is None:
            preemption.first_marked = now
        if preemption.unmarked:
            return
        remark = now - preemption.first_marked > self._remark_after
        if remark:  # marks this old may be stale before the DELETEs land: write them all again
            log.info("evictor.remarking", victims=len(preemption.evictions))
            preemption.unmarked = {victim.uid for victim in preemption.evictions}
            preemption.first_marked = None
        for victim in preemption.evictions:
            self._pending[victim.uid] = (_Step.MARK if remark else _Step.DELETE, victim)
        self._wake.set()

    async def _delete(self, eviction: Eviction) -> None:
        path = f"/api/v1/namespaces/{eviction.namespace}/pods/{eviction.name}"
        try:
            deleted = await self.http.request("DELETE", path, body={"apiVersion": "v1", "kind": "DeleteOptions",
                                                                   "preconditions": {"uid": eviction.uid}},
                                              limited=False)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            self._later(_Step.DELETE, eviction, err)
            return
        if eviction.uid not in self._preemptions:
            return  # leadership was lost meanwhile
        if deleted.ok or deleted.status in (404, 409):
            self._done(eviction, deleted=deleted.ok)
        elif deleted.status in _FINAL:
            refused = str(_Refused(deleted.status, deleted.message()))
            log.warning("evictor.refused", pod=f"{eviction.namespace}/{eviction.name}", error=refused)
            del self._preemptions[eviction.uid]
            self.on_failed(eviction, refused)
        else:
            self._later(_Step.DELETE, eviction, _Refused(deleted.status, deleted.message()))

    def _fail(self, preemption: _Preemption, reason: str) -> None:
        """A victim cannot be marked: none of this preemption's victims is deleted, and the marks
        already written are withdrawn (a later leader must not finish a gang from them)."""
        preemption.failed = True
        for eviction in preemption.evictions:
            log.warning("evictor.refused", pod=f"{eviction.namespace}/{eviction.name}", error=reason)
            self._preemptions.pop(eviction.uid, None)
            self._pending.pop(eviction.uid, None)
            self._retry.pop(eviction.uid, None)
            if eviction.uid in preemption.written:
                self._pending[eviction.uid] = (_Step.WITHDRAW, eviction)
            self.on_failed(eviction, reason)
        self._wake.set()

    async def _withdraw(self, eviction: Eviction) -> None:
        """The condition set False, as upstream's disruption controller does to a stale one. Not
        retried: a withdrawal that does not get through leaves a mark that controller turns False
        after 2 min, and that the finishing rule ignores from then on."""
        try:
            answer = await self._set_condition(eviction, marked=False)
            outcome = "ok" if answer.ok else f"HTTP {answer.status}"
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            outcome = str(err)
        log.info("evictor.mark_withdrawn", pod=f"{eviction.namespace}/{eviction.name}", outcome=outcome)

    def _later(self, step: _Step, eviction: Eviction, err: BaseException) -> None:
        if eviction.uid not in self._preemptions:
            return
        log.warning("evictor.failed", pod=f"{eviction.namespace}/{eviction.name}", step=step.value, error=str(err),
                    retry_in=self._retry_seconds)
        self._retry[eviction.uid] = (step, eviction)
        if self._retry_at is None:
            self._retry_at = anyio.current_time() + self._retry_seconds

    def _done(self, eviction: Eviction, *, deleted: bool) -> None:
        self._preemptions.pop(eviction.uid, None)
        self.evicted += deleted
        log.info("evictor.evicted" if deleted else "evictor.already_gone", pod=f"{eviction.namespace}/{eviction.name}",
                 node=eviction.node, preemptor=eviction.preemptor_uid, finishing_gang=eviction.finishing_gang)
        self.on_evicted(eviction, deleted)


_FINAL = frozenset({400, 401, 403, 405, 422})  # retrying cannot help


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
