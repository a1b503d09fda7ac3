"""NodeResourcesFit over the whole node table: the exact integer formulas of strategies.py.

Same int64 arithmetic as upstream, with numpy: utilisation floored, requested above capacity
counting as 100 (RTCR) or 0 (LeastAllocated), zero-allocatable and unrequested extended resources
skipped per node, RTCR rounding half away from zero. tests/unit/test_vector_equivalence.py checks
it against the per-node form on random clusters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from scheduler.core.plugins.fit.args import ScoringStrategy
from scheduler.core.framework.cycle_state import MAX_NODE_SCORE, DeviceDemand, PodContext
from scheduler.core.framework.interface import Bools, Ints
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.framework.resources import ResourceColumns
from scheduler.core.plugins.fit.strategies import broken_linear
from scheduler.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar


@dataclass(frozen=True, slots=True)
class AllocationRows:
    """`ResourceAllocation`'s vectors over many rows: for each listed resource a pod asks for or
    may ask for, its index, the rows' allocatable, requested without the pod and with it, and
    which rows count it (the rest score as upstream's zero allocatable: skipped)."""

    resources: tuple[tuple[str, bool], ...]  # (name, is scalar)
    use_requested: bool  # cpu and memory as requested, not with the non-zero defaults

    @classmethod
    def of(cls, names: Iterable[str], *, use_requested: bool) -> AllocationRows:
        return cls(tuple((name, is_scalar(name)) for name in names), use_requested)

    def each(self, table: NodeTable, rows: Ints, ctx: PodContext,
             extra: dict[str, DeviceDemand] | None) -> Iterator[tuple[int, Ints, Ints, Ints, Bools]]:
        """`extra`: per-row additions to the pod's request from its devices."""
        columns = table.group(ResourceColumns)
        pod = ctx.pod.requests if self.use_requested else ctx.pod.scoring_requests
        for i, (name, extended) in enumerate(self.resources):
            pod_request: int | Ints = pod.get(name, 0)
            demand = extra.get(name) if extra is not None else None
            if demand is not None:
                pod_request = pod_request + demand.amount
            elif pod_request == 0 and extended:
                continue
            column = columns.of(name)
            if name == CPU and not self.use_requested:
                alloc, before = column.alloc[rows], columns.score_cpu[rows]
            elif name == MEMORY and not self.use_requested:
                alloc, before = column.alloc[rows], columns.score_memory[rows]
            else:
                source = column.alloc if name in (CPU, MEMORY, EPHEMERAL_STORAGE) else column.score_alloc
                alloc, before = source[rows], column.used[rows]
            present = alloc != 0
            if extended and demand is not None:
                # unrequested extended resources are skipped per node
                present &= (pod_request != 0) | demand.uses
            yield i, alloc, before, before + pod_request, present


class FitVector:
    """NodeResourcesFit's score over many rows at once."""

    def __init__(self, strategy: ScoringStrategy) -> None:
        self.type = strategy.type
        self.weights = [r.weight for r in strategy.scored]
        self.rows = AllocationRows.of((r.name for r in strategy.scored), use_requested=False)
        self.table: Ints | None = None
        if strategy.type == "RequestedToCapacityRatio":
            raw = broken_linear(strategy.shape)
            self.table = np.array([raw(p) for p in range(101)], np.int64)

    def score(self, table: NodeTable, rows: Ints, ctx: PodContext,
              extra: dict[str, DeviceDemand] | None = None) -> Ints:
        """`extra`: per-row additions to the pod's request from its devices."""
        node_score = np.zeros(len(rows), np.int64)
        weight_sum = np.zeros(len(rows), np.int64)
        for i, alloc, _, requested, present in self.rows.each(table, rows, ctx, extra):
            weight = self.weights[i]
            safe = np.where(present, alloc, 1)
            if self.type == "LeastAllocated":
                rs = np.where(requested > alloc, 0, (alloc - requested) * MAX_NODE_SCORE // safe)
                counted = present
            elif self.type == "MostAllocated":
                rs = np.minimum(requested, alloc) * MAX_NODE_SCORE // safe
                counted = present
            else:
                assert self.table is not None
                utilization = np.where(requested > alloc, 100, requested * 100 // safe)
                rs = self.table[np.clip(utilization, 0, 100)]
                counted = present & (rs > 0)
            node_score += np.where(counted, rs * weight, 0)
            weight_sum += np.where(counted, weight, 0)
        safe_sum = np.where(weight_sum > 0, weight_sum, 1)
        if self.type == "RequestedToCapacityRatio":
            result = (2 * node_score + weight_sum) // (2 * safe_sum)
        else:
            result = node_score // safe_sum
        return np.where(weight_sum > 0, result, 0)
