"""Per-node caches that are never stale: one validity rule for every plugin.

A value computed from a node is valid while the node's generation (it moves whenever anything
placed on the node, its object or its devices change) and the cache owner's `epoch` (whatever
else the value depends on: the ResourceClass registry, the learned workload) are both unchanged.
Caching therefore never changes a decision; it only saves recomputing one. The plugins' per-node
tallies keep their parts in one too (`node_parts.NodeParts`, epoch always 0).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from scheduler.core.state import NodeInfo

V = TypeVar("V")


class NodeCache(Generic[V]):
    """node name -> (node generation, epoch, value). Loops over thousands of nodes read `entries`
    directly with the same rule (`hit[0] == info.generation and hit[1] == epoch`; an owner whose
    epoch never moves compares the generation alone): a method call per node costs more than the
    lookup. Where None is a value (`NodeParts`' empty part), `get`'s None cannot tell it from a
    miss, so its owner reads `entries` too."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[str, tuple[int, int, V]] = {}

    def get(self, info: NodeInfo, epoch: int) -> V | None:
        hit = self.entries.get(info.name)
        if hit is not None and hit[0] == info.generation and hit[1] == epoch:
            return hit[2]
        return None

    def put(self, info: NodeInfo, epoch: int, value: V) -> V:
        self.entries[info.name] = (info.generation, epoch, value)
        return value

    def __len__(self) -> int:
        return len(self.entries)

    def clear(self) -> None:
        self.entries.clear()
