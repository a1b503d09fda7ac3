"""What a label gang's members say about its topology, whatever order they were seen in.

A scheduler-plugins label gang has no object of its own: its constraint is on its members
(`tessera.dev/topology-required` / `-preferred`). Kueue reads one PodSet template and KAI its
PodGroup, so their members agree by construction; a hand-made gang's may not. Each key is the one
value the members that give it name — a member without it takes the others' (a constraint binds
the whole gang); two values of one key have no right answer, and the gang waits until its members
agree. Counts are kept per value so that a member joining costs the same in a gang of thousands.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from scheduler.core.objects import TOPOLOGY_PREFERRED, TOPOLOGY_REQUIRED, GangTopology
from scheduler.first_few import first_few

Verdict = tuple[GangTopology | None, str | None]  # the gang's topology, or why its members disagree


@dataclass(slots=True)
class SaidTopology:
    """One label gang's live members' topology annotations."""

    key: str  # the gang's "<namespace>/<name>"
    members: dict[str, tuple[str, GangTopology | None]] = field(default_factory=dict)  # uid -> (pod key, said)
    said: Counter[GangTopology | None] = field(default_factory=Counter)
    required: Counter[str] = field(default_factory=Counter)  # non-empty values -> members naming them
    preferred: Counter[str] = field(default_factory=Counter)

    def set(self, uid: str, pod_key: str, topology: GangTopology | None) -> tuple[bool, str | None]:
        """A member says `topology`: whether the gang's verdict changed (never for the first
        member), and the Event for the member when it brought a value no other member gave."""
        old = self.members.get(uid)
        if old is not None and old[1] == topology:
            return False, None
        before = self.verdict() if self.members else None
        new_value = self.said[topology] == 0
        if old is not None:
            self._count(old[1], -1)
        self.members[uid] = (pod_key, topology)
        self._count(topology, 1)
        changed = before is not None and before != self.verdict()
        return changed, (self._mismatch() if new_value and len(self.said) > 1 else None)

    def drop(self, uid: str) -> bool:
        """A member left: whether that changed the verdict for the members still there."""
        old = self.members.pop(uid, None)
        if old is None:
            return False
        before = self.verdict()
        self._count(old[1], -1)
        return bool(self.members) and before != self.verdict()

    def verdict(self) -> Verdict:
        values = []
        for annotation, counts in ((TOPOLOGY_REQUIRED, self.required), (TOPOLOGY_PREFERRED, self.preferred)):
            if len(counts) > 1:
                listed = ", ".join(f'"{value}" ({self._naming(annotation, value)})' for value in sorted(counts))
                return None, f"members of gang {self.key} disagree on {annotation}: {listed}; the gang waits until they agree"
            values.append(next(iter(counts), ""))
        required, preferred = values
        return (GangTopology(required, preferred) if required or preferred else None), None

    def _count(self, topology: GangTopology | None, step: int) -> None:
        self.said[topology] += step
        if topology is not None:
            self.required[topology.required] += step
            self.preferred[topology.preferred] += step
        for counts in (self.said, self.required, self.preferred):
            for value in [value for value, count in counts.items() if count <= 0 or value == ""]:
                del counts[value]

    def _mismatch(self) -> str:
        """The Event for a member whose annotations differ from its gang's other members'."""
        topology, conflict = self.verdict()
        if conflict is not None:
            return conflict
        assert topology is not None
        lacking = [pod_key for pod_key, own in self.members.values() if own != topology]
        given = " and ".join(f'{annotation}: "{value}"' for annotation, value in
                             ((TOPOLOGY_REQUIRED, topology.required), (TOPOLOGY_PREFERRED, topology.preferred)) if value)
        return (f"members of gang {self.key} differ in their topology annotations: {given} is not on "
                f"{_some(lacking)}; the whole gang is placed with it (a constraint binds every member)")

    def _naming(self, annotation: str, value: str) -> str:
        attribute = "required" if annotation == TOPOLOGY_REQUIRED else "preferred"
        return _some([pod_key for pod_key, own in self.members.values()
                      if own is not None and getattr(own, attribute) == value])


def _some(keys: list[str]) -> str:
    """Three of the members' keys, in order, and how many more."""
    return first_few(sorted(keys), 3)
