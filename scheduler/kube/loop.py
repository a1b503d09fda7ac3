"""The live scheduler: informers feed the core, cycles run, bindings go out, Events and statuses follow.

Everything runs in one event loop. The core is synchronous and never awaits, so applying a watch
event and running a cycle can never interleave: each cycle sees a consistent state, exactly as in
`simulate`. Only the leader pops the queue; a standby keeps its cache warm so a handover is
immediate. Bindings, Events and status patches are written by background tasks and never block a
cycle. All of those tasks live in the task group `SchedulerLoop.run()` opens (the Bindings in the
binder's, nested in it), so cancelling the loop's owner ends every one of them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import structlog

from scheduler.api.config import SchedulerConfig
from scheduler.core import annotations as ann
from scheduler.core.cycle import pod_group_error
from scheduler.core.foreign import IGNORED_SCHEDULER_KEY
from scheduler.core.outcomes import REDECIDED_AT_ONCE
from scheduler.core.pod_terms import IGNORED_PREFERRED_TERMS
from scheduler.core.framework.attempt import Attempt
from scheduler.core.framework.timing import NO_STOPWATCH, Stopwatch
from scheduler.core.objects import (FINAL_GROUP_PHASES, PLUGINS_API, PODGROUP_API_VERSIONS, WORKLOAD_API, Pod,
                                   gang_key, gang_key_parts, gang_name, podgroup_api)
from scheduler.core.plugins.preemption.victims import listed
from scheduler.core.plugins.registry import args_of
from scheduler.core.plugins.volume_binding import BindingsChecked, VolumeBindingArgs, check_bindings
from scheduler.core.scheduler import Scheduler
from scheduler.core.state import Notice
from scheduler.core.tenants import pods_named
from scheduler.core.volumes import CLAIM_KIND, VOLUME_KIND
from scheduler.kube.binder import Binder, Binding, BindResult, Outcome
from scheduler.kube.class_controller import DefaultClassController
from scheduler.kube.concurrency import Wakeup
from scheduler.kube.conflicting import GIVEN_TWICE, ConflictingSchedulers, other_install_note
from scheduler.kube.evictor import Eviction, Evictor
from scheduler.kube.fence import FENCE_REFUSED, FencedPod, TermFence
from scheduler.kube.http import KubeHttp, RateLimiter
from scheduler.kube.informers import PODS, SCHEDULER_KINDS, STORAGE_KINDS, InformerSet
from scheduler.kube.recorder import EventRecorder, ObjectRef
from scheduler.kube.startup_gc import collect_after_sync
from scheduler.kube.held import HeldDevicesWriter
from scheduler.kube.status import SCHEDULER_ERROR, UNSCHEDULABLE, WAITING_FOR_ALLOCATION, StatusWriter
from scheduler.kube.untold import UntoldNotices
from scheduler.kube.volume_writes import planned
from scheduler.first_few import first_few
from scheduler.logs import describe_error

log = structlog.get_logger("tessera.loop")
# notices of valid input Tessera does not read (other schedulers' keys, preferred terms it does not
# score): told once per pod as a Warning Event, logged at info (not `input.invalid`)
NOT_READ = frozenset({IGNORED_SCHEDULER_KEY, IGNORED_PREFERRED_TERMS})

FLUSH_UNSCHEDULABLE_EVERY = 30.0
FINISH_GANG_EVICTIONS_EVERY = 5.0  # a refused finishing eviction is tried again this often, not in a loop
IDLE_WAKE_SECONDS = 1.0  # the cycles look again at least this often (backoff expiries, flushes)
CYCLES_BEFORE_YIELD = 16
ABANDONED_NAMED = 5  # pods `leader.abandoned` names of each kind; the counts say how many there were

_API_VERSIONS = {"Pod": "v1", "Node": "v1", "ExtendedResource": "tessera.dev/v1alpha1",
                 "ResourceClass": "tessera.dev/v1alpha1", "PodGroup": PODGROUP_API_VERSIONS[PLUGINS_API],
                 "PodDisruptionBudget": "policy/v1", "PriorityClass": "scheduling.k8s.io/v1",
                 "PersistentVolumeClaim": "v1", "PersistentVolume": "v1", "StorageClass": "storage.k8s.io/v1"}


@dataclass(slots=True)
class LoopStats:
    cycles: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    bind_errors: int = 0
    errors: int = 0  # cycles that failed with an error (SchedulerError), not a rejection
    preemptions: int = 0
    started: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class _Placement:
    """One placement of a PodGroup's gang whose Bindings are out: its PodGroup's key, the members
    not bound yet (uids), the nodes of those bound, and the profile it was decided for (the Event's
    controller)."""

    key: str
    waiting: set[str]
    nodes: list[str] = field(default_factory=list)
    controller: str = ""


class SchedulerLoop:
    def __init__(self, config: SchedulerConfig, http: KubeHttp, watch_http: KubeHttp, *, identity: str,
                 leader_term: Callable[[], Hashable | None] = lambda: 0, seed: int | None = None,
                 hooks: LoopHooks | None = None, stopwatch: Stopwatch = NO_STOPWATCH,
                 term_fence: Callable[[], str | None] = lambda: None,
                 on_term_seen: Callable[[str, str], bool] = lambda token, pod: False,
                 other_lease: Callable[[str], str | None] = lambda token: None) -> None:
        self.config = config
        self.identity = identity
        # `leader_term`: which leadership term this replica is in, None when not leading (the
        # elector's `term`; without leader election, one term for ever). Only the leader acts on
        # the cluster, and the binder lets only a Binding's own term send it.
        self.leader_term = leader_term
        self.is_leader: Callable[[], bool] = lambda: self.leader_term() is not None
        # `term_fence`: the tessera.dev/term value the current term writes onto the pods it
        # schedules before its first decision (`_fence_term`), None when it needs no fence (no
        # leader election). A term whose fence began is fenced to the end with that token.
        # `on_term_seen(token, pod)`: every tessera.dev/term a pod of this process's scheduler
        # names shows while leading, and one a Binding brings onto a pod of another name
        # (`_term_written`) (the elector's `saw_term`: a newer term's token ends this replica's
        # acting at once).
        self.on_term_seen = on_term_seen
        # `stopwatch`: told how long the core's extension points and plugins take, and the Bindings
        # (scheduler_framework_extension_point_duration_seconds, scheduler_plugin_execution_duration_seconds)
        self.stopwatch = stopwatch
        self.core = Scheduler(config, seed=random.randrange(2**32) if seed is None else seed, stopwatch=stopwatch)
        self.informers = InformerSet(watch_http, self._on_event, SCHEDULER_KINDS)
        self.binder = Binder(http, self._on_bound, term=lambda: self.leader_term(), identity=identity,
                             ready=self._after_own_status_write, check_volumes=self._check_volumes)
        # Events get a client of their own with its own token bucket, as kube-scheduler's event
        # client does, so that recording a pod's Event never takes a Binding's place in the budget;
        # it counts its requests wherever `http` counts them then (`on_result` may be set later).
        limiter = http.limiter
        events_http = KubeHttp(http.api, RateLimiter(limiter.qps, limiter.burst) if limiter is not None else None,
                               on_result=http.tell_result)
        # each Event names the profile it was decided for as its reportingController (kube-scheduler
        # gives each profile a recorder named after its scheduler); the first profile's otherwise
        self.events = EventRecorder(events_http, controller=config.profiles[0].scheduler_name, instance=identity,
                                    term=lambda: self.leader_term())
        self.statuses = StatusWriter(http, self._pod_version, allowed=lambda: self.is_leader(),
                                     on_pod_written=self._written, term_token=lambda: self.fence.token())
        # the Warning of an edit a standby saw is reported by whichever replica writes its union
        self.held = HeldDevicesWriter(http, allowed=lambda: self.is_leader(),
                                      on_written=self._tell)
        # every other notice this replica saw while it could not record Events: told when it leads
        self.untold = UntoldNotices()
        # PodGroups whose status this process already settled (upstream ones PodGroupScheduled=True,
        # scheduler-plugins ones Finished or Failed): nothing is written over it, even before the
        # watch echoes it back
        self._groups_settled: set[str] = set()
        # pods placed whose Binding has not answered yet: (profile, cycle seconds, the attempt)
        # (profile, the cycle's seconds, the attempt, when it was decided: monotonic clock), so the
        # attempt's duration runs to the Binding's answer, a wait at the allocation gate included,
        # as upstream's runs through WaitOnPermit and bind
        self._binding_attempts: dict[str, tuple[str, float, Attempt, float]] = {}
        # a pod decided again at once after an outdated Binding: the time its attempt took so far,
        # and when (monotonic)
        self._carried_seconds: dict[str, tuple[float, float]] = {}
        # placements of gangs whose members' Bindings have not all landed, by the uid of each member
        # not bound yet (one lookup per Binding answered, however many gangs are in flight; a
        # gang's later placement while an earlier one's Bindings are out is a placement of its
        # own): told `Scheduled` once they have (`_placement_answered`)
        self._placing: dict[str, _Placement] = {}
        # Bindings the allocation gate holds, by pod uid: since when (monotonic clock), for the
        # permit wait's duration when it ends (upstream's WaitOnPermit)
        self._held_since: dict[str, float] = {}
        self.evictor = Evictor(http, self._on_evicted, self._on_eviction_failed, term=lambda: self.leader_term())
        self.hooks = hooks or LoopHooks()
        self.stats = LoopStats()
        self._wake = Wakeup()
        self._stopping = False
        # a ResourceClass event since the statuses were last computed: an edit that keeps the
        # class's meaning moves only its metadata.generation, which the status reports but the
        # registry's generation does not follow (`ClassRegistry.refresh`)
        self._classes_dirty = False
        # the class registry's generation the statuses were last computed for (-1: a new term
        # computes them all): it moves with every class or device change the registry indexed,
        # also one of another kind's event (a node leaving makes a class valid, a pod leaving takes
        # in a device that waited behind a held one); not with a device's heartbeat
        self._classes_written = -1
        self._finish_due = 0.0  # the next look for half-done gang evictions (at once when leading)
        # the leadership term whose first decision waited for `_catch_up` (None: none yet)
        self._caught_up_term: Hashable | None = None
        self.fence = TermFence(http, term_fence)
        # `other_lease(token)`: the Lease a pod's term token was written under when it is not ours
        # (the elector's): a second Tessera on another Lease binds the same pods
        self.conflicting = ConflictingSchedulers(other_lease, lambda: self.fence.token(), self.events)
        # when (monotonic clock) this replica last began to lead (`leadership_started`; None: not
        # told): a Pod LIST sent after it makes the term's catch-up read needless
        self._leading_since: float | None = None
        self._alive = time.monotonic()
        self.class_controller: DefaultClassController | None = None
        if self.core.default_class_controller:
            self.class_controller = DefaultClassController(
                http, self.core.devices, self.core.resource_classes,
                is_leader=lambda: self.is_leader(), ready=lambda: self.informers.synced)

    # --- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until cancelled (`stop()` only ends the cycles: the rest keeps going while the
        caller drains the Bindings). The binder is up before anything can submit to it."""
        async with anyio.create_task_group() as group:
            group.start_soon(collect_after_sync, self.informers.wait_synced, name="startup-gc")
            await group.start(self.binder.run, name="binder")
            group.start_soon(self.informers.run, name="informers")
            group.start_soon(self.events.run, name="events")
            group.start_soon(self.statuses.run, name="statuses")
            group.start_soon(self.held.run, name="held-devices")
            group.start_soon(self.evictor.run, name="evictor")
            group.start_soon(self._schedule_forever, name="schedule")
            group.start_soon(self._wake_when_synced, name="wake-when-synced")
            if self.class_controller is not None:
                group.start_soon(self.class_controller.run, name="class-controller")

    def stop(self) -> None:
        """Stop starting new cycles (graceful shutdown); the caller then `drain`s the writes in flight."""
        self._stopping = True
        self.binder.stop_waiting()  # a Binding waiting for its claims has sent nothing: it is given up
        self._wake.set()

    @property
    def in_flight(self) -> int:
        """Bindings and preemptions under way."""
        return self.binder.in_flight + self.evictor.in_flight

    async def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds in all for the Bindings and the preemptions in flight to end
        (nothing is cancelled); True if every one ended with its outcome known. Both are writes the
        Lease guards: one still out, or cut mid-request, may land after a successor took over."""
        deadline = anyio.current_time() + timeout
        bound = await self.binder.drain(timeout)
        evicted = await self.evictor.drain(max(0.0, deadline - anyio.current_time()))
        return bound and evicted

    def wake(self) -> None:
        self._wake.set()

    def leadership_started(self, lease: ObjectRef | None = None) -> None:
        """This replica leads from now on (the elector's `on_started_leading`, with the Lease it
        took; at start without leader election, no Lease). Wakes the loop. A Lease taken is told
        as client-go's LeaseLock.RecordEvent("became leader") tells it: a Normal Event
        LeaderElection on the Lease (its uid too, as `kubectl describe lease` finds Events by it),
        "<identity> became leader" (written in this term)."""
        if lease is not None:
            self.events.record(lease, "Normal", "LeaderElection", "LeaderElection", f"{self.identity} became leader")
        self._leading_since = time.monotonic()
        self.wake()
        if self.class_controller is not None:  # a new leader creates the missing classes at once
            self.class_controller.wake()

    @property
    def healthy(self) -> bool:
        """The scheduling task has been around within the last minute (it wakes at least every second)."""
        return time.monotonic() - self._alive < 60.0

    @property
    def stopping(self) -> bool:
        """`stop()` was called (SIGTERM): /readyz answers not ready from then on, as kube-scheduler's
        shutdown check."""
        return self._stopping

    # --- watch events ------------------------------------------------------------------------

    def _on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        self._apply(event_type, obj)
        self.hooks.on_event(event_type, str(obj.get("kind")))
        self._submit_released()
        self._wake.set()

    def _apply(self, event_type: str, obj: dict[str, Any]) -> None:
        """One object state into the core: a watch event, or a pod the binder has just read back."""
        kind = obj.get("kind")
        # the pod's term token before this event (None: not in the cache), to tell a token written
        # while we watched from one first seen on a pod written before
        before = self.core.state.pods.get(str((obj.get("metadata") or {}).get("uid") or "")) if kind == "Pod" else None
        term_read = self._term_written(before, obj) if kind == "Pod" and event_type != "DELETED" else ""
        if term_read and before is not None and before.meta.annotations.get(ann.TERM) != term_read:
            # before the core's notices of this write: a GPU it gave out twice names the install
            self.conflicting.term_changed(term_read, obj)
        labels_before = self._node_labels(obj) if kind == "Node" else None
        notices = self.core.apply(event_type, obj, time.time())
        for notice in notices:
            self._report(notice)
        if (kind in (CLAIM_KIND, VOLUME_KIND) or (kind == "Pod" and event_type == "DELETED")
                or (kind == "Node" and (event_type == "DELETED" or self._node_labels(obj) != labels_before))):
            # a Binding waiting for its claims looks again (a node gone or relabelled fails it, as
            # upstream's poll of the node would; heartbeats do not wake it)
            self.binder.volumes_changed()
        if event_type == "DELETED":  # nothing is told about an object that is gone
            meta = obj.get("metadata") or {}
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            self.untold.object_gone(str(kind), f"{namespace}/{name}" if namespace else name, str(meta.get("uid") or ""))
        if kind == "ResourceClass":
            self._classes_dirty = True
        elif kind == "ExtendedResource":
            if self.class_controller is not None:
                self.class_controller.wake()
        elif kind == "Pod":
            meta = obj.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            held = annotations.get(ann.HELD_DEVICES)
            if event_type != "DELETED" and isinstance(held, str):
                self.held.observed(str(meta.get("uid", "")), held)  # an earlier leader wrote it
            if term_read:
                self.on_term_seen(term_read, f"{meta.get('namespace', '')}/{meta.get('name', '')}")
            if event_type != "ADDED" and (event_type == "DELETED" or (obj.get("spec") or {}).get("nodeName")):
                self.statuses.pod_gone(str(meta.get("namespace", "")), str(meta.get("name", "")))
            if event_type == "DELETED":  # a held Binding that will never be sent
                uid = str(meta.get("uid", ""))
                self.held.pod_gone(uid)
                self.evictor.forget(uid)
                self._binding_attempts.pop(uid, None)
                self._carried_seconds.pop(uid, None)
                self._placement_answered(uid, None)
                self._end_permit_wait(uid, "Unschedulable")  # upstream's deletePod -> RejectWaitingPod
        if event_type == "DELETED" and kind in ("ResourceClass", "PodGroup"):
            self._forget_status(str(kind), obj)
        elif event_type != "DELETED" and kind in ("ResourceClass", "Pod"):
            self.statuses.observed(obj)  # the condition times a new term keeps
        elif event_type != "DELETED" and kind == "PodGroup" and self.statuses.podgroup_observed(obj):
            # another status landed after ours (an earlier term's late write): settled or not, the
            # group is written again (the event touched it)
            meta = obj.get("metadata") or {}
            self._groups_settled.discard(gang_key(str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                                                  podgroup_api(obj)))
        self._write_touched_groups()

    def _term_written(self, before: Pod | None, obj: dict[str, Any]) -> str:
        """The `tessera.dev/term` token of pod `obj` (`before`: the cache's version, None when new)
        that tells the leader something — a newer term of its Lease (`on_term_seen`), another
        install's write (`term_changed`); "" when none or not leading. Only tokens on pods of this
        process's scheduler names count, and on a pod of another name only the one its Binding
        brings (the update that sets nodeName): without the admission policy anyone who may
        annotate a pod can write any token, and one written every half second onto a user's pod
        of another scheduler stalled the leader (adversary round 10). A Binding takes
        pods/binding, which users do not have; it is how another Tessera under other scheduler
        names on this install's nodes shows (a second install, or a newer replica of this Lease
        whose profiles differ). A pod's schedulerName never changes."""
        token = ((obj.get("metadata") or {}).get("annotations") or {}).get(ann.TERM)
        if not isinstance(token, str) or not self.is_leader():
            return ""
        spec = obj.get("spec") or {}
        if str(spec.get("schedulerName") or "default-scheduler") in self.config.scheduler_names:
            return token
        if before is None or before.node_name or not spec.get("nodeName"):
            return ""
        return token if before.meta.annotations.get(ann.TERM) != token else ""

    def _written(self, pod: dict[str, Any]) -> None:
        """A pod as a write of this replica's own left it (a status PATCH, the term fence): into
        the core before the watch shows it, so the pod's next Binding carries its current
        resourceVersion."""
        self._apply("MODIFIED", {"apiVersion": "v1", "kind": "Pod", **pod})

    def _write_touched_groups(self) -> None:
        """The status of every PodGroup whose object or members changed — only by the leader, and
        only from a complete cache: before every informer has listed, a group's pods are only the
        ones seen so far (3 Succeeded and 1 Failed of a job that has a 4th Succeeded one reads as
        Failed, a final phase), as scheduler-plugins' controller reconciles only once its caches
        have synced. Until then the groups stay touched and are written once both hold."""
        if not self.is_leader() or not self.informers.synced:
            return
        for key in self.core.take_touched_groups():
            self._write_group_status(key)

    def _forget_status(self, kind: str, obj: dict[str, Any]) -> None:
        """A deleted ResourceClass or PodGroup: nothing of its status is kept, so one created
        again under the name gets its own."""
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if kind == "ResourceClass":
            self.statuses.resource_class_gone(name)
            return
        self._groups_settled.discard(gang_key(namespace, name, podgroup_api(obj)))
        self.statuses.podgroup_gone(namespace, name, podgroup_api(obj))

    def lost_leadership(self) -> None:
        """Another replica leads now: drop every Binding this one has decided but not sent, every
        eviction and status not yet written (and what it remembers of statuses written: the next
        leader may change them), and the core stops counting those victims as going; a later
        term looks for half-done gang evictions at once and writes every PodGroup's status again
        (a wish dropped here would otherwise wait for the group's next change, which a finished
        job never has)."""
        self._leading_since = None
        self.binder.volumes_changed()  # a Binding waiting for its claims gives up at once
        self._log_abandoned(self.evictor.abandon())
        self.core.abandon_deferred(time.time())
        self.statuses.reset()
        self._classes_written = -1  # and every ResourceClass's
        self._groups_settled.clear()
        self.core.touch_all_groups()  # the wishes just dropped: the next term writes every group again
        self._binding_attempts.clear()
        self._carried_seconds.clear()
        self._placing.clear()
        self._held_since.clear()
        # the queue gauges are the leader's (kube-scheduler exits on losing the lease, so its
        # series go away): a standby's would freeze at its last leading values
        self.hooks.on_queue(dict.fromkeys(self.core.pending_counts(), 0), {})
        self.core.abandon_evictions(time.time())
        self._finish_due = 0.0

    def _log_abandoned(self, victims: list[str]) -> None:
        """One line at the hand-over saying what this term leaves undone (an SRE trial: after
        `leader.lost` nothing said it, and a Binding held at the allocation gate is dropped with no
        line of its own): the Bindings decided and not known bound (held, or in flight: each of
        those ends later with its own binder.given_up or binder.withdrawn line), the evictions
        under way (`victims`), and a few pods of each. The new leader decides them afresh."""
        pods = sorted(attempt.pod.key for _profile, _seconds, attempt, _at in self._binding_attempts.values())
        level = log.warning if pods or victims else log.info
        level("leader.abandoned", bindings=len(pods), bindings_in_flight=self.binder.in_flight,
              evictions=len(victims), pods=first_few(pods, ABANDONED_NAMED), victims=first_few(victims, ABANDONED_NAMED),
              message="this replica stopped leading: it sends none of these Bindings again and writes none of "
              "these evictions; the new leader decides their pods afresh")

    def _submit_released(self) -> None:
        """Bindings the allocation gate held back and has now let through (only while leading, and
        not once stopping: the drain has passed, and a POST cut by the shutdown could still land).
        First what the core found while forgetting a pod since (a Binding refused, a held one
        redone): asked here, after every event, cycle and Binding result, so it is told when raised."""
        for notice in self.core.take_notices():
            self._report(notice)
        for rejected in self.core.take_rejected():
            self._gate_rejected(rejected)
        if self._stopping or not self.is_leader():
            self.core.abandon_deferred(time.time())
            self._held_since.clear()
            return
        for attempt in self.core.take_released():
            pod = attempt.pod
            assert attempt.node is not None
            log.info("binder.gate_released", pod=pod.key, node=attempt.node)
            self._end_permit_wait(pod.uid, "Success")
            self.binder.submit(self._binding(attempt))
        if self._held_since:  # the rest left the gate without a Binding: placed anew (a Permit's Reject)
            still = {attempt.pod.uid for attempt in self.core.held()}
            for uid in [uid for uid in self._held_since if uid not in still]:
                self._end_permit_wait(uid, "Unschedulable")

    def _node_labels(self, obj: Mapping[str, Any]) -> Mapping[str, str] | None:
        """The labels the core holds for the Node `obj` names (None: none held)."""
        info = self.core.state.nodes.get(str((obj.get("metadata") or {}).get("name") or ""))
        return info.node.meta.labels if info is not None and info.node is not None else None

    def _binding(self, attempt: Attempt) -> Binding:
        """The Binding of a placed pod, conditional on the pod's resourceVersion as the core holds it
        now: the version it was decided at, or — for a Binding the allocation gate held — a later
        one the watch brought meanwhile (the gate's own status write changes it). Any version the
        core holds in this term postdates the term fence, so no Binding of an earlier term can land
        after this one's; a version already stale makes the apiserver refuse it (409), and the pod
        is decided again from the one read back.

        It also carries the term's fence token (`tessera.dev/term`), so the first pod a new
        leader binds tells a deposed one that still thinks it leads (its clock ran slow) to stop,
        even when no pod was pending at the takeover for the fence to mark. Its claims' volume
        writes (`volume_writes.planned`) go first, conditional on the versions its decision read (not
        these), and refused outright when the watch shows a volume or claim taken since."""
        pod = attempt.pod
        assert attempt.node is not None
        current = current if (current := self.core.state.pods.get(pod.uid)) is not None else pod
        token = self.fence.token()
        annotations = {**attempt.annotations, ann.TERM: token} if token is not None else attempt.annotations
        return Binding(pod.uid, pod.meta.namespace, pod.meta.name, attempt.node, annotations,
                       resource_version=current.meta.resource_version,
                       term_as_decided=current.meta.annotations.get(ann.TERM, ""),
                       volume_writes=planned(self.core.state, attempt.claims, attempt.node), claims=attempt.claims,
                       bind_timeout=self._bind_timeout(pod.scheduler_name))

    def _bind_timeout(self, scheduler_name: str) -> float:
        """How long a Binding of the profile's waits for its claims to be bound (its
        VolumeBindingArgs.bindTimeoutSeconds)."""
        profile = self.config.profile_for(scheduler_name) or self.config.profiles[0]
        return float(args_of(profile, VolumeBindingArgs).bind_timeout_seconds)

    def _check_volumes(self, binding: Binding, written: Mapping[str, str]) -> BindingsChecked:
        """The Binder's look at a waiting Binding's claims: upstream's checkBindings on the core's state."""
        return check_bindings(self.core.state, binding.uid, binding.claims, binding.node, written)

    async def _after_own_status_write(self, binding: Binding) -> Binding:
        """The Binding to send: as decided, or — when a status write of ours to the pod, conditional
        on the very version the pod was decided at, was still in flight (a PodScheduled=False or
        nomination PATCH sent while it waited) and succeeded — conditional on the version that
        write left: it touched only the pod's status and term, nothing its placement rests on.
        Only that version: a change by anyone else, before or after it (a label, a new leader's
        fence, a preemption mark), still makes the Binding fail and the pod be decided again."""
        write = await self.statuses.pod_write_settled(binding.namespace, binding.name)
        if write is None or write.written is None or write.base != binding.resource_version:
            return binding
        return replace(binding, resource_version=write.written)

    def _end_permit_wait(self, uid: str, result: str) -> None:
        """A held Binding's wait is over: let go ("Success"), rejected ("Unschedulable") or
        preempted ("Error"), as upstream's WaitOnPermit status codes."""
        since = self._held_since.pop(uid, None)
        if since is not None:
            self.hooks.on_permit_wait(result, time.monotonic() - since)

    def _gate_rejected(self, attempt: Attempt) -> None:
        """A Binding the allocation gate held that would no longer be chosen: its pod is back in
        the queue, and its attempt ends as upstream's binding cycle ends when a Permit plugin
        rejects a waiting pod (WaitOnPermit returns the Reject status, handleSchedulingFailure):
        counted unschedulable, a FailedScheduling Warning and PodScheduled=False Unschedulable
        with the plugin's message."""
        pod = attempt.pod
        # the log line names the pods of other namespaces the pod's Event and condition only count
        log.info("binder.gate_rejected", pod=pod.key, node=attempt.node, message=attempt.logged or attempt.message)
        self._end_permit_wait(pod.uid, "Unschedulable")
        self._end_binding_attempt(pod.uid, Outcome.RETRY, "unschedulable")
        self._placement_answered(pod.uid, None)
        if not self.is_leader():
            return
        self.events.record(_pod_ref(attempt), "Warning", "FailedScheduling", "Scheduling", attempt.message,
                           controller=pod.scheduler_name)
        self.statuses.pod_waiting(pod.meta.namespace, pod.meta.name, UNSCHEDULABLE, attempt.message,
                                  generation=pod.meta.generation)

    def _report(self, notice: Notice) -> None:
        """A notice of the core's as a Warning Event. A replica that does not lead (or leads while
        its caches still list) cannot record it yet, and the core raises it only once: it is told
        when this replica leads on a complete cache (`_tell_untold`), or, for an edited devices
        annotation, by the replica that writes its union."""
        if notice.reason in GIVEN_TWICE:  # the log line names every pod, the Event those it may
            notice = replace(notice, message=notice.message + self._other_install(notice, ""),
                             event_message=notice.told + self._other_install(notice, notice.namespace))
        if notice.reason in NOT_READ:  # valid input Tessera does not read: the pod's Event tells its owner
            log.info("input.not_read", kind=notice.kind, object=notice.key, reason=notice.reason,
                     message=notice.message)
        else:
            log.warning("input.invalid", kind=notice.kind, object=notice.key, reason=notice.reason,
                        message=notice.message)
        # while the caches list, a leader sees a half-listed cluster (a class before the device
        # carrying its attribute): it tells once they are complete, if it still stands, as a standby does
        telling = self.is_leader() and self.informers.synced
        if telling:
            self._warn(notice, "Validating")
        if notice.held_devices:  # an edited devices annotation: the union goes onto the pod
            # a standby cannot tell: the replica that writes the union does (the leader may be gone)
            self.held.want(notice.namespace, notice.key.rpartition("/")[2], notice.uid, notice.held_devices,
                           untold=None if telling else notice)
        elif not telling and notice.key:
            self.untold.add(notice)

    def _other_install(self, notice: Notice, namespace: str) -> str:
        """`other_install_note` for a notice about a pod (its node's pods) or a Node, naming the
        pods an Event regarding an object of `namespace` may ("": every one, `pods_named`)."""
        state = self.core.state
        placement = state.placements.get(notice.uid) if notice.kind == "Pod" else None
        node = placement.node if placement is not None else notice.key if notice.kind == "Node" else ""
        info = state.nodes.get(node) if node else None
        if info is None or not self.conflicting.writes:
            return ""
        holders = {pod.key: token for uid in info.pods if (pod := state.pods.get(uid)) is not None
                   and isinstance(token := pod.meta.annotations.get(ann.TERM), str)}
        return other_install_note(holders, self.conflicting.other_lease, self.conflicting.writes, namespace)

    def _tell_untold(self) -> None:
        """The notices this replica saw while it did not lead, as Warning Events now that it leads
        (once: they are told and forgotten), each only while its problem still stands in the cache
        (`Scheduler.still_stands`): the other holder of a copied GPU may have ended meanwhile."""
        for notice in self.untold.take():
            if self.core.still_stands(notice):
                self._warn(notice, "Validating")
            else:
                log.info("untold.ended", kind=notice.kind, object=notice.key, reason=notice.reason,
                         message="seen while not leading; no longer so when this replica led: no Event")

    def _controller(self, uid: str) -> str:
        """The reportingController of an Event about the pod `uid`: the scheduler name of its
        profile; "" (the recorder's, the first profile's) for another object or a pod not known."""
        pod = self.core.state.pods.get(uid)
        return pod.scheduler_name if pod is not None and pod.scheduler_name in self.config.scheduler_names else ""

    def _tell(self, untold: tuple[Notice, ...]) -> None:
        """Notices a standby saw, reported by the leader that wrote their union onto the pod."""
        for notice in untold:
            self._warn(notice, "Validating")

    def _warn(self, notice: Notice, action: str, controller: str = "") -> None:
        """The notice as a Warning Event regarding its object (only by the leader); `controller`:
        the profile it was decided for, else the object's own (a pod's) or the first profile's."""
        self._record_notice(notice, "Warning", action, controller)

    def _record_notice(self, notice: Notice, event_type: str, action: str, controller: str = "") -> None:
        """The notice as an Event of `event_type` regarding its object (`_warn`)."""
        if not self.is_leader() or not notice.key:
            return
        namespace, _, name = notice.key.rpartition("/")
        api_version = notice.api_version or _API_VERSIONS.get(notice.kind)
        if api_version is None:
            return
        self.events.record(ObjectRef(notice.kind, api_version, name, notice.namespace or namespace, notice.uid),
                           event_type, notice.reason, action, notice.told,
                           controller=controller or self._controller(notice.uid))

    # --- scheduling --------------------------------------------------------------------------

    async def _wake_when_synced(self) -> None:
        """The cycles start the moment the caches are complete: the informer that completes them
        may deliver nothing new at that point (its objects went to the core page by page), so no
        watch event would wake them until the next idle tick. So does the default class
        controller's first real pass: the passes the first LIST's ExtendedResources woke found the
        caches incomplete and wrote nothing, and its next timed pass is 30 s away."""
        await self.informers.wait_synced()
        starts = "scheduling starts" if self.is_leader() else "scheduling starts when this replica leads"
        log.info("tessera.ready", kinds=len(self.informers.informers),
                 message=f"every informer has listed: the cache is complete and {starts}")
        self._wake.set()
        if self.class_controller is not None:
            self.class_controller.wake()

    async def _schedule_forever(self) -> None:
        last_flush = time.time()
        while not self._stopping:
            self._alive = time.monotonic()
            timeout = IDLE_WAKE_SECONDS
            expiry = self.core.next_backoff_expiry()
            if expiry is not None and self.is_leader() and self.informers.synced:  # only cycles clear it
                timeout = max(0.0, min(timeout, expiry - time.time()))
            if self.fence.retry_at is not None:
                timeout = max(0.0, min(timeout, self.fence.retry_at - time.monotonic()))
            await self._wake.wait(timeout)
            if self._stopping or not self.is_leader() or not self.informers.synced:
                # pods entering the queue are counted as they come, by a standby too (kube-scheduler's
                # informers and queue run before it leads); the queue gauges stay the leader's
                self.hooks.on_queue({}, self.core.take_queue_incoming())
                continue
            if not await self._catch_up() or not await self._fence_term():
                continue
            self._tell_untold()  # what it saw before it led, judged on the complete cache
            self._write_touched_groups()  # held back until the cache synced or this replica led
            now = time.time()
            if now - last_flush >= FLUSH_UNSCHEDULABLE_EVERY:
                self.core.flush_unschedulable(now)
                last_flush = now
            if now >= self._finish_due:
                self._finish_gang_evictions(now)
                self._finish_due = now + FINISH_GANG_EVICTIONS_EVERY
            self._write_class_statuses_when_moved()
            self._mark_unread()
            await self._run_cycles()
            self._submit_released()  # gates a cycle opened (e.g. a node's agent went quiet)
            self.hooks.on_queue(self.core.pending_counts(), self.core.take_queue_incoming())

    def _mark_unread(self) -> None:
        """Tell the core which storage kinds its role may not read (their informers unavailable):
        VolumeBinding passes what it cannot tell then, so a deploy whose RBAC predates it
        schedules pods with claims as before instead of refusing them for claims "not found"."""
        self.core.state.unread = {informer.kind.kind: informer.unavailable for informer in self.informers.informers
                                  if informer.kind in STORAGE_KINDS and informer.unavailable is not None}

    async def _catch_up(self) -> bool:
        """Before a term's first decision, read the pods Tessera schedules as the apiserver holds
        them now (a consistent LIST per scheduler name: `spec.schedulerName` is one of the Pod's
        selectable fields, pkg/registry/core/pod/strategy.go ToSelectableFields) and give the core
        every one newer than its cache. A standby's watch may lag: the Bindings the old leader sent
        while its Lease was valid would otherwise look unbound here, their GPUs free to give to
        another pod. Not "wait until the watch reaches the Lease's resourceVersion": versions of
        two resources have no order (apimachinery's CompareResourceVersion, pkg/util/resourceversion),
        and a quiet Pod watch moves only with a bookmark, about once a minute. Skipped when the Pod
        informer's LIST was itself sent after the term began (`leadership_started`): that LIST is
        a consistent read too. True when this term may decide; False (the next wake tries again)
        when the LIST failed or the term changed while it was read."""
        term = self.leader_term()
        if term is None or term == self._caught_up_term:
            return term is not None
        listed = self.informers.listed_since(PODS)
        if self._leading_since is not None and listed is not None and listed >= self._leading_since:
            # the Pod LIST itself was sent after this replica began to lead (the start of a
            # process; a relist): a consistent read that already holds every Binding an old
            # leader made, so a second one would only delay the first decision
            self._caught_up_term = term
            return True
        started = time.monotonic()
        try:
            changed = await self.informers.catch_up(
                PODS, [f"spec.schedulerName={name}" for name in sorted(self.config.scheduler_names)])
        except Exception as err:  # noqa: BLE001 - retried at the next wake; nothing is decided meanwhile
            log.warning("leader.catch_up_failed", error=describe_error(err),
                        message="this replica leads but does not decide until it has read the pods it schedules")
            return False
        if self.leader_term() != term:
            return False
        self._caught_up_term = term
        log.info("leader.caught_up", pods_newer_than_cache=changed, seconds=round(time.monotonic() - started, 3))
        return True

    async def _fence_term(self) -> bool:
        """Before a term's first decision (after `_catch_up`, so the cache holds every pod the
        apiserver does), the term fence on every pod of this scheduler's names that is unbound,
        not being deleted, not finished and not gated — every pod an earlier term could have
        decided (a pod's scheduling gates can only be removed, and the apiserver refuses a Binding
        to a gated pod) — each pod as written handed to the core. All of them, not only those
        asking for devices: a late Binding of any pod breaks a gang's all-or-nothing and the node's
        capacity (kubelet OutOf* rejections), and the cost is one write per pending pod per
        takeover. True when this term may decide (`TermFence.ready`)."""
        names = self.config.scheduler_names

        def unbound() -> list[FencedPod]:
            return [FencedPod(pod.uid, pod.meta.namespace, pod.meta.name) for pod in list(self.core.state.pods.values())
                    if pod.scheduler_name in names and not pod.node_name and not pod.meta.deleting
                    and not pod.terminal and not pod.gated]

        return await self.fence.ready(self.leader_term, unbound, self._written, self._fence_refused)

    def _fence_refused(self, pod: FencedPod, why: str) -> None:
        """A pending pod the term fence could not write: nothing is scheduled until it can, and
        without an Event the pod would show no reason at all."""
        self.events.record(ObjectRef("Pod", "v1", pod.name, pod.namespace, pod.uid), "Warning", "FailedScheduling",
                           "Scheduling", f"{FENCE_REFUSED}: writing tessera.dev/term through pods/status failed: {why}",
                           controller=self._controller(pod.uid))

    @property
    def fence_pending(self) -> int:
        """Pods the current term still has to fence before its first decision, as its last try
        left them (tessera_leader_fence_pending_pods); 0 when no fence of this term failed."""
        return self.fence.pending(self.leader_term())

    @property
    def fence_error(self) -> str | None:
        """Why the current term's fence last failed ("ns/name: HTTP 403: …", /readyz's
        term-fence check); None when it did not."""
        return self.fence.error(self.leader_term())

    async def _run_cycles(self) -> None:
        cycles = 0
        while not self._stopping and self.is_leader():
            self._alive = time.monotonic()  # a long backlog is work, not a hang (/healthz)
            started = time.perf_counter()
            attempts = self.core.schedule_next(time.time())
            if attempts is None:
                return
            elapsed = time.perf_counter() - started
            self.stats.cycles += 1
            self._handle_cycle(attempts, elapsed)
            self.hooks.on_cycle(attempts, elapsed)
            cycles += 1
            if cycles % CYCLES_BEFORE_YIELD == 0:
                await anyio.sleep(0)  # let informers and binders run

    def _handle_cycle(self, attempts: list[Attempt], seconds: float) -> None:
        """One cycle's attempts (one pod's, or every member's of a gang: `seconds` shared between
        them), then the PodGroup the cycle tried, once, from the whole cycle: a Warning when its
        gang did not fit (`Scheduler.group_notice`), and its status."""
        for attempt in attempts:
            self._handle(attempt, seconds / max(1, len(attempts)))
        notice = self.core.group_notice(attempts)
        if notice is not None:  # its gang did not fit: the PodGroup says why, as its members do
            log.debug("cycle.group_unschedulable", group=notice.key, message=notice.message)
            self._warn(notice, "Scheduling", controller=attempts[0].pod.scheduler_name)
        placed = self.core.group_placed(attempts)
        if placed is not None:  # told `Scheduled` once every member's Binding landed
            placement = _Placement(placed, {attempt.pod.uid for attempt in attempts if attempt.node is not None},
                                   controller=attempts[0].pod.scheduler_name)
            for uid in placement.waiting:
                self._placement_answered(uid, None)  # decided again: its earlier placement is over
                self._placing[uid] = placement
        gang = attempts[0].pod.gang if attempts else None
        if gang is None or not gang.from_podgroup:
            return
        failed = next((attempt for attempt in attempts if attempt.error), None)
        if failed is not None:  # the group's cycle failed with an error: one message for the group
            self._write_group_status(gang.key, pod_group_error(failed.message), SCHEDULER_ERROR)
            return
        # a group that could not be tried yet (too few members, no PodGroup) was not found
        # unschedulable: the core gates such a Workload API group at PreEnqueue (no cycle at all),
        # as kube-scheduler's GangScheduling does, and a cycle still meets one only when a member
        # went after the rest passed that gate; no pod group cycle writes PodGroupScheduled for it
        not_placed = all(attempt.node is None and attempt.gang_outcome != "waiting" for attempt in attempts)
        preempting = any(attempt.preempted for attempt in attempts)
        self._write_group_status(gang.key, self.core.group_unschedulable(gang.key, preempting) if not_placed else "")

    def _handle(self, attempt: Attempt, seconds: float) -> None:
        pod = attempt.pod
        profile = pod.scheduler_name
        # one reading of the clock: the time carried over runs to `now`, and a placed pod's attempt
        # runs on from `now` (two readings would lose what comes between, a log line, a GC pause)
        now = time.monotonic()
        carried = self._carried_seconds.pop(pod.uid, None)
        if carried is not None:  # the attempt an outdated Binding did not end: it went on until now
            seconds = carried[0] + (now - carried[1])
        if attempt.node is not None:
            self.stats.scheduled += 1
            log.debug("cycle.scheduled", pod=pod.key, node=attempt.node, attempts=attempt.attempts)
            # counted once its Binding lands ("scheduled") or fails ("error"), as upstream's
            # binding cycle counts it, with the Binding's time in the attempt's duration
            self._binding_attempts[pod.uid] = (profile, seconds, attempt, now)
            if attempt.deferred:  # another pod on the node is still being handed its devices
                # the gate's message, naming the pod it waits for (of any namespace: a log line)
                log.info("binder.gate_wait", pod=pod.key, node=attempt.node, message=attempt.logged or attempt.message)
                self._end_permit_wait(pod.uid, "Unschedulable")  # an earlier hold redone within these cycles
                self._held_since[pod.uid] = time.monotonic()
                self.events.record(_pod_ref(attempt), "Normal", WAITING_FOR_ALLOCATION, "Binding", attempt.message,
                                   controller=pod.scheduler_name)
                self.statuses.pod_waiting(pod.meta.namespace, pod.meta.name, WAITING_FOR_ALLOCATION, attempt.message,
                                          generation=pod.meta.generation)
            else:
                self.binder.submit(self._binding(attempt))
        else:
            # upstream's handleSchedulingFailure: an error (not a rejection) reads SchedulerError and
            # counts as an "error" attempt; either way a FailedScheduling Event carries the message
            if attempt.error:
                self.stats.errors += 1
                log.warning("cycle.error", pod=pod.key, message=attempt.message, attempts=attempt.attempts)
            else:
                self.stats.unschedulable += 1
                log.debug("cycle.unschedulable", pod=pod.key, message=attempt.message, attempts=attempt.attempts)
            self.hooks.on_attempt("error" if attempt.error else "unschedulable", profile, seconds, attempt)
            self.events.record(_pod_ref(attempt), "Warning", "FailedScheduling", "Scheduling", attempt.message,
                               controller=pod.scheduler_name)
            self.statuses.pod_waiting(pod.meta.namespace, pod.meta.name,
                                      SCHEDULER_ERROR if attempt.error else UNSCHEDULABLE, attempt.message,
                                      nominated_node=attempt.nominated_node, generation=pod.meta.generation)
        self._evict(attempt)
        for displaced in attempt.nominations_cleared:
            self.statuses.pod_nomination_cleared(displaced.meta.namespace, displaced.meta.name)

    def _evict(self, attempt: Attempt) -> None:
        """Preemption chose victims for this pod (or its gang): evict them (once each: a victim
        already being deleted needs nothing more, as upstream)."""
        if not attempt.preempted:
            return
        self.stats.preemptions += 1
        by = self._preemptor(attempt)
        state = self.core.state
        # upstream's note names the candidate node (executor.go, `c.Name()`): for a pod, the node it
        # is nominated to, where all of upstream's victims run; a victim gang's members on other
        # nodes name it too. A gang preempting as one has no single node: each victim names its own
        candidate = (attempt.nominated_node or "") if attempt.preemptor_type == "pod" else ""
        for victim in attempt.preempted:
            node = attempt.rejected_waiting.get(victim.uid)
            if node is not None:  # held at Permit: back to the queue, no API call (upstream's words)
                self.events.record(_pod_ref_of(victim), "Normal", "Preempted", "Preempting",
                                   f"{_preempted_note(by.kind, by.uid, candidate or node)} (in kube-scheduler "
                                   "memory).", by, controller=attempt.pod.scheduler_name)
                # its binding cycle ends there: upstream's WaitOnPermit error (waitingPod.Preempt)
                self._end_permit_wait(victim.uid, "Error")
                self._end_binding_attempt(victim.uid, Outcome.RETRY)
                self._binding_error(victim.meta.namespace, victim.meta.name, victim.uid,
                                    "waiting on permit for pod: preempted")
        # each victim's own node (the log's): a victim whose Binding is still out has no
        # spec.nodeName yet: its node is the one the core assumed it on, where it holds its room
        # until it is gone
        self.evictor.submit([Eviction(victim.meta.namespace, victim.meta.name, victim.uid, attempt.pod.uid,
                                      attempt.pod.scheduler_name, victim.node_name or state.node_of(victim.uid) or "",
                                      generation=victim.meta.generation,
                                      preemptor=attempt.pod.key, preemptor_type=attempt.preemptor_type,
                                      marked_since=victim.preemption_mark.since if victim.preemption_mark else None,
                                      by=by, candidate=candidate)
                             for victim in attempt.preempted
                             if not victim.meta.deleting and victim.uid not in attempt.rejected_waiting])
        self._preempting_note(attempt, candidate)

    def _preempting_note(self, attempt: Attempt, candidate: str) -> None:
        """Tessera's own Event on the pod whose cycle preempted (upstream writes none there): its
        victims, where each runs, and why a gang went whole, for `kubectl tessera explain`. The
        Event lands in the preemptor's namespace, readable by its tenant: victims of other
        namespaces are only counted (`pods_named`: a tenant must not learn another's pod names, nodes or gangs
        from it; each victim's own `Preempted` Event, in its namespace, names the preemptor's uid
        alone, as upstream's)."""
        state = self.core.state
        namespace = attempt.pod.meta.namespace
        victims = {victim.key: (victim.key, victim.node_name or state.node_of(victim.uid)
                                or attempt.rejected_waiting.get(victim.uid, ""),
                                attempt.victim_reasons.get(victim.uid, "")) for victim in attempt.preempted}
        named = pods_named(namespace, sorted(victims), lambda here: listed([victims[key] for key in here]))
        gang = attempt.pod.gang
        where = (f"for gang {gang_name(gang.key)}" if attempt.preemptor_type == "podgroup" and gang is not None
                 else f"on {candidate}" if candidate else "")
        count = len(attempt.preempted)
        self.events.record(_pod_ref(attempt), "Normal", "Preempting", "Preempting",
                           f"Preempting {count} lower-priority pod{'' if count == 1 else 's'} to make room"
                           f"{' ' + where if where else ''}: {named}", controller=attempt.pod.scheduler_name)

    def _preemptor(self, attempt: Attempt) -> ObjectRef:
        """Whom the victims' Events name: upstream's ExecutorPreemptor (framework/preemption/
        executor.go), the PodGroup object for a gang that preempted as one (podGroupExecutorPreemptor),
        else the pod. A label-form gang has no object, so no uid to name: its pod is named."""
        gang = attempt.pod.gang
        if attempt.preemptor_type == "podgroup" and gang is not None and gang.from_podgroup:
            group = self.core.state.gangs.podgroups.get(gang.key)
            if group is not None and group.meta.uid:
                return ObjectRef("PodGroup", PODGROUP_API_VERSIONS[group.api], group.meta.name, group.meta.namespace,
                                 group.meta.uid)
        return _pod_ref_of(attempt.pod)

    def _finish_gang_evictions(self, now: float) -> None:
        """A replica that led before died half-way through a gang's eviction: finish it."""
        for item in self.core.finish_gang_evictions(now):
            pod = item.pod
            log.warning("evictor.finishing_gang", gang=item.gang, pod=pod.key, node=item.node)
            self.evictor.submit([Eviction(pod.meta.namespace, pod.meta.name, pod.uid, "", item.scheduler, item.node,
                                          finishing_gang=item.gang, generation=pod.meta.generation)])

    def _on_eviction_failed(self, eviction: Eviction, reason: str) -> None:
        self.core.eviction_failed(eviction.uid, time.time())
        ref = ObjectRef("Pod", "v1", eviction.name, eviction.namespace, eviction.uid)
        wanted_by = f"gang {gang_name(eviction.finishing_gang)}" if eviction.finishing_gang else f"pod {eviction.preemptor_uid}"
        self.events.record(ref, "Warning", "PreemptionFailed", "Preempting",
                           f"Could not evict the pod for {wanted_by}: {reason}", controller=eviction.preemptor_scheduler)
        self._wake.set()

    def _on_evicted(self, eviction: Eviction, deleted: bool) -> None:
        if not deleted:
            return  # already gone (or its name is a new pod's): nothing to tell
        ref = ObjectRef("Pod", "v1", eviction.name, eviction.namespace, eviction.uid)
        if eviction.finishing_gang:
            self.events.record(ref, "Normal", "Preempted", "Preempting",
                               f"Preempted to finish the eviction of gang {gang_name(eviction.finishing_gang)}, which an "
                               f"earlier leader began: the gang was below its minimum",
                               controller=eviction.preemptor_scheduler)
            return
        by = eviction.by
        if by is None:  # an Eviction made without it: the preemptor pod, while it is known
            preemptor = self.core.state.pods.get(eviction.preemptor_uid)
            by = _pod_ref_of(preemptor) if preemptor is not None else None
        self.events.record(ref, "Normal", "Preempted", "Preempting",
                           _preempted_note("Pod" if by is None else by.kind, eviction.preemptor_uid if by is None
                                           else by.uid, eviction.candidate or eviction.node), by,
                           controller=eviction.preemptor_scheduler)

    def _end_binding_attempt(self, uid: str, outcome: Outcome, failed_as: str | None = "error") -> None:
        """A placed pod's attempt is over (its Binding answered, or it never went out): counted
        "scheduled", else `failed_as` ("error", or "unschedulable" for a Permit rejection), as
        upstream's binding cycle, its duration running until now; `None`: not counted (this
        replica stopped leading before the attempt ended: the new leader counts its own)."""
        decided = self._binding_attempts.pop(uid, None)
        result = "scheduled" if outcome is Outcome.BOUND else failed_as
        if decided is not None and result is not None:
            profile, seconds, attempt, decided_at = decided
            self.hooks.on_attempt(result, profile, seconds + (time.monotonic() - decided_at), attempt)

    def _carry_attempt(self, uid: str) -> None:
        """A placed pod's Binding was outdated and the pod is decided again at once: its attempt
        did not end (nothing counted): it goes on, through the new decision's cycle, until that
        decision's Binding ends it (or the cycle finds the pod unschedulable)."""
        decided = self._binding_attempts.pop(uid, None)
        if decided is not None:
            _, seconds, _, decided_at = decided
            now = time.monotonic()
            self._carried_seconds[uid] = (seconds + (now - decided_at), now)

    def _binding_error(self, namespace: str, name: str, uid: str, message: str) -> None:
        """upstream's handleSchedulingFailure for a binding cycle's error (not a rejection): a
        FailedScheduling Warning and PodScheduled=False, reason SchedulerError."""
        self.events.record(ObjectRef("Pod", "v1", name, namespace, uid), "Warning", "FailedScheduling", "Scheduling",
                           message, controller=self._controller(uid))
        pod = self.core.state.pods.get(uid)
        self.statuses.pod_waiting(namespace, name, SCHEDULER_ERROR, message,
                                  generation=pod.meta.generation if pod is not None else 0)

    def _placement_answered(self, uid: str, node: str | None) -> None:
        """A member of a placed gang was bound to `node`, or (None) was not and never will be by
        this placement (refused, decided again, gone): once every member of the placement is bound
        its PodGroup gets one Normal `Scheduled` (`coscheduling.scheduled_notice`); a placement
        with a member not bound gets none (its gang is tried again, and told then)."""
        placement = self._placing.pop(uid, None)
        if placement is None:
            return
        placement.waiting.discard(uid)
        if node is None:
            for other in placement.waiting:
                del self._placing[other]
            return
        placement.nodes.append(node)
        if placement.waiting:
            return
        notice = self.core.group_scheduled_notice(placement.key, placement.nodes)
        if notice is not None:
            self._record_notice(notice, "Normal", "Binding", controller=placement.controller)

    def _on_bound(self, result: BindResult) -> None:
        binding = result.binding
        self._placement_answered(binding.uid, binding.node if result.outcome is Outcome.BOUND else None)
        decided = self._binding_attempts.get(binding.uid)
        if decided is not None:  # Bind: DefaultBinder's status is Success or, for any failure, Error
            self.stopwatch.extension_point("Bind", "Success" if result.outcome is Outcome.BOUND else "Error",
                                           decided[0], result.seconds)
        # a Binding given up because this replica stopped leading ends no attempt of its own
        failed_as = None if result.not_leading else "error"
        if not result.pod_changed:  # else told once the core has decided whether it decides again at once
            self.hooks.on_bind(result)
            self._end_binding_attempt(binding.uid, result.outcome, failed_as)
        if result.observed is not None:
            # the pod as read back (bound, or being deleted): the core learns it before the watch
            # does, so a pod bound elsewhere never leaves its real devices uncounted meanwhile
            self._apply("MODIFIED", {"apiVersion": "v1", "kind": "Pod", **result.observed})
        if result.outcome is Outcome.BOUND:
            _log_bound(binding)
            ref = ObjectRef("Pod", "v1", binding.name, binding.namespace, binding.uid)
            self.events.record(ref, "Normal", "Scheduled", "Binding",
                               f"Successfully assigned {binding.namespace}/{binding.name} to {binding.node}",
                               controller=self._controller(binding.uid))
            return
        preempted = binding.uid in self.core.state.preempting
        # someone else edited the pod between decision and Binding (not a victim: its own eviction's
        # write did): the core decides it again at once from the version read back (a whole new
        # decision), or — refused so too many times in a row — has backed it off as a refusal
        outdated = result.pod_changed and not preempted
        redecided = outdated and self.core.binding_outdated(binding.uid, time.time())
        if result.pod_changed:
            self.hooks.on_bind(result, redecided=redecided)
            if not redecided:
                self._end_binding_attempt(binding.uid, result.outcome, failed_as)
        if redecided:
            # no error: no Warning, no condition (itself a change of the pod the next Binding would
            # run into), no backoff; and no attempt that ended (no scheduler_schedule_attempts_total
            # "error"): the attempt goes on with the new decision, which counts it once it ends,
            # its duration from the first decision on
            self._carry_attempt(binding.uid)
            log.info("binder.pod_changed", pod=f"{binding.namespace}/{binding.name}", node=binding.node,
                     outcome=result.outcome.value, detail=result.detail,
                     reason="the pod was changed by another writer after it was decided: decided again at once")
            self._submit_released()
            self._wake.set()
            return
        _log_not_bound(result, preempted=preempted, reason=(
            f"the pod was changed by another writer after it was decided more than {REDECIDED_AT_ONCE} times in a "
            "row: decided again after a backoff" if outdated else ""))
        if result.outcome is Outcome.RETRY:
            if not outdated:  # else binding_outdated backed it off already
                self.core.binding_failed(binding.uid, time.time())
            if not result.not_leading:  # given up is no error: the new leader decides the pod
                self.stats.bind_errors += 1
                self._binding_error(binding.namespace, binding.name, binding.uid, result.refusal)
        else:
            self.core.binding_dropped(binding.uid)
        self._submit_released()
        self._wake.set()

    def _write_group_status(self, key: str, failure: str = "", reason: str = UNSCHEDULABLE) -> None:
        """scheduler-plugins PodGroups get their phase and counts; upstream (Workload API)
        PodGroups the PodGroupScheduled condition as kube-scheduler writes it: True once the
        minimum is placed, False with the `failure` of a cycle that tried the group and could not
        place it (`reason` Unschedulable, or SchedulerError for a cycle that failed with an error;
        none while it only waits for members or its PodGroup) — never True → False
        (neither what the object says nor what this process already wished: the watch may not
        have echoed it yet), and a new lastTransitionTime only when the status changes."""
        status = self.core.group_status(key)
        if status is None:
            return
        namespace, name = gang_key_parts(key)
        if status.api == WORKLOAD_API:
            if status.condition == "True" or key in self._groups_settled:
                return
            if status.scheduled >= status.minimum:
                self._groups_settled.add(key)
                self.statuses.workload_pod_group(namespace, name, True, "Scheduled", "", transition=True,
                                                 uid=status.uid, generation=status.generation)
            elif failure:
                self.statuses.workload_pod_group(namespace, name, False, reason, failure,
                                                 transition=status.condition != "False", uid=status.uid,
                                                 generation=status.generation)
            return
        if status.final or key in self._groups_settled:
            return
        if status.phase in FINAL_GROUP_PHASES:
            self._groups_settled.add(key)
        written: dict[str, Any] = {"phase": status.phase, "running": status.running, "succeeded": status.succeeded,
                                   "failed": status.failed}
        if status.occupied_by:
            written["occupiedBy"] = status.occupied_by
        self.statuses.pod_group(namespace, name, written)

    def _pod_version(self, namespace: str, name: str, reason: str | None) -> str | None:
        """For the status writer: the pod's resourceVersion while it still waits for `reason`
        (None: for any reason)."""
        waiting = self.core.waiting_reason(f"{namespace}/{name}")
        if waiting is None:
            return None
        # a refused Binding's SchedulerError stands while the pod waits in the queue again
        wanted = UNSCHEDULABLE if reason == SCHEDULER_ERROR else reason
        return waiting[1] if wanted in (None, waiting[0]) else None

    def _write_class_statuses_when_moved(self) -> None:
        """Compute and wish the ResourceClass statuses when what they say may have moved: a class
        event, a move of the class registry's generation, a new term. An ExtendedResource event
        that changes nothing the registry indexes (the node agent's heartbeat, every device's
        steady write) computes nothing."""
        if self._classes_dirty or self.core.state.classes.generation != self._classes_written:
            self._classes_dirty = False
            self._classes_written = self.core.state.classes.generation
            self._write_class_statuses()

    def _write_class_statuses(self) -> None:
        for status in self.core.class_statuses():
            self.statuses.resource_class(status.name, status.valid, status.message, status.matching_devices,
                                         status.resource_name, generation=status.generation, reason=status.reason)


