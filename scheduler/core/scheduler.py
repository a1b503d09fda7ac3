"""The scheduler core: watch events in, decisions out. No I/O, no clock — `now` is passed in.

The live loop, the simulator and the benchmarks all drive it the same way:

    notices = scheduler.apply(event_type, obj, now)      # every watch event
    attempts = scheduler.schedule_next(now)              # until it returns None
    ... POST each placed attempt's Binding (or wait for take_released() when it was deferred);
    ... on a refusal scheduler.binding_failed(uid, now), on 404/409 scheduler.binding_dropped(uid);
    ... on a Binding outdated by another writer's edit of the pod scheduler.binding_outdated(uid, now)
    notices = scheduler.take_notices()                   # after those: what forgetting a pod found

A placed attempt is already *assumed* in the state (its resources and devices are held), so the
next cycle can run while the Binding is in flight. Everything else the shell needs to know — for
Events, statuses and metrics — it asks through the queries below, never by reading the state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from scheduler.api.config_model import SchedulerConfig
from scheduler.core.cycle import Cycle
from scheduler.core.engine import Engine
from scheduler.core.framework.attempt import Attempt
from scheduler.core.framework.runtime import ProfileRuntime
from scheduler.core.framework.timing import NO_STOPWATCH, Stopwatch
from scheduler.core.held_elsewhere import assume_held
from scheduler.core.intake import Intake
from scheduler.core.lifecycle import DeviceHold
from scheduler.core.nominations import hold_nominated
from scheduler.core.capacity import ClusterTotals, level_alone, never_fits, never_fits_key, with_sentence
from scheduler.core.classes import ResourceClass
from scheduler.core.objects import JSON, Device, Pod
from scheduler.core.outcomes import BindingOutcomes
from scheduler.core.plugins.coscheduling import (GroupStatus, group_status, placed_group, reports_status,
                                                 scheduled_notice, unschedulable_message, unschedulable_notice)
from scheduler.core.plugins.preemption.unfinished import UnfinishedEviction, unfinished_gang_evictions
from scheduler.core.queue import GATED, IN_FLIGHT, QueuedPod, SchedulingQueue
from scheduler.core.state import ClusterEvent, ClusterState, EventKind, Notice
from scheduler.core.state.standing import still_stands

UNSCHEDULABLE = "Unschedulable"
WAITING_FOR_ALLOCATION = "WaitingForAllocation"
SCHEDULER_ERROR = "SchedulerError"  # upstream's reason for a failure that is not a rejection (an error, a refused Binding)


@runtime_checkable
class _CreatesDefaultClasses(Protocol):
    default_class_controller: bool  # one ResourceClass per GPU model, created by the live shell


@dataclass(frozen=True, slots=True)
class ClassStatus:
    name: str
    valid: bool
    message: str
    matching_devices: int
    resource_name: str  # the effective name pods ask for (the default when the class sets none)
    generation: int  # the class's metadata.generation the status describes
    reason: str = "Valid"  # its Valid condition's reason (`ClusterState.class_status`)


@dataclass(frozen=True, slots=True)
class PlacedPod:
    key: str
    node: str
    requests: dict[str, int]
    grants: tuple[DeviceHold, ...]  # (device, shared amount or None, resource name, dimension)
    assumed: bool


@dataclass(frozen=True, slots=True)
class NodeUsage:
    name: str
    resources: dict[str, tuple[int, int]]  # resource -> (in use, allocatable); devices by class count
    pods: int


class Scheduler:
    def __init__(self, config: SchedulerConfig, seed: int = 0, explain: bool = False, batch: bool = True,
                 stopwatch: Stopwatch = NO_STOPWATCH, breakdown: bool = False) -> None:
        """`batch=False` runs every plugin's per-node form only: the reference the batch forms
        are tested against (the same decisions, slower). `stopwatch` is told how long extension
        points and plugins took (framework/timing.py); the default times nothing. `breakdown`
        keeps each score plugin's part (`Attempt.scores`) for the nodes a pick was among only,
        where `explain` keeps every node's and every filter's reason: what-if's breakdown, at
        about the cost of a plain run (explain's tables for every pod of a large cluster doubled
        its time and took 18 times the memory)."""
        self._engine = Engine(config, batch, stopwatch)
        self._intake = Intake(self._engine)
        self._cycle = Cycle(self._engine, seed, explain, breakdown)
        self._outcomes = BindingOutcomes(self._engine)

    # --- driving it ---------------------------------------------------------------------------

    def apply(self, event_type: str, obj: JSON, now: float) -> list[Notice]:
        """Feed one watch event; keeps the queue in step and requeues pods the event may help."""
        return self._intake.apply(event_type, obj, now)

    def schedule_next(self, now: float) -> list[Attempt] | None:
        """Run one cycle (one pod, or one whole gang); None when no pod is ready at `now`."""
        state = self._engine.state
        hold_nominated(self._engine, now)  # nominations an earlier leader made, seen since
        held = {uid: hold.node for uid, hold in state.holds.items()} if state.holds else {}
        attempts = self._cycle.schedule_next(now)
        hold_nominated(self._engine, now)  # a nominated pod whose hold this cycle dropped keeps its room
        self._holds_given_back(held, now)  # and the classes the cycle judged again (a hold it released)
        return attempts

    def _holds_given_back(self, held: dict[str, str], now: float) -> None:
        """Room a cycle (or a failed eviction) stopped holding for a nominated pod — not taken by
        that pod itself — is free again: an AssignedPodDelete for the pods it kept out, as a deleted
        pod's room is (upstream treats forgetting a pod's cached room so). Not for the pods whose
        room it was: their own hold never kept them out (upstream's addGENominatedPods skips the
        pod itself), and a pod that just gave its room up failing would only fail again at once.
        Taken even when no room came free: the step that let the holds go (a release may drop a
        ghost) may have judged classes again, which `Engine.take` acts on as it ends."""
        state = self._engine.state
        given_back = {uid: node for uid, node in held.items()
                      if (hold := state.holds.get(uid)) is None or hold.node != node}
        nodes = set(given_back.values()) - {node for uid, node in held.items() if state.node_of(uid) == node}
        self._engine.take([ClusterEvent(EventKind.ASSIGNED_POD_REMOVED, node=node) for node in sorted(nodes)], now,
                          spared=frozenset(given_back))

    def binding_failed(self, uid: str, now: float) -> None:
        """The apiserver refused a Binding (nothing was bound): release and back off."""
        self._outcomes.failed(uid, now)

    def binding_outdated(self, uid: str, now: float) -> bool:
        """The Binding could not land because someone else changed the pod since it was decided
        (unbound at a newer resourceVersion, its term fence token unchanged; the shell has fed the
        pod as read back): release, and decide it again at once from its new version. False when
        it fell back to `binding_failed` (refused so too many times in a row: backing off)."""
        return self._outcomes.outdated(uid, now)

    def binding_dropped(self, uid: str) -> None:
        """409 bound elsewhere / 404 gone: the apiserver's view wins; wait for the watch event."""
        self._outcomes.dropped(uid)

    def eviction_failed(self, victim_uid: str, now: float) -> None:
        """A preemption's victim could not be evicted (the apiserver refused for good): the room
        every preemptor waiting for it holds is not coming (a victim already leaving can be a
        later preemptor's too): each lets go and tries again, as upstream activates every
        preemptor whose PreemptPod failed, and so do the victim's gang's pending members."""
        state = self._engine.state
        preemptors = state.unmark_going(victim_uid)
        if preemptors is None:
            return
        released = {preemptor: hold.node for preemptor in sorted(preemptors)
                    if preemptor and (hold := state.release_hold(preemptor)) is not None}  # "": finishing a gang
        self._holds_given_back(released, now)
        # upstream activates such a preemptor (executor.go prepareCandidateAsync: Activate, past
        # its backoff); the victim's gang's parked members are retried as a cluster event retries
        self._engine.queue.activate(sorted(preemptors), now, "ForceActivate")
        self._retry_gangs_of((victim_uid,), now, "ForceActivate")

    def _retry_gangs_of(self, victim_uids: Iterable[str], now: float, event: str) -> None:
        """Victims that no longer go count as their gangs' members again: the gangs' pending
        members (parked while they were leaving) are tried again."""
        state = self._engine.state
        gangs = {victim.gang.key for uid in victim_uids
                 if (victim := state.pods.get(uid)) is not None and victim.gang is not None}

        def worth(entry: QueuedPod) -> bool:
            pod = state.pods.get(entry.uid)
            return pod is not None and pod.gang is not None and pod.gang.key in gangs

        self._engine.queue.move(now, worth, event)

    def finish_gang_evictions(self, now: float) -> list[UnfinishedEviction]:
        """Gangs left below their minimum by an eviction that stopped half-way (a replica that led
        before died between two DELETEs): their marked members, to evict now. Each is handed out
        once (it counts as being evicted until it is gone or `eviction_failed`)."""
        state = self._engine.state
        unfinished = unfinished_gang_evictions(state, now)
        for item in unfinished:
            state.mark_going(item.pod.uid, "")
        return unfinished

    def abandon_evictions(self, now: float) -> None:
        """Lost the lease: the evictions not yet written are dropped, so their victims no longer
        count as going (a later term decides, or finishes a gang, afresh)."""
        victims = self._engine.state.unmark_all_going()
        self._retry_gangs_of(victims, now, "EvictionAbandoned")

    def abandon_deferred(self, now: float) -> None:
        """Lost the lease: Bindings not sent yet are not ours to send; their pods go back to the queue."""
        self._outcomes.abandon(now)

    def take_notices(self) -> list[Notice]:
        """What the core found to report while doing something other than taking a watch event
        (whose notices `apply` returns): a pod forgotten — a held Binding redone or abandoned, a
        Binding refused, a gang's trial undone, a victim taken back from its Permit — that let go
        of a device moved to another node, which may take that node beyond its allocatable
        (DevicesBeyondAllocatable). Asked after every call that may forget a pod, so a notice is
        told when it is raised, not at the next event (a replay or a dry run may have none)."""
        return self._engine.state.take_deferred_notices()

    def take_released(self) -> list[Attempt]:
        """Held Bindings a permit plugin (the allocation gate) has let go: send them now."""
        released, self._engine.released = self._engine.released, []
        return released

    def take_rejected(self) -> list[Attempt]:
        """Held Bindings a permit plugin found would no longer be chosen, their pods back in the
        queue: each attempt ends here, its `message` saying why (upstream's WaitOnPermit returning
        the plugin's Reject status: the binding cycle ends Unschedulable)."""
        rejected, self._engine.rejected = self._engine.rejected, []
        return rejected

    def take_queue_incoming(self) -> dict[tuple[str, str], int]:
        """Pods that entered each queue since the last call, by (queue, event)."""
        incoming, self._engine.queue.incoming = self._engine.queue.incoming, Counter()
        return dict(incoming)

    def flush_unschedulable(self, now: float) -> None:
        """Pods unschedulable for longer than the queue's timeout get another try."""
        self._engine.queue.flush_unschedulable(now)

    def next_backoff_expiry(self) -> float | None:
        """When the next backed-off pod becomes ready (the live loop sleeps until then)."""
        return self._engine.queue.next_backoff_expiry()

    # --- queries ------------------------------------------------------------------------------

    @property
    def config(self) -> SchedulerConfig:
        return self._engine.config

    @property
    def state(self) -> ClusterState:
        """The cluster state, for tests and tools that inspect the core's view directly."""
        return self._engine.state

    @property
    def queue(self) -> SchedulingQueue:
        return self._engine.queue

    @property
    def profiles(self) -> dict[str, ProfileRuntime]:
        return dict(self._engine.profiles)

    @property
    def default_class_controller(self) -> bool:
        """Some profile wants one ResourceClass per GPU model created for it."""
        return any(isinstance(plugin, _CreatesDefaultClasses) and plugin.default_class_controller
                   for runtime in self._engine.profiles.values() for plugin in runtime.plugins.values())

    def assume_held_elsewhere(self, held: Mapping[str, tuple[str, str]], now: float) -> list[Attempt]:
        """For a core built from a listing: the pods the leader holds at its allocation gate (by
        key: the node and its message, from their PodScheduled condition) assumed on those nodes
        (`held_elsewhere`), most urgent first; their held attempts, for the view's `held`."""
        state = self._engine.state
        pods = sorted((pod for key in held if (pod := state.pod_by_key(key)) is not None),
                      key=lambda pod: (-state.competing_priority(pod), pod.key))
        return [attempt for pod in pods
                if (attempt := assume_held(self._engine, pod.uid, *held[pod.key], now)) is not None]

    def hold_nominated(self, now: float) -> None:
        """For a core built from a listing: the room the leader keeps for each pending pod
        nominated to a node (`nominations.hold_nominated`, which every cycle runs before and after
        it), so a view counts those GPUs as the leader does: the nominated pod's, not free."""
        hold_nominated(self._engine, now)

    def held(self) -> list[Attempt]:
        """Placed pods whose Binding a permit plugin holds, in the order they were held."""
        return [attempt for permit in self._engine.permits for attempt in permit.held()]

    def pending_counts(self) -> dict[str, int]:
        """Pods waiting, by where they wait: the queue's parts and `gated` — held back by their
        spec.schedulingGates, or by a PreEnqueue plugin (a Workload API gang still short), both
        of which upstream counts so. Not the pods whose Binding a permit plugin holds (`held`):
        they were placed and wait in the binding cycle, as upstream's WaitOnPermit, which no
        queue counts."""
        counts = self._engine.queue.counts()
        counts[GATED] += len(self._engine.state.gated)
        return counts

    def gated(self) -> dict[str, str]:
        """Pods the queue keeps out because a PreEnqueue plugin refuses them, by key: "gated by
        <plugin>: <why>". They are not attempted, so no attempt, Event or condition says it:
        tools that list why pods wait (explain, what-if, simulate) ask here."""
        engine = self._engine
        out: dict[str, str] = {}
        for entry in engine.queue.entries.values():
            pod = engine.state.pods.get(entry.uid)
            if pod is None or not entry.gating:
                continue
            rejected = engine.runtime_of(pod).pre_enqueue(pod)  # asked now: the reason as it is now
            if rejected is not None:
                out[pod.key] = f"gated by {rejected[0]}: {rejected[1][0]}"
        return out

    def unschedulable_by_plugin(self) -> dict[tuple[str, str], int]:
        """Pods waiting, by (plugin, profile) for each plugin that rejected their last attempt or
        gates them at PreEnqueue (runPreEnqueuePlugin adds it to the pod's rejectors), and
        ("SchedulingGates", profile) for pods held by spec.schedulingGates: upstream's
        unschedulableReasons, counted while the pod is queued (any queue) and not once it is
        popped for its next attempt; a pod back after an error has no rejectors, as upstream."""
        state = self._engine.state
        counts: Counter[tuple[str, str]] = Counter()
        for entry in self._engine.queue.entries.values():
            pod = state.pods.get(entry.uid)
            if pod is not None and entry.where != IN_FLIGHT:
                counts.update((plugin, pod.scheduler_name) for plugin in entry.rejectors)
        counts.update(("SchedulingGates", pod.scheduler_name) for uid in state.gated
                      if (pod := state.pods.get(uid)) is not None)
        return dict(counts)

    def waiting_reason(self, key: str) -> tuple[str, str] | None:
        """Why the pod `key` still waits and its resourceVersion: ("Unschedulable", rv) while it has
        no node, ("WaitingForAllocation", rv) while its Binding is held; None once it is bound,
        its Binding is out, or it is gone."""
        state = self._engine.state
        pod = state.pod_by_key(key)
        if pod is None:
            return None
        if pod.uid in state.pending:
            return UNSCHEDULABLE, pod.meta.resource_version
        if any(attempt.pod.uid == pod.uid for attempt in self.held()):
            return WAITING_FOR_ALLOCATION, pod.meta.resource_version
        return None

    def take_touched_groups(self) -> set[str]:
        """PodGroups whose object or members changed since the last call (their status may have),
        of those whose status Tessera writes (`coscheduling.reports_status`: one of its pods is
        ours, or none is left and one of ours named it); a group left out (no pod of ours has
        named it yet) is touched again by its next pod's change."""
        state = self._engine.state
        return {key for key in state.take_touched_groups()
                if key in state.gangs.podgroups and reports_status(state, key)}

    def touch_all_groups(self) -> None:
        """Every known PodGroup's status is to be written again: a new leadership term trusts
        nothing the last one wished or wrote (as scheduler-plugins' controller, whose every
        term starts from a full list of PodGroups)."""
        gangs = self._engine.state.gangs
        gangs.touched.update(gangs.podgroups)

    def group_status(self, key: str) -> GroupStatus | None:
        return group_status(self._engine.state, key)

    def group_unschedulable(self, key: str, preempting: bool) -> str:
        """The PodGroupScheduled=False message of a cycle that tried the group and placed nothing."""
        return unschedulable_message(self._engine.state, key, preempting)

    def still_stands(self, notice: Notice) -> bool:
        """Whether the problem `notice` told of is still there now (`state.standing.still_stands`):
        a notice told late, by a replica that could not when it came, is told only then."""
        return still_stands(self._engine.state, notice)

    def group_notice(self, attempts: list[Attempt]) -> Notice | None:
        """What the PodGroup of the gang whose cycle made these `attempts` is to be told (a Warning
        Event live): its gang was tried and did not fit, in its members' words; None otherwise."""
        return unschedulable_notice(self._engine.state, attempts, self.cluster_totals())

    def group_placed(self, attempts: list[Attempt]) -> str | None:
        """The PodGroup whose gang the cycle that made these `attempts` placed (`placed_group`)."""
        return placed_group(self._engine.state, attempts)

    def group_scheduled_notice(self, key: str, nodes: list[str]) -> Notice | None:
        """What the PodGroup `key` is told once a placement's Bindings all landed, on `nodes`."""
        return scheduled_notice(self._engine.state, key, nodes)

    def cluster_totals(self) -> ClusterTotals:
        """What the schedulable nodes offer, in all and per topology domain as each pod's profile
        names domains (its placement plugin's levels): for can-never-fit verdicts."""
        engine = self._engine

        def level_of(pod: Pod, key: str) -> tuple[tuple[str, ...], str]:
            placement = engine.runtime_of(pod).placement
            return placement.level(key) if placement is not None else level_alone(pod, key)

        return ClusterTotals(engine.state, level_of)

    def never_fits_told(self, waiting: Mapping[str, str]) -> dict[str, str]:
        """Each pending pod's message in `waiting` (by pod key) with `capacity.and_never_fits`'
        sentence after it when its gang can never fit or has too few pods to be tried: the dry
        runs' reports (what-if's RESULT, simulate's unschedulable pods) say it alike; a key no
        pod has any more keeps its message."""
        state = self._engine.state
        totals = self.cluster_totals()
        out = {}
        sentences: dict[tuple[object, ...], str] = {}  # per gang: each member asking was quadratic
        for key, message in waiting.items():
            pod = state.pod_by_key(key)
            gang = never_fits_key(state, pod) if pod is not None else None
            if pod is None or gang is None:  # gone, or no gang member: no sentence to add
                out[key] = message
                continue
            if gang not in sentences:
                sentences[gang] = never_fits(state, pod, totals)
            out[key] = with_sentence(message, sentences[gang])
        return out

    def class_statuses(self) -> list[ClassStatus]:
        state = self._engine.state
        classes = state.classes.classes
        statuses = []
        for name in sorted(classes):
            valid, message, matching, reason = state.class_status(name)
            statuses.append(ClassStatus(name, valid, message, matching, classes[name].resource_name,
                                        classes[name].meta.generation, reason))
        return statuses

    def resource_classes(self) -> list[ResourceClass]:
        """Every ResourceClass, valid or not (the default class controller names by them)."""
        return list(self._engine.state.classes.classes.values())

    def devices(self) -> list[Device]:
        return list(self._engine.state.devices.values())

    def cache_sizes(self) -> dict[str, int]:
        """Nodes, pods and assumed pods (placed, Binding not confirmed) in the cache, as
        kube-scheduler's cache counts them: its pods are those on nodes (bound, any scheduler's,
        or assumed) and not finished; pending pods are the queue's (scheduler_pending_pods)."""
        state = self._engine.state
        assumed = sum(1 for placement in state.placements.values() if placement.assumed)
        return {"nodes": len(state.node_order), "pods": len(state.placements), "assumed_pods": assumed}

    def node_usage(self, resources: tuple[str, ...]) -> Iterator[NodeUsage]:
        """Per node in arrival order: in-use and allocatable amounts of `resources`."""
        for info in self._engine.state.node_infos():
            assert info.node is not None
            usage = {name: (info.used(name), info.node.allocatable.get(name, 0)) for name in resources}
            yield NodeUsage(info.name, usage, len(info.pods))

    def over_capacity(self, node: str) -> list[tuple[str, int, int]]:
        """(resource, in use, allocatable) for every resource the node has more of in use than it
        has (possible only through pods bound by others, or a node that shrank)."""
        info = self._engine.state.nodes.get(node)
        return info.over_capacity() if info is not None else []

    def placements(self) -> Iterator[PlacedPod]:
        """Every pod on a node (bound, or assumed while its Binding is out) and what it charged."""
        state = self._engine.state
        for uid, placement in state.placements.items():
            pod = state.pods.get(uid)
            yield PlacedPod(pod.key if pod is not None else uid, placement.node, dict(placement.requests),
                            placement.grants, placement.assumed)

    def waiting_for_others(self) -> dict[str, int]:
        """Pods without a node that no profile of this configuration schedules, by schedulerName
        (a replay with a configuration whose profiles the input's pods do not name places none)."""
        state = self._engine.state
        waiting: dict[str, int] = {}
        for pod in state.pods.values():
            if not pod.node_name and not pod.terminal and not pod.meta.deleting and not state.is_ours(pod):
                waiting[pod.scheduler_name] = waiting.get(pod.scheduler_name, 0) + 1
        return waiting

    def is_pending(self, key: str) -> bool:
        """The pod exists and waits for a node (not placed, not being deleted)."""
        state = self._engine.state
        pod = state.pod_by_key(key)
        return pod is not None and pod.uid in state.pending
