"""The term fence: a new leader makes every Binding an earlier term sent unable to land.

client-go's leader election does no fencing (tools/leaderelection/leaderelection.go: "does not
guarantee that only one client is acting as a leader"): a Binding the old leader sent can sit in
a proxy or a dead connection and reach the apiserver after its Lease ran out and a new leader
gave the same GPUs to another pod. Every Binding Tessera sends is conditional on the pod's
resourceVersion as it was decided (`Binding.resource_version`; BindingREST.Create hands it to
GuaranteedUpdate as a precondition, pkg/registry/core/pod/storage/storage.go, a mismatch is 409
Conflict). So at the start of a term taken over from another replica's record, before its first
decision, the new leader writes `tessera.dev/term` onto every pod it schedules that is unbound
and could still be bound: each write changes the pod's resourceVersion, so no Binding decided
before it can land, however late it arrives. The answers (the pods at their new versions) go to
the core, so the new term's own Bindings carry versions the fence did not invalidate.

Each write is `write_term` (scheduler/kube/term_write.py: through pods/status, a merge patch with
the pod's uid as a precondition, and how its answer reads). Pods are written concurrently,
outside the client's rate limiter as Bindings are: through the limiter (50 qps, burst 100) a
takeover with 5,000 pending pods would wait (5,000 - 100) / 50 = 98 s before its first decision.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog

from scheduler.kube.binder import RESEND_INITIAL, RESEND_MAX
from scheduler.kube.concurrency import MAX_IN_FLIGHT
from scheduler.kube.http import KubeHttp
from scheduler.kube.term_write import write_term

log = structlog.get_logger("tessera.fence")

# How the Warning FailedScheduling Event on a pod the fence could not write begins (the loop's
# `_fence_refused`; `kubectl tessera explain` reads it)
FENCE_REFUSED = ("no pod is scheduled until this scheduler's new leader has marked every pending pod "
                 "(its term fence)")


@dataclass(frozen=True, slots=True)
class FencedPod:
    """A pod to fence, as the cache holds it: the uid is the write's precondition, so a pod
    deleted and created again under the name (which no Binding of the old one can reach) is not
    written, and it keys the term's set of pods already fenced."""

    uid: str
    namespace: str
    name: str


@dataclass(slots=True)
class FenceOutcome:
    """What one pass of the fence did: the loop decides only after a pass with nothing failed and
    not aborted, tries the failed pods again (with backoff), and logs the counts."""

    written: int = 0  # pods whose resourceVersion the fence changed
    gone: int = 0  # deleted (404) or replaced under the name (a uid precondition's 409)
    failed: list[tuple[FencedPod, str]] = field(default_factory=list)  # writes to try again, and why
    aborted: bool = False  # the term changed while it ran


async def fence(http: KubeHttp, pods: Iterable[FencedPod], token: str, term: Hashable,
                current_term: Callable[[], Hashable | None], on_pod: Callable[[dict[str, Any]], None],
                done: set[str], *, timeout: float = 30.0) -> FenceOutcome:
    """Write `tessera.dev/term: token` onto each of `pods` not in `done` (uids already fenced in
    this term), adding each one written or gone to `done`; `on_pod` gets every pod as written.
    Nothing is sent once `current_term()` is not `term` (the outcome says aborted)."""
    outcome = FenceOutcome()
    slots = anyio.Semaphore(MAX_IN_FLIGHT)

    async def write(pod: FencedPod) -> None:
        async with slots:
            if current_term() != term:
                outcome.aborted = True
                return
            answer = await write_term(http, pod.namespace, pod.name, pod.uid, token, timeout=timeout,
                                      resend=lambda: current_term() == term)
        if answer.pod is not None:
            outcome.written += 1
            done.add(pod.uid)
            try:
                on_pod(answer.pod)
            except Exception:  # noqa: BLE001 - the callback is ours; a bug there must not stop the fence
                log.exception("fence.callback_failed", pod=f"{pod.namespace}/{pod.name}")
        elif answer.gone:  # deleted, or another pod under the name
            outcome.gone += 1
            done.add(pod.uid)
        else:
            outcome.failed.append((pod, answer.failed))

    async with anyio.create_task_group() as group:
        for pod in pods:
            if pod.uid not in done:
                group.start_soon(write, pod)
    if current_term() != term:
        outcome.aborted = True
    return outcome


