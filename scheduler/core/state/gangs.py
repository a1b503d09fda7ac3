"""The gang index: which pods belong to which group, the group's minimum, and its PodGroup.

Kept apart from the pods themselves because gangs are asked about as a whole (how many members
can count, who is bound) and their status is reported per group; `touched` collects the groups
whose members or PodGroup changed, so the live shell writes only their status.
"""

from __future__ import annotations

from scheduler.core.objects import GangRef, GangTopology, Pod, PodGroup
from scheduler.core.state.gang_topology import SaidTopology


class GangIndex:
    def __init__(self) -> None:
        self.members: dict[str, set[str]] = {}  # gang key -> non-terminal member uids
        self.history: dict[str, set[str]] = {}  # gang key -> every member uid not deleted (for status)
        self.first_min: dict[str, int] = {}  # label gangs: min-available of the first member seen
        # label gangs: each live member's topology annotations (a hand-made gang's may differ)
        self.said_topology: dict[str, SaidTopology] = {}
        self.podgroups: dict[str, PodGroup] = {}  # by gang key: the API is part of it (gang_key)
        self.touched: set[str] = set()  # gangs whose members or PodGroup changed (status to write)
        # PodGroup gangs a pod of one of our scheduler names named: whose status is ours to write
        # while no pod is left (`coscheduling.reports_status`); kept while it has a pod or its object
        self.ours: set[str] = set()

    def podgroup_of(self, pod: Pod) -> PodGroup | None:
        """The PodGroup object `pod`'s gang names, when it is of a PodGroup form and has been seen
        (None for a label gang, which has no object)."""
        return self.podgroups.get(pod.gang.key) if pod.gang is not None and pod.gang.from_podgroup else None

    def minimum(self, key: str, pod: Pod) -> int | None:
        """The gang's minimum, or None when its PodGroup object has not been seen."""
        assert pod.gang is not None
        return self.minimum_of(pod.gang, key)

    def minimum_of(self, gang: GangRef, key: str | None = None) -> int | None:
        """`minimum` of the gang `gang` names (at `key`, its own unless given), with or without a member."""
        key = gang.key if key is None else key
        if gang.from_podgroup:
            group = self.podgroups.get(key)
            return group.min_member if group is not None else None
        return self.first_min.get(key, gang.min_available)

    def topology(self, key: str, pod: Pod) -> GangTopology | None:
        """Where the gang must or should be together: its PodGroup's, or — the label form — what
        its live members' annotations say, in whatever order they were seen (`gang_topology`)."""
        assert pod.gang is not None
        if pod.gang.from_podgroup:
            group = self.podgroups.get(key)
            return group.topology if group is not None else None
        said = self.said_topology.get(key)
        return said.verdict()[0] if said is not None else pod.gang.topology

    def topology_conflict(self, key: str) -> str | None:
        """Why a label gang cannot be placed while its members name different levels, or None."""
        said = self.said_topology.get(key)
        return said.verdict()[1] if said is not None else None

    def seen(self, pod: Pod, ours: bool) -> None:
        """Any state of a member: it belongs to the group's history (terminal ones included);
        `ours`: the pod has one of our scheduler names."""
        assert pod.gang is not None
        self.history.setdefault(pod.gang.key, set()).add(pod.uid)
        self.touched.add(pod.gang.key)
        if ours and pod.gang.from_podgroup:
            self.ours.add(pod.gang.key)

    def join(self, pod: Pod) -> tuple[bool, str | None]:
        """A live (non-terminal) member. Returns whether the gang's topology (or its conflict)
        changed, and a message when the member's annotations made the members differ."""
        assert pod.gang is not None
        key = pod.gang.key
        members = self.members.setdefault(key, set())
        if pod.uid not in members and pod.gang.min_available is not None:
            self.first_min.setdefault(key, pod.gang.min_available)
        members.add(pod.uid)
        if pod.gang.from_podgroup:
            return False, None
        said = self.said_topology.setdefault(key, SaidTopology(key))
        return said.set(pod.uid, pod.key, pod.gang.topology)

    def leave(self, pod: Pod) -> bool:
        """The member ended, or left the group: it no longer counts towards the minimum, nor
        speaks for a label gang's topology. True when that changed the gang's topology (or ended
        a disagreement)."""
        assert pod.gang is not None
        key = pod.gang.key
        members = self.members.get(key)
        if members is not None:
            members.discard(pod.uid)
            if not members:
                del self.members[key]
                self.first_min.pop(key, None)
        said = self.said_topology.get(key)
        if said is None:
            return False
        changed = said.drop(pod.uid)
        if not said.members:
            del self.said_topology[key]
        return changed

    def forget(self, pod: Pod) -> None:
        """The member is gone (deleted, or moved to another group)."""
        assert pod.gang is not None
        self.touched.add(pod.gang.key)
        members = self.history.get(pod.gang.key)
        if members is not None:
            members.discard(pod.uid)
            if not members:
                del self.history[pod.gang.key]
                if pod.gang.key not in self.podgroups:
                    self.ours.discard(pod.gang.key)

    def podgroup_changed(self, group: PodGroup) -> bool:
        """A PodGroup was added or changed: True when what placement reads (minimum, minimum
        resources, topology) is new."""
        old = self.podgroups.get(group.key)
        self.touched.add(group.key)
        self.podgroups[group.key] = group
        return old is None or ((old.min_member, old.topology, old.min_resources)
                               != (group.min_member, group.topology, group.min_resources))

    def podgroup_deleted(self, key: str) -> bool:
        """The PodGroup of the gang `key` is gone: True when the gang had one."""
        if self.podgroups.pop(key, None) is None:
            return False
        self.touched.add(key)
        if key not in self.history:
            self.ours.discard(key)
        return True
