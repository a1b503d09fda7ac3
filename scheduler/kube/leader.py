"""Leader election on a `coordination.k8s.io/v1` Lease: client-go's algorithm, on anyio.

Why a port and not something simpler: Tessera runs as a Deployment with a hot standby, and the
standby must agree with the leader (and with `kubectl get lease`, and with any Go tool watching the
same object) on what the Lease means. So this follows client-go's
`tools/leaderelection/leaderelection.go` and `resourcelock/leaselock.go` step by step:

* **Local observation clock.** A candidate never compares the Lease's `renewTime` with its own
  wall clock. It remembers *when it last saw the record change* (`observedTime`, read from the
  monotonic ``clock``) and may take the Lease over only when `observedTime + leaseDurationSeconds`
  has passed on that clock. Clock skew between hosts is therefore harmless; only a skew *rate*
  matters (client-go's package doc).
* **`tryAcquireOrRenew`.** (1) Fast path for the leader: while its own lease is still valid it
  writes a renewed record straight onto the Lease it last saw (optimistic `resourceVersion`).
  (2) Otherwise — or when that write failed — GET the Lease, creating it when it is missing.
  (3) If the record changed since the last GET, adopt it and restart the observation clock.
  (4) A non-empty holder that is someone else and still valid on our clock: give up for now.
  (5) PUT the new record with the `resourceVersion` just read; `409 Conflict` means another
  candidate won the race. A leader keeps `acquireTime` and `leaseTransitions`; a new holder
  sets `acquireTime` to now and increments `leaseTransitions`.
* **Loops.** Campaigning retries every ``retry_period`` jittered by client-go's `JitterFactor`
  1.2 (`wait.JitterUntil`, sliding: the wait is `retry_period * (1 + 1.2 * rand)` after each
  attempt). Leading renews every ``retry_period``; each renewal may retry every
  ``retry_period`` for at most ``renew_deadline`` (`wait.PollImmediateUntil` under a
  `RenewDeadline` context) before the leader steps down.
* **Release** (client-go `ReleaseOnCancel`, which kube-scheduler enables): the holder writes
  `holderIdentity: ""`, `leaseDurationSeconds: 1`, `acquireTime = renewTime = now`, keeping
  `leaseTransitions`. An empty holder lets every candidate take over at its next attempt instead
  of waiting a whole lease duration.
* Requests time out after `max(1 s, renew_deadline / 2)`, like the dedicated client of
  `resourcelock.NewFromKubeconfig`, so one hung request cannot use up the renew deadline.

Where this deliberately differs from client-go, and why:

* `run()` does not return when leadership is lost. client-go's `Run` returns and callers
  usually exit the process; Tessera keeps its informer cache warm, calls `on_stopped_leading`,
  and campaigns again. Because every write is conditional on `resourceVersion`, re-acquiring
  can never overwrite a leader elected in the meantime.
* `on_stopped_leading` is called only after `on_started_leading` was (client-go also calls it
  when `Run` exits without ever leading).
* "Did the record change?" compares the Lease spec as the apiserver returns it (microsecond
  `MicroTime`s). client-go compares a JSON rendering whose timestamps have whole-second
  precision, so two renewals within one second look unchanged to it; ours never miss one.
* `release()` re-reads the Lease once if its conditional write conflicts (our last renewal may
  have landed after we stopped listening) and still only clears the Lease if it is ours.
* A Lease is ours when it holds a record this process wrote (or sent: a write whose answer was
  lost may have landed), not merely when it names our identity. client-go takes a valid Lease
  naming its identity as its own, so two processes started with the same `--identity` both
  lead, each renewing over the other, and both schedule: two pods on one GPU. Here a record
  naming us that we did not write is another holder's: a standby waits for it to expire (a
  restarted process with a fixed identity waits one lease duration, like any failover), a leader
  that meets one steps down at once, and both say why in one error line.
* `is_leader` is true between `on_started_leading` and `on_stopped_leading`; client-go's
  `IsLeader()` (the last observed holder is us) is `observed_holder == identity`.
* A leader also stops acting on evidence that needs no clock (`saw_term`): a pod carrying the
  `tessera.dev/term` token of a newer Lease holder (its term fence) means another replica took
  the Lease after this one did. Only a Lease write of its own sent after that lets it act again.
  The renew loop sends that write at once (not at its next retryPeriod), so a bogus token costs
  one Lease round trip and a real newer holder is found as fast (the conditional write fails on
  its record and this replica steps down); tokens seen while a write is out coalesce into one
  more write after it, so doubts never cause more than one write per round trip. Leader
  election cannot survive a clock running slow (a skewed rate: libfaketime, CLOCK_MONOTONIC
  stopped across a suspended VM) while the Lease traffic is cut; the tokens can, for every pod
  the new leader fenced, bound or marked pending that this replica's watch shows it.

Beyond client-go: the holder records the digest of the configuration it runs
(`scheduler/api/config_effective.py`) on the Lease, in the annotations `tessera.dev/config-digest`,
`tessera.dev/config-digest-holder` (its identity) and `tessera.dev/config-digest-version` (the
Tessera version that computed it: two versions may digest the same settings differently), sent
with the create and update writes election makes anyway. Nothing reloads a configuration, so a ConfigMap changed by `helm upgrade`
is not what the leader runs until it restarts; `kubectl tessera explain` and `what-if` compare
the two (`lease_config_digest`). client-go reads and writes only the spec (leaselock.go: `Get`
takes the record from the spec, `Update` replaces the spec of the Lease it read and PUTs its
metadata back), so kube-scheduler-style tooling is unaffected; and a Go program or an older
Tessera taking the Lease over keeps the annotations as they were: the holder annotation no longer
names the holder then, and the digest reads as unknown.
"""

