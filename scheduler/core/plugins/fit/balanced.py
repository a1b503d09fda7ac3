"""NodeResourcesBalancedAllocation: prefer nodes whose resources are used in even proportions.

Upstream's plugin (k/k pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go),
with its args (`resources`, v1 defaults.go and validation_pluginargs.go) and arithmetic exactly:
each listed resource's fraction `requested / allocatable`, capped at 1, resources the node has
none of (and scalar ones the pod does not ask for) left out; a balance `int64((1 - std) * 100)` in
float64, the standard deviation of the fractions taken as `|f0 - f1| / 2` for two, the population
formula for more, 0 for fewer; and since v1.36 (kubernetes#135573) the score is how the pod
changes that balance, `50 + (50 + balance with the pod - balance without it) / 2`. Unlike NodeResourcesFit it
reads requests as written (`useRequested`: no non-zero CPU/memory defaults, on the node's side or
the pod's), and a pod asking for none of the resources is not scored (PreScore's Skip, for
best-effort pods: kubernetes#129138). The resource weights are validated and otherwise unused, as
upstream's scorer never reads them.

Why in the fit package: it is upstream's noderesources package's second scorer, sharing the
(requested, allocatable) vectors of `ResourceAllocation` and `AllocationRows`.

Off by default in Tessera (upstream's default profile scores with it at weight 1): balancing cpu
against memory says nothing about GPUs and pulls small pods onto emptier nodes, against the GPU
packing the built-in profile is for (docs/configuration.md).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from scheduler.api.config_reader import ArgsReader, Checks, duplicate, invalid, required
from scheduler.core.framework.cycle_state import MAX_NODE_SCORE, PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import Bools, Ints, ScorePlugin
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.plugins.fit.args import DEFAULT as FIT_DEFAULT
from scheduler.core.plugins.fit.args import ResourceWeight
from scheduler.core.plugins.fit.batch import AllocationRows
from scheduler.core.plugins.fit.strategies import ResourceAllocation
from scheduler.core.resources import PODS, is_scalar
from scheduler.core.state import NodeInfo

NAME = "NodeResourcesBalancedAllocation"
FIELDS = ("resources",)

Floats = npt.NDArray[np.float64]


class BalancedAllocationArgs(BaseModel):
    """NodeResourcesBalancedAllocationArgs: the resources whose fractions are compared."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resources: tuple[ResourceWeight, ...] = FIT_DEFAULT.resources  # upstream's defaultResourceSpec: cpu, memory

    @property
    def scored(self) -> tuple[str, ...]:
        """The names a score can count: `pods` never (as NodeResourcesFit's `scored`: not among a
        node's scalar resources, it reads as zero allocatable and is skipped)."""
        return tuple(resource.name for resource in self.resources if resource.name != PODS)


def parse_args(args: ArgsReader) -> BalancedAllocationArgs:
    """SetDefaults_NodeResourcesBalancedAllocationArgs (no resources: cpu and memory; a weight
    unset or 0: 1), then ValidateNodeResourcesBalancedAllocationArgs: every error, in order (a
    name seen before is a Duplicate, a weight other than 1 is Invalid "must be 1"). A resource
    without a name is refused, as NodeResourcesFit's are (upstream would score it as nothing)."""
    items = args.get_list("resources")
    if not items:
        return BalancedAllocationArgs()
    found = Checks()
    seen: set[str] = set()
    resources: list[ResourceWeight] = []
    for i, raw in enumerate(items):
        item = ArgsReader(raw, f"{args.at('resources')}[{i}]")
        found.check(lambda: item.check_keys(("name", "weight")))
        name = found.read(lambda: item.get_str("name", ""), "")
        if not name:
            found.check(lambda: required(item.at("name")))
        elif name in seen:
            found.check(lambda: duplicate(item.at("name"), name))
        seen.add(name)
        weight = found.read(lambda: item.get_int("weight", 0, "int64"), 1) or 1
        if weight != 1:
            found.check(lambda: invalid(item.at("weight"), weight, "must be 1"))
        if name:
            resources.append(ResourceWeight(name=name, weight=1))
    found.raise_errors()
    return BalancedAllocationArgs(resources=tuple(resources))


