"""Node resource columns: allocatable and in-use amounts per resource, for batch plugins.

Generic node accounting rather than one plugin's rule: the resource fit plugin filters and scores
on these columns, the device plugin checks a device resource's count on them. Rows follow the
node table; a resource gets its columns the first time any node or pod names it.

Each resource's columns are separate contiguous arrays (not one node × resource matrix): a
filter reads one resource over every node, and a strided column of a matrix would pull the
whole matrix through the cache for each resource it reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.core.framework.interface import Ints
from scheduler.core.framework.nodetable import SATURATE, ColumnGroup, EachArray, NodeTable, int64
from scheduler.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, is_extended
from scheduler.core.state import NodeInfo


@dataclass(slots=True)
class ResourceColumn:
    """One resource over the node rows."""

    alloc: Ints  # allocatable
    score_alloc: Ints  # allocatable for scoring: the device count stands in when not advertised
    used: Ints  # requested + devices handed out by class
    free: Ints  # alloc - used, what a pod's request must fit in
    extended: bool  # an extended resource: its scoring allocatable may come from the devices

    def row_arrays(self, each: EachArray) -> None:
        """Its per-row arrays (`ColumnGroup.row_arrays`)."""
        self.alloc, self.score_alloc = each(self.alloc), each(self.score_alloc)
        self.used, self.free = each(self.used), each(self.free)


class ResourceColumns(ColumnGroup):
    def __init__(self, table: NodeTable) -> None:
        super().__init__(table)
        self.table = table
        self.columns: dict[str, ResourceColumn] = {}
        self.score_cpu: Ints = np.zeros(self.capacity, np.int64)  # with upstream's non-zero defaults
        self.score_memory: Ints = np.zeros(self.capacity, np.int64)
        self.pods_free: Ints = np.zeros(self.capacity, np.int64)
        for name in (CPU, MEMORY, EPHEMERAL_STORAGE):
            self.of(name)

    def row_arrays(self, each: EachArray) -> None:
        for column in self.columns.values():
            column.row_arrays(each)
        self.score_cpu, self.score_memory = each(self.score_cpu), each(self.score_memory)
        self.pods_free = each(self.pods_free)

    def of(self, name: str) -> ResourceColumn:
        """The columns of resource `name`, added on first use and filled for the rows filled so
        far (`NodeTable.size`: during a pass, the rest are filled by the pass itself)."""
        column = self.columns.get(name)
        if column is None:
            alloc, score_alloc, used, free = (np.zeros(self.capacity, np.int64) for _ in range(4))
            column = self.columns[name] = ResourceColumn(alloc, score_alloc, used, free, is_extended(name))
            for row in range(self.table.size):
                self._fill_one(row, self.table.info(row), name, column)
        return column

    def fill(self, row: int, info: NodeInfo) -> None:
        node = info.node
        assert node is not None
        columns = self.columns
        allocatable, requested, busy = node.allocatable, info.requested, info.busy
        for named in (allocatable, requested, busy):
            for name in named:
                if name not in columns and name != PODS:
                    self.of(name)
        # The hot loop of every refill (and of the first cycle's fill of every node): inline, with
        # calls only for amounts out of the columns' range and for a device resource the node
        # does not list (its scoring allocatable is then its device count: `device_capacity`,
        # which for a listed one is the allocatable, as `_fill_one` reads it).
        for name, column in columns.items():
            alloc = allocatable.get(name, 0)
            used = requested.get(name, 0) + busy.get(name, 0)  # NodeInfo.used
            if not (-SATURATE <= alloc <= SATURATE and -SATURATE <= used <= SATURATE):
                alloc, used = int64(alloc), int64(used)
            column.alloc[row] = alloc
            column.used[row] = used
            column.free[row] = alloc - used
            column.score_alloc[row] = (int64(info.device_capacity(name)) if column.extended and name not in allocatable
                                       else alloc)
        if info.devices:  # a count takes no unhealthy GPU (`ClusterState.count_room`)
            for name, room in self.table.state.count_room(info).items():
                limited = columns.get(name)
                if limited is not None and room < limited.free[row]:
                    limited.free[row] = room
        if info.broken:  # rare: a pod's device annotation is unreadable (NodeInfo.hides_devices_of)
            for name, column in columns.items():
                if info.hides_devices_of(name):
                    column.free[row] = min(column.free[row], 0)
        self.score_cpu[row] = int64(info.scoring_cpu)
        self.score_memory[row] = int64(info.scoring_memory)
        self.pods_free[row] = allocatable.get(PODS, 0) - len(info.pods) - info.held

    def _fill_one(self, row: int, info: NodeInfo, name: str, column: ResourceColumn) -> None:
        node = info.node
        assert node is not None
        alloc = int64(node.allocatable.get(name, 0))
        used = int64(info.used(name))
        free = min(alloc - used, 0) if info.hides_devices_of(name) else alloc - used
        if info.devices:
            room = self.table.state.count_room(info).get(name)
            if room is not None:
                free = min(free, int64(room))
        column.alloc[row], column.used[row], column.free[row] = alloc, used, free
        column.score_alloc[row] = int64(info.device_capacity(name)) if column.extended else alloc