class TermFence:
    """The fence of one leadership term at a time: which term is fenced, the term being fenced
    (its token and the uids written so far: a failed write is tried again, the others not), and
    the backoff of a fence that failed — tried again after a delay doubled each time
    (RESEND_INITIAL to RESEND_MAX), not at every wake: a webhook or a missing pods/status right
    refuses every write, and a busy watch wakes the loop many times a second.

    `token()` gives the tessera.dev/term value a new term writes, None when it needs no fence (no
    leader election, or leading again on this process's own record). A term whose fence began is
    fenced to the end with its token."""

    def __init__(self, http: KubeHttp, token: Callable[[], str | None]) -> None:
        self.http = http
        self.token = token
        self._fenced_term: Hashable | None = None
        self._fencing: tuple[Hashable, str, set[str]] | None = None
        self._delay = RESEND_INITIAL
        self.retry_at: float | None = None  # monotonic clock: the next try of a fence that failed
        self._failed: tuple[int, str] | None = None  # the last failed try: pods it left, and why
        self._told: set[str] = set()  # uids of the pods told why this term's fence holds them

    async def ready(self, current_term: Callable[[], Hashable | None], unbound: Callable[[], list[FencedPod]],
                    on_pod: Callable[[dict[str, Any]], None],
                    on_refused: Callable[[FencedPod, str], None] = lambda pod, why: None) -> bool:
        """True when the current term may decide: it is fenced, or needs no fence. Otherwise
        writes the fence onto `unbound()` pods not written yet (False when a write failed or the
        term changed meanwhile; the next call tries the rest, once the backoff has passed).
        `on_refused` hears of each pod whose write failed, once per term: while it fails nothing
        is scheduled, and the pod itself should say why (an admission policy refusing the write
        left every pending pod without an Event)."""
        term = current_term()
        if term is None or term == self._fenced_term:
            return term is not None
        if self._fencing is not None and self._fencing[0] == term:
            token = self._fencing[1]  # a fence this term began and has not finished: never skipped
            if self.retry_at is not None and time.monotonic() < self.retry_at:
                return False
        else:
            fresh = self.token()
            if fresh is None:
                self._fenced_term = term
                self._ended()
                return True
            token = fresh
            self._fencing = (term, token, set())
            self._told = set()
            self._delay, self.retry_at = RESEND_INITIAL, None
        done = self._fencing[2]
        started = time.monotonic()
        outcome = await fence(self.http, unbound(), token, term, current_term, on_pod, done)
        if outcome.aborted or current_term() != term:
            log.info("leader.fence_aborted", written=outcome.written, message="the term changed while it was fenced")
            self._ended()
            return False
        if outcome.failed:
            first_pod, first_why = outcome.failed[0]
            first = f"{first_pod.namespace}/{first_pod.name}: {first_why}"
            self._failed = (len(outcome.failed), first)
            self.retry_at = time.monotonic() + self._delay
            for pod, why in outcome.failed:
                if pod.uid not in self._told:
                    self._told.add(pod.uid)
                    on_refused(pod, why)
            log.warning("leader.fence_failed", failed=len(outcome.failed), written=outcome.written,
                        first=first, retry_in=round(self._delay, 1),
                        message="this replica leads but does not decide until every pod an earlier leader could "
                        "have bound is fenced; trying the rest again")
            self._delay = min(self._delay * 2, RESEND_MAX)
            return False
        self._fenced_term = term
        self._fencing = None
        self._ended()
        log.info("leader.fenced", token=token, pods=outcome.written, gone=outcome.gone,
                 seconds=round(time.monotonic() - started, 3),
                 message="no Binding an earlier leader sent can land on these pods any more")
        return True

    def pending(self, term: Hashable | None) -> int:
        """Pods `term` still has to fence, as its last failed try left them; 0 otherwise."""
        return self._failed[0] if self._failed is not None and self._stalled(term) else 0

    def error(self, term: Hashable | None) -> str | None:
        """Why `term`'s fence last failed; None when it did not."""
        return self._failed[1] if self._failed is not None and self._stalled(term) else None

    def _stalled(self, term: Hashable | None) -> bool:
        return term is not None and self._fencing is not None and self._fencing[0] == term

    def _ended(self) -> None:
        """No fence is under way (finished, not needed, or its term ended): nothing to report."""
        self._failed = None
        self._delay, self.retry_at = RESEND_INITIAL, None