from __future__ import annotations

import random
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

import anyio
import anyio.lowlevel
import structlog

from scheduler import __version__
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.term_token import parse_term_token, term_token
from scheduler.logs import describe_error

log = structlog.get_logger("tessera.leader")

JITTER_FACTOR = 1.2
"""client-go `leaderelection.JitterFactor`: acquire retries wait `retry_period * (1 + 1.2 * rand)`."""
# our writes since the last one confirmed (forgotten at each confirmation: the Lease holds one of
# them or the confirmed one while it is ours); the bound only caps a long run of failed attempts,
# far more than fit in one renew deadline
SENT_KEPT = 256

DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
"""component-base `RecommendedDefaultLeaderElectionConfiguration` (and kube-scheduler's defaults)."""

RENEW_DEADLINE_PASSED = "failed to renew lease within renewDeadline"
"""`leader.lost`'s reason when renewals kept failing (client-go: `failed to renew lease %v: %v`)."""

DEFAULT_NAMESPACE = "kube-system"
DEFAULT_LEASE_NAME = "tessera"

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"

CONFIG_DIGEST_ANNOTATION = "tessera.dev/config-digest"
CONFIG_HOLDER_ANNOTATION = "tessera.dev/config-digest-holder"  # whose configuration the digest is
CONFIG_VERSION_ANNOTATION = "tessera.dev/config-digest-version"  # the Tessera version that computed it


def lease_config_digest(lease: dict[str, Any]) -> str:
    """The configuration digest a Lease's holder records (see the module docstring); "" when it is
    not known: no such annotation (a holder of another program, or a Tessera before it wrote one),
    or one written for another holder than the Lease names (one who took it over without writing
    its own), or no holder (released)."""
    metadata, spec = lease.get("metadata"), lease.get("spec")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    holder = spec.get("holderIdentity") if isinstance(spec, dict) else None
    if not isinstance(annotations, dict) or not isinstance(holder, str) or not holder:
        return ""
    digest = annotations.get(CONFIG_DIGEST_ANNOTATION)
    return digest if isinstance(digest, str) and annotations.get(CONFIG_HOLDER_ANNOTATION) == holder else ""


def lease_config_version(lease: dict[str, Any]) -> str:
    """The Tessera version that computed the digest `lease_config_digest` reads, "" when that
    digest is not known or no version was recorded with it."""
    if not lease_config_digest(lease):
        return ""
    version = lease["metadata"]["annotations"].get(CONFIG_VERSION_ANNOTATION)
    return version if isinstance(version, str) else ""


def default_identity() -> str:
    """`<hostname>_<uuid4>`, as kube-scheduler builds it: the uuid keeps two processes on one
    host (or a restarted pod that kept its name) from believing they are the same holder."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(moment: datetime) -> str:
    """A `metav1.MicroTime` string: RFC 3339, UTC, always six fractional digits."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True, slots=True)
