"""Counts over every node, kept by node generation: one home for the plugins' per-node tallies.

Some plugins count, for a pod, what the pods of every node add up to (InterPodAffinity's topology
pairs, PodTopologySpread's domains). Taken afresh, that reads every pod of every node for each
pod (5,000 nodes of 20 pods: 200 to 500 ms), again after each placement and each lift of
preemption's dry run. So the count is kept as each node's part, with the `NodeInfo.generation` it
was taken at, and totals over the parts: a pod's count takes again only the nodes changed since
(a placement, a lift, a label), each new part replacing the old in the totals (less the old,
plus the new). The parts are a `NodeCache`, stale by its rule, the one every per-node cache
keeps; the bookkeeping of the totals is here, the totals are the plugin's: what a part is, and
how it is added into them (`NodeParts._add`). A tally serves every pod of the same signature (a
workload's replicas); a few are kept, the least recently used dropped (`RecentTallies`), so that
workloads interleaved do not take every node again between them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from scheduler.core.framework.nodecache import NodeCache
from scheduler.core.state import NodeInfo

P = TypeVar("P")
T = TypeVar("T")


class NodeParts(ABC, Generic[P]):
    """Each node's part (None: the node adds nothing) in a `NodeCache`; the subclass keeps the
    totals, adding a part into them with a sign (`_add`). A part depends on nothing but its node
    (the rest is the tally's signature, its key in `RecentTallies`), so its epoch is always 0."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: NodeCache[P | None] = NodeCache()

    def update(self, infos: Iterable[NodeInfo], take: Callable[[NodeInfo], P | None]) -> None:
        """Each node of `infos` changed since its part was taken (or never taken) has it taken
        again by `take`, in place of the one it had."""
        # NodeCache's rule, inline (every node, every count), less the epoch, always 0 here
        entries = self.parts.entries
        for info in infos:
            hit = entries.get(info.name)
            if hit is None or hit[0] != info.generation:
                self.put(info, take(info))

    def put(self, info: NodeInfo, part: P | None) -> None:
        """The node's part now, in place of the one it had."""
        seen = self.parts.entries.get(info.name)
        if seen is not None and seen[2] is not None:
            self._add(seen[2], -1)
        self.parts.put(info, 0, part)
        if part is not None:
            self._add(part, 1)

    @abstractmethod
    def _add(self, part: P, sign: int) -> None:
        """Add `part` into the totals (`sign` 1), or take it out of them (-1)."""


class RecentTallies(Generic[T]):
    """Tallies by signature, the `most` recently used kept: a signature per workload would
    otherwise keep every node's part for every workload ever counted."""

    __slots__ = ("_kept", "most")

    def __init__(self, most: int) -> None:
        self.most = most
        self._kept: dict[Hashable, T] = {}

    def get(self, key: Hashable, new: Callable[[], T]) -> T:
        """The tally of `key`, a `new` one if none is kept; now the most recent."""
        kept = self._kept
        tally = kept.pop(key, None)
        if tally is None:
            tally = new()
        kept[key] = tally  # the most recent last
        if len(kept) > self.most:
            del kept[next(iter(kept))]
        return tally

    def __len__(self) -> int:
        return len(self._kept)
