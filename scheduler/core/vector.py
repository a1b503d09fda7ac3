"""Filter and score every node at once with numpy, for the pod shapes batch clusters are made of.

Why: kube-scheduler evaluates hundreds of nodes per pod in parallel goroutines; a Python loop over
5,000 nodes costs milliseconds per pod however small each check is. Most pods only need
NodeUnschedulable, TaintToleration and NodeResourcesFit — columns of integers per node — so this
module keeps those columns as arrays (rows in `ClusterState.node_order` order, refreshed from the
nodes the state marked dirty) and answers "which nodes fit, why the others do not, and what do
they score" with a few vector operations. Everything else (device plans, tolerations on tainted
nodes, preferred affinity, fragmentation) still runs per node in Python, but only on the nodes
the vectors let through.

The results are identical to the per-node path, in values and in order: the same rotating start,
the same number of processed nodes, the same first-failing reason per node, the same int64
arithmetic as upstream. `tests/unit/test_vector_equivalence.py` checks that on random clusters.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import math

import numpy as np
import numpy.typing as npt

from scheduler.api.config import ScoringStrategy
from scheduler.core.framework import MAX_NODE_SCORE, PodContext
from scheduler.core.objects import Taint
from scheduler.core.plugins import fit, node_unschedulable, taints
from scheduler.core.plugins.devices import BROKEN, DevicePlanner, over_count
from scheduler.core.plugins.fit import broken_linear
from scheduler.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, is_extended
from scheduler.core.state import ClusterState, NodeInfo

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
_UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


class NodeVectors:
    """Per-node integer columns, kept in step with the cluster state."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.columns: dict[str, int] = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2}
        self.size = 0
        capacity = 64
        width = 8
        self.alloc: Ints = np.zeros((capacity, width), np.int64)
        self.score_alloc: Ints = np.zeros((capacity, width), np.int64)  # device count stands in when absent
        self.used: Ints = np.zeros((capacity, width), np.int64)  # requested + devices handed out by class
        self.score_cpu: Ints = np.zeros(capacity, np.int64)
        self.score_memory: Ints = np.zeros(capacity, np.int64)
        self.pods_free: Ints = np.zeros(capacity, np.int64)
        self.unschedulable: Bools = np.zeros(capacity, np.bool_)
        self.hard_taints: Bools = np.zeros(capacity, np.bool_)
        self.soft_taints: Bools = np.zeros(capacity, np.bool_)
        # per valid ResourceClass: free matching devices (exclusive classes) or the largest free
        # amount on one matching device, rounded up (sharing classes) — a necessary condition
        # for the device planner, so nodes that cannot pass are never planned
        self.class_free: dict[str, Ints] = {}
        self.class_total: dict[str, Ints] = {}  # matching schedulable devices (exclusive classes)
        self.class_resources: dict[str, set[str]] = {}  # device resourceNames seen per class
        self.broken: Bools = np.zeros(capacity, np.bool_)
        self.generation: Ints = np.full(capacity, -1, np.int64)  # NodeInfo.generation the row was filled at
        self.class_epoch = -1
        self.order_version = -1

    def column(self, name: str) -> int:
        col = self.columns.get(name)
        if col is None:
            col = self.columns[name] = len(self.columns)
            if col >= self.alloc.shape[1]:
                grow = self.alloc.shape[1] * 2
                for attr in ("alloc", "score_alloc", "used"):
                    old = getattr(self, attr)
                    new = np.zeros((old.shape[0], grow), np.int64)
                    new[:, : old.shape[1]] = old
                    setattr(self, attr, new)
            self._fill_column(name, col)
        return col

    def sync(self) -> None:
        state = self.state
        order = state.node_order
        if self.class_epoch != state.classes.epoch:
            self.class_epoch = state.classes.epoch
            self.class_free = {name: np.zeros(self.alloc.shape[0], np.int64) for name in self._valid_classes()}
            self.class_total = {name: np.zeros(self.alloc.shape[0], np.int64) for name in self._valid_classes()}
            self.class_resources = {name: set() for name in self._valid_classes()}
            self.order_version = -1  # refill every row
        if self.order_version != state.order_version or len(order) < self.size:
            self.order_version = state.order_version
            self.size = 0
            state.dirty.clear()
            self._ensure(len(order))
            for row, name in enumerate(order):
                self._fill_row(row, state.nodes[name])
            self.size = len(order)
            return
        if len(order) > self.size:
            self._ensure(len(order))
            for row in range(self.size, len(order)):
                self._fill_row(row, state.nodes[order[row]])
            self.size = len(order)
        for name in state.dirty:
            position = state.node_position(name)
            if position is not None:
                self._fill_row(position, state.nodes[name])
        state.dirty.clear()

    def _ensure(self, rows: int) -> None:
        if rows <= self.alloc.shape[0]:
            return
        capacity = max(rows, self.alloc.shape[0] * 2)
        for attr in ("alloc", "score_alloc", "used"):
            old = getattr(self, attr)
            new = np.zeros((capacity, old.shape[1]), np.int64)
            new[: old.shape[0]] = old
            setattr(self, attr, new)
        for attr in ("score_cpu", "score_memory", "pods_free", "unschedulable", "hard_taints", "soft_taints", "broken",
                     "generation"):
            old = getattr(self, attr)
            new = np.zeros(capacity, old.dtype)
            new[: old.shape[0]] = old
            setattr(self, attr, new)
        for columns in (self.class_free, self.class_total):
            for name, old_column in list(columns.items()):
                grown = np.zeros(capacity, np.int64)
                grown[: old_column.shape[0]] = old_column
                columns[name] = grown

    def _valid_classes(self) -> list[str]:
        return [cls.name for cls in self.state.classes.by_resource.values()]

    def _fill_row(self, row: int, info: NodeInfo) -> None:
        node = info.node
        assert node is not None
        for name in node.allocatable.keys() | info.requested.keys() | info.busy.keys():
            if name != PODS and name not in self.columns:
                self.column(name)
        self.alloc[row] = 0
        self.used[row] = 0
        self.score_alloc[row] = 0
        for name, col in self.columns.items():
            self.alloc[row, col] = _int64(node.allocatable.get(name, 0))
            self.used[row, col] = _int64(info.used(name))
            self.score_alloc[row, col] = _int64(info.device_capacity(name) if is_extended(name) else node.allocatable.get(name, 0))
        self.score_cpu[row] = _int64(info.scoring_cpu)
        self.score_memory[row] = _int64(info.scoring_memory)
        self.pods_free[row] = node.allocatable.get(PODS, 0) - len(info.pods)
        self.unschedulable[row] = node.unschedulable
        self.hard_taints[row] = any(t.effect != "PreferNoSchedule" for t in node.taints)
        self.soft_taints[row] = any(t.effect == "PreferNoSchedule" for t in node.taints)
        self.broken[row] = bool(info.broken)
        self.generation[row] = info.generation
        if self.class_free:
            self._fill_class_row(row, info)

    def _fill_class_row(self, row: int, info: NodeInfo) -> None:
        classes = self.state.classes
        uses = self.state.device_use
        for name, column in self.class_free.items():
            cls = classes.classes[name]
            best = total = 0
            for device in info.devices.values():
                if not device.schedulable or name not in classes.device_classes.get(device.name, ()):
                    continue
                self.class_resources[name].add(device.resource_name)
                total += 1
                use = uses.get(device.name)
                if cls.sharing is None:
                    if use is None or not use.busy:
                        best += 1
                elif use is None or not use.exclusive:
                    capacity = device.capacity.get(cls.sharing.dimension)
                    if capacity is not None:
                        free = capacity - (use.shared_total if use is not None else 0)
                        best = max(best, math.ceil(free / cls.sharing.unit))
            column[row] = best
            self.class_total[name][row] = total

    def _fill_column(self, name: str, col: int) -> None:
        order = self.state.node_order
        for row in range(min(self.size, len(order))):
            info = self.state.nodes[order[row]]
            assert info.node is not None
            self.alloc[row, col] = _int64(info.node.allocatable.get(name, 0))
            self.used[row, col] = _int64(info.used(name))
            self.score_alloc[row, col] = _int64(info.device_capacity(name) if is_extended(name) else info.node.allocatable.get(name, 0))