class LoopHooks:
    """Observation points for metrics; the default does nothing."""

    def on_event(self, event_type: str, kind: str) -> None:
        return None

    def on_attempt(self, result: str, profile: str, seconds: float, attempt: Attempt) -> None:
        """`result`: "unschedulable" when the cycle placed nothing; "scheduled" / "error" once the
        Binding of a placed pod landed / failed (`seconds` then includes the Binding's)."""
        return None

    def on_cycle(self, attempts: list[Attempt], seconds: float) -> None:
        """Once per scheduling cycle, after its attempts (a gang's cycle has one per member);
        `seconds`: the cycle's time (filter, score, preemption, reserve), the Bindings not in it."""
        return None

    def on_bind(self, result: BindResult, redecided: bool = False) -> None:
        """A Binding's answer; `redecided`: it was refused because another writer changed the pod
        since it was decided, and the core decided it again at once (no error: no condition, no
        backoff, the attempt goes on). Such a refusal that fell back to the error backoff (too
        many in a row) comes with False, as any refusal."""
        return None

    def on_permit_wait(self, result: str, seconds: float) -> None:
        """A Binding the allocation gate held is let go or stopped (`result` as upstream's
        WaitOnPermit status code); `seconds`: how long it was held."""
        return None

    def on_queue(self, counts: dict[str, int], incoming: dict[tuple[str, str], int]) -> None:
        """`counts`: pods waiting, by queue (queues left out: unchanged); `incoming`: pods that
        entered a queue since the last call, by (queue, event)."""
        return None


