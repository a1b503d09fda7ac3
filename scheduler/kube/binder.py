"""Binding pods: POST `pods/{name}/binding` with the device annotations, many at once.

A Binding carrying VolumeBinding's writes sends them first and then waits, up to its
`bind_timeout`, until `check_volumes` (the loop's: the core's `check_bindings`) finds the pod's
claims bound; that wait holds no slot, and any failure there decides the pod again unsent.
Before its first send a Binding awaits `ready` (the loop's: a status write of its own to the pod
still in flight is answered first, and the Binding is conditional on the version that write left;
docs/running.md). Bindings run concurrently while the next cycle runs, at most `max_in_flight` requests at a time (a
slot is held for one request, not for a Binding's whole life: one waiting between reads or sends
keeps no other waiting); the pod is already *assumed* in the core, so nothing it holds can be
handed out twice meanwhile. Each Binding is a task in the task group `Binder.run()` hosts, so none
outlives the binder: cancelling its owner (the scheduling loop) cancels every Binding still in
flight. Outcomes (docs/design.md §3):
- 201: bound; the watch event confirms the assumption.
- 404: read back (a proxy or load balancer may say it of a pod that exists); the apiserver's own
  NotFound for the pod drops it.
- other 4xx (400, 403, 422, ...): the apiserver refused this Binding, so nothing was bound; forget
  and decide again after backoff — unless an earlier send of the same Binding was ambiguous and its
  request may still land: the refusal answers for its own request only, so it is treated like an
  ambiguous answer.
- 409, 5xx, 429, timeouts, resets: *ambiguous*. The request may have reached the apiserver, or may
  still be on its way there (a proxy or a dead connection can deliver it after we gave up). The pod
  is read back: bound (to our node with our devices, or elsewhere) or gone settles it, and the pod
  as read is handed to the core, so its state shows the truth before the watch does. Bound to our
  node with our devices is ours only if the pod carries our Binding's `tessera.dev/term`: another
  term or install deciding the pod the same way bound it otherwise (`conflict`, `bound_by_other`:
  the pod is theirs, this replica claims no success) — unless the pod's history shows our Binding
  bound it and a newer leader's term fence wrote its token over ours after (`_bound_by_ours`: the
  first change after the version our Binding is conditional on, replayed by a watch). A pod read
  back *unbound* at the resourceVersion the Binding is conditional on settles nothing — our
  earlier request can still land — so the same Binding is sent again until an answer is certain;
  unbound at any other resourceVersion settles it: no send of ours can ever land (the apiserver's
  precondition; a 409 says so), so the pod, as read, is decided again. Only the apiserver's
  answers settle a read: a 404 that is not its NotFound Status for the pod, or a 200 that is not a
  Pod, is a failed read. The
  assumption, and the devices it holds, are never released while a Binding of ours may still bind
  the pod: that is how double allocation happens.
  A replica that stops leading sends nothing more for it, but one with a request still out keeps
  reading the pod back until it is bound or gone, or until our timeout plus the apiserver's
  request timeout have passed; one last read then decides. That window is no bound on a request
  still in a proxy or a socket buffer, so a Binding conditional on a resourceVersion is not given
  up on time alone: it is *withdrawn* first (`tessera.dev/term` written onto the pod, as the
  term fence writes it), which changes the pod's version so that the Binding can never land. Only
  the write's certain answer (the pod as written, or gone) settles it; a failed write is tried
  again with backoff, the assumption held meanwhile. Leading again in a
  new term it never sends it again (another leader may have given its devices away meanwhile);
  leading again in the *same* term (the Lease kept naming us: nobody else led in between) it goes
  on sending.
"""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio
import orjson
import structlog
from anyio.abc import TaskStatus

from scheduler.core.annotations import DEVICES, TERM
from scheduler.core.plugins.volume_binding import BIND_TIMEOUT, BindingsChecked
from scheduler.core.volumes import ClaimBinding
from scheduler.kube.http import TRANSPORT_ERRORS, KubeHttp
from scheduler.kube.concurrency import MAX_IN_FLIGHT, InFlight, TaskHost
from scheduler.kube.pod_answers import pod_in, pod_not_found
from scheduler.kube.term_token import parse_term_token
from scheduler.kube.term_write import write_term
from scheduler.kube.volume_writes import PRE_BIND, VolumeWrite, write as write_volume
from scheduler.logs import describe_error

if TYPE_CHECKING:
    from scheduler.kube.metrics import BindingResult

log = structlog.get_logger("tessera.binder")


