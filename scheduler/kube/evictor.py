"""Preemption's evictions, as kube-scheduler's PreemptPod does them: first the victim's
`DisruptionTarget` condition (reason `PreemptionByScheduler`, `observedGeneration` the victim's
generation, so the pod's owners and the preemptor's next cycle know why it goes), then DELETE with
the victim's uid as precondition (a pod recreated under the same name is not evicted by mistake).
A victim already gone (404), or whose name now belongs to a new pod (the apiserver answers the
uid-guarded write with 409 or 422; a GET then shows another uid), counts as done.

Each preemption is carried out by a task of its own, as upstream's `prepareCandidateAsync` runs a
goroutine per preemption: a request that hangs holds back that preemption alone. Within it, every
victim is marked before any is deleted: the apiserver deletes one pod per request, and a leader
that dies between two DELETEs of a gang would otherwise leave no trace of the rest of its decision.
With every mark written first, the next leader finds the gang's marked members still running and
finishes the eviction (`plugins/preemption/unfinished.py`); marks older than `remark_after` when
the last one lands are written once more before the DELETEs. A write that fails for now
(transport, 429, 5xx) is tried again, up to `tries` times in all with upstream's
`retry.DefaultBackoff` pauses (10 ms, ×5); one refused for good, or still failing, fails that
victim: a refused mark fails the whole preemption (nothing of it is deleted, every victim is
reported to `on_failed`, the marks already written are withdrawn, best effort: the disruption
controller would after 2 min); a refused DELETE fails that victim alone. `on_failed` lets the core
release the preemptor's room, so it is scheduled again (upstream activates it).

`on_evicted(eviction, deleted)` is called for each victim that is gone or going (`deleted`: by us,
and the loop records the upstream `Preempted` Event on the victim; False when it was already gone
or its name now belongs to a new pod).

Only the leadership term that decided a preemption carries it out: each write waits for a slot
(`concurrency`) and its rate-limiter token, then asks the term. While the lease lapses (the time
bound of `LeaderElector.is_leader`, no new term yet) the write waits for it to come back; a
different term, or `abandon()` (the lease lost), ends the preemption without another write — the
new term decides again, and its own preemption of the same victims never meets the old one's.
For the same reason the graceful shutdown hands the Lease over only once every preemption
submitted has ended (`drain`, as the binder's): one cut short mid-request may still land after a
successor took over, so it leaves the Lease to expire.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field

import anyio
import structlog

from scheduler.kube.concurrency import InFlight
from scheduler.kube.http import TRANSPORT_ERRORS, STRATEGIC_PATCH, KubeHttp, Response
from scheduler.kube.recorder import ObjectRef, micro_time

log = structlog.get_logger("tessera.evictor")

REASON = "PreemptionByScheduler"
TRIES = 4  # upstream retry.DefaultBackoff: Steps 4 ...
FIRST_RETRY = 0.01  # ... Duration 10 ms,
_BACKOFF_FACTOR, _BACKOFF_JITTER = 5.0, 0.1  # Factor 5, Jitter 0.1
LAPSE_POLL = 0.1  # how often a write waiting out a lapse of the lease looks again
_FOR_NOW = frozenset({429})  # and every 5xx: the apiserver may answer differently in a moment


@dataclass(frozen=True, slots=True)
class Eviction:
    namespace: str
    name: str
    uid: str
    preemptor_uid: str  # "" when finishing a gang's eviction begun by another replica
    preemptor_scheduler: str  # the preemptor's schedulerName, the condition message's prefix
    node: str  # where the victim runs (the room it makes)
    finishing_gang: str = ""  # the gang whose half-done eviction this finishes
    generation: int = 0  # the victim's metadata.generation: the condition's observedGeneration
    preemptor: str = ""  # the preemptor's namespace/name, for the log (its Event names the uid alone, as upstream's)
    preemptor_type: str = "pod"  # "podgroup" when a whole gang preempted (upstream's ExecutorPreemptor.Type())
    marked_since: float | None = None  # lastTransitionTime of the DisruptionTarget=True mark the victim already carries
    # whom the victim's Preempted Event names and relates to (upstream's preemptor.Obj()): the
    # preemptor pod, or the PodGroup object of a gang that preempted as one; None: the pod `preemptor_uid`
    by: ObjectRef | None = None
    # the node the victim's Preempted Event names (upstream's candidate, c.Name()): where the
    # preemptor pod is nominated, also for a victim gang's members elsewhere; "" names `node`
    candidate: str = ""

    @property
    def message(self) -> str:
        return f"{self.preemptor_scheduler}: preempting to accommodate a higher priority {self.preemptor_type}"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True, eq=False)
class _Preemption:
    """One preemption's victims, carried out by one task in one leadership term."""

    evictions: list[Eviction]
    term: Hashable
    abandoned: bool = False  # the lease was lost: nothing more of it is written
    written: set[str] = field(default_factory=set)  # victims whose mark reached the apiserver
    # victim uid -> the lastTransitionTime its mark carries, fixed at the first try: a retry is the
    # same transition (upstream's UpdatePodCondition moves the time only when the status changes)
    mark_times: dict[str, str] = field(default_factory=dict)