def _log_bound(binding: Binding) -> None:
    """The one line that records a successful Binding, with the devices the pod got (the
    Binding's tessera.dev/devices, applied with the node): an audit reading the logs can tell which
    GPU a pod had after the pod is gone. Device names and IDs in the annotation's order."""
    raw = binding.annotations.get(ann.DEVICES)
    grants = [grant for by_resource in (ann.decode_devices(raw) if raw else {}).values()
              for grants in by_resource.values() for grant in grants]
    log.info("binder.bound", pod=f"{binding.namespace}/{binding.name}", uid=binding.uid, node=binding.node,
             devices=[grant.device for grant in grants], device_ids=[grant.device_id for grant in grants])


def _log_not_bound(result: BindResult, preempted: bool, reason: str = "") -> None:
    """The one line for a Binding that did not bind, at the level of what happened. Error
    (`binder.failed`) for a refusal or a pod bound elsewhere, as kube-scheduler's
    handleSchedulingFailure logs a binding-cycle error. Lower where nothing failed: a newer
    leader's term fence refused it (warning: this replica was deposed mid-flight); the newer
    leader bound the pod elsewhere after this replica's term ended while the Binding was out
    (warning, `binder.superseded`: kube-scheduler never binds once deposed — it logs
    "Leaderelection lost" and exits; ours logged `leader.lost`); another
    Binding — a newer term's, another install's — bound the pod to our node with our devices
    (warning, `binder.bound_by_other`: the pod is theirs, not bound by us); this replica
    stopped leading and gave the Binding up, withdrawn or never sent; the pod was deleted
    meanwhile (kube-scheduler's own line for that is an info one, "Pod doesn't exist in informer
    cache"); or the pod is a preemption victim on its way out (`preempted`, and the read-back
    showed our own eviction's writes moved or removed it: a refusal the apiserver answered
    itself is still an error). (A pod another writer changed between decision and Binding is
    decided again at once with an info line, `binder.pod_changed`, not here; `reason` says so when
    that happened too often in a row and it backs off: `binder.failed` as any refusal.)"""
    binding = result.binding
    line: dict[str, Any] = {"pod": f"{binding.namespace}/{binding.name}", "node": binding.node,
                            "outcome": result.counted_as,
                            "message": result.message}
    if result.detail:
        line["detail"] = result.detail
    if result.fenced_by:
        log.warning("binder.fenced", **{**line, "message": "a newer leader's term fence changed the pod: this "
                                        "replica's Binding, sent before it lost the Lease, can never land"},
                    term=result.fenced_by)
    elif result.superseded:
        log.warning("binder.superseded", **line, term=result.bound_by or "(none)",
                    reason="this replica's term ended while its Binding was out: the newer leader decided the pod "
                    "(its tessera.dev/term), as it decides every pod once this term is over; this replica bound nothing")
    elif result.bound_by_other:
        log.warning("binder.bound_by_other", **line, term=result.bound_by or "(none)",
                    reason="the pod is bound to this node with these devices by another Binding (its tessera.dev/term "
                    "is not this Binding's): another leader's, counted as that leader's binding; this replica "
                    "bound nothing")
    elif preempted and (result.observed is not None or result.pod_gone):  # read back: our eviction's doing
        log.info("binder.preempted", **line, reason="the pod is a preemption victim: " + (
            "it was deleted" if result.pod_gone else "the preemption's DisruptionTarget write changed it")
            + " while its Binding was in flight")
    elif result.pod_gone:
        log.info("binder.pod_gone", **line, reason="the pod was deleted while its Binding was in flight")
    elif result.not_leading:
        log.info("binder.withdrawn" if result.withdrawn else "binder.given_up", **line,
                 reason="this replica stopped leading: the Binding was given up"
                 + (" and withdrawn, so it can never land" if result.withdrawn else ""))
    else:
        log.error("binder.failed", **line, **({"reason": reason} if reason else {}))


def _preempted_note(kind: str, uid: str, node: str) -> str:
    """A victim's Event note, upstream's `Preempted by <preemptor.Type()> <preemptor.UID()> on node
    <node>` (Type() "podgroup" for a PodGroup, else "pod"); `kind`, `uid`: the preemptor object's."""
    return f"Preempted by {'podgroup' if kind == 'PodGroup' else 'pod'} {uid} on node {node}"


def _pod_ref(attempt: Attempt) -> ObjectRef:
    return _pod_ref_of(attempt.pod)


def _pod_ref_of(pod: Pod) -> ObjectRef:
    return ObjectRef("Pod", "v1", pod.meta.name, pod.meta.namespace, pod.uid)
