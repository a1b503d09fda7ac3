"""NodeResourcesFit over the whole node table: the exact integer formulas of strategies.py.

Same int64 arithmetic as upstream, with numpy: utilisation floored, requested above capacity
counting as 100 (RTCR) or 0 (LeastAllocated), zero-allocatable and unrequested extended resources
skipped per node, RTCR rounding half away from zero. tests/unit/test_vector_equivalence.py checks
it against the per-node form on random clusters.
"""

from __future__ import annotations

import numpy as np

from scheduler.core.plugins.fit.args import ScoringStrategy
from scheduler.core.framework.cycle_state import MAX_NODE_SCORE, DeviceDemand, PodContext
from scheduler.core.framework.interface import Ints
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.framework.resources import ResourceColumns
from scheduler.core.plugins.fit.strategies import broken_linear
from scheduler.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar


class FitVector:
    """NodeResourcesFit's score over many rows at once."""

    def __init__(self, strategy: ScoringStrategy) -> None:
        self.type = strategy.type
        self.resources = [(r.name, r.weight, is_scalar(r.name)) for r in strategy.scored]
        self.table: Ints | None = None
        if strategy.type == "RequestedToCapacityRatio":
            raw = broken_linear(strategy.shape)
            self.table = np.array([raw(p) for p in range(101)], np.int64)

    def score(self, table: NodeTable, rows: Ints, ctx: PodContext,
              extra: dict[str, DeviceDemand] | None = None) -> Ints:
        """`extra`: per-row additions to the pod's request from its devices."""
        columns = table.group(ResourceColumns)
        scoring = ctx.pod.scoring_requests
        node_score = np.zeros(len(rows), np.int64)
        weight_sum = np.zeros(len(rows), np.int64)
        for name, weight, extended in self.resources:
            pod_request: int | Ints = scoring.get(name, 0)
            demand = extra.get(name) if extra is not None else None
            if demand is not None:
                pod_request = pod_request + demand.amount
            elif pod_request == 0 and extended:
                continue
            column = columns.of(name)
            if name == CPU:
                alloc, requested = column.alloc[rows], columns.score_cpu[rows] + pod_request
            elif name == MEMORY:
                alloc, requested = column.alloc[rows], columns.score_memory[rows] + pod_request
            else:
                source = column.alloc if name == EPHEMERAL_STORAGE else column.score_alloc
                alloc, requested = source[rows], column.used[rows] + pod_request
            present = alloc != 0
            if extended and demand is not None:
                # unrequested extended resources are skipped per node
                present &= (pod_request != 0) | demand.uses
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
