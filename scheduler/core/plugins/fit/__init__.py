"""NodeResourcesFit: does the pod fit the node's free resources, and how full does that make it.

Filtering uses actual requests (a node's free amount is allocatable minus requests minus devices
handed out by class, so plain counts and class devices share e.g. `nvidia.com/gpu: 4`); scoring
uses requests with the non-zero CPU/memory defaults and the configured strategy
(`strategies.py`, upstream's arithmetic; `batch.py`, the same over the node table). The package
is upstream's noderesources: `balanced.py` is NodeResourcesBalancedAllocation, on the same
(requested, allocatable) vectors.
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
    QueueingHint,
    Reasons,
    RowVerdict,
    ScorePlugin,
    always,
)
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.framework.resources import ResourceColumns
from scheduler.core.plugins.fit.args import ScoringStrategy
from scheduler.core.plugins.fit.batch import FitVector
from scheduler.core.plugins.fit.strategies import (
    FitScore,
    broken_linear,
    build_scorer,
    least_allocated,
    most_allocated,
    requested_to_capacity_ratio,
)
from scheduler.core.resources import PODS, is_extended
from scheduler.core.state import EventKind, NodeInfo

__all__ = ["NAME", "TOO_MANY_PODS", "NodeResourcesFit", "FitScore", "broken_linear", "build_scorer",
           "least_allocated", "most_allocated", "requested_to_capacity_ratio"]

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"


class NodeResourcesFit(FilterPlugin, ScorePlugin):
    name = NAME
    also_extends: ClassVar[frozenset[str]] = frozenset({"preFilter", "preScore"})  # upstream's
    preemption_helps = True  # Insufficient <resource>, Too many pods: evicting pods frees them
    stays_on: ClassVar[str] = ("it keeps what pods request within what the node has, which TesseraDevices' "
                               "grants count on: without it a node could be promised more than it has, a GPU twice")

    def __init__(self, handle: Handle, strategy: ScoringStrategy) -> None:
        self.handle = handle
        self.ignores = strategy.ignores if strategy.ignored_resources or strategy.ignored_resource_groups else None
        self.per_node = FitScore(strategy)
        self.batch = FitVector(strategy)

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        on_node = self.handle.node_hint(self.name)
        return {EventKind.NODE_ADDED: on_node, EventKind.NODE_UPDATED: on_node,
                EventKind.ASSIGNED_POD_REMOVED: always}

    def pod_form(self, ctx: PodContext) -> Hashable:
        """Its plain requests."""
        return (ctx.plain, ctx.empty_request)

    def checked(self, ctx: PodContext) -> tuple[tuple[str, int], ...]:
        """The plain requests the filter checks: all but the extended resources the args ignore
        (upstream's fitsRequest skips those)."""
        ignores = self.ignores
        if ignores is None:
            return ctx.plain
        return tuple((name, amount) for name, amount in ctx.plain if not (is_extended(name) and ignores(name)))

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        node = info.node
        assert node is not None
        alloc = node.allocatable
        # upstream's fitsRequest: "Too many pods" and then every resource short, all reported
        insufficient: list[str] | None = [TOO_MANY_PODS] if len(info.pods) + info.held + 1 > alloc.get(PODS, 0) else None
        if ctx.empty_request:
            return tuple(insufficient) if insufficient else None
        requested = info.requested
        busy = info.busy
        room: dict[str, int] | None = None  # no unhealthy GPU by count (`ClusterState.count_room`)
        for name, amount in self.checked(ctx):
            free = alloc.get(name, 0) - requested.get(name, 0) - busy.get(name, 0)
            if info.devices and is_extended(name):
                if room is None:
                    room = self.handle.state.count_room(info)
                if name in room:
                    free = min(free, room[name])
            if info.broken and info.hides_devices_of(name):
                free = min(free, 0)
            if amount > free:
                if insufficient is None:
                    insufficient = []
                insufficient.append(f"Insufficient {name}")
        return tuple(insufficient) if insufficient else None

    def filter_rows(self, table: NodeTable, ctx: PodContext, rows: Bools) -> RowVerdict:
        columns = table.group(ResourceColumns)
        n = table.size
        too_many = columns.pods_free[:n] < 1
        shortages = [] if ctx.empty_request else [
            (name, columns.of(name).free[:n] < amount) for name, amount in self.checked(ctx)]
        fails = too_many.copy()
        for _, short in shortages:
            fails |= short
        fails &= rows

        def reasons() -> list[tuple[str, Bools]]:  # as filter: too many pods and every shortage
            return [(TOO_MANY_PODS, too_many), *((f"Insufficient {name}", short) for name, short in shortages)]

        return RowVerdict(fails, reasons)

    def unresolvable_rows(self, table: NodeTable, ctx: PodContext, rows: Ints) -> Bools:
        """upstream's InsufficientResource.Unresolvable: the pod asks for more of a resource than
        the node has at all (its allocatable), so no eviction can make room there."""
        columns = table.group(ResourceColumns)
        beyond = np.zeros(len(rows), np.bool_)
        if not ctx.empty_request:
            for name, amount in self.checked(ctx):
                beyond |= columns.of(name).alloc[rows] < amount
        return beyond

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        return self.per_node.score(ctx, info)

    def score_rows(self, table: NodeTable, ctx: PodContext, rows: Ints) -> Ints:
        extra = ctx.device_demand(rows) if ctx.device_demand is not None else None
        return self.batch.score(table, rows, ctx, extra)

