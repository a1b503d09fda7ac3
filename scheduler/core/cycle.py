"""The scheduler core: watch events in, decisions out. No I/O, no clock — `now` is passed in.

One `Scheduler` owns the cluster state, the queue and the configured profiles. The live loop, the
simulator and the benchmarks all drive it the same way:

    notices = scheduler.apply(event_type, obj, now)      # every watch event
    attempts = scheduler.schedule_next(now)              # until it returns None
    ... POST each successful attempt's Binding; on failure scheduler.binding_failed(uid, now)

A successful attempt is already *assumed* in the state (its resources and devices are held), so
the next cycle can run while the Binding is in flight.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from dataclasses import dataclass, field

from scheduler.api.config import SchedulerConfig
from scheduler.core import annotations as ann
from scheduler.core.framework.cycle_state import prepare
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.framework.runtime import ProfileRuntime
from scheduler.core.objects import JSON, Pod, object_uid
from scheduler.core.queue import QueuedPod, SchedulingQueue
from scheduler.core.state import ClusterEvent, ClusterState, EventKind, Notice

MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENTAGE = 5
NO_NODES = "no nodes available to schedule pods"


@dataclass(slots=True)
class Attempt:
    """One scheduling attempt for one pod: a node and Binding annotations, or why not."""

    pod: Pod
    node: str | None
    annotations: dict[str, str] = field(default_factory=dict)
    message: str = ""
    rejectors: frozenset[str] = frozenset()
    scores: dict[str, dict[str, int]] | None = None
    filtered: dict[str, str] | None = None
    attempts: int = 1  # this attempt included (for the scheduling SLI metrics)
    queued_at: float = 0.0  # when the pod first entered the queue
    deferred: bool = False  # placed, but its Binding waits for the node's allocation gate


def num_feasible_nodes_to_find(percentage: int, num_nodes: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind (adaptive when percentage is 0)."""
    if num_nodes < MIN_FEASIBLE_NODES:
        return num_nodes
    if percentage == 0:
        percentage = max(50 - num_nodes // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(num_nodes * percentage // 100, MIN_FEASIBLE_NODES)


def fit_error(num_nodes: int, reasons: Counter[str]) -> str:
    """The FitError message: `0/N nodes are available: <count reason, sorted as strings>.`"""
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{num_nodes} nodes are available: {', '.join(parts)}."


class Scheduler:
    def __init__(self, config: SchedulerConfig, seed: int = 0, explain: bool = False, batch: bool = True) -> None:
        """`batch=False` runs every plugin's per-node form only: the reference the batch forms
        are tested against (the same decisions, slower)."""
        self.config = config
        self.state = ClusterState(config.scheduler_names)
        self.queue = SchedulingQueue(config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds)
        table = NodeTable(self.state)
        self.profiles = {p.scheduler_name: ProfileRuntime(p, self.state, table, batch) for p in config.profiles}
        self.rng = random.Random(seed)
        self.explain = explain
        self.next_start = 0
        self.deferred: dict[str, list[Attempt]] = {}  # node -> placed attempts waiting for the gate
        self._released: list[Attempt] = []
        self._next_gate_check = 0.0
        self._now = 0.0  # the latest time the caller passed in (for requeues inside event handling)

    # --- input -------------------------------------------------------------------------------

    def apply(self, event_type: str, obj: JSON, now: float) -> list[Notice]:
        """Feed one watch event; keeps the queue in step and requeues pods the event may help."""
        self._now = now
        if not isinstance(obj, dict):
            return self.state.apply(event_type, obj)[1]
        before = self._pending_snapshot(obj)
        events, notices = self.state.apply(event_type, obj)
        self._sync_queue(obj, before, now)
        if before is None and obj.get("kind") == "Pod" and event_type != "DELETED":
            self._observe(obj)
        for event in events:
            if event.kind is EventKind.ALLOCATION_DONE:
                self._release_deferred(event.node)
            else:
                self.queue.move(now, functools.partial(self._worth_retrying, event=event))
        return notices

    def _pending_snapshot(self, obj: JSON) -> Pod | None:
        if obj.get("kind") != "Pod":
            return None
        uid = object_uid(obj)
        return self.state.pods.get(uid) if uid is not None else None

    def _observe(self, obj: JSON) -> None:
        uid = object_uid(obj)
        pod = self.state.pods.get(uid) if uid is not None else None
        if pod is not None:
            for runtime in self.profiles.values():
                runtime.observe(pod)

    def _sync_queue(self, obj: JSON, before: Pod | None, now: float) -> None:
        if obj.get("kind") != "Pod":
            return
        uid = object_uid(obj)
        if uid is None:
            return
        pod = self.state.pods.get(uid)
        if pod is None or uid not in self.state.pending:
            if uid in self.queue and (pod is None or uid not in self.state.placements or pod.node_name):
                self.queue.remove(uid)
            return
        if uid not in self.queue or before is None or _scheduling_inputs(before) != _scheduling_inputs(pod):
            self.queue.add(uid, pod.priority, pod.gang.key if pod.gang else "", now)

    def _worth_retrying(self, entry: QueuedPod, *, event: ClusterEvent) -> bool:
        """Requeue hints: may this event make this pod schedulable? (asked of the plugins that
        rejected it, through its profile)"""
        pod = self.state.pods.get(entry.uid)
        runtime = self.profiles.get(pod.scheduler_name) if pod is not None else None
        if runtime is None:
            runtime = next(iter(self.profiles.values()))
        return runtime.worth_retrying(entry.uid, entry.rejectors, event)

    # --- scheduling --------------------------------------------------------------------------

    def schedule_next(self, now: float) -> list[Attempt] | None:
        """Run one cycle (one pod, or one whole gang); None when no pod is ready at `now`."""
        self._now = now
        self._open_gates_without_agent(now)
        uid = self.queue.pop(now)
        if uid is None:
            return None
        pod = self.state.pods.get(uid)
        if pod is None or uid not in self.state.pending:
            self.queue.remove(uid)
            return []
        runtime = self.profiles[pod.scheduler_name]
        history = self._history(pod)
        if pod.gang is not None and runtime.grouping is not None:
            attempts = self._schedule_gang(pod, runtime, now)
        else:
            attempts = [self._attempt(pod, runtime, now)]
            if attempts[0].node is not None:
                self.queue.done(uid)
            else:
                self.queue.unschedulable_failure(uid, attempts[0].rejectors, now)
        for attempt in attempts:
            if attempt.node is not None and attempt.annotations:
                self._gate(attempt, runtime, now)
        for attempt in attempts:
            failures, queued_at = history.get(attempt.pod.uid, (0, now))
            attempt.attempts, attempt.queued_at = failures + 1, queued_at
        return attempts

    # --- the allocation gate (DESIGN.md §2: one Allocating pod per resource name and node) -----

    def _gate(self, attempt: Attempt, runtime: ProfileRuntime, now: float) -> None:
        """Bind now and hold the node's gate, or defer the Binding until the gate opens.

        The gate holds only where a node agent is known to serve the node (a fresh heartbeat on
        its devices): only an agent ever marks an allocation done, so elsewhere it would hold for
        ever.
        """
        args = runtime.profile.devices
        assert attempt.node is not None
        info = self.state.nodes[attempt.node]
        if not args.allocation_gate or not info.agent_serves(now, args.agent_heartbeat_timeout_seconds):
            return
        resources = _resources_of(attempt)
        waiting = self.deferred.get(attempt.node, ())
        holder = info.allocation_holder(resources)
        ahead = next((w for w in waiting if not _resources_of(w).isdisjoint(resources)), None)
        if holder is None and ahead is None:
            self.state.mark_allocating(attempt.pod.uid, attempt.node, resources)
            return
        attempt.deferred = True
        blocker = self.state.pods[holder].key if holder is not None and holder in self.state.pods else \
            ahead.pod.key if ahead is not None else "another pod"
        attempt.message = (f"assigned to {attempt.node}; the Binding waits until the node agent has allocated "
                           f"{', '.join(sorted(resources))} to {blocker} (allocation gate)")
        self.deferred.setdefault(attempt.node, []).append(attempt)

    @property
    def gated(self) -> int:
        """Placed pods whose Binding waits for a node's allocation gate."""
        return sum(len(attempts) for attempts in self.deferred.values())

    def take_touched_groups(self) -> set[str]:
        """PodGroups whose object or members changed since the last call (their status may have)."""
        touched, self.state.touched_groups = self.state.touched_groups, set()
        return {key for key in touched if key in self.state.podgroups}

    def pending_counts(self) -> dict[str, int]:
        """Pods waiting, by where they wait: the queue's parts and `gated` (placed, Binding held)."""
        return {**self.queue.counts(), "gated": self.gated}

    def waiting_reason(self, key: str) -> tuple[str, str] | None:
        """Why the pod `key` still waits and its resourceVersion: ("Unschedulable", rv) while it has
        no node, ("WaitingForAllocation", rv) while its Binding is held by the gate; None once it
        is bound, its Binding is out, or it is gone."""
        pod = self.state.pod_by_key(key)
        if pod is None:
            return None
        if pod.uid in self.state.pending:
            return "Unschedulable", pod.meta.resource_version
        node = self.state.node_of(pod.uid)
        if node is not None and any(a.pod.uid == pod.uid for a in self.deferred.get(node, ())):
            return "WaitingForAllocation", pod.meta.resource_version
        return None

    def _open_gates_without_agent(self, now: float) -> None:
        """Deferred Bindings on nodes whose agent stopped heartbeating go out: nobody would open the gate."""
        if not self.deferred or now < self._next_gate_check:
            return
        self._next_gate_check = now + 1.0
        for node in list(self.deferred):
            self._release_deferred(node)

    def _release_deferred(self, node: str) -> None:
        waiting = self.deferred.get(node)
        if not waiting:
            return
        info = self.state.nodes[node]
        still: list[Attempt] = []
        held: set[str] = set()  # resources of pods still waiting: later pods must not overtake them
        for attempt in waiting:
            placement = self.state.placements.get(attempt.pod.uid)
            if placement is None or not placement.assumed or placement.node != node:
                continue  # deleted, bound by someone else, or forgotten meanwhile
            if not self._still_valid(attempt):
                # the node, a device or its class changed while the Binding waited: decide again
                self.state.forget(attempt.pod.uid)
                self._requeue_after_error(attempt.pod.uid, self._now)
                continue
            resources = _resources_of(attempt)
            args = self.profiles[attempt.pod.scheduler_name].profile.devices
            gated = info.agent_serves(self._now, args.agent_heartbeat_timeout_seconds)
            if gated and (not held.isdisjoint(resources) or info.allocation_blocks(resources)):
                still.append(attempt)
                held |= resources
                continue
            if gated:
                self.state.mark_allocating(attempt.pod.uid, node, resources)
            attempt.deferred = False
            attempt.message = ""
            self._released.append(attempt)
        if still:
            self.deferred[node] = still
        else:
            del self.deferred[node]

    def _still_valid(self, attempt: Attempt) -> bool:
        """Would this held placement still be chosen as it is? Node, devices, classes, amounts."""
        state = self.state
        assert attempt.node is not None
        info = state.nodes.get(attempt.node)
        if info is None or info.node is None:
            return False
        containers = {c.name: c for c in attempt.pod.containers}
        uid = attempt.pod.uid
        for container, by_resource in ann.decode_devices(attempt.annotations[ann.DEVICES]).items():
            for resource, grants in by_resource.items():
                cls = state.classes.resource_class(resource)
                if cls is None:
                    return False
                for grant in grants:
                    device = state.devices.get(grant.device)
                    use = state.device_use.get(grant.device)
                    if device is None or not device.schedulable or device.node_name != attempt.node \
                            or cls.name not in state.classes.device_classes.get(device.name, ()) or use is None:
                        return False
                    if cls.sharing is None:
                        if grant.amount is not None or use.exclusive != {uid} or use.shared:
                            return False
                    else:
                        count = containers[container].requests.get(resource, 0) if container in containers else 0
                        capacity = device.capacity.get(cls.sharing.dimension)
                        if grant.amount != cls.sharing.unit * count or use.exclusive or capacity is None \
                                or use.shared_total > capacity:
                            return False
        return True

    def abandon_deferred(self, now: float) -> None:
        """Lost the lease: Bindings not sent yet are not ours to send; their pods go back to the queue."""
        waiting = [a for attempts in self.deferred.values() for a in attempts] + self._released
        self.deferred = {}
        self._released = []
        for attempt in waiting:
            self.binding_failed(attempt.pod.uid, now)

    def _requeue_after_error(self, uid: str, now: float) -> None:
        pod = self.state.pods.get(uid)
        if pod is not None and uid in self.state.pending:
            if uid not in self.queue:
                self.queue.add(uid, pod.priority, pod.gang.key if pod.gang else "", now)
            self.queue.error_failure(uid, now)

    def take_released(self) -> list[Attempt]:
        """Deferred attempts whose gate has opened: their Bindings can go out now."""
        released, self._released = self._released, []
        return released

    def _history(self, pod: Pod) -> dict[str, tuple[int, float]]:
        """Failed attempts so far and first-queued time of the pod (and its gang siblings)."""
        uids = self.state.groups.get(pod.gang.key, {pod.uid}) if pod.gang is not None else {pod.uid}
        entries = self.queue.entries
        return {uid: (entries[uid].attempts, entries[uid].initial) for uid in uids if uid in entries}

    def _attempt(self, pod: Pod, runtime: ProfileRuntime, now: float) -> Attempt:
        """PreFilter, filter, score and pick a node for one pod; on success the pod is assumed."""
        ctx = prepare(pod, self.state.classes)
        num_nodes = len(self.state.node_order)
        rejected = runtime.pre_filter(ctx)
        if rejected is not None:
            plugin, reasons = rejected
            return Attempt(pod, None, message=f"0/{num_nodes} nodes are available: {reasons[0]}.",
                           rejectors=frozenset({plugin}))
        if num_nodes == 0:
            return Attempt(pod, None, message=NO_NODES, rejectors=frozenset(p.name for p in runtime.filters))
        percentage = runtime.profile.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.config.percentage_of_nodes_to_score
        to_find = num_feasible_nodes_to_find(percentage, num_nodes) if runtime.scores else 1
        start = self.next_start
        found = runtime.find_feasible(ctx, start, to_find, self.explain)
        self.next_start = (start + found.processed) % num_nodes
        table = runtime.table
        filtered = ({table.info(row).name: reason for row, reason in found.filtered.items()}
                    if found.filtered is not None else None)
        if not found.rows:
            return Attempt(pod, None, message=fit_error(num_nodes, found.reasons), rejectors=frozenset(found.rejectors),
                           filtered=filtered, scores={} if self.explain else None)
        scores: dict[str, dict[str, int]] | None = None
        if len(found.rows) == 1 and not self.explain:
            best = 0
        else:
            scored = runtime.score(ctx, found.rows, self.explain)
            best = self._pick(scored.totals)
            if scored.per_plugin is not None:
                scores = {}
                for i, row in enumerate(found.rows):
                    line = {name: values[i] for name, values in scored.per_plugin.items()}
                    line["total"] = scored.totals[i]
                    scores[table.info(row).name] = line
        chosen = table.info(found.rows[best])
        reservation = runtime.reserve(ctx, chosen, now)
        self.state.assume(pod.uid, chosen.name, reservation.devices)  # type: ignore[arg-type]
        return Attempt(pod, chosen.name, dict(reservation.annotations), scores=scores, filtered=filtered)

    def _pick(self, totals: list[int]) -> int:
        """Index of the highest total; ties broken uniformly at random (as selectHost's reservoir sampling)."""
        top = max(totals)
        ties = [i for i, total in enumerate(totals) if total == top]
        return ties[0] if len(ties) == 1 else self.rng.choice(ties)

    def _schedule_gang(self, pod: Pod, runtime: ProfileRuntime, now: float) -> list[Attempt]:
        """Place every pending member on the live state as one transaction: all (≥ min) or nothing."""
        grouping = runtime.grouping
        assert grouping is not None
        view = grouping.view(pod)
        if view is None:  # siblings still waiting stay parked; only this pod reports
            reason = grouping.waiting_message(pod)
            self.queue.unschedulable_failure(pod.uid, {grouping.name}, now)
            message = f"0/{len(self.state.node_order)} nodes are available: {reason}."
            return [Attempt(pod, None, message=message, rejectors=frozenset({grouping.name}))]
        members = sorted(view.pending, key=grouping.placement_order)
        for member in members:
            self.queue.take(member.uid)
        attempts = [self._attempt(member, self.profiles[member.scheduler_name], now) for member in members]
        placed = [a for a in attempts if a.node is not None]
        failed = [a for a in attempts if a.node is None]
        if len(view.bound) + len(placed) >= view.minimum:
            for attempt in placed:
                self.queue.done(attempt.pod.uid)
            for attempt in failed:
                self.queue.unschedulable_failure(attempt.pod.uid, attempt.rejectors | {grouping.name}, now)
            self.queue.group_succeeded(view.key)
            return attempts
        # Not enough: undo every assumption so the group holds nothing between cycles.
        if grouping.backoff_seconds > 0:
            self.queue.back_off_group(view.key, now + grouping.backoff_seconds)
        first = failed[0]
        rejectors = frozenset({grouping.name}).union(*(a.rejectors for a in failed))
        summary = (f"pod group {view.key} needs {view.minimum} members placed together, "
                   f"only {len(view.bound) + len(placed)} fit; {first.pod.key}: {first.message}")
        for attempt in attempts:
            if attempt.node is not None:
                self.state.forget(attempt.pod.uid)
                attempt.node = None
                attempt.annotations = {}
                attempt.message = summary
            elif attempt is not first:
                attempt.message = f"{attempt.message} (pod group {view.key}: {len(placed)} of {view.minimum} placed)"
            attempt.rejectors = rejectors
            self.queue.unschedulable_failure(attempt.pod.uid, rejectors, now)
        return attempts

    # --- binding outcomes (live loop) --------------------------------------------------------

    def binding_failed(self, uid: str, now: float) -> None:
        """A Binding POST failed for a reason worth retrying: release and back off."""
        node = self.state.node_of(uid)
        self.state.forget(uid)
        self._requeue_after_error(uid, now)
        if node is not None:
            self._release_deferred(node)

    def binding_dropped(self, uid: str) -> None:
        """409 already bound / 404 gone: the apiserver's view wins; wait for the watch event."""
        node = self.state.node_of(uid)
        self.state.forget(uid)
        if node is not None:
            self._release_deferred(node)
        self.state.pending.discard(uid)
        self.queue.remove(uid)


def _resources_of(attempt: Attempt) -> frozenset[str]:
    raw = attempt.annotations.get(ann.DEVICES)
    if raw is None:
        return frozenset()
    return frozenset(resource for by_resource in ann.decode_devices(raw).values() for resource in by_resource)


def _scheduling_inputs(pod: Pod) -> tuple[object, ...]:
    """What a pod update must change to be worth another try (status and metadata noise is not)."""
    return (pod.requests, pod.node_selector, pod.required_terms, pod.preferred_terms, pod.tolerations,
            pod.priority, pod.gang, pod.meta.labels, pod.scheduler_name)
