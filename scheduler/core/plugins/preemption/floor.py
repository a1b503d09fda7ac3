"""The victim floor: per node, the lowest priority a preemption victim there could have.

Why: a pod that fits nowhere runs the PostFilter, and on a busy cluster most nodes have no pod of
a lower priority at all (every batch pod of one tier failing at once). Asking each node in Python
which of its pods could be victims costs more than the rest of the cycle; a column answers for
every node at once, and only the nodes below the preemptor are searched.

A pod counts at its own priority; a gang member at its gang's as a victim
(`ClusterState.gang_priority`): the class its PodGroup names, else the highest of its running
members' — never below the member's own, so the member's own is the floor then. The column's
epoch follows `ClusterState.victim_priority_version` (PodGroup classes and class values).
"""

from __future__ import annotations

import numpy as np

from scheduler.core.framework.interface import Ints
from scheduler.core.framework.nodetable import ColumnGroup, EachArray, NodeTable
from scheduler.core.state import ClusterState, NodeInfo

LOWEST = np.iinfo(np.int64).min
HIGHEST = np.iinfo(np.int64).max  # no pod on the node: nothing to evict


class VictimFloor(ColumnGroup):
    """Per row, the lowest priority any placed pod of the node has as a victim (a lower bound)."""

    def __init__(self, table: NodeTable) -> None:
        super().__init__(table)
        self.state: ClusterState = table.state
        self.lowest: Ints = np.full(self.capacity, HIGHEST, np.int64)

    def epoch(self) -> int:
        return self.state.victim_priority_version

    def row_arrays(self, each: EachArray) -> None:
        self.lowest = each(self.lowest)

    def fill(self, row: int, info: NodeInfo) -> None:
        state = self.state
        lowest = int(HIGHEST)
        for uid in info.pods:
            pod = state.pods.get(uid)
            if pod is None:
                continue
            fixed = state.class_priority(pod.gang.key) if pod.gang is not None else None
            lowest = min(lowest, pod.priority if fixed is None else fixed)
        self.lowest[row] = max(int(LOWEST), lowest)  # below int64 (not a real priority): searched