_SATURATE = 2**55  # absurd amounts saturate here, so that x*100 in scoring cannot overflow int64


def _int64(value: int) -> int:
    return max(-_SATURATE, min(_SATURATE, value))


@dataclass(slots=True)
class FilterResult:
    rows: list[int]  # feasible nodes' positions in node_order, in visiting order
    processed: int
    reasons: Counter[str] = field(default_factory=Counter)
    rejectors: set[str] = field(default_factory=set)


def applies(ctx: PodContext) -> bool:
    """Pods whose node-selection filters are all vectorised (devices are checked per candidate)."""
    pod = ctx.pod
    return not pod.node_selector and pod.required_terms is None


def filter_nodes(vectors: NodeVectors, ctx: PodContext, start: int, to_find: int,
                 device_filter: DevicePlanner | None, plans_needed: bool) -> FilterResult:
    """First `to_find` feasible nodes from `start` (rotating), plus reasons if there are none."""
    n = vectors.size
    nodes = vectors.state.nodes
    order = vectors.state.node_order
    pod = ctx.pod
    tolerates_cordon = any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in pod.tolerations)
    unsched_fail = np.zeros(n, np.bool_) if tolerates_cordon else vectors.unschedulable[:n].copy()
    taint_reason: dict[int, str] = {}
    taint_fail = np.zeros(n, np.bool_)
    tainted = np.flatnonzero(vectors.hard_taints[:n] & ~unsched_fail)
    for row in tainted.tolist():
        rejected = taints.filter_node(ctx, nodes[order[row]])
        if rejected:
            taint_fail[row] = True
            taint_reason[row] = rejected[0]
    passed = ~(unsched_fail | taint_fail)
    too_many = passed & (vectors.pods_free[:n] < 1)
    fit_rows = passed & ~too_many
    insufficient: list[tuple[str, Bools]] = []
    fit_fail = np.zeros(n, np.bool_)
    if not ctx.empty_request:
        for name, amount in ctx.plain:
            col = vectors.column(name)
            short = fit_rows & ((vectors.alloc[:n, col] - vectors.used[:n, col]) < amount)
            insufficient.append((name, short))
            fit_fail |= short
    candidates = fit_rows & ~fit_fail
    if device_filter is not None:
        candidates = candidates & _devices_possible(vectors, ctx, n)
    rows = np.flatnonzero(candidates)
    rotated = np.concatenate((rows[rows >= start], rows[rows < start]))

    result = FilterResult([], n)
    device_reasons: Counter[str] = Counter()
    # without per-node plans only vector scoring can score the nodes (plans_needed says otherwise)
    simple = simple_exclusive(vectors, ctx) if device_filter is not None and not plans_needed else None
    if simple is not None:
        # one exclusive class request: the planner's verdict is a function of the columns
        name, resource, count = simple
        col = vectors.column(resource)
        alloc, score_alloc = vectors.alloc[:n, col], vectors.score_alloc[:n, col]
        advertised = ~((alloc == 0) & (score_alloc > 0))  # the node reports the resource itself
        own = ctx.plain_request(resource)  # the pod's plain request of the same resource shares the count
        room = ~advertised | (vectors.used[:n, col] + count + own <= alloc)
        ok = candidates & ~vectors.broken[:n] & (vectors.class_free[name][:n] >= count) & room
        rows = np.flatnonzero(ok)
        rotated = np.concatenate((rows[rows >= start], rows[rows < start]))
        result.rows = rotated[:to_find].tolist()
        if len(result.rows) >= to_find:
            result.processed = (result.rows[-1] - start) % n + 1
    elif device_filter is None:
        result.rows = rotated[:to_find].tolist()
        if len(result.rows) >= to_find:
            result.processed = (result.rows[-1] - start) % n + 1
    else:
        # DevicePlanner.filter_node, inlined: a cached plan is two dict lookups
        planner = device_filter
        per_node = planner.cache_for(ctx.device_requests)
        generation = planner.generation
        plans = ctx.plans
        for row in rotated.tolist():
            info = nodes[order[row]]
            if info.broken:
                continue
            hit = per_node.get(info.name)
            if hit is not None and hit[0] == info.generation and hit[1] == generation:
                plan = hit[2]
            else:
                plan = planner.plan(ctx.device_requests, info)
                per_node[info.name] = (info.generation, generation, plan)
            if isinstance(plan, str) or over_count(ctx, plan, info) is not None:
                continue
            plans[info.name] = plan
            result.rows.append(row)
            if len(result.rows) >= to_find:
                result.processed = (row - start) % n + 1
                break
    if result.rows:
        return result
    # Nobody fits: every node was processed; count each node's first failing plugin's reasons.
    reasons = result.reasons
    count = int(np.count_nonzero(unsched_fail))
    if count:
        reasons[node_unschedulable.REASON] += count
        result.rejectors.add(node_unschedulable.NAME)
    for reason in taint_reason.values():
        reasons[reason] += 1
    if taint_reason:
        result.rejectors.add(taints.NAME)
    count = int(np.count_nonzero(too_many))
    if count:
        reasons[fit.TOO_MANY_PODS] += count
    for name, short in insufficient:
        count = int(np.count_nonzero(short))
        if count:
            reasons[f"Insufficient {name}"] += count
    if np.any(too_many) or np.any(fit_fail):
        result.rejectors.add(fit.NAME)
    if device_filter is not None:
        # The prefilter skipped nodes the planner would refuse. For the message, their reasons:
        # with a single device request the planner can only say "unreadable assignments" (broken
        # node) or "Insufficient <resource>"; otherwise ask the planner itself.
        single = len(ctx.device_requests) == 1
        possible = _devices_possible(vectors, ctx, n)
        for row in np.flatnonzero(fit_rows & ~fit_fail).tolist():
            info = nodes[order[row]]
            if single and not possible[row]:
                device_reasons[BROKEN if info.broken else f"Insufficient {ctx.device_requests[0].resource_name}"] += 1
                continue
            rejected = device_filter.filter_node(ctx, info)
            if rejected:
                device_reasons[rejected[0]] += 1
    if device_reasons:
        reasons.update(device_reasons)
        result.rejectors.add("TesseraDevices")
    return result


