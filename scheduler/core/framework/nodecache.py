"""Per-node caches that are never stale: one validity rule for every plugin.

A value computed from a node is valid while the node's generation (it moves whenever anything
placed on the node, its object or its devices change) and the cache owner's `epoch` (whatever
else the value depends on: the ResourceClass registry, the learned workload) are both unchanged.
Caching therefore never changes a decision; it only saves recomputing one.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from scheduler.core.state import NodeInfo

V = TypeVar("V")


class NodeCache(Generic[V]):
    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[str, tuple[int, int, V]] = {}

    def get(self, info: NodeInfo, epoch: int) -> V | None:
        hit = self._entries.get(info.name)
        if hit is not None and hit[0] == info.generation and hit[1] == epoch:
            return hit[2]
        return None

    def put(self, info: NodeInfo, epoch: int, value: V) -> V:
        self._entries[info.name] = (info.generation, epoch, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
