"""What every job of the scheduler works on: the cluster state, the queue, the profiles' plugins
and the Bindings permit plugins have let through. The jobs themselves — taking in events
(`intake.py`), running cycles (`cycle.py`), handling Binding outcomes (`outcomes.py`) — share one
Engine; `Scheduler` (`scheduler.py`) is the face the live loop, the replay and the benchmarks use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable

from scheduler.api.config_model import SchedulerConfig
from scheduler.core.framework.attempt import Attempt
from scheduler.core.framework.cycle_state import prepare
from scheduler.core.framework.interface import PermitPlugin, Reservation
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.framework.runtime import ProfileRuntime
from scheduler.core.framework.timing import Stopwatch, Timing
from scheduler.core.objects import Pod
from scheduler.core.queue import QueuedPod, SchedulingQueue
from scheduler.core.state import ClusterEvent, ClusterState, EventKind, NodeInfo


class Engine:
    def __init__(self, config: SchedulerConfig, batch: bool, stopwatch: Stopwatch) -> None:
        self.config = config
        self.state = ClusterState(config.scheduler_names)
        self.queue = SchedulingQueue(config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds)
        table = NodeTable(self.state)
        self.timing = Timing(stopwatch)
        self.profiles = {p.scheduler_name: ProfileRuntime(p, self.state, table, self.timing, batch)
                         for p in config.profiles}
        self.permits: list[PermitPlugin] = [p for runtime in self.profiles.values() for p in runtime.permits]
        # per event kind, the plugins of any profile with a queueing hint for it: the only
        # rejectors whose pods an event of that kind is worth asking about (`queue.move`)
        self.listening: dict[EventKind, frozenset[str]] = {
            kind: frozenset(name for runtime in self.profiles.values()
                            for name, hints in runtime.hints.items() if kind in hints)
            for kind in EventKind}
        self.queue.pre_enqueue = self.gating_plugin
        self.released: list[Attempt] = []  # held Bindings a permit plugin let go, not taken yet
        self.rejected: list[Attempt] = []  # held Bindings a permit plugin found invalid, not taken yet
        self.now = 0.0  # the latest time the caller passed in (for requeues inside event handling)

    def runtime_of(self, pod: Pod | None) -> ProfileRuntime:
        """The pod's profile (the first profile for a pod the state no longer has)."""
        runtime = self.profiles.get(pod.scheduler_name) if pod is not None else None
        return runtime if runtime is not None else next(iter(self.profiles.values()))

    def reserve_on(self, pod: Pod, info: NodeInfo, now: float) -> Reservation | None:
        """The pod's reservation on a node fixed in advance (a nomination's, an allocation gate's
        held elsewhere), checked as a cycle checks one node (PreFilter, then Filter there); None
        when it does not go there."""
        runtime = self.runtime_of(pod)
        ctx = prepare(pod, self.state.classes)
        if runtime.pre_filter(ctx) is not None or runtime.filter_node(ctx, info) is not None:
            return None
        return runtime.reserve(ctx, info, now)

    def take(self, events: Iterable[ClusterEvent], now: float, spared: Collection[str] = ()) -> None:
        """Act on what changed in the cluster state: a node whose agent finished an allocation
        lets the allocation gate release held Bindings; for anything else, pods that failed
        earlier are asked whether it may help them (the queueing hints of the plugins that
        rejected them), except the `spared` ones, whom it cannot help (the pods whose own hold
        it was). Whatever the change came from: a watch event, or a Binding that did not land.
        Classes judged again on the way are acted on too (`_act_on_deferred_class_events`), and so
        are those the caller's step judged before it (a scheduling cycle, a failed eviction: the
        Scheduler ends both with a take, of no event if no room came free): their one home."""
        for event in events:
            if event.kind is EventKind.ALLOCATION_DONE:
                self.release(event.node, now)
            else:
                self.queue.move(now, functools.partial(self._worth_retrying, event=event, spared=spared),
                                event.label or event.kind.value, self.listening[event.kind])
        self._act_on_deferred_class_events(now)

    def _act_on_deferred_class_events(self, now: float) -> None:
        """Act on the classes judged again outside a watch event (`ClusterState.deferred_events`:
        a hold a cycle ended, a pod forgotten, dropped a node's last ghost), as soon as the
        step that judged them is over: the pods parked on them move as upstream's queue moves
        the unschedulable pods an event may help when the event comes, and a pod whose cycle
        saw it is judged by it after its failure, as upstream's in-flight pod is by the events
        seen while it was in flight (determineSchedulingHintForInFlightPod). None is spared:
        a class changed for every pod waiting on it."""
        if self.state.deferred_events:
            self.take(self.state.take_deferred_events(), now)

    def _worth_retrying(self, entry: QueuedPod, *, event: ClusterEvent, spared: Collection[str]) -> bool:
        """Asks the hints of the plugins the pod listens to (`QueuedPod.listens_to`: a gated
        pod's gating plugin alone, any other's rejectors)."""
        if entry.uid in spared:
            return False
        runtime = self.runtime_of(self.state.pods.get(entry.uid))
        return runtime.worth_retrying(entry.uid, entry.listens_to, event)

    def gating_plugin(self, uid: str) -> str | None:
        """The PreEnqueue plugin of the pod's profile that keeps it out of the queue now, or None."""
        pod = self.state.pods.get(uid)
        if pod is None:
            return None
        rejected = self.runtime_of(pod).pre_enqueue(pod)
        return rejected[0] if rejected is not None else None

    def release(self, node: str | None, now: float) -> None:
        """Ask the permit plugins what they let through on `node` (every node when None): allowed
        Bindings wait in `released`; placements that would no longer be chosen are redone."""
        for permit in self.permits:
            released = permit.release(node, now)
            self.released += released.allowed
            self.rejected += released.invalid
            for attempt in released.invalid:
                freed = self.state.forget(attempt.pod.uid)
                self.requeue_after_error(attempt.pod.uid, now)
                self.take(freed, now)

    def reject_waiting(self, uid: str, now: float) -> bool:
        """A preemption's victim whose Binding a permit plugin holds goes back to the queue in
        memory, without an API call (upstream's waitingPod.Preempt): its room is free at once.
        False when no permit plugin holds it (its Binding went out: it is evicted instead)."""
        if not any(permit.reject(uid) for permit in self.permits):
            return False
        freed = self.state.forget(uid)
        self.requeue_after_error(uid, now)
        self.take(freed, now)
        return True

    def requeue_at_once(self, uid: str, now: float) -> None:
        """A pending pod back to activeQ now, no backoff (its Binding was outdated by an edit)."""
        self._requeue(uid, now, self.queue.outdated_failure)

    def requeue_after_error(self, uid: str, now: float) -> None:
        """A pending pod back to the queue after an error, to wait out its error backoff."""
        self._requeue(uid, now, self.queue.error_failure)

    def _requeue(self, uid: str, now: float, failure: Callable[[str, float], None]) -> None:
        """A pending pod (queued again if the queue forgot it) handed to the queue's `failure`."""
        pod = self.state.pods.get(uid)
        if pod is not None and uid in self.state.pending:
            if uid not in self.queue:
                self.queue.add(uid, pod.priority, pod.gang.key if pod.gang else "", now)
            failure(uid, now)
