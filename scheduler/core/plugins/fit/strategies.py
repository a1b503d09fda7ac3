"""NodeResourcesFit's scoring strategies, per node: upstream's integer arithmetic exactly.

Scoring uses requests with the non-zero CPU/memory defaults and the three upstream strategies
(pkg/scheduler/framework/plugins/noderesources/{least_allocated,most_allocated,
requested_to_capacity_ratio,resource_allocation}.go and helper/shape_score.go). The batch form of
the same formulas is `batch.py`; tests/unit/test_fit_upstream.py runs upstream's own tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scheduler.core.plugins.fit.args import ScoringStrategy, ShapePoint
from scheduler.core.framework.cycle_state import MAX_NODE_SCORE, PodContext
from scheduler.core.framework.nodecache import NodeCache
from scheduler.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar
from scheduler.core.state import NodeInfo

MAX_UTILIZATION = 100

# requested, allocatable (parallel lists over the configured resources) -> node score
Scorer = Callable[[list[int], list[int]], int]


# --- scoring -------------------------------------------------------------------------------


def _go_div(a: int, b: int) -> int:
    """Go's integer division truncates toward zero; Python's floors."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def broken_linear(shape: Sequence[ShapePoint]) -> Callable[[int], int]:
    """helper.BuildBrokenLinearFunction over shape points already scaled to 0..100."""
    points = [(p.utilization, p.score) for p in shape]

    def f(p: int) -> int:
        for i, (util, score) in enumerate(points):
            if p <= util:
                if i == 0:
                    return points[0][1]
                prev_util, prev_score = points[i - 1]
                return prev_score + _go_div((score - prev_score) * (p - prev_util), util - prev_util)
        return points[-1][1]

    return f


def least_allocated(weights: Sequence[int]) -> Scorer:
    def score(requested: list[int], allocatable: list[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, weights):
            if alloc == 0:
                continue
            rs = 0 if req > alloc else (alloc - req) * MAX_NODE_SCORE // alloc
            node_score += rs * weight
            weight_sum += weight
        return node_score // weight_sum if weight_sum else 0

    return score


def most_allocated(weights: Sequence[int]) -> Scorer:
    def score(requested: list[int], allocatable: list[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, weights):
            if alloc == 0:
                continue
            rs = min(req, alloc) * MAX_NODE_SCORE // alloc
            node_score += rs * weight
            weight_sum += weight
        return node_score // weight_sum if weight_sum else 0

    return score


def requested_to_capacity_ratio(shape: Sequence[ShapePoint], weights: Sequence[int]) -> Scorer:
    # The utilisation argument is always an integer in 0..100: tabulate the broken line once.
    raw = broken_linear(shape)
    table = [raw(p) for p in range(MAX_UTILIZATION + 1)]
    full = table[MAX_UTILIZATION]

    def score(requested: list[int], allocatable: list[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, weights):
            if alloc == 0:
                continue
            rs = full if req > alloc else table[req * MAX_UTILIZATION // alloc]
            if rs > 0:  # resources scoring 0 are dropped from the mean, not averaged in
                node_score += rs * weight
                weight_sum += weight
        if not weight_sum:
            return 0
        return (2 * node_score + weight_sum) // (2 * weight_sum)  # math.Round, half away from zero

    return score


def build_scorer(strategy: ScoringStrategy) -> Scorer:
    weights = [r.weight for r in strategy.scored]
    if strategy.type == "LeastAllocated":
        return least_allocated(weights)
    if strategy.type == "MostAllocated":
        return most_allocated(weights)
    return requested_to_capacity_ratio(strategy.shape, weights)


class ResourceAllocation:
    """A node's (requested after the pod, requested before it, allocatable) per listed resource:
    upstream's resourceAllocationScorer vectors, shared by NodeResourcesFit and
    NodeResourcesBalancedAllocation.

    `use_requested`: cpu and memory as requested (BalancedAllocation) rather than with the
    non-zero defaults (Fit), on the node's side and the pod's. The node's side of the vectors is
    cached per node generation and the pod's side per attempt, so a score is a short loop of
    integer arithmetic.
    """

    def __init__(self, resources: Sequence[str], *, use_requested: bool) -> None:
        self.resources = list(resources)
        self.use_requested = use_requested
        self._extended = [is_scalar(name) for name in self.resources]
        self._nodes: NodeCache[tuple[list[int], list[int]]] = NodeCache()
        self._pod: tuple[PodContext, list[int]] | None = None

    def _node_vectors(self, info: NodeInfo) -> tuple[list[int], list[int]]:
        cached = self._nodes.get(info, 0)
        if cached is not None:
            return cached
        node = info.node
        assert node is not None
        allocatable: list[int] = []
        requested: list[int] = []
        for name in self.resources:
            if name == CPU:
                alloc = node.allocatable.get(CPU, 0)
                req = info.requested.get(CPU, 0) if self.use_requested else info.scoring_cpu
            elif name == MEMORY:
                alloc = node.allocatable.get(MEMORY, 0)
                req = info.requested.get(MEMORY, 0) if self.use_requested else info.scoring_memory
            elif name == EPHEMERAL_STORAGE:
                alloc, req = node.allocatable.get(name, 0), info.requested.get(name, 0)
            else:
                alloc, req = info.device_capacity(name), info.used(name)
            allocatable.append(alloc)
            requested.append(req)
        return self._nodes.put(info, 0, (allocatable, requested))

    def pod_vector(self, ctx: PodContext) -> list[int]:
        """The pod's requests of the listed resources (not to be changed by the caller)."""
        if self._pod is None or self._pod[0] is not ctx:
            source = ctx.pod.requests if self.use_requested else ctx.pod.scoring_requests
            self._pod = (ctx, [source.get(name, 0) for name in self.resources])
        return self._pod[1]

    def vectors(self, ctx: PodContext, info: NodeInfo) -> tuple[list[int], list[int], list[int]]:
        """(requested with the pod, requested without it, allocatable); a resource left out (an
        unrequested scalar one) reads 0 in all three, as upstream's zero allocatable."""
        node_alloc, node_requested = self._node_vectors(info)
        pod_vector = self.pod_vector(ctx)
        plan = ctx.plans.get(info.name)
        requested: list[int] = []
        before: list[int] = []
        allocatable: list[int] = []
        for i, name in enumerate(self.resources):
            pod_request = pod_vector[i]
            uses_devices = False
            if plan is not None:
                pod_request += plan.newly_busy.get(name, 0)
                uses_devices = name in plan.resources
            if pod_request == 0 and self._extended[i] and not uses_devices:
                allocatable.append(0)  # unrequested scalar resources are skipped
                requested.append(0)
                before.append(0)
                continue
            allocatable.append(node_alloc[i])
            requested.append(node_requested[i] + pod_request)
            before.append(node_requested[i])
        return requested, before, allocatable


class FitScore(ResourceAllocation):
    """NodeResourcesFit's score: the strategy over requests with the non-zero CPU/memory defaults."""

    def __init__(self, strategy: ScoringStrategy) -> None:
        super().__init__([r.name for r in strategy.scored], use_requested=False)
        self.scorer = build_scorer(strategy)

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        requested, _, allocatable = self.vectors(ctx, info)
        return self.scorer(requested, allocatable)
