"""The scheduling queue, shaped like kube-scheduler's: activeQ, backoffQ and unschedulable pods.

- activeQ is a heap: higher priority first, then the older timestamp. For gang members the group's
  last failure time stands in for the pod's, so a large gang that keeps failing does not hold the
  head of the queue forever and does not starve either (scheduler-plugins #949).
- A pod that failed waits in `unschedulable` until a cluster event that could help it arrives (the
  caller decides "could help" — the requeue hint), then sits out its backoff (1 s doubling to 10 s,
  counted from its consecutive errors, else from its rejections, as upstream's getBackoffTime),
  and comes back after 5 minutes at the latest.
- Backoffs end on whole seconds, as upstream's one-second ordering windows (KEP-5142): the expiry
  is truncated to its second (the window) and the pod backs off while that window is the current
  one, so it is ready at the start of the next. Pods whose windows are the same reach activeQ
  together, and the rejected ones among them pop early by activeQ's order (priority, then
  timestamp) rather than by which expired first. A gang's podGroupBackoffSeconds hold is not
  upstream's backoff (scheduler-plugins rejects the gang in PreFilter until an exact expiry): it
  stays exact, and a member is ready when both its window and its gang's hold are over.
- When nothing is ready in activeQ, a pod a plugin rejected is taken from backoffQ before its
  backoff ends (upstream's SchedulerPopFromBackoffQ, on by default since 1.33): an idle scheduler
  does not sit out a backoff. Pods back after an error, and gangs held by podGroupBackoffSeconds,
  wait theirs out (upstream's podErrorBackoffQ is never popped early).
- Before a pod enters activeQ or backoffQ the profile's PreEnqueue plugins are asked (upstream's
  runPreEnqueuePlugins in moveToActiveQ / moveToBackoffQ; not when backoffQ hands a pod to
  activeQ, as with SchedulerPopFromBackoffQ). A pod one refuses is parked gated among the
  unschedulable pods, its gating plugin among its rejectors: it is not attempted, counts as
  `gated`, and only events that plugin's hints accept wake it (not the 5-minute flush, whose
  wildcard event no gating plugin registers). Pods held by spec.schedulingGates never enter the
  queue (`gated_arrived`): the cluster state keeps them.
- Time is always passed in: the live loop gives wall-clock seconds, the simulator a virtual clock.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
IN_FLIGHT = "inFlight"
GATED = "gated"  # an unschedulable pod a PreEnqueue plugin keeps out, never attempted since (counts only)

# event labels of scheduler_queue_incoming_pods_total for a pod's own arrival: upstream's
# ClusterEvent.Label() (Resource + ActionType) of EventUnscheduledPodAdd, EventUnscheduledPodUpdate
# and {UnschedulablePod, UpdatePodSchedulingGatesEliminated} (framework/events.go)
POD_ADDED = "UnschedulablePodAdd"
POD_UPDATED = "UnschedulablePodUpdate"
GATES_ELIMINATED = "UnschedulablePodUpdatePodSchedulingGatesEliminated"
ATTEMPT_FAILURE = "ScheduleAttemptFailure"  # upstream's event for a pod requeued after its attempt failed

UNSCHEDULABLE_TIMEOUT = 300.0
BACKOFF_WINDOW = 1.0  # upstream's backoffQOrderingWindowDuration: backoffs end on whole seconds

Order = tuple[int, float, str]  # activeQ's less function as a sort key: see SchedulingQueue._order
# a backoff heap's item: (ready at, order within the window, insertion seq, uid, version)
BackoffItem = tuple[float, Order, int, str, int]
# podErrorBackoffQ orders by the window only (upstream's lessBackoffCompleted): one order for all
_BY_WINDOW_ONLY: Order = (0, 0.0, "")


@dataclass(slots=True)
class QueuedPod:
    uid: str
    priority: int
    group: str  # gang key, "" for single pods
    timestamp: float  # when it was (re)queued after its last attempt: the backoff base
    initial: float  # when it first entered the queue (a gang's order until it fails)
    # when it first passed PreEnqueue (upstream's InitialAttemptTimestamp): the scheduling SLI
    # counts from here, not from the time it waited gated; None while it never has
    admitted: float | None = None
    attempts: int = 0  # failed attempts of every kind (the attempt metrics)
    rejections: int = 0  # attempts rejected by plugins: upstream's UnschedulableCount
    errors: int = 0  # errors since the last rejection: upstream's ConsecutiveErrorsCount
    # Bindings in a row that could not land because someone else changed the pod between decision
    # and Binding (`outdated_failure`); an attempt the pod was found unschedulable at starts it afresh
    outdated: int = 0
    rejectors: frozenset[str] = frozenset()  # plugins that rejected it last time
    gating: str = ""  # the PreEnqueue plugin that keeps it out (upstream's GatingPlugin), "" if none
    where: str = ACTIVE
    version: int = 0
    move_cycle_at_pop: int = 0

    @property
    def listens_to(self) -> frozenset[str]:
        """The plugins whose hints may wake it: its gating plugin alone while one keeps it out
        (upstream skips a gated pod for events its GatingPluginEvents do not include), else its
        rejectors (none: every event may). One rule for the hints asked (`Engine`) and the
        plugins it is filed under (`SchedulingQueue._park`)."""
        return frozenset({self.gating}) if self.gating else self.rejectors


class SchedulingQueue:
    def __init__(self, initial_backoff: float = 1.0, max_backoff: float = 10.0) -> None:
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.entries: dict[str, QueuedPod] = {}
        self._active: list[tuple[Order, int, str, int]] = []
        # backoffQ in two parts, as upstream's: pods a plugin rejected (popped early when activeQ
        # is empty; within one window by activeQ's order) and pods that must wait their backoff
        # out (by the window only; a gang held by its hold joins them from pop)
        self._backoff: list[BackoffItem] = []
        self._backoff_waiting: list[BackoffItem] = []
        self.unschedulable: dict[str, QueuedPod] = {}
        # the unschedulable pods by the plugins whose hints may wake them (`_park`), each with its
        # place in `unschedulable`'s order: an event asks only the pods its plugins may wake (`move`)
        self._parked_by: dict[str, dict[str, int]] = {}
        self._parked_as: dict[str, tuple[frozenset[str], int]] = {}  # uid -> (its plugins, its place)
        self._places = itertools.count()
        self.group_failed_at: dict[str, float] = {}
        self.group_backoff_until: dict[str, float] = {}  # a failed group kept out until then
        self._seq = itertools.count()
        self._move_cycle = 0
        # pods entering a queue, by (queue, event) — upstream's scheduler_queue_incoming_pods_total
        self.incoming: Counter[tuple[str, str]] = Counter()
        # placed pods whose Binding is not confirmed yet: a refused one comes back with its history
        # (attempts, first-queued time), as upstream keeps the QueuedPodInfo through binding
        self._placed: dict[str, QueuedPod] = {}
        self._group_entries: Counter[str] = Counter()  # gang key -> its members queued: its state goes with the last
        # the PreEnqueue plugins' verdict on a pod (the profile's: the engine sets it): the gating
        # plugin, or None when it may enter activeQ / backoffQ
        self.pre_enqueue: Callable[[str], str | None] = lambda uid: None

    # --- membership --------------------------------------------------------------------------

    def add(self, uid: str, priority: int, group: str, now: float, event: str = POD_ADDED) -> None:
        """A new pending pod, or an update to one (an update revives an unschedulable pod).
        `event` is what brought a new one in: its creation, or its scheduling gates removed."""
        entry = self.entries.get(uid)
        if entry is None:
            placed = self._placed.pop(uid, None)
            if placed is not None:  # its Binding failed: back with its history (the caller backs it off)
                placed.priority, placed.group, placed.where = priority, group, ACTIVE
                self.entries[uid] = placed
                self._group_entries[group] += 1
                self._push_active(placed)
                return
            entry = self.entries[uid] = QueuedPod(uid, priority, group, now, now)
            self._group_entries[group] += 1
            if not self._admit(entry, now, event):
                return
            if self._ready_at(entry) > now:  # its gang failed recently
                self._to_backoff(entry)
                self.incoming[BACKOFF, event] += 1
                return
            self._push_active(entry)
            self.incoming[ACTIVE, event] += 1
            return
        changed = entry.priority != priority or entry.group != group
        if entry.group != group:
            self._leave_group(entry.group)
            self._group_entries[group] += 1
        entry.priority, entry.group = priority, group
        if entry.where == UNSCHEDULABLE or (changed and entry.where == ACTIVE):
            self._requeue(entry, now, POD_UPDATED)

    def gated_arrived(self) -> None:
        """A new pod held back by its spec.schedulingGates: it stays out of the queue (the
        cluster state keeps it), but upstream's SchedulingGates PreEnqueue parks such a pod in
        unschedulablePods, which counts it in (addOrUpdate), so it is counted as entering there."""
        self.incoming[UNSCHEDULABLE, POD_ADDED] += 1

    def remove(self, uid: str) -> None:
        """The pod is gone or bound: nothing is kept for it."""
        self._placed.pop(uid, None)
        entry = self.entries.pop(uid, None)
        if entry is not None:
            entry.version += 1  # invalidates heap entries lazily
            self._unpark(uid)
            self._leave_group(entry.group)

    def _leave_group(self, group: str) -> None:
        """One member fewer queued; with the last, what the queue kept for its gang goes too."""
        if not group:
            return
        self._group_entries[group] -= 1
        if self._group_entries[group] <= 0:
            del self._group_entries[group]
            self.group_failed_at.pop(group, None)
            self.group_backoff_until.pop(group, None)

    def __contains__(self, uid: str) -> bool:
        return uid in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    # --- popping -----------------------------------------------------------------------------

    def pop(self, now: float) -> str | None:
        """The next pod to try, or None when nothing is ready at `now`. With activeQ empty, the
        pod a plugin rejected whose backoff ends first (upstream's PopFromBackoffQ)."""
        self.flush_backoff(now)
        while self._active:
            _, _, uid, version = heapq.heappop(self._active)
            entry = self.entries.get(uid)
            if entry is None or entry.version != version or entry.where != ACTIVE:
                continue
            self._take(entry)
            return uid
        while self._backoff:
            item = heapq.heappop(self._backoff)
            entry = self.entries.get(item[3])
            if entry is None or entry.version != item[4] or entry.where != BACKOFF:
                continue
            if entry.group and self.group_backoff_until.get(entry.group, now) > now:
                heapq.heappush(self._backoff_waiting, item)  # its gang is kept out: it waits
                continue
            self._take(entry)
            self.incoming[ACTIVE, "PopFromBackoffQ"] += 1
            return entry.uid
        return None

    def take(self, uid: str) -> bool:
        """Claim a specific waiting pod (a gang sibling) for the cycle that is running."""
        entry = self.entries.get(uid)
        if entry is None or entry.where == IN_FLIGHT:
            return False
        self._take(entry)
        return True

    def _take(self, entry: QueuedPod) -> None:
        self._unpark(entry.uid)
        entry.gating = ""
        entry.where = IN_FLIGHT
        entry.version += 1
        entry.move_cycle_at_pop = self._move_cycle

    # --- outcomes ----------------------------------------------------------------------------

    def done(self, uid: str) -> None:
        """Scheduled: the pod leaves the queue; its history is kept until its Binding is confirmed
        (`remove`) or refused (`add` brings it back)."""
        entry = self.entries.get(uid)
        self.remove(uid)
        if entry is not None:
            self._placed[uid] = entry

    def unschedulable_failure(self, uid: str, rejectors: Iterable[str], now: float) -> None:
        """The pod did not fit: park it until an event may help (or back off if one already came)."""
        entry = self.entries.get(uid)
        if entry is None:
            return
        entry.attempts += 1
        entry.rejections += 1
        entry.errors = 0
        entry.outdated = 0
        entry.timestamp = now
        entry.rejectors = frozenset(rejectors)
        if entry.group:
            self.group_failed_at[entry.group] = now
        if self._move_cycle > entry.move_cycle_at_pop:  # an event during the attempt may have helped
            self._requeue(entry, now, ATTEMPT_FAILURE)
            return
        entry.where = UNSCHEDULABLE
        entry.version += 1
        self._park(entry)
        self.incoming[UNSCHEDULABLE, ATTEMPT_FAILURE] += 1

    def error_failure(self, uid: str, now: float) -> None:
        """An error (API failure, lost Binding): always retry after backoff."""
        entry = self.entries.get(uid)
        if entry is None:
            return
        entry.attempts += 1
        entry.errors += 1
        entry.timestamp = now
        entry.rejectors = frozenset()
        self._requeue(entry, now, ATTEMPT_FAILURE)

    def placed_outdated(self, uid: str) -> int:
        """A placed pod's Binding could not land because the pod changed since it was decided: how
        many of its Bindings in a row did so now, this one counted (0: nothing kept for it)."""
        entry = self._placed.get(uid)
        if entry is None:
            return 0
        entry.outdated += 1
        return entry.outdated

    def outdated_failure(self, uid: str, now: float) -> None:
        """Its Binding could not land because someone else changed the pod since it was decided —
        no error, and no rejection: to activeQ at once, to be decided again from its new version,
        behind the pods of its priority that waited longer (its timestamp is now), its errors and
        rejections (its backoff) untouched. A gang member still waits out its gang's hold."""
        entry = self.entries.get(uid)
        if entry is None:
            return
        entry.attempts += 1
        entry.timestamp = now
        entry.rejectors = frozenset()
        self._unpark(uid)
        if not self._admit(entry, now, ATTEMPT_FAILURE):
            return
        if entry.group and self.group_backoff_until.get(entry.group, now) > now:
            self._to_backoff(entry)
        else:
            self._push_active(entry)  # an earlier heap item of it is skipped by its version
        self.incoming[entry.where, ATTEMPT_FAILURE] += 1

    def group_succeeded(self, group: str) -> None:
        self.group_failed_at.pop(group, None)
        self.group_backoff_until.pop(group, None)

    def back_off_group(self, group: str, until: float) -> None:
        """Keep every member of a failed gang out of activeQ until `until`, whatever wakes them."""
        self.group_backoff_until[group] = until

    # --- requeueing --------------------------------------------------------------------------

    def move(self, now: float, worth: Callable[[QueuedPod], bool], event: str,
             listening: Iterable[str] | None = None) -> int:
        """Move unschedulable pods for which `worth` says the `event` may help; returns how many.
        `listening`, when given, names every plugin with a hint for the event: only the pods
        rejected (or gated) by one of them, or by none named, are asked — as upstream asks no pod
        about an event no plugin registers (isEventOfInterest) — in `unschedulable`'s order.
        Every Binding confirmed is an event: asking every parked pod made each cost the whole
        unschedulable pool's hints."""
        self._move_cycle += 1
        if listening is None:
            candidates: Iterable[QueuedPod] = self.unschedulable.values()
        else:
            places: dict[str, int] = {}
            for name in (*listening, ""):
                places.update(self._parked_by.get(name, {}))
            candidates = [self.unschedulable[uid] for uid in sorted(places, key=places.__getitem__)]
        moved = [entry for entry in candidates if worth(entry)]
        for entry in moved:
            self._requeue(entry, now, event)
        return len(moved)

    def activate(self, uids: Iterable[str], now: float, event: str) -> None:
        """These pods to activeQ now, from unschedulable or backoffQ, whatever is left of their
        backoff: upstream's PriorityQueue.activate (moveToActiveQ), what `Activate` does for a
        preemptor whose victim's eviction failed. Pods already in activeQ or in flight stay."""
        for uid in uids:
            entry = self.entries.get(uid)
            if entry is None or entry.where not in (UNSCHEDULABLE, BACKOFF) or not self._admit(entry, now, event):
                continue
            self._unpark(uid)
            self._push_active(entry)  # a stale backoff item is skipped by its version
            self.incoming[ACTIVE, event] += 1

    def flush_backoff(self, now: float) -> None:
        """Every pod whose backoff is over at `now` to activeQ. Readiness falls on whole seconds
        (a gang's hold aside), so flushing at any pop is upstream's flush on every whole second."""
        for heap in (self._backoff, self._backoff_waiting):
            while heap and heap[0][0] <= now:
                _, _, _, uid, version = heapq.heappop(heap)
                entry = self.entries.get(uid)
                if entry is None or entry.version != version or entry.where != BACKOFF:
                    continue
                if self._ready_at(entry) > now:  # its gang was held after it came in: it waits for that
                    self._to_backoff(entry)
                    continue
                self._push_active(entry)
                self.incoming[ACTIVE, "BackoffComplete"] += 1

    def flush_unschedulable(self, now: float) -> int:
        """Pods unschedulable for longer than 5 minutes get another try (UnschedulableTimeout);
        not gated ones: the timeout's wildcard event is none their gating plugin registers
        (upstream's movePodsToActiveOrBackoffQueue skips them)."""
        stale = [e for e in self.unschedulable.values() if now - e.timestamp > UNSCHEDULABLE_TIMEOUT and not e.gating]
        for entry in stale:
            self._requeue(entry, now, "UnschedulableTimeout")
        return len(stale)

    def next_backoff_expiry(self) -> float | None:
        """When the next backed-off pod is ready: the start of the window after its backoff's,
        not its exact expiry (a caller sleeping until then would wake early and spin)."""
        expiries = []
        for heap in (self._backoff, self._backoff_waiting):
            while heap:
                expiry, _, _, uid, version = heap[0]
                entry = self.entries.get(uid)
                if entry is not None and entry.version == version and entry.where == BACKOFF:
                    expiries.append(expiry)
                    break
                heapq.heappop(heap)
        return min(expiries, default=None)

    def counts(self) -> dict[str, int]:
        """Pods by where they wait; the unschedulable ones a PreEnqueue plugin gates as `gated`
        (upstream's unschedulablePods counts them apart: scheduler_pending_pods{queue="gated"})."""
        counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, IN_FLIGHT: 0}
        for entry in self.entries.values():
            counts[GATED if entry.gating else entry.where] += 1
        return counts

    @staticmethod
    def _backoff_count(entry: QueuedPod) -> int:
        """The consecutive errors when there are any, else the rejections, as upstream's
        getBackoffTime (one counter for both made an error after many rejections, or a rejection
        after errors, wait the maximum)."""
        return entry.errors or entry.rejections

    def backoff_duration(self, entry: QueuedPod) -> float:
        """Upstream's calculateBackoffDuration of the pod's backoff count."""
        count = self._backoff_count(entry)
        if count == 0:
            return 0.0
        return float(min(self.initial_backoff * (1 << min(count - 1, 30)), self.max_backoff))

    def _ready_at(self, entry: QueuedPod) -> float:
        """When the pod stops backing off. Upstream's getBackoffTime truncates the expiry to its
        one-second window and isPodBackingoff holds the pod while that window is the current one:
        it is ready at the next window's start. No failure yet, or podMaxBackoff 0, is no backoff
        (getBackoffTime's zero time). A gang member also waits for its gang's hold, whose exact
        end is kept: podGroupBackoffSeconds is scheduler-plugins' rejection, not this backoff."""
        ready = -math.inf
        if self.max_backoff > 0 and self._backoff_count(entry) > 0:
            window = math.floor(entry.timestamp + self.backoff_duration(entry))  # Go's Truncate(1 s)
            ready = window + BACKOFF_WINDOW
        if entry.group:
            ready = max(ready, self.group_backoff_until.get(entry.group, ready))
        return ready

    def _admit(self, entry: QueuedPod, now: float, event: str) -> bool:
        """Ask the PreEnqueue plugins before the pod enters activeQ or backoffQ (upstream's
        runPreEnqueuePlugins). Refused: it is parked gated among the unschedulable pods, its
        gating plugin added to its rejectors (so that plugin's hints wake it, and
        scheduler_unschedulable_pods counts it), and counted as entering there (addOrUpdate)."""
        gating = self.pre_enqueue(entry.uid)
        if gating is None:
            entry.gating = ""
            if entry.admitted is None:
                entry.admitted = now
            return True
        entry.gating = gating
        entry.rejectors |= {gating}
        entry.where = UNSCHEDULABLE
        entry.version += 1
        self._park(entry)
        self.incoming[UNSCHEDULABLE, event] += 1
        return False

    def _park(self, entry: QueuedPod) -> None:
        """Among the unschedulable pods, filed under the plugins whose hints may wake it
        (`QueuedPod.listens_to`; "" when none is named: every event is asked about it). Parked
        again, it keeps its place."""
        uid = entry.uid
        names = entry.listens_to or frozenset({""})
        was = self._parked_as.get(uid)
        place = next(self._places) if was is None else was[1]
        self._unfile(uid)
        self.unschedulable[uid] = entry  # a pod parked again keeps its place here too
        self._parked_as[uid] = (names, place)
        for name in names:
            self._parked_by.setdefault(name, {})[uid] = place

    def _unpark(self, uid: str) -> None:
        """No longer among the unschedulable pods (if it was)."""
        self.unschedulable.pop(uid, None)
        self._unfile(uid)

    def _unfile(self, uid: str) -> None:
        was = self._parked_as.pop(uid, None)
        if was is None:
            return
        for name in was[0]:
            by_name = self._parked_by[name]
            del by_name[uid]
            if not by_name:
                del self._parked_by[name]

    def _requeue(self, entry: QueuedPod, now: float, event: str) -> None:
        """To backoffQ while the pod backs off, else to activeQ (upstream's
        requeuePodWithQueueingStrategy, asking isPodBackingoff) — if its PreEnqueue plugins let it."""
        self._unpark(entry.uid)
        if not self._admit(entry, now, event):
            return
        if self._ready_at(entry) > now:
            self._to_backoff(entry)
        else:
            self._push_active(entry)
        self.incoming[entry.where, event] += 1

    def _to_backoff(self, entry: QueuedPod) -> None:
        entry.where = BACKOFF
        entry.version += 1
        # a plugin's rejection may be popped early, so within its window it is ordered as activeQ
        # orders (lessBackoffCompletedWithPriority); an error (no rejectors) waits its backoff out
        # and is ordered by its window only (podErrorBackoffQ, lessBackoffCompleted)
        rejected = bool(entry.rejectors)
        heap = self._backoff if rejected else self._backoff_waiting
        order = self._order(entry) if rejected else _BY_WINDOW_ONLY
        heapq.heappush(heap, (self._ready_at(entry), order, next(self._seq), entry.uid, entry.version))

    def _order(self, entry: QueuedPod) -> Order:
        """activeQ's less function (PrioritySort): the higher priority, then the older timestamp;
        a gang member's is its gang's last failure (else its first queueing), so the members
        stay together and a gang that keeps failing yields its place."""
        sort_time = self.group_failed_at.get(entry.group, entry.initial) if entry.group else entry.timestamp
        return (-entry.priority, sort_time, entry.group)

    def _push_active(self, entry: QueuedPod) -> None:
        entry.where = ACTIVE
        entry.version += 1
        heapq.heappush(self._active, (self._order(entry), next(self._seq), entry.uid, entry.version))