class Outcome(enum.Enum):
    BOUND = "success"
    # bound elsewhere, bound by another Binding than ours (another term's or install's, to our
    # very node and devices), or being deleted: our Binding can never land; drop
    CONFLICT = "conflict"
    NOT_FOUND = "not_found"  # gone: drop
    RETRY = "error"  # refused, so not bound: forget and back off


# A refusal of these is certain: the apiserver answered and bound nothing. 408 and 429 are not
# among them (the request may be retried by the server side or still be queued).
_REFUSED = frozenset({400, 401, 403, 405, 406, 410, 413, 415, 422})
# the delay between tries of a write that did not land, doubled each time (the Binder, the term fence)
RESEND_INITIAL, RESEND_MAX = 0.2, 5.0
APISERVER_REQUEST_TIMEOUT = 60.0  # kube-apiserver's --request-timeout default
# how long the watch that replays a pod's history (`Binder._bound_by_ours`) stays open: the changes
# since the Binding's version come at once, then the apiserver ends the watch
HISTORY_WATCH_SECONDS = 1
# the message of a Binding withdrawn by the replica that gave up on it: the same every time (it
# goes into the pod's PodScheduled condition; the versions are in the result's `detail`)
WITHDRAWN = "the Binding was withdrawn (the pod's resourceVersion changed, so it can never land)"
NOT_LEADING = "not the leader any more"
STOPPING = "the scheduler is stopping"
# the message of a Binding the read-back found outdated: the pod is unbound at a newer version
CHANGED = "the pod changed since it was decided; no Binding for the version it was decided at can land"


@dataclass(frozen=True, slots=True)
class Binding:
    uid: str
    namespace: str
    name: str
    node: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    # the pod's metadata.resourceVersion as the core saw it when it decided: the apiserver binds
    # only while the pod still has it (BindingREST's Preconditions), so a Binding that lands after
    # the pod changed — after a new leader's term fence wrote to it — is refused ("" = none)
    resource_version: str = ""
    # the pod's `tessera.dev/term` as the core saw it when it decided ("" = none): a read-back
    # showing another one tells a term's fence (or a withdrawal) from anyone else's edit
    term_as_decided: str = ""
    # VolumeBinding's PreBind: the volume and claim writes sent, in order, before the first POST;
    # then the wait until the decision's claims are bound (`check_bindings`), for at most
    # `bind_timeout` seconds (the pod's profile's VolumeBindingArgs.bindTimeoutSeconds)
    volume_writes: tuple[VolumeWrite, ...] = ()
    claims: tuple[ClaimBinding, ...] = ()
    bind_timeout: float = 600.0


@dataclass(frozen=True, slots=True)
class BindResult:
    binding: Binding
    outcome: Outcome
    message: str
    seconds: float
    observed: dict[str, Any] | None = None  # the pod as read back after an ambiguous answer
    sends: int = 1  # POSTs it took (more than one after ambiguous failures)
    # for the log only: what `message` leaves out so that it stays the same from one refusal to
    # the next (the resourceVersions, the apiserver's 409 naming them). `message` goes into the
    # pod's PodScheduled condition and an Event: a message new at every 409 is a new status write
    # every time, itself a change of the pod that the next Binding can run into.
    detail: str = ""
    # the `tessera.dev/term` of the newer leader whose fence refused this Binding, when this
    # replica was deposed while it waited: the fence doing its job, not a fault (for the log)
    fenced_by: str = ""
    # given up because this replica stopped leading (`withdrawn`: after writing its withdrawal
    # token): the leadership machinery at work, not a fault (for the log)
    not_leading: bool = False
    withdrawn: bool = False
    # the read-back showed the pod unbound at a newer resourceVersion, changed by someone else (a
    # label, an annotation: its `tessera.dev/term` is the one it was decided with, or this term's
    # own) while this replica still led: no fence, no withdrawal — the pod is simply to be decided
    # again from the version read back
    pod_changed: bool = False
    # the read-back showed the pod bound to our node with our devices, but by another Binding than
    # ours: its `tessera.dev/term` (`bound_by`, "" for none) is not the one our Binding carries
    # (a newer term of our Lease, another install's, a scheduler without one). A `conflict`: no
    # success of this replica's, no "Successfully assigned" Event of ours; the pod is the other's
    bound_by_other: bool = False
    bound_by: str = ""
    # the read-back showed the pod bound elsewhere (another node, other devices) after this
    # replica's term ended while the Binding was out: the newer leader decided it, as it must (its
    # `tessera.dev/term` in `bound_by`) — the leadership machinery at work, not a fault (for the log)
    superseded: bool = False
    # refused before the Binding was sent: a volume write of VolumeBinding's PreBind failed
    # (`message` in upstream's words, "running PreBind plugin ...")
    pre_bind: bool = False

    @property
    def refusal(self) -> str:
        """What the pod's FailedScheduling Event and SchedulerError condition say of a refusal:
        a PreBind failure in upstream's words, a Binding's under "Binding rejected:"."""
        return self.message if self.pre_bind else f"Binding rejected: {self.message}"

    @property
    def counted_as(self) -> BindingResult:
        """What the Binding counts as (tessera_bindings_total's `result`, its log line's
        `outcome`): `given_up` when this replica stopped leading and gave it up (withdrawn or
        never sent: the leadership machinery at a failover, not an error), else its outcome."""
        return "given_up" if self.not_leading else self.outcome.value

    @property
    def pod_gone(self) -> bool:
        """The pod was deleted (or is being deleted, unbound) while the Binding was out: nothing
        is left to bind, so nothing failed."""
        if self.outcome is Outcome.NOT_FOUND:
            return True
        pod = self.observed or {}
        return (self.outcome is Outcome.CONFLICT and bool((pod.get("metadata") or {}).get("deletionTimestamp"))
                and not (pod.get("spec") or {}).get("nodeName"))