class _Record:
    """client-go's `LeaderElectionRecord`, with the Lease's timestamps kept as the strings sent."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    leader_transitions: int = 0

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> _Record:
        def as_int(value: Any) -> int:
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        def as_time(value: Any) -> str | None:
            return value if isinstance(value, str) else None

        holder = spec.get("holderIdentity")
        return cls(
            holder_identity=holder if isinstance(holder, str) else "",
            lease_duration_seconds=as_int(spec.get("leaseDurationSeconds")),
            acquire_time=as_time(spec.get("acquireTime")),
            renew_time=as_time(spec.get("renewTime")),
            leader_transitions=as_int(spec.get("leaseTransitions")),
        )

    def to_spec(self) -> dict[str, Any]:
        """`LeaderElectionRecordToLeaseSpec`: the whole spec is replaced, holder even when empty."""
        return {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.leader_transitions,
        }


class LeaderElector:
    """Campaign for, hold and release one Lease. See the module docstring for the algorithm.

    ``on_started_leading`` / ``on_stopped_leading`` are plain callables run on the event loop:
    they must not block (start or cancel tasks, flip flags). An exception they raise is logged
    and does not stop the election. ``on_new_leader`` gets every newly observed holder identity
    ("" after a release), like client-go's `OnNewLeader`. ``on_resumed`` is called when a Lease
    write settles a doubt (`saw_term`) and the term goes on: acting may resume now.
    ``config_digest`` is recorded on the Lease with every write, with this version of Tessera ("":
    none, and a digest another holder left is removed).
    """

    def __init__(self, http: KubeHttp, *, namespace: str = DEFAULT_NAMESPACE, name: str = DEFAULT_LEASE_NAME,
                 identity: str, lease_duration: float = DEFAULT_LEASE_DURATION,
                 renew_deadline: float = DEFAULT_RENEW_DEADLINE, retry_period: float = DEFAULT_RETRY_PERIOD,
                 clock: Callable[[], float] = time.monotonic,
                 on_started_leading: Callable[[], None] | None = None,
                 on_stopped_leading: Callable[[], None] | None = None,
                 on_new_leader: Callable[[str], None] | None = None,
                 on_resumed: Callable[[], None] | None = None,
                 config_digest: str = "",
                 wall_clock: Callable[[], datetime] = _utc_now,
                 rng: random.Random | None = None) -> None:
        # client-go NewLeaderElector's validation, plus: the Lease stores whole seconds, so a
        # duration under one second would be written as 0 (= expired at once).
        if lease_duration < 1:
            raise ValueError("leaseDuration must be at least 1 second (the Lease stores whole seconds)")
        if int(lease_duration) <= renew_deadline:  # what a successor waits is the whole seconds on the Lease
            raise ValueError("leaseDuration must be greater than renewDeadline (in the whole seconds the Lease stores)")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if renew_deadline <= 0:
            raise ValueError("renewDeadline must be greater than zero")
        if retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")
        if not identity:
            raise ValueError("Lock identity is empty")
        if not namespace or not name:
            raise ValueError("the Lease needs a namespace and a name")
        self.http = http
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = float(lease_duration)
        self.renew_deadline = float(renew_deadline)
        self.retry_period = float(retry_period)
        self.request_timeout = max(1.0, self.renew_deadline / 2)
        self._clock = clock
        self._wall_clock = wall_clock
        self._rng = rng or random.Random()
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._on_resumed = on_resumed
        self._config_digest = config_digest

        self._observed = _Record()
        self._observed_raw: dict[str, Any] | None = None  # spec of the last GET
        self._observed_time = 0.0
        self._lease: dict[str, Any] | None = None  # last Lease read or written (carries resourceVersion)
        self._reported_leader = ""
        self._get_failing: int | None = None  # status of the failed Lease GET last logged
        self._write_refused: int | None = None  # status (401/403) of the refused Lease write last warned of
        self._leading = False
        self._term: Hashable = None
        self._fence: str | None = None  # the current term's fence token (`fence_token`)
        self._fence_transitions = 0  # the leaseTransitions in it: a token with more is a newer term's
        # doubts (`saw_term`) so far, and how many there were when our last confirmed write went
        # out: we act only while no doubt came after it (an order of events, not of clock readings)
        self._doubts = 0
        self._confirmed_doubts = 0
        self._doubted: set[str] = set()  # the tokens that made us doubt, each acted on once
        # a doubt since the last attempt began: the renew loop's next write goes out at once
        self._doubt_pending = False
        self._doubt_wake: anyio.Event | None = None  # set by a doubt while the renew loop waits
        self._took_over = False  # the last successful attempt acquired the Lease (not a renewal)
        # renewals whose optimistic write failed and went through GET + update: client-go's
        # slowpathExercised, exported as leader_election_slowpath_total
        self.slow_renewals = 0
        self._acquired_at: str | None = None  # the acquireTime this process wrote when it last took the lead
        self._sent: deque[_Record] = deque(maxlen=SENT_KEPT)  # records this process wrote or tried to
        self._confirmed: _Record | None = None  # the last record of ours the apiserver took
        self._confirmed_sent = 0.0  # our clock before that write went out
        self._impostor_said = False  # the duplicate-identity error is logged once per episode
        self._campaign: tuple[anyio.CancelScope, anyio.Event] | None = None  # run()'s scope, and its end
        self._last_holder = ""  # the last non-empty holder seen: who a released record was released by
        self._previous: dict[str, Any] = {}  # what the Lease held before the last successful attempt, for the log
        self._request = ""  # the Lease request last sent, named when an attempt fails
        self._lost_reason = RENEW_DEADLINE_PASSED  # why the last renewal failed, for `leader.lost`

    # --- public state ------------------------------------------------------------------------

    @property
    def description(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_leader(self) -> bool:
        """True between `on_started_leading` and `on_stopped_leading` while our last successful
        write went out less than `renew_deadline` ago (our clock): act on the cluster only then.

        The time bound is what keeps a paused process (a GC pause, SIGSTOP, a starved VM) from
        acting when it wakes, before its renew loop has run: a successor takes over no earlier
        than `lease_duration` after it saw that write, and `renew_deadline` is shorter. Measured
        from the send, not the answer: an answer read late proves nothing about now."""
        return (self._leading and self._confirmed_doubts == self._doubts
                and self._clock() - self._confirmed_sent < self.renew_deadline)

    @property
    def term(self) -> Hashable | None:
        """Which unbroken leadership this replica is in (None when not leading); work decided in
        one term (a Binding sent into an uncertain answer) may go on in that term only.

        It is the Lease's (leaseTransitions, acquireTime) when we took the lead: a Lease that
        lapsed and came back to us with nobody else holding it in between keeps both (we write our
        own record back), so the term is the same; any other holder in between writes new ones.
        A Lease that names our identity in a record this process did not write (another process
        with the same --identity, a Lease restored from a backup) is not ours: it is waited out,
        and taking over after it writes a new transition, so a new term."""
        return self._term if self.is_leader else None

    @property
    def fence_token(self) -> str | None:
        """The `tessera.dev/term` value the current term writes onto the pods it schedules before
        its first decision (`<leaseNamespace>/<leaseName>/<identity>/<leaseTransitions>/<acquireTime>`,
        scheduler/kube/term_token.py: unique per takeover, so the write always changes the pod,
        even after a Lease deleted by hand restarted the count); None when not leading. A term resumed on this process's own record keeps its
        token (the loop does not fence a term twice, and finishes a fence left half-done)."""
        return self._fence if self.is_leader else None

    def saw_term(self, token: str, where: str) -> bool:
        """`token`, a pod's `tessera.dev/term` (at `where`), names a term newer than this leader's
        (more lease transitions): another replica has taken the Lease since this one did, whatever
        this replica's clock says. Stop acting now (True) and wake the renew loop: the Lease write
        of our own it sends at once restores the term, if it is still ours (the write is
        conditional, so it succeeds only on our own record: the token was bogus, and it cost one
        round trip), or finds the newer holder's record and steps down. Each token
        counts once; tokens of this term's count or older (pods fenced before this term; a Lease
        deleted by hand restarts the count, which this cannot see), another Lease's tokens (its
        count is not ours: `other_lease`) and unreadable values are no evidence."""
        if not self.is_leader or self._fence is None or token == self._fence or token in self._doubted:
            return False
        parsed = parse_term_token(token)
        if parsed is None or parsed.transitions <= self._fence_transitions or self.other_lease(token) is not None:
            return False
        self._doubted.add(token)
        self._doubts += 1
        self._doubt_pending = True
        if self._doubt_wake is not None:
            self._doubt_wake.set()
        log.warning("leader.doubted", lease=self.description, identity=self.identity, pod=where, term=token,
                    own_term=self._fence, message="a pod carries the term fence of a newer Lease holder: this replica "
                    "acts on nothing until the Lease write of its own it sends now succeeds")
        return True

    def other_lease(self, token: str) -> str | None:
        """The Lease (`namespace/name`) that `token`, a pod's `tessera.dev/term`, was written
        under when it is not this elector's: a second Tessera leading on another Lease wrote it.
        None for this Lease's tokens, tokens that name no Lease and values that are no token."""
        parsed = parse_term_token(token)
        return parsed.lease if parsed is not None and not parsed.of_lease(self.description) else None

    @property
    def lease_uid(self) -> str:
        """The uid of the Lease last read or written ("" before any): the object an Event about
        it refers to."""
        return str(((self._lease or {}).get("metadata") or {}).get("uid") or "")

    @property
    def observed_holder(self) -> str:
        """The last holder identity seen on the Lease ("" = nobody / released); for logs and metrics."""
        return self._observed.holder_identity

    def takes_over_within(self) -> float:
        """The longest this replica, campaigning, waits before it takes the Lease if the holder it
        saw renews it no more (a holder killed with -9 releases nothing): the rest of that
        record's leaseDurationSeconds on this replica's clock, counted from when it saw the record
        (never the record's renewTime against this clock: hosts' clocks differ), and the longest
        wait between two attempts, `retry_period * (1 + JITTER_FACTOR)`. For a standby's log line:
        a replica silent for a lease duration says how long it will be."""
        left = max(0.0, self._observed_time + self._observed.lease_duration_seconds - self._clock())
        return round(left + self.retry_period * (1 + JITTER_FACTOR), 1)

    def unrenewed_for(self) -> float | None:
        """How long the holder's record has gone unrenewed: its renewTime read against this
        replica's wall clock (None without a readable renewTime). For a standby's log line only,
        beside `takes_over_within`: a replica that first sees a dead holder's record (started after
        a `kill -9`) has seen it unchanged for no time at all on its observation clock (what
        `leader.acquired`'s `unrenewed_for_seconds` counts), while renewTime says how stale it is
        already. Hosts' clocks differ, so no decision reads it (`_lease_valid` does not)."""
        try:
            renewed = datetime.fromisoformat(self._observed.renew_time or "")
        except ValueError:
            return None
        if renewed.tzinfo is None:
            return None
        return max(0.0, round((self._wall_clock() - renewed).total_seconds(), 1))

    def check(self, max_tolerable_expired: float = 20.0) -> bool:
        """client-go `Check` (kube-scheduler's healthz watchdog uses 20 s): False when we lead but
        have not renewed for longer than the lease duration plus the tolerance, i.e. the renew
        loop is wedged and someone else may already lead. A standby is always fine."""
        if not self._leading:
            return True
        return self._clock() - self._observed_time <= self.lease_duration + max_tolerable_expired

    # --- campaign ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign: acquire, lead until a renewal misses its deadline, step down, repeat.

        Returns only when `release()` ends it; otherwise runs until cancelled. Cancelling it while
        leading calls `on_stopped_leading` but leaves the Lease to expire — call `release()` for a
        fast handover.
        """
        ended = anyio.Event()
        with anyio.CancelScope() as scope:
            self._campaign = (scope, ended)
            try:
                while True:
                    await self._acquire()
                    self._start_leading()
                    try:
                        await self._renew()
                    finally:
                        self._stop_leading()
            finally:
                self._campaign = None
                ended.set()

    async def release(self) -> bool:
        """Give the Lease up if we hold it (graceful shutdown). Returns True when we do not hold it
        afterwards (released, or it was not ours).

        A `run()` still going (in another task) is stopped and awaited first, so it neither keeps
        scheduling after the release nor re-acquires the freshly emptied Lease.
        """
        if self._campaign is not None:
            scope, ended = self._campaign
            scope.cancel()
            await ended.wait()
        if not self._observed_is_us():
            return True
        now = micro_time(self._wall_clock())
        record = _Record(holder_identity="", lease_duration_seconds=1, acquire_time=now, renew_time=now,
                         leader_transitions=self._observed.leader_transitions)
        for _ in range(3):
            try:
                response = await self._update(record)
                if response.ok:
                    self._set_observed(record)
                    self._report_transition()
                    log.info("leader.released", lease=self.description, identity=self.identity)
                    return True
                if response.status != 409:
                    log.error("leader.release_failed", lease=self.description, status=response.status,
                              message=response.message())
                    return False
                # Conflict: our last renewal may have been applied after we stopped waiting for
                # it. Re-read, and release only if the Lease still names us.
                current = await self._get()
                if not current.ok:
                    return current.status == 404
                self._lease = current.json()
                fresh = _Record.from_spec((self._lease or {}).get("spec") or {})
                if fresh.holder_identity != self.identity or fresh not in self._sent:
                    self._set_observed(fresh)
                    self._report_transition()
                    return True
                record = replace(record, leader_transitions=fresh.leader_transitions)
            except Exception as err:  # noqa: BLE001 - transport errors: report, never raise on shutdown
                log.error("leader.release_failed", lease=self.description, error=describe_error(err))
                return False
        return False

    # --- loops -------------------------------------------------------------------------------

    async def _acquire(self) -> None:
        """`acquire`: `wait.JitterUntil(tryAcquireOrRenew, retryPeriod, JitterFactor, sliding)`."""
        log.info("leader.acquiring", lease=self.description, identity=self.identity)
        while True:
            succeeded = await self._try_acquire_or_renew()
            self._report_transition()
            if succeeded:
                log.info("leader.acquired", lease=self.description, identity=self.identity, **self._previous)
                return
            await anyio.sleep(self.retry_period * (1 + self._rng.random() * JITTER_FACTOR))

    async def _renew(self) -> None:
        """`renew`: every retry period, `PollImmediateUntil(retryPeriod, tryAcquireOrRenew)` bounded
        by `renewDeadline`; returns (we step down) when one renewal cannot succeed in time."""
        while True:
            renewed = await self._renew_once()
            if not renewed:
                # lost, stopped, then who leads now: a replica resumed after a pause must not read
                # as standing by while it still thinks it leads
                log.warning("leader.lost", lease=self.description, identity=self.identity,
                            holder=self.observed_holder, reason=self._lost_reason)
                self._stop_leading()
                self._report_transition()
                return
            self._report_transition()
            await self._pause(self.retry_period)

    async def _pause(self, seconds: float) -> None:
        """The renew loop's wait between attempts: `seconds`, or less when a doubt (`saw_term`)
        wants a Lease write now. A doubt that came while the last attempt was out needs one more
        at once (that attempt went out before it); several coalesce into that one."""
        if self._doubt_pending:
            await anyio.lowlevel.checkpoint()
            return
        self._doubt_wake = wake = anyio.Event()
        try:
            with anyio.move_on_after(seconds):
                await wake.wait()
        finally:
            self._doubt_wake = None

    async def _renew_once(self) -> bool:
        """One renewal of a leader; False to step down. A renewal that had to take the Lease anew
        (the record on it was another holder's, or it was gone) ends the term: another replica
        led in between (this one was paused past its lease), and work decided in the old term must
        not go on as if nobody had — the next term starts after `on_stopped_leading`."""
        deadline = self._clock() + self.renew_deadline
        self._lost_reason = RENEW_DEADLINE_PASSED
        with anyio.move_on_after(self.renew_deadline):
            while True:
                self._took_over = False
                doubted = self._confirmed_doubts != self._doubts
                if await self._try_acquire_or_renew():
                    if self._took_over:
                        log.warning("leader.term_interrupted", lease=self.description, identity=self.identity,
                                    message="another holder's record (or none) was on the Lease: a new term starts")
                        self._stop_leading()  # at once: nothing of the old term may go out meanwhile
                        self._lost_reason = ("the term was interrupted: another holder's record (or none) was on "
                                             "the Lease, so this replica took it anew and starts a new term")
                        return False
                    if doubted and self._confirmed_doubts == self._doubts:
                        log.info("leader.doubt_settled", lease=self.description, identity=self.identity,
                                 message="a Lease write of this replica's own succeeded after the doubting tokens: "
                                         "the term goes on")
                        self._call(self._on_resumed, "on_resumed")
                    return True
                if self._usurped():  # someone else leads: stop now, not at the deadline
                    self._lost_reason = ("the Lease names this replica's identity in a record this process did "
                                         "not write (see leader.identity_in_use)")
                    return False
                if self._taken():
                    # client-go's words for a record it may not take (`tryAcquireOrRenew`, logged at V(4))
                    self._lost_reason = (f"lock is held by {self._observed.holder_identity} and has not yet "
                                         "expired: another holder took the Lease")
                    return False
                if self._clock() + self.retry_period >= deadline:
                    return False
                await self._pause(self.retry_period)
        return False  # the deadline cut a renewal short

    def _start_leading(self) -> None:
        acquired = self._observed.acquire_time
        ours = acquired is not None and acquired == self._acquired_at
        previous_term, self._term = self._term, (self._observed.leader_transitions, acquired) if ours else object()
        # a new term (the Lease taken over from another holder's record — expired, released, or
        # none: deleted by hand — or this process's first): Bindings an earlier holder sent may
        # still be on their way, so the term is fenced first (scheduler/kube/fence.py). Leading
        # again on this process's own record is the same term: nobody else led in between, and it
        # keeps the term's token, so a fence it had not finished before stepping down is finished
        # (the loop skips a fence already finished in the term).
        if self._term != previous_term:
            self._fence = term_token(self.namespace, self.name, self.identity, self._observed.leader_transitions,
                                     acquired or "")
            self._fence_transitions = self._observed.leader_transitions
        self._leading = True
        self._call(self._on_started_leading, "on_started_leading")

    def _stop_leading(self) -> None:
        if not self._leading:
            return
        self._leading = False
        self._call(self._on_stopped_leading, "on_stopped_leading")

    @staticmethod
    def _call(callback: Callable[[], None] | None, what: str) -> None:
        if callback is None:
            return
        try:
            callback()
        except Exception:  # noqa: BLE001 - a broken callback must not end the election
            log.exception("leader.callback_failed", callback=what)

    def _report_transition(self) -> None:
        """`maybeReportTransition`: tell `on_new_leader` about a holder we have not reported yet."""
        holder = self._observed.holder_identity
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        log.info("leader.observed", lease=self.description, holder=holder or "<none>",
                 me=holder == self.identity)
        if self._on_new_leader is not None:
            try:
                self._on_new_leader(holder)
            except Exception:  # noqa: BLE001
                log.exception("leader.callback_failed", callback="on_new_leader")

    # --- one attempt -------------------------------------------------------------------------

    async def _try_acquire_or_renew(self) -> bool:
        """client-go `tryAcquireOrRenew`; API and transport errors count as a failed attempt."""
        try:
            return await self._try_acquire_or_renew_unguarded()
        except Exception as err:  # noqa: BLE001 - retried by the caller's loop
            # KubeHttp's timeout is a bare TimeoutError: say how long it waited, not only its type
            error = (f"TimeoutError: no answer within {self.request_timeout:g} s"
                     if isinstance(err, TimeoutError) and not str(err).strip() else describe_error(err))
            log.warning("leader.attempt_failed", lease=self.description, error=error, request=self._request)
            return False

    async def _try_acquire_or_renew_unguarded(self) -> bool:
        now_clock = self._clock()
        doubts = self._doubts  # a write sent now answers the doubts so far, not later ones
        self._doubt_pending = False
        now = micro_time(self._wall_clock())
        record = _Record(holder_identity=self.identity, lease_duration_seconds=int(self.lease_duration),
                         acquire_time=now, renew_time=now)

        # 1. Fast path: the leader writes onto the Lease it last saw.
        if self._observed_is_us() and self._lease_valid(now_clock) and self._lease is not None:
            fast = replace(record, acquire_time=self._observed.acquire_time,
                           leader_transitions=self._observed.leader_transitions)
            response = await self._update(fast)
            if response.ok:
                self._confirm(fast, now_clock, doubts)
                # its own record, same term: also when it takes it back after stepping down (a
                # lease blip), where the last takeover's holder would be named otherwise
                self._previous = {"previous_holder": self.identity, "previous_record": "own"}
                return True
            self._write_failed("leader.fast_renew_failed", response)

        # 2. Obtain or create the record.
        current = await self._get()
        if not current.ok and current.status != 404:
            if current.status != self._get_failing:  # once per kind of failure, not every retry period
                log.warning("leader.get_failed", lease=self.description, status=current.status,
                            message=current.message(), **self._access_hint(current.status))
            self._get_failing = current.status
            return False
        self._get_failing = None
        if current.status == 404:
            if self._taken():  # deleted by hand under a holder we saw: it may lead still; wait it out
                return False
            created = await self._create(record)
            if not created.ok:
                self._write_failed("leader.create_failed", created)
                return False
            self._previous = {"previous_holder": self._last_holder or "<none>", "previous_record": "absent"}
            self._confirm(record, now_clock, doubts)
            self._acquired_at = record.acquire_time
            self._took_over = True
            return True
        lease = current.json()
        if not isinstance(lease, dict):
            log.warning("leader.get_failed", lease=self.description, message="not a Lease object")
            return False
        self._lease = lease
        spec = lease.get("spec") or {}
        old = _Record.from_spec(spec)

        # 3. Record obtained: restart our observation clock only when it changed.
        unrenewed_for = now_clock - self._observed_time if spec == self._observed_raw else 0.0
        if spec != self._observed_raw:
            self._set_observed(old)
            self._observed_raw = spec
        if self._usurped() and not self._impostor_said:
            self._impostor_said = True
            log.error("leader.identity_in_use", lease=self.description, identity=self.identity,
                      message=f"the Lease names this replica's identity {self.identity!r} in a record this process "
                              "did not write: an earlier run of this replica (restarted before the Lease expired), or "
                              "another process started with the same --identity (give every replica its own); this "
                              "one waits until that record expires before it leads")
        if old.holder_identity and self._lease_valid(now_clock) and not self._observed_is_us():
            return False

        # 4. Keep acquireTime/transitions when we already lead, count a transition otherwise.
        fresh = not self._observed_is_us()
        if not fresh:
            record = replace(record, acquire_time=old.acquire_time, leader_transitions=old.leader_transitions)
            self.slow_renewals += 1
            previous: dict[str, Any] = {"previous_holder": self.identity, "previous_record": "own"}
        else:
            record = replace(record, leader_transitions=old.leader_transitions + 1)
            if old.holder_identity:  # another holder's (or an earlier process's) record ran out
                previous = {"previous_holder": old.holder_identity, "previous_record": "expired",
                            "unrenewed_for_seconds": round(unrenewed_for, 1),
                            "lease_duration_seconds": old.lease_duration_seconds}
            else:  # emptied by a holder's release (or by hand): taken at once, as client-go does
                previous = {"previous_holder": self._last_holder or "<unknown>", "previous_record": "released"}

        # 5. Conditional write: 409 means someone else updated the Lease since our GET.
        updated = await self._update(record)
        if not updated.ok:
            self._write_failed("leader.update_failed", updated)
            return False
        self._confirm(record, now_clock, doubts)
        self._previous = previous
        if fresh:
            self._acquired_at = record.acquire_time
            self._impostor_said = False
            self._took_over = True
        return True

    def _write_failed(self, event: str, response: Response) -> None:
        """A Lease write the apiserver did not take. A 409 (another writer since our read) or a
        5xx is routine, and retried: info. A 401/403 is not: a revoked or expired token, or RBAC
        that no longer grants the Lease, and this replica cannot renew until someone fixes it; a
        warning, once per such status (a renewal is retried every retryPeriod), as
        `leader.get_failed` is."""
        refused = response.status in (401, 403)
        (log.warning if refused and response.status != self._write_refused else log.info)(
            event, lease=self.description, status=response.status, message=response.message(),
            **self._access_hint(response.status))
        if refused:
            self._write_refused = response.status

    def _ours(self, record: _Record) -> bool:
        """Written (or sent) by this process: among our last writes, or the last one taken (failed
        writes must not push the record the Lease holds out of our memory)."""
        return record in self._sent or record == self._confirmed

    def _observed_is_us(self) -> bool:
        """The Lease holds a record of ours: our identity *and* written (or sent) by this process."""
        return self._observed.holder_identity == self.identity and self._ours(self._observed)

    def _usurped(self) -> bool:
        """The Lease names our identity in a record this process never wrote: another process
        runs with the same --identity."""
        return self._observed.holder_identity == self.identity and not self._ours(self._observed)

    def _taken(self) -> bool:
        """The last record seen names another holder and has not expired on our clock."""
        holder = self._observed.holder_identity
        return bool(holder) and holder != self.identity and self._lease_valid(self._clock())

    def _confirm(self, record: _Record, sent_at: float, doubts: int) -> None:
        """The apiserver took `record`, sent no earlier than `sent_at` (our clock) and after the
        first `doubts` doubts: a record of ours, so those tokens were not a newer holder's."""
        self._set_observed(record)
        self._confirmed = record
        self._confirmed_sent = sent_at
        self._confirmed_doubts = doubts
        self._sent.clear()  # writes are conditional: an older one can no longer land after this
        self._write_refused = None  # a refusal after this one is news again

    def _lease_valid(self, now_clock: float) -> bool:
        """`isLeaseValid`: valid until `observedTime + leaseDurationSeconds` on OUR clock."""
        return self._observed_time + self._observed.lease_duration_seconds > now_clock

    def _set_observed(self, record: _Record) -> None:
        self._observed = record
        if record.holder_identity:
            self._last_holder = record.holder_identity
        self._observed_time = self._clock()

    # --- Lease I/O ---------------------------------------------------------------------------

    def _path(self) -> str:
        return LEASES.format(namespace=self.namespace)

    def _access_hint(self, status: int) -> dict[str, str]:
        """For a 403: the Lease's namespace is one the scheduler's RBAC does not grant (a
        configuration copied into deploy/'s ConfigMap with `kube-system`): this replica can never
        lead, so say what to change. For a 401: its credentials themselves are refused."""
        if status == 401:
            return {"hint": "the apiserver refused the scheduler's credentials (a revoked or expired "
                            "ServiceAccount token, or a deleted ServiceAccount): this replica cannot renew or "
                            "take the Lease until they are valid again"}
        if status != 403:
            return {}
        return {"hint": f"the scheduler may not use Leases in {self.namespace}: set "
                        "leaderElection.resourceNamespace to the namespace its Role grants Leases in "
                        "(tessera-system with deploy/ and the Helm chart), or grant it there"}

    async def _get(self) -> Response:
        self._request = f"GET {self._path()}/{self.name}"
        return await self.http.request("GET", f"{self._path()}/{self.name}", timeout=self.request_timeout,
                                       limited=False)

    async def _create(self, record: _Record) -> Response:
        self._sent.append(record)
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": self._metadata({"name": self.name, "namespace": self.namespace}),
                "spec": record.to_spec()}
        self._request = f"POST {self._path()}"
        response = await self.http.request("POST", self._path(), body=body, timeout=self.request_timeout,
                                           limited=False)
        if response.ok:
            self._lease = response.json()
        return response

    async def _update(self, record: _Record) -> Response:
        """PUT the last Lease seen with its spec replaced; its `resourceVersion` makes it conditional."""
        if self._lease is None:
            return Response(409, b'{"message":"lease not initialized, call get or create first"}')
        self._sent.append(record)
        body = {**self._lease, "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": self._metadata(self._lease.get("metadata") or {}), "spec": record.to_spec()}
        self._request = f"PUT {self._path()}/{self.name}"
        response = await self.http.request("PUT", f"{self._path()}/{self.name}", body=body,
                                           timeout=self.request_timeout, limited=False)
        if response.ok:
            self._lease = response.json()
        return response

    def _metadata(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """`metadata` with this replica's configuration digest, identity and version in its
        annotations (any other annotation kept), or without them when it records none."""
        annotations = {key: value for key, value in (metadata.get("annotations") or {}).items()
                       if key not in (CONFIG_DIGEST_ANNOTATION, CONFIG_HOLDER_ANNOTATION, CONFIG_VERSION_ANNOTATION)}
        if self._config_digest:
            annotations |= {CONFIG_DIGEST_ANNOTATION: self._config_digest, CONFIG_HOLDER_ANNOTATION: self.identity,
                            CONFIG_VERSION_ANNOTATION: __version__}
        kept = {key: value for key, value in metadata.items() if key != "annotations"}
        return {**kept, "annotations": annotations} if annotations else kept