def balance(requested: list[int], allocatable: list[int]) -> int:
    """upstream's balancedResourceScore: `int64((1 - std) * 100)` of the fractions, in float64 as
    Go computes it (each int converted before the division; Go on amd64 fuses no multiply-add)."""
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocatable):
        if alloc == 0:
            continue
        fraction = min(float(req) / float(alloc), 1.0)
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        squares = 0.0
        for fraction in fractions:
            squares = squares + (fraction - mean) * (fraction - mean)
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


def balanced_resource_scorer(requested: list[int], before: list[int], allocatable: list[int]) -> int:
    """upstream's balancedResourceScorer (v1.36, kubernetes#135573): the change the pod makes to
    the node's balance, `50 + (50 + with - without) / 2` in integers; each balance is 50..100, so
    no change scores 75, perfectly balanced to perfectly not 50, the reverse 100."""
    half = MAX_NODE_SCORE // 2
    return half + (half + balance(requested, allocatable) - balance(before, allocatable)) // 2


def _balance_rows(fractions: list[tuple[Floats, Bools]], n: int) -> Ints:
    """`balance` over many rows: (fraction, counted) per resource in order, a row's fractions
    being the counted ones (adding 0.0 for the others leaves each sum as upstream's)."""
    count = np.zeros(n, np.int64)
    total = np.zeros(n, np.float64)
    first = np.zeros(n, np.float64)
    second = np.zeros(n, np.float64)
    for fraction, counted in fractions:
        total = total + np.where(counted, fraction, 0.0)
        first = np.where(counted & (count == 0), fraction, first)
        second = np.where(counted & (count == 1), fraction, second)
        count += counted
    many = np.maximum(count, 1).astype(np.float64)
    mean = total / many
    squares = np.zeros(n, np.float64)
    for fraction, counted in fractions:
        squares = np.where(counted, squares + (fraction - mean) * (fraction - mean), squares)
    std = np.where(count == 2, np.abs((first - second) / 2), np.where(count > 2, np.sqrt(squares / many), 0.0))
    scores: Ints = ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)  # truncation, as Go's int64()
    return scores


class NodeResourcesBalancedAllocation(ScorePlugin):
    name = NAME
    also_extends: ClassVar[frozenset[str]] = frozenset({"preScore"})  # upstream's; its Score falls back the same

    def __init__(self, handle: Handle, args: BalancedAllocationArgs) -> None:
        self.scalar = any(is_scalar(name) for name in args.scored)
        self.per_node = ResourceAllocation(args.scored, use_requested=True)
        self.rows = AllocationRows.of(args.scored, use_requested=True)

    def score_applies(self, ctx: PodContext) -> bool:
        """upstream's PreScore Skip for a pod requesting none of the resources; a pod asking for
        devices through a class may still add to a scalar one (its plan's devices)."""
        return any(self.per_node.pod_vector(ctx)) or (self.scalar and bool(ctx.device_requests))

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        if not self.score_applies(ctx):
            return 0
        return balanced_resource_scorer(*self.per_node.vectors(ctx, info))

    def score_rows(self, table: NodeTable, ctx: PodContext, rows: Ints) -> Ints:
        if not self.score_applies(ctx):
            return np.zeros(len(rows), np.int64)
        extra = ctx.device_demand(rows) if ctx.device_demand is not None else None
        with_pod: list[tuple[Floats, Bools]] = []
        without: list[tuple[Floats, Bools]] = []
        for _, alloc, before, requested, present in self.rows.each(table, rows, ctx, extra):
            safe = np.where(present, alloc, 1).astype(np.float64)
            with_pod.append((np.minimum(requested.astype(np.float64) / safe, 1.0), present))
            without.append((np.minimum(before.astype(np.float64) / safe, 1.0), present))
        half = MAX_NODE_SCORE // 2
        scores: Ints = half + (half + _balance_rows(with_pod, len(rows)) - _balance_rows(without, len(rows))) // 2
        return scores