def simple_exclusive(vectors: NodeVectors, ctx: PodContext) -> tuple[str, str, int] | None:
    """(class, device resourceName, count) when the pod makes one exclusive class request whose
    devices all belong to one resourceName — then feasibility, devices made busy and the device
    score per node follow from the class columns, and only the chosen node needs a real plan."""
    if len(ctx.device_requests) != 1:
        return None
    req = ctx.device_requests[0]
    resources = vectors.class_resources.get(req.cls.name)
    if req.cls.sharing is not None or resources is None or len(resources) != 1:
        return None
    return req.cls.name, next(iter(resources)), req.count


def _devices_possible(vectors: NodeVectors, ctx: PodContext, n: int) -> Bools:
    """Nodes with enough free matching devices (or shared room) for the pod's class requests."""
    exclusive: dict[str, int] = {}
    shared: dict[str, int] = {}
    for req in ctx.device_requests:
        if req.cls.sharing is None:
            exclusive[req.cls.name] = exclusive.get(req.cls.name, 0) + req.count
        else:
            shared[req.cls.name] = max(shared.get(req.cls.name, 0), req.count)
    possible = np.ones(n, np.bool_)
    for needs in (exclusive, shared):
        for name, need in needs.items():
            column = vectors.class_free.get(name)
            if column is None:
                return np.zeros(n, np.bool_)
            possible &= column[:n] >= need
    return possible


