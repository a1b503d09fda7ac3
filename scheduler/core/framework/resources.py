"""Node resource columns: allocatable and in-use amounts per resource, for batch plugins.

Generic node accounting rather than one plugin's rule: the resource fit plugin filters and scores
on these columns, the device plugin checks a device resource's count on them. Rows follow the
node table; a resource gets its column the first time any node or pod names it.
"""

from __future__ import annotations

import numpy as np

from scheduler.core.framework.interface import Ints
from scheduler.core.framework.nodetable import ColumnGroup, NodeTable, grown, int64
from scheduler.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, is_extended
from scheduler.core.state import NodeInfo

_INITIAL_WIDTH = 8


class ResourceColumns(ColumnGroup):
    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.index: dict[str, int] = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2}
        shape = (table.capacity, _INITIAL_WIDTH)
        self.alloc: Ints = np.zeros(shape, np.int64)
        self.score_alloc: Ints = np.zeros(shape, np.int64)  # device count stands in when not advertised
        self.used: Ints = np.zeros(shape, np.int64)  # requested + devices handed out by class
        self.score_cpu: Ints = np.zeros(table.capacity, np.int64)  # with upstream's non-zero defaults
        self.score_memory: Ints = np.zeros(table.capacity, np.int64)
        self.pods_free: Ints = np.zeros(table.capacity, np.int64)

    def grow(self, capacity: int) -> None:
        for attr in ("alloc", "score_alloc", "used", "score_cpu", "score_memory", "pods_free"):
            setattr(self, attr, grown(getattr(self, attr), capacity))

    def column(self, name: str) -> int:
        """The column of resource `name`, added (and filled for every row) on first use."""
        col = self.index.get(name)
        if col is None:
            col = self.index[name] = len(self.index)
            if col >= self.alloc.shape[1]:
                for attr in ("alloc", "score_alloc", "used"):
                    old = getattr(self, attr)
                    wider = np.zeros((old.shape[0], old.shape[1] * 2), np.int64)
                    wider[:, : old.shape[1]] = old
                    setattr(self, attr, wider)
            for row in range(self.table.size):
                self._fill_one(row, self.table.info(row), name, col)
        return col

    def fill(self, row: int, info: NodeInfo) -> None:
        node = info.node
        assert node is not None
        for name in node.allocatable.keys() | info.requested.keys() | info.busy.keys():
            if name != PODS and name not in self.index:
                self.column(name)
        alloc, used, score_alloc = self.alloc[row], self.used[row], self.score_alloc[row]  # row views
        allocatable = node.allocatable
        for name, col in self.index.items():  # the hot loop of every refill: inline, no call per column
            value = allocatable.get(name, 0)
            alloc[col] = int64(value)
            used[col] = int64(info.used(name))
            score_alloc[col] = int64(info.device_capacity(name) if is_extended(name) else value)
        self.score_cpu[row] = int64(info.scoring_cpu)
        self.score_memory[row] = int64(info.scoring_memory)
        self.pods_free[row] = node.allocatable.get(PODS, 0) - len(info.pods)

    def _fill_one(self, row: int, info: NodeInfo, name: str, col: int) -> None:
        node = info.node
        assert node is not None
        allocatable = node.allocatable.get(name, 0)
        self.alloc[row, col] = int64(allocatable)
        self.used[row, col] = int64(info.used(name))
        self.score_alloc[row, col] = int64(info.device_capacity(name) if is_extended(name) else allocatable)