def _transition_time(at: float | None = None) -> str:
    """A condition's lastTransitionTime (a metav1.Time: whole seconds, UTC), now or `at`."""
    return micro_time(at).split(".")[0] + "Z"


class _Gone(Exception):
    """The victim is gone, or its name belongs to a new pod: nothing to evict."""


class _Failed(Exception):
    """A write refused for good, or still failing after every try."""


class _Abandoned(Exception):
    """The term that decided the preemption is over: no more writes."""


class Evictor:
    def __init__(self, http: KubeHttp, on_evicted: Callable[[Eviction, bool], None],
                 on_failed: Callable[[Eviction, str], None], *, term: Callable[[], Hashable | None] = lambda: 0,
                 concurrency: int = 8, retry_seconds: float = FIRST_RETRY, remark_after: float = 60.0,
                 tries: int = TRIES) -> None:
        self.http = http
        self.on_evicted = on_evicted
        self.on_failed = on_failed
        self.term = term
        self._retry_seconds = retry_seconds  # the first pause before a write is tried again (then ×5)
        self._remark_after = remark_after
        self._tries = tries
        self._slots = anyio.Semaphore(concurrency, fast_acquire=True)
        self._preemptions: dict[str, _Preemption] = {}  # victim uid -> the live preemption evicting it
        self._send, self._receive = anyio.create_memory_object_stream[_Preemption](1_000_000)
        self._flights = InFlight()  # preemptions submitted and not ended; those cut short mid-way
        # victim uid -> the refusal last logged for it and how many refusals it had so far: a
        # refused victim is preempted again and again (the preemptor is activated, as upstream's),
        # and its `evictor.refused` line is written once per change, not once per try
        self._refusals: dict[str, tuple[str, int]] = {}
        self.evicted = 0

    @property
    def in_flight(self) -> int:
        return self._flights.count

    def submit(self, evictions: Sequence[Eviction]) -> None:
        """One preemption's victims (a victim another preemption of this term is already evicting
        stays there). A victim that finishes a gang's eviction already carries its mark: it is only
        deleted (marking it again would restart the mark's 2-minute clock at every try)."""
        term = self.term()
        fresh = [eviction for eviction in evictions if eviction.uid not in self._preemptions]
        if not fresh or term is None:
            return
        preemption = _Preemption(fresh, term)
        for eviction in fresh:
            self._preemptions[eviction.uid] = preemption
        self._flights.started()
        self._send.send_nowait(preemption)

    async def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds until every preemption submitted has ended (graceful
        shutdown: the writes go on meanwhile); True if none is left and none was cut short — a
        write cut mid-request may still land, so the Lease must then be left to expire."""
        return await self._flights.drain(timeout)

    def abandon(self) -> list[str]:
        """The lease is lost: nothing decided so far is ours to write any more, and a later term may
        be handed the same victims again. Returns the victims (namespace/name, sorted) whose
        eviction was under way, for the hand-over's line."""
        victims = sorted(eviction.key for preemption in set(self._preemptions.values())
                         for eviction in preemption.evictions if self._preemptions.get(eviction.uid) is preemption)
        for preemption in set(self._preemptions.values()):
            preemption.abandoned = True
        self._preemptions.clear()
        return victims

    async def run(self) -> None:
        """Carry out what is submitted, each preemption in a task of its own, until cancelled."""
        async with anyio.create_task_group() as group:
            async for preemption in self._receive:
                group.start_soon(self._carry_out, preemption, name=f"preemption of {preemption.evictions[0].key}")

    # --- one preemption --------------------------------------------------------------------------

    async def _carry_out(self, preemption: _Preemption) -> None:
        settled = False  # ended with nothing of it still out (False: cancelled, perhaps mid-request)
        try:
            if await self._mark_all(preemption):
                async with anyio.create_task_group() as group:
                    for eviction in list(preemption.evictions):
                        group.start_soon(self._delete, preemption, eviction)
            settled = True
        except _Abandoned:  # also from a withdrawal: the new term decides afresh
            settled = True
            log.info("evictor.abandoned", victims=[e.key for e in preemption.evictions],
                     message="the leadership term that decided this preemption is over")
        finally:  # ended without an outcome (abandoned, cancelled): its victims may be decided again
            for eviction in preemption.evictions:
                if self._preemptions.get(eviction.uid) is preemption:
                    del self._preemptions[eviction.uid]
            self._flights.ended(settled=settled)

    async def _mark_all(self, preemption: _Preemption) -> bool:
        """Every victim marked (or found gone), so the DELETEs may go; written once more if the
        first marks have aged past `remark_after` by the time the last lands. A mark refused for
        good fails it all: False, after the marks already written are withdrawn."""
        to_mark = [eviction for eviction in preemption.evictions if not eviction.finishing_gang]
        for round_ in range(2):
            started = anyio.current_time()
            failures: list[str] = []
            async with anyio.create_task_group() as group:
                for eviction in to_mark:
                    group.start_soon(self._mark, preemption, eviction, failures)
            if preemption.abandoned:
                raise _Abandoned
            if failures:
                self._fail(preemption, failures[0])
                await self._withdraw(preemption)
                return False
            to_mark = [eviction for eviction in to_mark if eviction in preemption.evictions]
            if round_ or not to_mark or anyio.current_time() - started <= self._remark_after:
                return True
            log.info("evictor.remarking", victims=len(to_mark))
            for eviction in to_mark:  # the one deliberate move of a True mark's time: restart its clock
                preemption.mark_times[eviction.uid] = _transition_time()
        return True

    async def _mark(self, preemption: _Preemption, eviction: Eviction, failures: list[str]) -> None:
        try:
            await self._write(preemption, eviction, "mark", lambda: self._set_condition(preemption, eviction, marked=True))
        except _Gone:
            preemption.evictions.remove(eviction)
            self._done(preemption, eviction, deleted=False)
            return
        except _Failed as err:
            failures.append(str(err))
            return
        except _Abandoned:  # the preemption knows (`abandoned`): `_mark_all` ends it
            return
        preemption.written.add(eviction.uid)

    async def _delete(self, preemption: _Preemption, eviction: Eviction) -> None:
        path = f"/api/v1/namespaces/{eviction.namespace}/pods/{eviction.name}"
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": eviction.uid}}
        try:
            await self._write(preemption, eviction, "delete",
                              lambda: self.http.request("DELETE", path, body=body, limited=False,
                                                                resend=lambda: self._still_in_term(preemption)))
        except _Gone:
            self._done(preemption, eviction, deleted=False)
        except _Abandoned:
            return
        except _Failed as err:
            self._refused(eviction, str(err))
            if self._preemptions.get(eviction.uid) is preemption:
                del self._preemptions[eviction.uid]
                self.on_failed(eviction, str(err))
        else:
            self._done(preemption, eviction, deleted=True)

    def _fail(self, preemption: _Preemption, reason: str) -> None:
        """A victim cannot be marked: none of this preemption's victims is deleted."""
        for eviction in preemption.evictions:
            self._refused(eviction, reason)
            if self._preemptions.get(eviction.uid) is preemption:
                del self._preemptions[eviction.uid]
                self.on_failed(eviction, reason)

    async def _withdraw(self, preemption: _Preemption) -> None:
        """A failed preemption's marks set False, as upstream's disruption controller does to a
        stale one (a later leader must not finish a gang from them). Once each, not retried: a
        withdrawal that does not get through leaves a mark that controller turns False after 2 min,
        and that the finishing rule ignores from then on."""
        for eviction in preemption.evictions:
            if eviction.uid not in preemption.written:
                continue
            async with self._slots:
                await self._in_term(preemption)
                try:
                    answer = await self._set_condition(preemption, eviction, marked=False)
                    outcome = "ok" if answer.ok else f"HTTP {answer.status}"
                except TRANSPORT_ERRORS as err:
                    outcome = str(err)
            log.info("evictor.mark_withdrawn", pod=eviction.key, outcome=outcome)

    # --- one write ---------------------------------------------------------------------------------

    async def _write(self, preemption: _Preemption, eviction: Eviction, step: str,
                     send: Callable[[], Awaitable[Response]]) -> None:
        """One step for one victim, in the preemption's term, tried up to `tries` times while it
        fails for now. Raises `_Gone`, `_Failed` or `_Abandoned`; returns once it is written."""
        pause = self._retry_seconds
        for attempt in range(1, self._tries + 1):
            async with self._slots:
                await self._in_term(preemption)
                try:
                    answer: Response | BaseException = await send()
                except TRANSPORT_ERRORS as err:
                    answer = err
            if preemption.abandoned:
                raise _Abandoned
            if isinstance(answer, Response):
                if answer.ok:
                    return
                if answer.status == 404:
                    raise _Gone
                if answer.status in (409, 422) and await self._recreated(eviction):
                    raise _Gone
                failure = f"HTTP {answer.status}: {answer.message()}"
                if answer.status not in _FOR_NOW and answer.status < 500:
                    raise _Failed(failure)
            else:
                failure = f"{type(answer).__name__}: {answer}"
            if attempt == self._tries:
                raise _Failed(f"{failure} (after {attempt} tries)")
            log.warning("evictor.failed", pod=eviction.key, step=step, error=failure, attempt=attempt)
            await anyio.sleep(pause * (1 + _BACKOFF_JITTER * random.random()))
            pause *= _BACKOFF_FACTOR
        raise AssertionError("unreachable")  # pragma: no cover

    async def _in_term(self, preemption: _Preemption) -> None:
        """The write token, then the term, right before the request: a write that waited for a slot
        or a token past a lost lease must not go out. A lapse (no term for now) is waited out."""
        await self.http.acquire()
        while True:
            current = self.term()
            if preemption.abandoned or (current is not None and current != preemption.term):
                preemption.abandoned = True
                raise _Abandoned
            if current is not None:
                return
            await anyio.sleep(LAPSE_POLL)

    async def _recreated(self, eviction: Eviction) -> bool:
        """A write guarded by the victim's uid was refused: is its name now another pod's (or free)?
        The apiserver answers a uid precondition with 409 on DELETE and 422 on a status PATCH."""
        try:
            found = await self.http.request("GET", f"/api/v1/namespaces/{eviction.namespace}/pods/{eviction.name}",
                                            limited=False)
        except TRANSPORT_ERRORS:
            return False
        if found.status == 404:
            return True
        body = found.json() if found.ok else None
        uid = ((body or {}).get("metadata") or {}).get("uid") if isinstance(body, dict) else None
        return found.ok and uid != eviction.uid

    def _still_in_term(self, preemption: _Preemption) -> bool:
        """May a write of this preemption be sent again after a Retry-After wait? Only while its
        term leads (a lapse refuses: the write's own retry waits the lapse out in `_in_term`)."""
        return not preemption.abandoned and self.term() == preemption.term

    async def _set_condition(self, preemption: _Preemption, eviction: Eviction, marked: bool) -> Response:
        """The victim's DisruptionTarget condition: True with upstream's reason, message and
        observedGeneration, or False without them (null deletes them in a strategic merge); the
        uid is a precondition, so a new pod under the same name is never marked.

        lastTransitionTime moves only with the status, as upstream's `apipod.UpdatePodCondition`
        (pkg/api/v1/pod/util.go): a victim already marked True keeps its mark's time, and every
        try of one mark carries the time of the first. The disruption controller's 2-minute clock
        and the finishing rule (`unfinished.py`) read that time; only `_mark_all`'s second round
        restarts it on purpose. A withdrawal (True to False) is a change: now."""
        transition = (preemption.mark_times.setdefault(eviction.uid, _transition_time(eviction.marked_since))
                      if marked else _transition_time())
        condition: dict[str, str | int | None] = {"type": "DisruptionTarget", "status": "True" if marked else "False",
                     "reason": REASON if marked else None, "message": eviction.message if marked else None,
                     "lastTransitionTime": transition}
        if eviction.generation > 0:
            condition["observedGeneration"] = eviction.generation
        return await self.http.request("PATCH", f"/api/v1/namespaces/{eviction.namespace}/pods/{eviction.name}/status",
                                       body={"metadata": {"uid": eviction.uid}, "status": {"conditions": [condition]}},
                                       content_type=STRATEGIC_PATCH, limited=False,
                                       resend=lambda: self._still_in_term(preemption))

    def _refused(self, eviction: Eviction, reason: str) -> None:
        """`evictor.refused` once per victim and refusal: upstream logs every failed PreemptPod and
        activates the preemptor, whose next cycle preempts the same victim again (an SRE trial saw
        an admission policy's refusal logged 50 times in a few minutes). The retries go on; a
        refusal that changes is logged again, with how many came before."""
        last, count = self._refusals.get(eviction.uid, ("", 0))
        self._refusals[eviction.uid] = (reason, count + 1)
        if reason != last:
            log.warning("evictor.refused", pod=eviction.key, error=reason, **({"refused_before": count} if count else {}))

    def forget(self, uid: str) -> None:
        """The pod is gone (its watch event): its refusals no longer need remembering."""
        self._refusals.pop(uid, None)

    def _done(self, preemption: _Preemption, eviction: Eviction, *, deleted: bool) -> None:
        if self._preemptions.get(eviction.uid) is preemption:
            del self._preemptions[eviction.uid]
        refused = self._refusals.pop(eviction.uid, None)
        if refused is not None:  # the refusal logged once is over: say so, once
            log.info("evictor.refusal_ended", pod=eviction.key, refused=refused[1], last_error=refused[0])
        self.evicted += deleted
        log.info("evictor.evicted" if deleted else "evictor.already_gone", pod=eviction.key, node=eviction.node,
                 preemptor=eviction.preemptor, preemptor_uid=eviction.preemptor_uid,
                 finishing_gang=eviction.finishing_gang)
        self.on_evicted(eviction, deleted)