@dataclass(frozen=True, slots=True)
class DeviceDemand:
    """Per feasible node, what a pod's device plan adds to one device resourceName for scoring."""

    amount: Ints  # devices the plan turns from free to busy
    uses: Bools  # the plan's devices belong to the resource (requested even when amount is 0)


class FitVector:
    """NodeResourcesFit's score over many nodes at once (the exact integer formulas of fit.py)."""

    def __init__(self, strategy: ScoringStrategy) -> None:
        self.type = strategy.type
        self.resources = [(r.name, r.weight, is_extended(r.name)) for r in strategy.resources]
        self.table: Ints | None = None
        if strategy.type == "RequestedToCapacityRatio":
            raw = broken_linear(strategy.shape)
            self.table = np.array([raw(p) for p in range(101)], np.int64)

    def score(self, vectors: NodeVectors, rows: Ints, ctx: PodContext,
              extra: dict[str, DeviceDemand] | None = None) -> Ints:
        """`extra`: per-node additions to the pod's request from its device plans."""
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
            if name == CPU:
                alloc, requested = vectors.alloc[rows, 0], vectors.score_cpu[rows] + pod_request
            elif name == MEMORY:
                alloc, requested = vectors.alloc[rows, 1], vectors.score_memory[rows] + pod_request
            else:
                col = vectors.column(name)
                source = vectors.alloc if name == EPHEMERAL_STORAGE else vectors.score_alloc
                alloc, requested = source[rows, col], vectors.used[rows, col] + pod_request
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


def normalize_vector(raw: Ints, reverse: bool) -> Ints:
    """helper.DefaultNormalizeScore over an array."""
    highest = int(raw.max()) if len(raw) else 0
    if highest == 0:
        return np.full(len(raw), MAX_NODE_SCORE, np.int64) if reverse else raw
    out = MAX_NODE_SCORE * raw // highest
    return MAX_NODE_SCORE - out if reverse else out