class Binder:
    def __init__(self, http: KubeHttp, on_result: Callable[[BindResult], None], *, max_in_flight: int = MAX_IN_FLIGHT,
                 timeout: float = 30.0, term: Callable[[], Hashable | None] = lambda: 0,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 clock: Callable[[], float] = time.monotonic, late_landing_seconds: float | None = None,
                 identity: str = "tessera", ready: Callable[[Binding], Awaitable[Binding]] | None = None,
                 check_volumes: Callable[[Binding, Mapping[str, str]], BindingsChecked] | None = None) -> None:
        self.http = http
        # what the watch-fed state says of a Binding's claims after its volume writes, given the
        # versions the writes left (the loop's: `check_bindings` on its core's state); asked again
        # at every `volumes_changed`
        self.check_volumes = check_volumes if check_volumes is not None else _all_bound
        self._volumes_changed: anyio.Event | None = None
        self._stopping = False  # `stop_waiting` was called: no Binding waits for its claims any more
        # the Binding as it is to be sent, awaited before its first send: the loop's waits for a
        # status write of its own to the pod still in flight and takes the version it left
        self.ready = ready if ready is not None else _as_decided
        # this replica's leader-election identity: it names the replica in the `tessera.dev/term`
        # that withdraws a Binding it gave up on
        self.identity = identity
        self.on_result = on_result
        # The leadership term we are in (None: not leading), read when a Binding is submitted and
        # right before each POST: only the term that decided a Binding may send it.
        self.term = term
        self.timeout = timeout
        # How long after an ambiguous send its request may still land: our own timeout, then the
        # apiserver's (kube-apiserver --request-timeout, 60 s by default) to finish it.
        self.late_landing = timeout + APISERVER_REQUEST_TIMEOUT if late_landing_seconds is None \
            else late_landing_seconds
        self._sleep = sleep
        self._clock = clock
        self._slots = anyio.Semaphore(max_in_flight, fast_acquire=True)
        self._host = TaskHost("Binder")
        # Bindings that end before their outcome is known (cancelled with the loop, or a bug in the
        # binder) count as cut: their POST may still land, so a drain can never call them settled
        self._flights = InFlight()

    @property
    def in_flight(self) -> int:
        return self._flights.count

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Host the Bindings until cancelled; cancelling it cancels every Binding in flight.

        Start it with `await group.start(binder.run)`: `submit` works once that returns."""
        await self._host.run(task_status=task_status)

    def submit(self, binding: Binding) -> None:
        """Start sending `binding` (its result goes to `on_result`); needs `run()` going."""
        group = self._host.group
        self._flights.started()
        group.start_soon(self._bind, binding, self.term(), name=f"bind {binding.namespace}/{binding.name}")

    def volumes_changed(self) -> None:
        """Wake the Bindings waiting for their claims to be bound: the watch brought a claim, a
        volume or a pod deletion, or this replica's term changed. Each asks `check_volumes` again."""
        changed, self._volumes_changed = self._volumes_changed, None
        if changed is not None:
            changed.set()

    def stop_waiting(self) -> None:
        """Graceful shutdown: the Bindings waiting for their claims give up now, unsent (the next
        leader decides their pods), so that the drain is not held up to bindTimeoutSeconds by
        Bindings that cannot land, and the Lease can be handed over."""
        self._stopping = True
        self.volumes_changed()

    async def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds until no Binding is in flight, those submitted meanwhile
        included (graceful shutdown); True if every Binding ever submitted has settled. Nothing is
        cancelled here. A Binding cut short (the loop crashed and cancelled it mid-request) leaves
        the flight count too, but its request may still land, so it makes the drain False: the
        Lease must then be left to expire, not handed over."""
        return await self._flights.drain(timeout)

    def withdrawal_token(self, binding: Binding) -> str:
        """The `tessera.dev/term` value that withdraws `binding`: `<identity>/withdrawn/<the
        resourceVersion it is conditional on>`. With that version in it the write always changes
        the pod (a write that changes nothing keeps the version, and the Binding could land): a pod
        still at that version cannot carry it, since writing it moved the pod past that version.
        Its middle part is not a number, so no leader reads it as a term's leaseTransitions."""
        return f"{self.identity}/withdrawn/{binding.resource_version}"

    async def _bind(self, binding: Binding, term: Hashable | None) -> None:
        settled = False
        try:
            start = time.monotonic()
            binding = await self.ready(binding)
            result = await self._bind_volumes(binding, term) or await self._settle(binding, term)
            settled = True
            result = replace(result, seconds=time.monotonic() - start)
            try:
                self.on_result(result)
            except Exception:  # the callback is ours; a bug there must not kill the binder
                log.exception("binder.callback_failed", pod=f"{binding.namespace}/{binding.name}")
        finally:
            self._flights.ended(settled=settled)

    async def _bind_volumes(self, binding: Binding, term: Hashable | None) -> BindResult | None:
        """VolumeBinding's PreBind (upstream's BindPodVolumes): each write in turn, only while the
        term that decided the Binding leads, then the wait for the claims to be bound. None when
        all is bound (the Binding goes), else the result that keeps it from being sent: refused
        or failed (the pod is decided again; a write that landed stays, as upstream's), or not
        leading (the new leader decides the pod)."""
        written: dict[str, str] = {}
        for change in binding.volume_writes:
            async with self._slots:
                if self.term() is not None:
                    await self.http.acquire()
                if self.term() != term or term is None:
                    return _not_sent(binding)
                if self._stopping:  # no Binding follows: a claim pinned now would stay pinned for nothing
                    return _not_sent(binding, STOPPING)
                answer = await write_volume(self.http, change, self.timeout)
            if answer.failed:
                return BindResult(binding, Outcome.RETRY, answer.failed, 0.0, sends=0, pre_bind=True)
            written[change.key] = answer.version
        return await self._wait_for_volumes(binding, term, written) if binding.claims else None

    async def _wait_for_volumes(self, binding: Binding, term: Hashable | None,
                                written: Mapping[str, str]) -> BindResult | None:
        """Wait until the watch-fed state shows every claim of the decision bound (None), for at
        most `binding.bind_timeout` seconds, asking `check_volumes` at every change
        (`volumes_changed`) instead of upstream's poll each second. No in-flight slot is held
        meanwhile: other pods' Bindings go on. Fails as upstream's ("binding volumes: ..."):
        a claim given up on (`check_bindings`), or the timeout; ends at once when this replica
        stops leading, or when the pod is gone."""
        pod = f"{binding.namespace}/{binding.name}"
        timed_out = BindResult(binding, Outcome.RETRY, f"{PRE_BIND}: binding volumes: {BIND_TIMEOUT}", 0.0, sends=0,
                               pre_bind=True, detail=f"bindTimeoutSeconds {binding.bind_timeout:g} passed")
        if binding.bind_timeout <= 0:  # upstream's poll with its deadline already passed: not one look
            return timed_out
        # the pod shows nothing of it (no Event, no condition) until it ends: the log says it began
        log.info("binder.volumes_wait", pod=pod, node=binding.node, claims=[claim.claim for claim in binding.claims],
                 timeout_seconds=binding.bind_timeout)
        with anyio.move_on_after(binding.bind_timeout):
            while True:
                if self.term() != term or term is None:
                    return _not_sent(binding)
                if self._stopping:
                    return _not_sent(binding, STOPPING)
                if self._volumes_changed is None:
                    self._volumes_changed = anyio.Event()
                changed = self._volumes_changed
                checked = self.check_volumes(binding, written)
                if checked.bound:
                    log.info("binder.volumes_bound", pod=pod, node=binding.node, claims=len(binding.claims))
                    return None
                if checked.pod_gone:
                    return BindResult(binding, Outcome.NOT_FOUND, "the pod was deleted while its volumes were being "
                                      "bound", 0.0, sends=0)
                if checked.failure:
                    return BindResult(binding, Outcome.RETRY, f"{PRE_BIND}: binding volumes: {checked.failure}", 0.0,
                                      sends=0, pre_bind=True)
                await changed.wait()
        return timed_out

    async def _settle(self, binding: Binding, term: Hashable | None) -> BindResult:
        """POST, and after an ambiguous answer read back and POST the same Binding again, until the
        outcome is certain.

        Until `late_landing` seconds after the last ambiguous send, only the pod read back (bound,
        or gone) is certain: a refusal or a 404 of a later send answers for that request only. A
        replica not leading sends nothing for this Binding, and once a term other than `term` (the
        one it was decided in) has begun it never sends it again — its devices were chosen before,
        and another leader may have given them away — but reads back until the earlier request
        can no longer land; then the pod is decided afresh. Back in `term` itself (the lease
        lapsed and came back with nobody else holding it), nothing can have been given away: it
        sends again rather than hold the pod and its devices for the whole window. A Binding
        conditional on a resourceVersion that may still land (it was sent, and the last read shows
        the pod unbound at that version) is withdrawn before it is given up on (`_withdraw`)."""
        delay = RESEND_INITIAL
        sends = 0
        first_error = ""
        last_ambiguous: float | None = None  # when the last send whose fate is unknown went out
        deposed = False  # once another term has begun, for good
        pod = f"{binding.namespace}/{binding.name}"
        while True:
            # a slot for this one request, not across the waits between requests: a Binding being
            # read back (a deposed term's, for up to `late_landing`) must not keep the next
            # term's Bindings waiting
            async with self._slots:
                if not deposed and self.term() is not None:
                    # the write token first: a replica deposed while it waited for one must not send
                    await self.http.acquire()
                may_land = last_ambiguous is not None and self._clock() - last_ambiguous < self.late_landing
                current = self.term()
                deposed = deposed or (current is not None and current != term)
                sending = not deposed and current is not None
                if sending:
                    sends += 1
                    sent_at = self._clock()
                    outcome, message = await self._post(binding, term)
            if sending:
                if may_land and outcome in (Outcome.RETRY, Outcome.NOT_FOUND):
                    log.warning("binder.uncertain_after_ambiguous", pod=pod, node=binding.node, error=message,
                                earlier_error=first_error, sends=sends)
                    outcome = None
                elif outcome is None:
                    last_ambiguous = sent_at
                if outcome is Outcome.RETRY and last_ambiguous is not None and binding.resource_version:
                    # a refusal answers for this request only: an earlier one, held on its way, may
                    # still land on the devices the retry hands out again
                    return await self._withdraw(binding, first_error, sends, deposed=False, why=message)
                if outcome is not None:
                    return BindResult(binding, outcome, message, 0.0, sends=sends)
                first_error = first_error or message
            else:
                if not may_land:
                    if sends:  # the last read may predate a request that landed just before the window closed
                        settled, observed = await self._resolve(binding)
                        if settled is not None:
                            return await self._checked_read_back(binding, settled, observed, first_error, sends,
                                                                 deposed)
                        if binding.resource_version:  # the window is no bound on a request in a proxy
                            return await self._withdraw(binding, first_error, sends, deposed, why=NOT_LEADING)
                    message = (f"{NOT_LEADING}; the Binding was not sent" if not sends else
                               f"{NOT_LEADING}; no earlier Binding landed within {self.late_landing:g} s")
                    return BindResult(binding, Outcome.RETRY, f"{first_error}; {message}" if first_error else message,
                                      0.0, sends=sends, not_leading=True)
                message = f"{NOT_LEADING}: no more sends, reading the pod back"
            settled, observed = await self._resolve(binding)
            if settled is not None:
                # deposed while the send was out counts too: that is when a fence refuses it
                return await self._checked_read_back(binding, settled, observed, first_error, sends,
                                                     deposed or self.term() != term)
            log.info("binder.unsettled", pod=pod, node=binding.node, error=message, sends=sends)
            await self._sleep(delay * (1 + random.random() * 0.2))
            delay = min(delay * 2, RESEND_MAX)

    async def _post(self, binding: Binding, term: Hashable | None) -> tuple[Outcome | None, str]:
        """A certain outcome, or None and the error when the answer is ambiguous. The transport
        sends it again after a Retry-After only while `term` still leads."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": binding.name, "namespace": binding.namespace, "uid": binding.uid,
                         **({"resourceVersion": binding.resource_version} if binding.resource_version else {}),
                         "annotations": dict(binding.annotations)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": binding.node},
        }
        path = f"/api/v1/namespaces/{binding.namespace}/pods/{binding.name}/binding"
        try:
            response = await self.http.request("POST", path, body=body, timeout=self.timeout, limited=False,
                                               resend=lambda: self.term() == term)
        except TRANSPORT_ERRORS as err:
            return None, describe_error(err)
        if response.ok:
            return Outcome.BOUND, ""
        if response.status in _REFUSED:
            return Outcome.RETRY, f"HTTP {response.status}: {response.message()}"
        # 404 (the read-back tells gone from a proxy's word), 409 (already bound — perhaps by an
        # earlier request of ours — or being deleted), 5xx, 429
        return None, f"HTTP {response.status}: {response.message()}"

    async def _withdraw(self, binding: Binding, first_error: str, sends: int, deposed: bool, why: str) -> BindResult:
        """Make `binding` unable to land before the pod is given up on: write its withdrawal token
        onto the pod (`write_term`, the term fence's write), which changes the pod's
        resourceVersion, so the Binding — conditional on the old one — is refused (409) whenever
        it arrives. The pod as written settles it: still unbound (decided again from the new
        version), bound (by our Binding, which landed first, or elsewhere), or gone. A failed
        write says nothing of the pod: back off, read the pod back (another writer, a new
        leader's fence, may have settled it) and write again. The assumption, and its devices,
        are held until then: never released on time alone. `why` the Binding is given up on
        heads the result's message (a refusal's text, or NOT_LEADING)."""
        token = self.withdrawal_token(binding)
        delay = RESEND_INITIAL
        while True:
            async with self._slots:
                answer = await write_term(self.http, binding.namespace, binding.name, binding.uid, token,
                                          timeout=self.timeout)
            if answer.gone:
                return BindResult(binding, Outcome.NOT_FOUND, first_error, 0.0, sends=sends)
            failed = answer.failed
            if answer.pod is not None:
                settled = _settled_by(binding, answer.pod, token)
                if settled is Outcome.RETRY:
                    version = answer.pod["metadata"].get("resourceVersion")
                    detail = f"resourceVersion {binding.resource_version} -> {version}: withdrawn with " \
                        f"{TERM}={token}" + (f"; {first_error}" if first_error else "")
                    return BindResult(binding, Outcome.RETRY, f"{why}; {WITHDRAWN}", 0.0, observed=answer.pod,
                                      sends=sends, detail=detail, not_leading=why == NOT_LEADING, withdrawn=True)
                if settled is not None:
                    return await self._checked_read_back(binding, settled, answer.pod, first_error, sends, deposed)
                failed = "the write left the pod at the Binding's resourceVersion"  # defensive: see the token
            log.warning("binder.withdraw_failed", pod=f"{binding.namespace}/{binding.name}", node=binding.node,
                        error=failed, retry_in=round(delay, 1),
                        message="the pod and its devices stay held until the Binding is withdrawn or settled")
            await self._sleep(delay * (1 + random.random() * 0.2))
            delay = min(delay * 2, RESEND_MAX)
            settled, observed = await self._resolve(binding)
            if settled is not None:
                return await self._checked_read_back(binding, settled, observed, first_error, sends, deposed)

    async def _checked_read_back(self, binding: Binding, settled: Outcome, observed: dict[str, Any] | None,
                                 first_error: str, sends: int, deposed: bool) -> BindResult:
        """The result a read-back settled (`_read_back_result`), after one more look when it shows the
        pod bound to our node with our devices under another `tessera.dev/term`: our Binding may
        have bound it all the same (`_bound_by_ours`)."""
        if (settled is Outcome.CONFLICT and observed is not None and _same_placement(binding, observed)
                and await self._bound_by_ours(binding)):
            settled = Outcome.BOUND
        return _read_back_result(binding, settled, observed, first_error, sends, deposed)

    async def _bound_by_ours(self, binding: Binding) -> bool:
        """Whether our Binding is what bound the pod, for a pod that reads as bound to our node with
        our devices under another `tessera.dev/term` than our Binding's. A newer leader's term
        fence, written from a cache that still showed the pod unbound, can land just after our
        Binding did (its merge patch has only the uid as a precondition) and write its token over
        ours: the pod as read is then the same as after the fence and that leader's own Binding.
        Its history tells them apart: our Binding is conditional on `resource_version`, so it can
        land only on that version, and it bound the pod exactly when the first change after that
        version (a watch from it replays them) binds the pod to our node with our devices under
        our token (the apiserver sets the node and copies a Binding's annotations in one update).
        Anything that proves nothing — no version to start from, a history the watch cache no
        longer holds (410 Expired), a failed or unreadable watch — is not ours (fail closed: the
        pod is then counted as the other's binding, its devices all the same)."""
        ours = binding.annotations.get(TERM)
        if not binding.resource_version or not ours:
            return False
        query = [("watch", "true"), ("fieldSelector", f"metadata.name={binding.name}"),
                 ("resourceVersion", binding.resource_version), ("allowWatchBookmarks", "false"),
                 ("timeoutSeconds", str(HISTORY_WATCH_SECONDS))]
        try:
            async with self._slots:
                response = await self.http.request("GET", f"/api/v1/namespaces/{binding.namespace}/pods",
                                                   query=query, timeout=self.timeout, limited=False)
        except TRANSPORT_ERRORS:
            return False
        if not response.ok:
            return False
        for line in response.body.splitlines():
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                return False
            if not isinstance(event, dict) or event.get("type") not in ("ADDED", "MODIFIED"):
                return False  # an ERROR (410 Expired: the history is gone), a DELETED, or no event
            pod = event.get("object")
            if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
                return False
            meta = pod["metadata"]
            # the first change after our version: ours only if it is our Binding landing
            return meta.get("uid") == binding.uid and _same_placement(binding, pod) and _term_on(pod) == ours
        return False  # no change since our version came (within the watch's timeout): nothing proven

    async def _resolve(self, binding: Binding) -> tuple[Outcome | None, dict[str, Any] | None]:
        """Read the pod until a read succeeds: what it settles (None: still unbound) and the pod."""
        path = f"/api/v1/namespaces/{binding.namespace}/pods/{binding.name}"
        delay = RESEND_INITIAL
        while True:
            try:
                async with self._slots:
                    response = await self.http.request("GET", path, timeout=self.timeout, limited=False)
            except TRANSPORT_ERRORS:
                response = None
            if response is not None and response.status == 404 and pod_not_found(response, binding.name):
                return Outcome.NOT_FOUND, None
            pod = pod_in(response) if response is not None and response.ok else None
            if pod is not None:
                if pod["metadata"].get("uid") != binding.uid:  # a new pod under the old name: ours is gone
                    return Outcome.NOT_FOUND, None
                # our withdrawal token, if a write of it landed whose answer we missed, is no
                # evidence of whose Binding bound the pod
                return _settled_by(binding, pod, self.withdrawal_token(binding)), pod
            await self._sleep(delay * (1 + random.random() * 0.2))
            delay = min(delay * 2, RESEND_MAX)


async def _as_decided(binding: Binding) -> Binding:
    return binding


def _all_bound(binding: Binding, written: Mapping[str, str]) -> BindingsChecked:
    """A Binder without a cluster state to look at waits for nothing."""
    return BindingsChecked(bound=True)


def _not_sent(binding: Binding, why: str = NOT_LEADING) -> BindResult:
    """Given up before the Binding was sent: this replica no longer leads in the Binding's term
    (or, `STOPPING`, is about to hand the Lease over)."""
    return BindResult(binding, Outcome.RETRY, f"{why}; the Binding was not sent", 0.0, sends=0, not_leading=True)


def _settled_by(binding: Binding, pod: dict[str, Any], withdrawn_with: str = "") -> Outcome | None:
    """What pod `binding` names, as the apiserver answered it, settles: bound to our node with our
    devices by our Binding, bound elsewhere or by another Binding or being deleted, unbound at
    another version than the Binding's (decided again), or nothing (None: unbound at the
    Binding's version, where it may still land). `withdrawn_with`: our withdrawal token, written
    over whatever token the pod had (see `_bound_by_other`)."""
    meta = pod["metadata"]
    node = (pod.get("spec") or {}).get("nodeName") or ""
    if _same_placement(binding, pod):
        return Outcome.CONFLICT if _bound_by_other(binding, pod, withdrawn_with) is not None else Outcome.BOUND
    if node:
        return Outcome.CONFLICT
    if meta.get("deletionTimestamp"):  # no Binding can land on a pod being deleted
        return Outcome.CONFLICT
    if binding.resource_version and meta.get("resourceVersion") != binding.resource_version:
        # unbound, and no longer the version our Binding is conditional on: no send of it,
        # earlier or later, can ever land (a resourceVersion never comes back), so the pod is
        # decided again, from this newer version
        return Outcome.RETRY
    return None


def _same_placement(binding: Binding, pod: dict[str, Any]) -> bool:
    """The pod is bound to the Binding's node with its devices (or to its node, for a Binding
    naming no devices)."""
    ours = binding.annotations.get(DEVICES)
    return ((pod.get("spec") or {}).get("nodeName") or "") == binding.node and (
        ours is None or ((pod["metadata"].get("annotations") or {}).get(DEVICES) == ours))


def _bound_by_other(binding: Binding, pod: dict[str, Any], withdrawn_with: str = "") -> str | None:
    """For a pod bound to our node with our devices: the `tessera.dev/term` it carries ("" for
    none) when that proves another Binding than ours bound it, else None. The apiserver copies a
    Binding's annotations onto the pod it binds, and every Binding of a term carries the term's
    token; a newer leader deciding the same pod decides it the same way, so node and devices alone
    cannot tell its Binding from ours. A token other than ours — a newer term's, another
    install's, the one the pod had when we decided, none at all — is someone else's Binding: ours
    would have written ours. Nothing can be told when our Binding carries no token (no leader
    election) or when the pod carries our own withdrawal token (`withdrawn_with`: written over
    whichever Binding's token was there), nor of a Binding by a scheduler that writes no token
    onto a pod already carrying ours; such a pod counts as ours, as before. (A newer leader's fence
    writes its token only onto pods its cache holds unbound: onto one our Binding bound just
    before, only when that Binding landed as the fence wrote, a Lease duration after we stopped
    leading. The pod then reads as the newer term's; `Binder._bound_by_ours` looks at its history
    before the result says so.)"""
    ours = binding.annotations.get(TERM)
    if ours is None:
        return None
    theirs = _term_on(pod)
    return None if theirs in (ours, withdrawn_with) else theirs


def _newer_term_of_ours(binding: Binding, theirs: str) -> bool:
    """For a replica deposed while its Binding was out: `theirs` is another term's token of the
    Lease the Binding's own term leads on (a token of the format before it named its Lease counts
    as that Lease's, as `LeaderElector.other_lease` reads it) — the replica that took over. No
    comparison of the transition counts: a Lease deleted by hand restarts them. Not another
    Lease's token (a second install), nor none (a scheduler that writes none)."""
    mine = binding.annotations.get(TERM) or ""
    ours, newer = parse_term_token(mine), parse_term_token(theirs)
    if ours is None or newer is None or theirs == mine:
        return False
    return newer.of_lease(ours.lease)


def _term_on(pod: dict[str, Any]) -> str:
    """The `tessera.dev/term` a pod as the apiserver answered it carries ("" for none)."""
    return str(((pod.get("metadata") or {}).get("annotations") or {}).get(TERM) or "")


def _read_back_result(binding: Binding, settled: Outcome, observed: dict[str, Any] | None, first_error: str,
                      sends: int, deposed: bool) -> BindResult:
    """The result a read-back settled: bound (despite the earlier error), bound elsewhere, gone, or
    changed since the decision (no send of this Binding can land any more; `deposed`: a replica no
    longer leading names the newer term's fence the pod carries)."""
    if settled is Outcome.RETRY:
        meta = (observed or {}).get("metadata") or {}
        detail = f"resourceVersion {binding.resource_version} -> {meta.get('resourceVersion')}" + \
            (f"; {first_error}" if first_error else "")
        term = _term_on(observed or {})
        fenced_by = term if deposed else ""
        # its term token as decided, or the one this term's Binding carries (a status write of
        # ours may have written it since): nobody's fence or withdrawal changed it
        unfenced = term in (binding.term_as_decided, binding.annotations.get(TERM, binding.term_as_decided))
        return BindResult(binding, settled, CHANGED, 0.0, observed=observed, sends=sends, detail=detail,
                          fenced_by=fenced_by, pod_changed=not deposed and unfenced)
    if settled is Outcome.CONFLICT and observed is not None and _same_placement(binding, observed):
        bound_by = _term_on(observed)
        return BindResult(binding, settled, f"the pod was bound to {binding.node} by another Binding than this "
                          "replica's, with the same devices", 0.0, observed=observed, sends=sends,
                          detail=first_error, bound_by_other=True, bound_by=bound_by)
    node = str(((observed or {}).get("spec") or {}).get("nodeName") or "")
    if settled is Outcome.CONFLICT and observed is not None and node:
        # bound by someone else (a newer leader, a kubelet's static pod, another install): the
        # read-back says where and by which term; the send's own error (a timeout) stays the detail
        term = _term_on(observed) or "none"
        asked = "with other devices than" if node == binding.node else f"not to {binding.node} as"
        return BindResult(binding, settled, f"the pod is bound to {node} ({TERM} {term}), {asked} this Binding "
                          "asked", 0.0, observed=observed, sends=sends, detail=first_error,
                          superseded=deposed and _newer_term_of_ours(binding, _term_on(observed)),
                          bound_by=_term_on(observed))
    if settled is Outcome.BOUND:
        log.info("binder.bound_despite_error", pod=f"{binding.namespace}/{binding.name}", error=first_error,
                 sends=sends)
    return BindResult(binding, settled, "" if settled is Outcome.BOUND else first_error, 0.0,
                      observed=observed, sends=sends)
