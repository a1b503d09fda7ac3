"""Victim units: what a preemption evicts together, and which unit is more important.

A unit is one pod, or a gang's core: a gang is never left with 0 < running < minimum. A gang
with more running members than its minimum gives up its surplus one pod at a time (the
latest-started first, among the members where the room is needed); beyond the surplus the unit
is the whole rest of the gang, on every node. Ordering is upstream's workload-aware
`MoreImportantVictim` (pkg/scheduler/framework/preemption/util.go): higher priority, then a gang
before a single pod, then the larger unit, then the earlier start; the uid last, so the order is
deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduler.core.objects import Pod, gang_name
from scheduler.core.state import ClusterState

_NOT_STARTED = "\uffff"  # upstream: a pod without startTime counts as started now (the latest)


@dataclass(frozen=True, slots=True, eq=False)  # identity: units are compared and looked up by the thousand
class Unit:
    pods: tuple[Pod, ...]  # every pod evicted with the unit, on whichever node
    priority: int  # the highest of its pods (a unit is eligible only when all are below the preemptor)
    gang: str  # the gang key of a gang's core, "" for one pod (a surplus member is one pod)

    @property
    def start(self) -> str:
        return min((pod.start_time or _NOT_STARTED for pod in self.pods), default=_NOT_STARTED)

    def importance(self) -> tuple[int, int, int, str, str]:
        """Sort key, most important first."""
        return (-self.priority, -(2 if self.gang else 1), -len(self.pods), self.start, self.pods[0].uid)


def running_members(state: ClusterState, gang: str) -> list[Pod]:
    """A gang's members on a node that are staying: bound, or assumed while their Binding is out,
    and not already going (deleted, or a victim of an earlier preemption still terminating)."""
    uids = state.gangs.members.get(gang, set())
    return [pod for uid in uids if uid in state.placements and (pod := state.pods.get(uid)) is not None
            and not state.leaving(pod)]


def units_for(state: ClusterState, preemptor_priority: int, pods: Iterable[Pod], exclude_gang: str = "") -> list[Unit]:
    """The eligible units among `pods` (the placed pods where the room is needed): strictly lower
    priority than the preemptor (a gang member: its gang's priority), and for a gang member either
    surplus or its gang's whole core. Placed means bound, held at Permit (taken back in memory),
    or assumed while its Binding is out: kube-scheduler's snapshot holds its assumed pods
    (backend/cache/cache.go AssumePod adds them to their NodeInfo) and SelectVictimsOnNode makes
    no exception for them; such a victim is evicted through the API as a bound one is, and keeps
    its room until it is gone."""
    units: list[Unit] = []
    by_gang: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.uid not in state.placements:
            continue
        if state.leaving(pod):  # already leaving (its gang counts without it): a victim for free, alone
            priority = pod.priority if pod.gang is None else state.gang_priority(
                pod.gang.key, [pod, *running_members(state, pod.gang.key)], as_victim=True)
            if priority < preemptor_priority:
                units.append(Unit((pod,), priority, ""))
            continue
        if pod.gang is None:
            if pod.priority < preemptor_priority:
                units.append(Unit((pod,), pod.priority, ""))
        elif pod.gang.key != exclude_gang:
            by_gang.setdefault(pod.gang.key, []).append(pod)
    for key, here in sorted(by_gang.items()):
        members = running_members(state, key)
        priority = state.gang_priority(key, members, as_victim=True)  # its members share it
        if priority >= preemptor_priority:
            continue
        minimum = state.gang_minimum(key, here[0], len(members))
        surplus = max(0, len(members) - minimum)
        by_start = sorted(here, key=lambda p: (p.start_time or _NOT_STARTED, p.uid), reverse=True)
        spare = by_start[:surplus]
        units += [Unit((pod,), priority, "") for pod in spare]
        if len(spare) < len(here):
            units.append(Unit(tuple(sorted((p for p in members if p not in spare), key=lambda p: p.uid)), priority, key))
    return units


def most_important_first(units: Iterable[Unit]) -> list[Unit]:
    return sorted(units, key=Unit.importance)


def flatten(units: Sequence[Unit]) -> list[Pod]:
    """The units' pods, each once, in the units' order."""
    seen: set[str] = set()
    out: list[Pod] = []
    for unit in units:
        for pod in unit.pods:
            if pod.uid not in seen:
                seen.add(pod.uid)
                out.append(pod)
    return out


def why_evicted(state: ClusterState, victims: Sequence[Pod]) -> dict[str, str]:
    """Why each victim goes, by uid, in Tessera's words (read before the victims are marked
    leaving): a gang member evicted with the rest of its gang, which one member fewer would leave
    below its minimum; a surplus member above it; "" for a pod alone (its lower priority is all)."""
    chosen = {pod.uid for pod in victims}
    reasons: dict[str, str] = {}
    by_gang: dict[str, str] = {}  # a gang's reason, the same for each of its victims: computed once
    for pod in victims:
        if pod.gang is None or state.leaving(pod):  # already leaving: a victim for free, alone
            reasons[pod.uid] = ""
            continue
        key = pod.gang.key
        reason = by_gang.get(key)
        if reason is None:
            members = running_members(state, key)
            minimum = state.gang_minimum(key, pod, len(members))
            staying = sum(1 for member in members if member.uid not in chosen)
            reason = by_gang[key] = (f"gang {gang_name(key)}: would fall below minMember {minimum}"
                                     if staying < minimum else f"gang {gang_name(key)}: a member above its minMember "
                                     f"{minimum}")
        reasons[pod.uid] = reason
    return reasons


def listed(victims: Sequence[tuple[str, str, str]], most: int = 8) -> str:
    """`ns/a on n1, ns/b on n2 (gang ns/g: would fall below minMember 2); ns/c on n1` for victims
    (key, node, reason — `why_evicted`'s), those sharing a reason together, in the order given;
    at most `most` named, then how many more (an Event's note has 1 kB)."""
    groups: dict[str, list[str]] = {}
    for key, node, reason in victims[:most]:
        groups.setdefault(reason, []).append(f"{key} on {node}" if node else key)
    text = "; ".join(", ".join(names) + (f" ({reason})" if reason else "") for reason, names in groups.items())
    return text + (f"; and {len(victims) - most} more" if len(victims) > most else "")


def listed_all(keys: Sequence[str], reasons: Sequence[str]) -> str:
    """`listed` of victims by key (no node), each with `reasons`' entry (the same order; none
    given: no reasons), every one named: explain's dry run and what-if say victims alike."""
    why = reasons or ("",) * len(keys)
    return listed(sorted((key, "", reason) for key, reason in zip(keys, why, strict=True)), most=len(keys))
