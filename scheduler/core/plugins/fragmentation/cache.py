"""Reusing TesseraFragmentation scores across cycles and across equal nodes.

Why a cache of its own: the score reads a node's GPU slots and free CPU and the pod's demand, and
at 5,000 nodes recomputing it for every sampled node on every cycle cost more than everything else
in the cycle together (53 decisions/s). Two layers:
- per pod demand and node, valid while the node's generation and the classes/workload `generation`
  are unchanged (`score_nodes`, used for pods with slices of shared GPUs, whose plan matters);
- for every other pod the score is a pure function of (GPU slots, free CPU, demand), so each table
  row carries the id of its (slots, CPU) pair and each demand a table of scores by id
  (`score_rows`): a cycle is a few array operations plus score() for pairs not seen before.
Both give exactly what score() gives (tests/unit/test_vector_equivalence.py).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.interface import Ints
from scheduler.core.framework.nodecache import NodeCache
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.plugins.fragmentation.measure import MEMO_LIMIT, FragmentationScore, GpuState
from scheduler.core.resources import CPU
from scheduler.core.state import NodeInfo

_CACHED_DEMANDS = 256


class FragmentationCache:
    def __init__(self, fragmentation: FragmentationScore) -> None:
        self.fragmentation = fragmentation
        self.state = fragmentation.state
        self._ids: dict[tuple[GpuState, int], int] = {}  # (GPU slots, free CPU) -> id
        # pod demand -> score by id, -1 unknown; at most _CACHED_DEMANDS, oldest dropped first
        # (the tables are as long as the ids, and a generation can see thousands of demands)
        self._tables: OrderedDict[tuple[object, ...], Ints] = OrderedDict()
        self._row_id: Ints = np.zeros(0, np.int64)
        self._row_gen: Ints = np.zeros(0, np.int64)
        self._rows_generation = -1
        self._rows_order = -1
        self._scores: OrderedDict[tuple[object, ...], NodeCache[int]] = OrderedDict()

    def score_nodes(self, ctx: PodContext, infos: list[NodeInfo], generation: int) -> list[int]:
        """score() for many nodes, cached per pod demand and node while neither the node nor
        `generation` (classes and workload epoch) moved: a dictionary lookup per unchanged node."""
        pod = ctx.pod
        demand = (pod.requests.get(CPU, 0), pod.requests.get(self.fragmentation.resource, 0),
                  tuple((r.resource_name, r.count, r.phases) for r in ctx.device_requests))
        cache = self._scores.get(demand)
        if cache is None:
            cache = self._scores[demand] = NodeCache()
            if len(self._scores) > _CACHED_DEMANDS:
                self._scores.popitem(last=False)
        out: list[int] = []
        entries = cache.entries
        for info in infos:
            hit = entries.get(info.name)
            if hit is not None and hit[0] == info.generation and hit[1] == generation:
                out.append(hit[2])
            else:
                out.append(cache.put(info, generation, self.fragmentation.score(ctx, info)))
        return out

    def score_rows(self, nodes: NodeTable, ctx: PodContext, rows: Ints, generation: int) -> Ints:
        """Scores of the table rows (see the module docstring)."""
        if any(r.cls.sharing is not None for r in ctx.device_requests):
            by_name, order = self.state.nodes, self.state.node_order
            infos = [by_name[order[row]] for row in rows.tolist()]
            return np.array(self.score_nodes(ctx, infos, generation), np.int64)
        ids = self._row_ids(nodes, rows, generation)
        pod = ctx.pod
        demand = (pod.requests.get(CPU, 0), pod.requests.get(self.fragmentation.resource, 0),
                  tuple((r.cls.name, r.count, r.phases) for r in ctx.device_requests))
        scores = self._tables.get(demand)
        if scores is None or len(scores) < len(self._ids):
            grown = np.full(max(64, 2 * len(self._ids)), -1, np.int64)
            if scores is not None:
                grown[: len(scores)] = scores
            scores = self._tables[demand] = grown
            if len(self._tables) > _CACHED_DEMANDS:
                self._tables.popitem(last=False)
        values = scores[ids]
        missing = np.flatnonzero(values < 0)
        if missing.size:
            unknown, first = np.unique(ids[missing], return_index=True)
            for pair_id, at in zip(unknown.tolist(), first.tolist()):
                scores[pair_id] = self.fragmentation.score(ctx, nodes.info(int(rows[missing[at]])))
            values = scores[ids]
        return values

    def _row_ids(self, nodes: NodeTable, rows: Ints, generation: int) -> Ints:
        """The (GPU slots, free CPU) id of each row, recomputed for rows whose node moved."""
        capacity = len(nodes.generation)
        if (generation != self._rows_generation or nodes.order_version != self._rows_order
                or len(self._row_gen) < capacity or len(self._ids) > MEMO_LIMIT):
            self._rows_generation, self._rows_order = generation, nodes.order_version
            self._row_gen = np.full(capacity, -1, np.int64)
            self._row_id = np.zeros(capacity, np.int64)
            self._ids.clear()
            self._tables.clear()
        stale = rows[self._row_gen[rows] != nodes.generation[rows]]
        if stale.size:
            for row in stale.tolist():
                info = nodes.info(row)
                gpus = self.fragmentation.gpus(info)
                self._row_id[row] = self._ids.setdefault((gpus.state, gpus.free_cpu), len(self._ids))
                self._row_gen[row] = info.generation
        return self._row_id[rows]
