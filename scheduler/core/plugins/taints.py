"""TaintToleration: NoSchedule/NoExecute taints filter; untolerated PreferNoSchedule taints score.

Filter reports an untolerated taint as upstream v1.36 does (`node(s) had untolerated taint(s)`:
which taint is only logged there; the message stopped naming it in kubernetes#134740); the score counts intolerable PreferNoSchedule
taints, normalised and reversed so the node with fewest scores 100. Batch form: most nodes have
no taints at all; the table marks the ones that do, and only those are checked one by one.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import ClassVar

import numpy as np

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import (
    Bools,
    FilterPlugin,
    Ints,
    Normalize,
    QueueingHint,
    Reasons,
    RowVerdict,
    ScorePlugin,
)
from scheduler.core.framework.nodetable import ColumnGroup, EachArray, NodeTable
from scheduler.core.objects import Node, Pod, Taint
from scheduler.core.state import EventKind, NodeInfo

NAME = "TaintToleration"
UNTOLERATED = "node(s) had untolerated taint(s)"


def keeps_pods_off(taint: Taint) -> bool:
    """A NoSchedule or NoExecute taint: the filter keeps pods that do not tolerate it off its node
    (a PreferNoSchedule one is only scored)."""
    return taint.effect != "PreferNoSchedule"


def untolerated_taint(node: Node, pod: Pod) -> Taint | None:
    """The node's first NoSchedule or NoExecute taint the pod does not tolerate (upstream's
    FindMatchingUntoleratedTaint with DoNotScheduleTaintsFilterFunc), None when there is none:
    `kubectl tessera explain` names it, where the filter's reason does not (upstream's no longer does)."""
    return next((taint for taint in node.taints
                 if keeps_pods_off(taint) and not any(t.tolerates(taint) for t in pod.tolerations)), None)


def untolerated(node: Node, pod: Pod) -> bool:
    """Whether the node has a taint the pod does not tolerate (`untolerated_taint`): this filter's
    rule, and PodTopologySpread's nodeTaintsPolicy: Honor."""
    return untolerated_taint(node, pod) is not None


class TaintColumns(ColumnGroup):
    """Whether a node has hard (NoSchedule/NoExecute) or soft (PreferNoSchedule) taints."""

    def __init__(self, table: NodeTable) -> None:
        super().__init__(table)
        self.hard: Bools = np.zeros(self.capacity, np.bool_)
        self.soft: Bools = np.zeros(self.capacity, np.bool_)

    def row_arrays(self, each: EachArray) -> None:
        self.hard, self.soft = each(self.hard), each(self.soft)

    def fill(self, row: int, info: NodeInfo) -> None:
        assert info.node is not None
        taints = info.node.taints
        self.hard[row] = any(keeps_pods_off(t) for t in taints)
        self.soft[row] = any(not keeps_pods_off(t) for t in taints)


class TaintToleration(FilterPlugin, ScorePlugin):
    name = NAME
    also_extends: ClassVar[frozenset[str]] = frozenset({"preScore"})  # upstream's
    normalize = Normalize.REVERSE

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        return dict.fromkeys((EventKind.NODE_ADDED, EventKind.NODE_UPDATED), self.handle.node_hint(self.name))

    def pod_form(self, ctx: PodContext) -> Hashable:
        """Its tolerations."""
        return ctx.pod.tolerations

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        node = info.node
        assert node is not None
        return (UNTOLERATED,) if untolerated(node, ctx.pod) else None

    def filter_rows(self, table: NodeTable, ctx: PodContext, rows: Bools) -> RowVerdict:
        hard = table.group(TaintColumns).hard[: table.size]
        if not hard.any():
            return RowVerdict(None)
        tainted = rows & hard
        why: dict[int, Reasons] = {}
        for row in np.flatnonzero(tainted).tolist():
            rejected = self.filter(ctx, table.info(row))
            if rejected:
                why[row] = rejected
            else:
                tainted[row] = False  # tolerated
        return RowVerdict(tainted, explain=why.__getitem__)

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        node = info.node
        assert node is not None
        if not node.taints:
            return 0
        tolerations = [t for t in ctx.pod.tolerations if t.effect in ("", "PreferNoSchedule")]
        return sum(1 for taint in node.taints if taint.effect == "PreferNoSchedule"
                   and not any(t.tolerates(taint) for t in tolerations))

    def score_rows(self, table: NodeTable, ctx: PodContext, rows: Ints) -> Ints:
        raw = np.zeros(len(rows), np.int64)
        for i in np.flatnonzero(table.group(TaintColumns).soft[rows]).tolist():
            raw[i] = self.score(ctx, table.info(int(rows[i])))
        return raw
