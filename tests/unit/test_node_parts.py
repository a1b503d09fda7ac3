"""The per-node tally bookkeeping the topology plugins share (`scheduler.core.framework.node_parts`):
a node's part replaced when its generation moves, the totals adjusted by less the old plus the new,
and the tallies kept by signature, the least recently used dropped."""

from __future__ import annotations

from collections import Counter

from scheduler.core.framework.node_parts import NodeParts, RecentTallies
from scheduler.core.state import NodeInfo


class _Sum(NodeParts[Counter[str]]):
    __slots__ = ("total", "taken")

    def __init__(self) -> None:
        super().__init__()
        self.total: Counter[str] = Counter()
        self.taken: list[str] = []

    def _add(self, part: Counter[str], sign: int) -> None:
        for key, n in part.items():
            self.total[key] += sign * n


def _info(name: str, generation: int) -> NodeInfo:
    info = NodeInfo(name)
    info.generation = generation
    return info


def test_only_the_nodes_changed_since_are_taken_again_and_their_old_part_replaced() -> None:
    parts: dict[str, Counter[str] | None] = {"a": Counter(x=1), "b": Counter(x=2, y=1), "c": None}
    tally = _Sum()

    def take(info: NodeInfo) -> Counter[str] | None:
        tally.taken.append(info.name)
        return parts[info.name]

    tally.update([_info("a", 1), _info("b", 1), _info("c", 1)], take)
    assert tally.total == Counter(x=3, y=1) and tally.taken == ["a", "b", "c"]
    parts["b"], parts["c"] = None, Counter(y=4)
    tally.taken.clear()
    tally.update([_info("a", 1), _info("b", 2), _info("c", 2)], take)
    assert tally.taken == ["b", "c"]
    assert +tally.total == Counter(x=1, y=4)
    tally.taken.clear()
    tally.update([_info("a", 1), _info("b", 2), _info("c", 2)], take)
    assert tally.taken == []  # a node's empty part (b's None) is kept too, not taken again
    assert not hasattr(tally, "__dict__")  # slotted through the generic base


def test_the_least_recently_used_tally_is_dropped_past_the_bound() -> None:
    kept: RecentTallies[list[str]] = RecentTallies(2)
    first, second = kept.get("a", list), kept.get("b", list)
    assert kept.get("a", list) is first  # now the most recent: "b" goes next
    kept.get("c", list)
    assert len(kept) == 2
    assert kept.get("a", list) is first
    assert kept.get("b", list) is not second  # dropped, a new one
