"""NodeUnschedulable: cordoned nodes take only pods tolerating `node.kubernetes.io/unschedulable`."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import Bools, FilterPlugin, QueueingHint, Reasons, RowVerdict
from scheduler.core.framework.nodetable import ColumnGroup, EachArray, NodeTable
from scheduler.core.objects import Taint
from scheduler.core.state import EventKind, NodeInfo

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def tolerates_cordon(ctx: PodContext) -> bool:
    return any(t.tolerates(TAINT) for t in ctx.pod.tolerations)


class CordonColumn(ColumnGroup):
    """`spec.unschedulable` per node."""

    def __init__(self, table: NodeTable) -> None:
        super().__init__(table)
        self.cordoned: Bools = np.zeros(self.capacity, np.bool_)

    def row_arrays(self, each: EachArray) -> None:
        self.cordoned = each(self.cordoned)

    def fill(self, row: int, info: NodeInfo) -> None:
        assert info.node is not None
        self.cordoned[row] = info.node.unschedulable


class NodeUnschedulable(FilterPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        return dict.fromkeys((EventKind.NODE_ADDED, EventKind.NODE_UPDATED), self.handle.node_hint(self.name))

    def pod_form(self, ctx: PodContext) -> Hashable:
        """Its tolerations (`tolerates_cordon`)."""
        return ctx.pod.tolerations

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        node = info.node
        assert node is not None
        if node.unschedulable and not tolerates_cordon(ctx):
            return (REASON,)
        return None

    def filter_rows(self, table: NodeTable, ctx: PodContext, rows: Bools) -> RowVerdict:
        cordoned = table.group(CordonColumn).cordoned[: table.size]
        if tolerates_cordon(ctx) or not cordoned.any():
            return RowVerdict(None)
        fails = rows & cordoned
        return RowVerdict(fails, lambda: ((REASON, fails),))
