"""The victim floor: per node, the lowest priority a preemption victim there could have.

Why: a pod that fits nowhere runs the PostFilter, and on a busy cluster most nodes have no pod of
a lower priority at all (every batch pod of one tier failing at once). Asking each node in Python
which of its pods could be victims costs more than the rest of the cycle; a column answers for
every node at once, and only the nodes below the preemptor are searched.

A gang member counts as the lowest priority: its unit is its gang's priority (a PodGroup's
class may be below the member's own), so its node is always searched.
"""

from __future__ import annotations

import numpy as np

from scheduler.core.framework.interface import Ints
from scheduler.core.framework.nodetable import ColumnGroup, NodeTable, grown
from scheduler.core.state import ClusterState, NodeInfo

LOWEST = np.iinfo(np.int64).min
HIGHEST = np.iinfo(np.int64).max  # no pod on the node: nothing to evict


class VictimFloor(ColumnGroup):
    """Per row, the lowest priority among the node's placed pods (LOWEST with a gang member)."""

    def __init__(self, table: NodeTable) -> None:
        self.state: ClusterState = table.state
        self.lowest: Ints = np.full(table.capacity, HIGHEST, np.int64)

    def grow(self, capacity: int) -> None:
        self.lowest = grown(self.lowest, capacity)

    def fill(self, row: int, info: NodeInfo) -> None:
        lowest = int(HIGHEST)
        for uid in info.pods:
            pod = self.state.pods.get(uid)
            if pod is not None:
                lowest = min(lowest, int(LOWEST) if pod.gang is not None else pod.priority)
        self.lowest[row] = max(int(LOWEST), lowest)  # below int64 (not a real priority): searched
