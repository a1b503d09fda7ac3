"""Replay recorded watch events through the core, acting as the apiserver for its Bindings.

Semantics (the same event-driven requeue as the live queue): events are applied in order; after
each one the scheduler works until no pending pod can make progress — pods the event cannot help
stay parked — and every successful attempt is written back as the pod update the apiserver would
send (`spec.nodeName`, merged annotations, `PodScheduled=True`). Unless `agent=False`, the replay
also plays the node agent and marks device allocations `Allocated` at once, which opens the
allocation gate for the next pod on that node. Time is virtual: it only moves
forward to let backoff expire, so the same input always gives the same output.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from scheduler.api.config import SchedulerConfig
from scheduler.api.quantity import format_quantity
from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.core.objects import Pod, object_uid
from scheduler.core.queue import BACKOFF
from scheduler.core.resources import CPU
from scheduler.core.state import Notice
from scheduler.sim.snapshot import is_bound


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str
    object: dict[str, Any]


@dataclass(slots=True)
class ReplayStats:
    events: int = 0
    attempts: int = 0
    notices: list[Notice] = field(default_factory=list)
    final: dict[str, Attempt] = field(default_factory=dict)  # pod key -> last attempt
    # node -> what the input's bound pods use beyond its allocatable (the last time it was over)
    over_capacity: dict[str, str] = field(default_factory=dict)
    # node -> why, when the input bound a pod where this replay had placed others (a recording made
    # while the live scheduler worked, which decided otherwise): "binds A there, where ... placed B"
    diverged: dict[str, str] = field(default_factory=dict)
    evicted: dict[str, str] = field(default_factory=dict)  # pod key -> the preemptor it made room for
    # pod key -> why preemption took it (victims.why_evicted: its gang's minimum), "" for a pod alone
    evicted_why: dict[str, str] = field(default_factory=dict)
    # pod key -> the node it was evicted from: where its room went (what-if names a gang's victims
    # on the row of each member that lands there)
    evicted_from: dict[str, str] = field(default_factory=dict)
    # pod key -> what a recorded Binding overruled: "binds it to N2, where this replay had placed it
    # on N1" (the live scheduler decided otherwise; the pod's last JSON line is the replay's decision)
    overruled: dict[str, str] = field(default_factory=dict)
    seed: int = 0  # the tie-break's (`Scheduler`): the summaries name it with `ties` (`view.text.ties_line`)
    placements: int = 0  # attempts that placed their pod
    ties: int = 0  # of those, the ones whose node was the seeded pick among equally scored nodes (`tied_count`)


_UTF8_BOM = b"\xef\xbb\xbf"


class EventFileError(ValueError):
    """A line of an events file that is not a watch event."""


def read_events(lines: Iterable[bytes | str], errors: list[str]) -> Iterator[WatchEvent]:
    """Parse JSONL watch events; unreadable lines are reported in `errors` and skipped."""
    for number, line in enumerate(lines, start=1):
        if number == 1 and isinstance(line, bytes) and line.startswith(_UTF8_BOM):
            line = line[len(_UTF8_BOM):]  # a byte-order mark some editors write
        if not line.strip():
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as err:
            errors.append(f"line {number}: not JSON: {err}")
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("object"), dict) or not isinstance(doc.get("type"), str):
            errors.append(f'line {number}: not a watch event (want {{"type": ..., "object": {{...}}}})')
            continue
        yield WatchEvent(doc["type"], doc["object"])


class Replay:
    def __init__(self, config: SchedulerConfig, explain: bool = False, seed: int = 0, agent: bool = True,
                 breakdown: bool = False) -> None:
        self.scheduler = Scheduler(config, seed=seed, explain=explain, breakdown=breakdown)
        self.agent = agent  # act as the node agent: mark device allocations done right after binding
        self.now = 0.0
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> latest raw object, to write bindings back
        self._placed: dict[str, str] = {}  # uid -> node, for pods this replay bound (until the input moves them)
        self._evicted: set[str] = set()  # uids this replay's preemptions evicted
        self.stats = ReplayStats(seed=seed)

    def run(self, events: Iterable[WatchEvent]) -> Iterator[Attempt]:
        """Each event as it came, the scheduler deciding after each (a recording's timeline)."""
        for event in events:
            self.take(event)
            yield from self.drain()

    def run_listing(self, events: Iterable[WatchEvent]) -> Iterator[Attempt]:
        """Every event first, then the scheduler decides: a listing's pending pods wait together,
        in the queue's order (priority first), as they do in the cluster it was listed from."""
        for event in events:
            self.take(event)
        yield from self.drain()

    def take(self, event: WatchEvent) -> None:
        """One watch event into the core, without scheduling."""
        self.stats.events += 1
        event = self._keep_binding(event)
        live_binding = self._is_live_binding(event)
        uid = object_uid(event.object) if isinstance(event.object, dict) else None
        before = self.scheduler.state.pods.get(uid) if uid is not None else None
        notices = self.scheduler.apply(event.type, event.object, self.now)
        self._remember(event, before)
        if self._check_capacity(event, live_binding):
            # the core's live guess (another scheduler's pods) is wrong here: the report says why
            notices = [n for n in notices if n.reason != "GPUsOvercommitted"]
        elif live_binding and any(n.reason == "DeviceConflict" for n in notices):
            self._diverged_on_devices(event.object)
        if live_binding:
            self._note_overruled(event.object)
        self.stats.notices += notices
        self._input_placed(event)

    def drain(self) -> Iterator[Attempt]:
        """Schedule until no pod can make progress. A pod whose attempt failed with an error (a
        PreScore error) waits out its backoff and is tried again, as upstream retries it for ever;
        once only such pods wait, with nothing placed since their errors, a retry would fail the
        same way, so the replay stops rather than run its clock for ever."""
        scheduler = self.scheduler
        erred: set[str] = set()  # pods whose last attempt failed with an error, nothing placed since
        while True:
            attempts = scheduler.schedule_next(self.now)
            self.stats.notices += scheduler.take_notices()  # a pod the cycle forgot (a gang's trial undone)
            for rejected in scheduler.take_rejected():  # held Bindings the gate decided again
                self.stats.final[rejected.pod.key] = rejected
            if attempts is None:
                released = scheduler.take_released()  # a gate may have opened with no pod left to try
                if released:
                    self._bind_all(released)
                    continue
                expiry = scheduler.queue.next_backoff_expiry()
                if expiry is None or self._only_erred_wait(erred):
                    return
                self.now = max(self.now, expiry)
                continue
            if any(attempt.node is not None for attempt in attempts):
                erred.clear()
            erred.update(attempt.pod.uid for attempt in attempts if attempt.error)
            erred.difference_update(attempt.pod.uid for attempt in attempts if not attempt.error)
            for attempt in attempts:
                self.stats.attempts += 1
                if attempt.node is not None:
                    self.stats.placements += 1
                    self.stats.ties += attempt.tied_count > 0
                self.stats.final[attempt.pod.key] = attempt
                self.stats.evicted.pop(attempt.pod.key, None)  # a new pod under an evicted one's name
                self.stats.evicted_why.pop(attempt.pod.key, None)
                self.stats.evicted_from.pop(attempt.pod.key, None)
                yield attempt
            self._bind_all([a for a in attempts if a.node is not None and not a.deferred])
            # a gang's victims ride on its first member's attempt, and so do their reasons
            reasons = {uid: why for attempt in attempts for uid, why in attempt.victim_reasons.items()}
            for attempt in attempts:  # victims held at Permit went back to the queue in the core
                victims = [victim for victim in attempt.preempted if victim.uid not in attempt.rejected_waiting]
                self._evict(victims, attempt.pod.key)
                self.stats.evicted_why.update((victim.key, reasons.get(victim.uid, "")) for victim in victims
                                              if victim.key in self.stats.evicted)

    def _only_erred_wait(self, erred: set[str]) -> bool:
        """Every pod backing off failed its last attempt with an error, nothing placed since."""
        backing_off = [uid for uid, entry in self.scheduler.queue.entries.items() if entry.where == BACKOFF]
        return all(uid in erred for uid in backing_off)

    def _bind_all(self, ready: list[Attempt]) -> None:
        """Bind these, then whatever the allocation gate lets through as a result."""
        while ready:
            for attempt in ready:
                self._bind(attempt)
            ready = self.scheduler.take_released()

    def _evict(self, victims: list[Pod], preemptor: str) -> None:
        """Preemption's victims leave the replayed cluster at once (as if their grace period were 0)."""
        for victim in victims:
            raw = self.pods.pop(victim.uid, None)
            self._placed.pop(victim.uid, None)
            if raw is not None:
                self._evicted.add(victim.uid)
                self.stats.evicted[victim.key] = preemptor
                self.stats.evicted_from[victim.key] = victim.node_name
                self.stats.notices += self.scheduler.apply("DELETED", raw, self.now)

    def _is_live_binding(self, event: WatchEvent) -> bool:
        """The input binds one of Tessera's pods that it had shown pending, where this replay
        decided otherwise: left it pending, bound it to another node, or evicted it. That is a
        Binding the live scheduler made while the cluster was recorded."""
        obj: object = event.object
        if event.type != "MODIFIED" or not isinstance(obj, dict) or obj.get("kind") != "Pod" or not is_bound(obj):
            return False
        spec: dict[str, Any] = obj["spec"]
        node: str = spec["nodeName"]
        scheduler_name = spec.get("schedulerName", "default-scheduler")
        if not isinstance(scheduler_name, str) or scheduler_name not in self.scheduler.state.scheduler_names:
            return False  # another scheduler's Binding (or an unreadable pod): the core's own warning is the right one
        uid = object_uid(obj)
        if uid is None:
            return False
        if uid in self._evicted:
            return True
        if uid in self._placed:
            if self._placed[uid] != node:
                return True
            ours = self.pods.get(uid)  # the same node: is it the devices this replay gave it?
            ours_meta = ours.get("metadata") if ours is not None else None
            theirs_meta = obj.get("metadata")
            ours_devices = (ours_meta.get("annotations") or {}).get(ann.DEVICES) if isinstance(ours_meta, dict) else None
            theirs_devices = ((theirs_meta.get("annotations") or {}).get(ann.DEVICES)
                              if isinstance(theirs_meta, dict) and isinstance(theirs_meta.get("annotations"), dict) else None)
            return ours_devices is not None and theirs_devices != ours_devices
        before = self.pods.get(uid)
        return before is not None and not is_bound(before)

    def _note_overruled(self, obj: dict[str, Any]) -> None:
        """A recorded Binding put a pod elsewhere than this replay's decision for it (another node,
        or bound where the replay left it pending or evicted it): the Binding is what happened and
        the end table shows it, while the pod's last JSON line is the replay's own decision — so the
        report names the difference rather than contradict itself silently."""
        uid = object_uid(obj)
        pod = self.scheduler.state.pods.get(uid) if uid is not None else None
        if uid is None or pod is None or pod.key not in self.stats.final:
            return  # never attempted here: nothing of the replay's to overrule
        node = obj["spec"]["nodeName"]
        ours = self._placed.get(uid)
        if ours == node:
            return  # the same node on other devices: a conflict is warned of per node (`diverged`)
        was = ("had evicted it" if uid in self._evicted else
               f"had placed it on {ours}" if ours is not None else "had left it pending")
        self.stats.overruled[pod.key] = f"the recording binds it to {node}, where this replay {was}"

    def _input_placed(self, event: WatchEvent) -> None:
        """A pod the input binds, or deletes, is no longer this replay's placement."""
        obj: object = event.object
        if not isinstance(obj, dict) or obj.get("kind") != "Pod":
            return
        uid = object_uid(obj)
        if uid is not None and (event.type == "DELETED" or is_bound(obj)):
            self._placed.pop(uid, None)
            self._evicted.discard(uid)

    def _check_capacity(self, event: WatchEvent, live_binding: bool) -> bool:
        """Note a node that the input itself over-commits (a pod bound to it, or a node shrunk);
        true when a `live_binding` landed on the replay's own placements (`ReplayStats.diverged`).

        The scheduler never places beyond allocatable, but pods that arrive already bound count
        wherever they are: a hand-written file, or a recording that lists a pending pod before
        bound ones (the replay places it first), ends with more in use than the node has. So does
        a recording made while the live scheduler worked: its Bindings are replayed as facts, and
        where the replay had decided otherwise (another queue order, other timing) they land on
        GPUs the replay gave away. Such a replay does not show the cluster as it was, so the report
        must say so — and which of the two it was.
        """
        obj: object = event.object
        if not isinstance(obj, dict):
            return False
        kind = obj.get("kind")
        if kind == "Pod":
            spec = obj.get("spec")
            name = spec.get("nodeName") if isinstance(spec, dict) else None
        elif kind == "Node":
            meta = obj.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
        else:
            return False
        if not isinstance(name, str) or not name:
            return False
        over = ", ".join(f"{resource} {_amount(resource, used)} used > {_amount(resource, allocatable)} allocatable"
                         for resource, used, allocatable in self.scheduler.over_capacity(name))
        if not over:
            return False
        self.stats.over_capacity[name] = over
        if not live_binding:
            return False
        pods = self.scheduler.state.pods
        uid = object_uid(obj)
        placed = sorted(pods[other].key for other, node in self._placed.items()
                        if node == name and other != uid and other in pods)
        pod = pods.get(uid) if uid is not None else None
        if not placed or pod is None:
            return False
        self.stats.diverged[name] = f"binds {pod.key} there, where this replay had placed {', '.join(placed)}"
        return True

    def said_over_capacity(self, notice: Notice) -> bool:
        """A GPUsOvercommitted notice the report's over-capacity line says better (the report
        leaves it out; `stats.notices` keeps the core's word): on a node of Tessera's pods alone
        whose count was not cut, the live scheduler's story (a device plugin reporting fewer GPUs,
        an earlier leader's late Binding) does not exist in a replay, where the input's bound pods
        are the cause. Those naming another scheduler's pods, or a count the input cut, stay: the
        input holds them."""
        if notice.reason != "GPUsOvercommitted":
            return False
        state = self.scheduler.state
        pod = state.pods.get(notice.uid) if notice.kind == "Pod" else None
        node = notice.key if notice.kind == "Node" else pod.node_name if pod is not None else ""
        info = state.nodes.get(node)
        return (node in self.stats.over_capacity and info is not None and not info.cut_from
                and state.only_ours_on(info))

    def _keep_binding(self, event: WatchEvent) -> WatchEvent:
        """A recorded update without `spec.nodeName` of a pod this replay bound (a recording made
        while Tessera was stopped: the pod stayed pending there) keeps the replay's Binding, as
        the apiserver never clears a pod's node: the update lands on the bound pod."""
        obj = event.object
        if (event.type == "DELETED" or not isinstance(obj, dict) or obj.get("kind") != "Pod" or is_bound(obj)
                or not isinstance(obj.get("spec"), dict)):
            return event
        uid = object_uid(obj)
        node = self._placed.get(uid) if uid is not None else None
        bound = self.pods.get(uid) if uid is not None else None
        if node is None or bound is None:
            return event
        kept = copy.deepcopy(obj)
        kept["spec"]["nodeName"] = node
        meta = kept.get("metadata")
        if isinstance(meta, dict):
            ours = bound["metadata"].get("annotations") or {}
            theirs = meta.get("annotations")
            meta["annotations"] = {**(theirs if isinstance(theirs, dict) else {}),
                                   **{k: v for k, v in ours.items() if k.startswith("tessera.dev/")}}
        return WatchEvent(event.type, kept)

    def _diverged_on_devices(self, obj: dict[str, Any]) -> None:
        """A recorded Binding landed on GPUs this replay gave other pods of the node (no count is
        over capacity, but a device is held twice): the live scheduler decided otherwise."""
        pods = self.scheduler.state.pods
        uid = object_uid(obj)
        pod = pods.get(uid) if uid is not None else None
        node = obj["spec"]["nodeName"]
        placed = sorted(pods[other].key for other, where in self._placed.items()
                        if where == node and other != uid and other in pods)
        if pod is not None and placed:
            self.stats.diverged[node] = (f"binds {pod.key} there on GPUs this replay had given "
                                         f"{', '.join(placed)}")

    def _remember(self, event: WatchEvent, before: Pod | None) -> None:
        """Keep the pod object the core took (it holds a new Pod for it: neither refused as
        unreadable nor dropped as older than what it had): Bindings are applied to that one."""
        if not isinstance(event.object, dict) or event.object.get("kind") != "Pod":
            return
        uid = object_uid(event.object)
        if uid is None:
            return
        if event.type == "DELETED":
            self.pods.pop(uid, None)
            return
        held = self.scheduler.state.pods.get(uid)
        if held is not None and held is not before:
            self.pods[uid] = event.object

    def _bind(self, attempt: Attempt) -> None:
        """Apply the Binding the way the apiserver does, and feed the resulting pod update back."""
        raw = self.pods.get(attempt.pod.uid)
        if raw is None:
            return
        bound = copy.deepcopy(raw)
        meta = bound["metadata"]  # the core accepted this object, so metadata and spec are objects
        meta.pop("resourceVersion", None)
        annotations = meta.get("annotations")
        meta["annotations"] = {**(annotations if isinstance(annotations, dict) else {}), **attempt.annotations}
        bound["spec"]["nodeName"] = attempt.node
        raw_status = bound.get("status")
        status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
        old = status.get("conditions")
        conditions = [c for c in (old if isinstance(old, list) else [])
                      if isinstance(c, dict) and c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True"})
        bound["status"] = {**status, "conditions": conditions}
        self.pods[attempt.pod.uid] = bound
        self._placed[attempt.pod.uid] = bound["spec"]["nodeName"]
        self.stats.notices += self.scheduler.apply("MODIFIED", bound, self.now)
        if self.agent and meta["annotations"].get(ann.PHASE) == ann.PHASE_ALLOCATING:
            allocated = copy.deepcopy(bound)  # the node agent hands the devices out at once
            allocated["metadata"]["annotations"][ann.PHASE] = ann.PHASE_ALLOCATED
            self.pods[attempt.pod.uid] = allocated
            self.stats.notices += self.scheduler.apply("MODIFIED", allocated, self.now)


def _amount(resource: str, value: int) -> str:
    return f"{value / 1000:g}" if resource == CPU else format_quantity(value)


def attempt_line(attempt: Attempt, explain: bool) -> dict[str, Any]:
    """The stdout record of one attempt (docs/simulate.md, "Output")."""
    line: dict[str, Any] = {
        "pod": attempt.pod.key,
        "node": attempt.node,
        "annotations": attempt.annotations,
        "message": attempt.message,
    }
    if attempt.preempted:
        line["preempted"] = [victim.key for victim in attempt.preempted]
    if attempt.nominated_node:
        line["nominatedNodeName"] = attempt.nominated_node
    if explain:
        if attempt.node and attempt.tied_count:  # the pick among equal totals was the seeded tie-break
            line["tiedWith"] = sorted(attempt.tied)  # at most TIED_NAMED of them
            line["tiedCount"] = attempt.tied_count
        line["scores"] = attempt.scores or {}
        line["filtered"] = attempt.filtered or {}
    return line
