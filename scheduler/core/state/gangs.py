"""The gang index: which pods belong to which group, the group's minimum, and its PodGroup.

Kept apart from the pods themselves because gangs are asked about as a whole (how many members
can count, who is bound) and their status is reported per group; `touched` collects the groups
whose members or PodGroup changed, so the live shell writes only their status.
"""

from __future__ import annotations

from scheduler.core.objects import GangTopology, Pod, PodGroup


class GangIndex:
    def __init__(self) -> None:
        self.members: dict[str, set[str]] = {}  # gang key -> non-terminal member uids
        self.history: dict[str, set[str]] = {}  # gang key -> every member uid not deleted (for status)
        self.first_min: dict[str, int] = {}  # label gangs: min-available of the first member seen
        self.first_topology: dict[str, GangTopology] = {}  # label gangs: the first member's topology
        self.podgroups: dict[str, PodGroup] = {}
        self.touched: set[str] = set()  # gangs whose members or PodGroup changed (status to write)

    def minimum(self, key: str, pod: Pod) -> int | None:
        """The gang's minimum, or None when its PodGroup object has not been seen."""
        assert pod.gang is not None
        if pod.gang.from_podgroup:
            group = self.podgroup_of(key, pod)
            return group.min_member if group is not None else None
        return self.first_min.get(key, pod.gang.min_available)

    def podgroup_of(self, key: str, pod: Pod) -> PodGroup | None:
        """The PodGroup object the member names, of the API it names it in."""
        assert pod.gang is not None
        group = self.podgroups.get(key)
        return group if group is not None and group.api == pod.gang.api else None

    def topology(self, key: str, pod: Pod) -> GangTopology | None:
        """Where the gang must or should be together: its PodGroup's, or the label form's first
        member's annotations."""
        assert pod.gang is not None
        if pod.gang.from_podgroup:
            group = self.podgroup_of(key, pod)
            return group.topology if group is not None else None
        return self.first_topology.get(key, pod.gang.topology)

    def seen(self, pod: Pod) -> None:
        """Any state of a member: it belongs to the group's history (terminal ones included)."""
        assert pod.gang is not None
        self.history.setdefault(pod.gang.key, set()).add(pod.uid)
        self.touched.add(pod.gang.key)

    def join(self, pod: Pod) -> None:
        """A live (non-terminal) member."""
        assert pod.gang is not None
        members = self.members.setdefault(pod.gang.key, set())
        if pod.uid not in members and pod.gang.min_available is not None:
            self.first_min.setdefault(pod.gang.key, pod.gang.min_available)
            if pod.gang.topology is not None and not members:
                self.first_topology.setdefault(pod.gang.key, pod.gang.topology)
        members.add(pod.uid)

    def leave(self, pod: Pod) -> None:
        """The member ended, or left the group: it no longer counts towards the minimum."""
        assert pod.gang is not None
        members = self.members.get(pod.gang.key)
        if members is None:
            return
        members.discard(pod.uid)
        if not members:
            del self.members[pod.gang.key]
            self.first_min.pop(pod.gang.key, None)
            self.first_topology.pop(pod.gang.key, None)

    def forget(self, pod: Pod) -> None:
        """The member is gone (deleted, or moved to another group)."""
        assert pod.gang is not None
        self.touched.add(pod.gang.key)
        members = self.history.get(pod.gang.key)
        if members is not None:
            members.discard(pod.uid)
            if not members:
                del self.history[pod.gang.key]

    def podgroup_changed(self, group: PodGroup) -> bool:
        """A PodGroup was added or changed: True when what placement reads (minimum, topology) is new."""
        old = self.podgroups.get(group.key)
        self.podgroups[group.key] = group
        self.touched.add(group.key)
        return old is None or (old.min_member, old.topology) != (group.min_member, group.topology)

    def podgroup_deleted(self, key: str) -> bool:
        return self.podgroups.pop(key, None) is not None
