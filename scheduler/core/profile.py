"""A configured profile turned into the ordered filter and weighted score plugins one cycle runs."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import numpy.typing as npt
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.api.config import Profile
from scheduler.core.framework import MAX_NODE_SCORE, DevicePlan, PodContext
from scheduler.core.plugins import fit, node_affinity, node_unschedulable, taints
from scheduler.core.plugins.devices import NAME as DEVICES, DevicePlanner
from scheduler.core.plugins.fragmentation import NAME as FRAGMENTATION, FragmentationScore
from scheduler.core.plugins.fragmentation_cache import FragmentationCache
from scheduler.core.objects import Pod
from scheduler.core.state import ClusterState, NodeInfo
from scheduler.core.vector import DeviceDemand, FitVector, NodeVectors, normalize_vector, simple_exclusive

FilterFn = Callable[[PodContext, NodeInfo], "tuple[str, ...] | None"]
ScoreFn = Callable[[PodContext, NodeInfo], int]
Rejection = tuple[str, tuple[str, ...]] | None
_CACHED_SHAPES = 256


class CacheEntry:
    """One node's Filter result (and device plan) and raw scores for one pod shape."""

    __slots__ = ("generation", "class_generation", "rejected", "plan", "raw", "fixed")

    def __init__(self, generation: int, class_generation: int, rejected: Rejection, plan: DevicePlan | None) -> None:
        self.generation = generation
        self.class_generation = class_generation
        self.rejected = rejected
        self.plan = plan
        self.raw: tuple[int, ...] | None = None  # raw score per active plugin
        self.fixed = 0  # weighted sum of the plugins that need no normalisation


@dataclass(frozen=True, slots=True)
class ScorePlugin:
    name: str
    weight: int
    score: ScoreFn
    normalize: str  # "", "max" (DefaultNormalizeScore) or "reverse" (reversed DefaultNormalizeScore)
    applies: Callable[[PodContext], bool]


def _always(ctx: PodContext) -> bool:
    return True


def _has_devices(ctx: PodContext) -> bool:
    return bool(ctx.device_requests)


class ProfileRuntime:
    """Runs one profile's plugins, caching per-node results by pod shape and node generation.

    A node's generation moves whenever anything placed on it, its object or its devices change,
    and the class registry has a generation of its own; a cached Filter result or raw score is
    reused only while both are unchanged, so caching never changes a decision.
    """

    def __init__(self, profile: Profile, state: ClusterState) -> None:
        self.profile = profile
        self.state = state
        self._cache: OrderedDict[tuple[object, ...], dict[str, CacheEntry]] = OrderedDict()
        frag = profile.fragmentation
        self.fragmentation = (FragmentationScore(state, frag.resource_name, frag.max_task_types)
                              if FRAGMENTATION in profile.score_weights else None)
        self.fragmentation_cache = FragmentationCache(self.fragmentation) if self.fragmentation is not None else None
        self.devices = DevicePlanner(state, self.fragmentation)
        # Upstream filter order: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
        # NodeResourcesFit; device classes come last because they are the most expensive.
        self.filters: list[tuple[str, FilterFn]] = [
            (node_unschedulable.NAME, node_unschedulable.filter_node),
            (taints.NAME, taints.filter_node),
            (node_affinity.NAME, node_affinity.filter_node),
            (fit.NAME, fit.filter_node),
            (DEVICES, self.devices.filter_node),
        ]
        fit_score = fit.FitScore(profile.fit)
        self.fit_vector = FitVector(profile.fit)
        available: dict[str, tuple[ScoreFn, str, Callable[[PodContext], bool]]] = {
            fit.NAME: (fit_score.score, "", _always),
            node_affinity.NAME: (node_affinity.score, "max", node_affinity.needs_score),
            taints.NAME: (taints.score, "reverse", _always),
            DEVICES: (self.devices.score, "", _has_devices),
        }
        if self.fragmentation is not None:
            available[FRAGMENTATION] = (self.fragmentation.score, "", _always)
        self.scores: list[ScorePlugin] = []
        for name, weight in profile.score_weights.items():
            if name in available:
                fn, normalize, applies = available[name]
                self.scores.append(ScorePlugin(name, weight, fn, normalize, applies))

    @property
    def generation(self) -> int:
        """Changes whenever cached per-node results may be stale for reasons beyond the node itself."""
        return self.devices.generation

    def observe(self, pod: Pod) -> None:
        if self.fragmentation is not None:
            self.fragmentation.observe(pod)

    def run_filters(self, ctx: PodContext, info: NodeInfo) -> Rejection:
        """(plugin, reasons) of the first plugin that rejects the node, or None if it passes."""
        filters = ctx.filters
        if filters is None:
            filters = ctx.filters = [(name, fn) for name, fn in self.filters if _filter_applies(name, ctx)]
        for name, fn in filters:
            reasons = fn(ctx, info)
            if reasons:
                return name, reasons
        return None

    def vector_scorable(self, ctx: PodContext) -> bool:
        """Scores that need nothing per node beyond the vector columns and device plans."""
        return not ctx.pod.preferred_terms

    def score_vector(self, vectors: NodeVectors, ctx: PodContext, feasible_rows: list[int]) -> list[int]:
        """score_nodes' totals for a vector_scorable pod, computed over all feasible nodes at once."""
        order = self.state.node_order
        rows = np.array(feasible_rows, np.int64)
        totals = np.zeros(len(rows), np.int64)
        extra: dict[str, DeviceDemand] | None = None
        device_scores: npt.NDArray[np.int64] | None = None
        simple = simple_exclusive(vectors, ctx) if ctx.device_requests else None
        if simple is not None:  # see vector.simple_exclusive: no per-node plans were made
            name, resource, count = simple
            extra = {resource: DeviceDemand(np.full(len(rows), count, np.int64), np.ones(len(rows), np.bool_))}
            total = vectors.class_total[name][rows]
            busy_after = total - vectors.class_free[name][rows] + count
            device_scores = busy_after * MAX_NODE_SCORE // np.where(total > 0, total, 1)
        elif ctx.device_requests:
            plans = [ctx.plans[order[row]] for row in feasible_rows]
            names = {name for plan in plans for name in plan.resources}
            extra = {name: DeviceDemand(np.array([plan.newly_busy.get(name, 0) for plan in plans], np.int64),
                                        np.array([name in plan.resources for plan in plans], np.bool_))
                     for name in names}
            device_scores = np.array([plan.score for plan in plans], np.int64)
        for plugin in self.scores:
            if plugin.name == fit.NAME:
                totals += self.fit_vector.score(vectors, rows, ctx, extra) * plugin.weight
            elif plugin.name == taints.NAME:
                raw = np.zeros(len(rows), np.int64)
                for i in np.flatnonzero(vectors.soft_taints[rows]).tolist():
                    raw[i] = taints.score(ctx, self.state.nodes[order[feasible_rows[i]]])
                totals += normalize_vector(raw, reverse=True) * plugin.weight
            elif plugin.name == DEVICES and device_scores is not None:
                totals += device_scores * plugin.weight
            elif plugin.name == FRAGMENTATION and self.fragmentation_cache is not None:
                totals += self.fragmentation_cache.score_rows(vectors, ctx, rows, self.generation,
                                                        self._plan_for(ctx)) * plugin.weight
            # NodeAffinity adds 0 without preferred terms
        return [int(total) for total in totals.tolist()]

    def _plan_for(self, ctx: PodContext) -> Callable[[NodeInfo], DevicePlan | None]:
        def plan_for(info: NodeInfo) -> DevicePlan | None:
            plan = self.devices.cached_plan(ctx.device_requests, info)
            return None if isinstance(plan, str) else plan
        return plan_for

    def node_cache(self, ctx: PodContext) -> dict[str, CacheEntry]:
        cache = self._cache.get(ctx.shape)
        if cache is None:
            cache = self._cache[ctx.shape] = {}
            if len(self._cache) > _CACHED_SHAPES:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(ctx.shape)
        return cache

    def filter_cached(self, ctx: PodContext, info: NodeInfo, cache: dict[str, CacheEntry]) -> Rejection:
        entry = cache.get(info.name)
        class_generation = self.generation
        if entry is None or entry.generation != info.generation or entry.class_generation != class_generation:
            rejected = self.run_filters(ctx, info)
            cache[info.name] = CacheEntry(info.generation, class_generation, rejected, ctx.plans.get(info.name))
            return rejected
        if entry.plan is not None:
            ctx.plans[info.name] = entry.plan
        return entry.rejected

    def score_nodes(self, ctx: PodContext, nodes: list[NodeInfo],
                    cache: dict[str, CacheEntry]) -> tuple[list[int], dict[str, list[int]]]:
        """Weighted totals per node, plus each plugin's normalised 0..100 scores (for --explain).

        Raw scores are cached in the node's filter entry (filter_cached has just validated it);
        only plugins that normalise over the feasible set do per-cycle work beyond a lookup.
        """
        active = [p for p in self.scores if p.applies(ctx) or p.normalize == "reverse"]
        applies = [p.applies(ctx) for p in active]
        fixed = [(i, p.weight) for i, p in enumerate(active) if not p.normalize]
        totals: list[int] = []
        raws: list[tuple[int, ...]] = []
        generation = self.generation
        for info in nodes:
            entry = cache.get(info.name)
            if entry is None or entry.generation != info.generation or entry.class_generation != generation:
                # filtered by the vector path: the node passed, and its plan (if any) is in ctx
                entry = cache[info.name] = CacheEntry(info.generation, generation, None, ctx.plans.get(info.name))
            raw = entry.raw
            if raw is None:
                raw = entry.raw = tuple([p.score(ctx, info) if a else 0 for p, a in zip(active, applies)])
                total = 0
                for i, weight in fixed:
                    total += raw[i] * weight
                entry.fixed = total
            totals.append(entry.fixed)
            raws.append(raw)
        per_plugin: dict[str, list[int]] = {p.name: [0] * len(nodes) for p in self.scores}
        for i, plugin in enumerate(active):
            column = [raw[i] for raw in raws]
            if plugin.normalize:
                column = normalize(column, reverse=plugin.normalize == "reverse")
                weight = plugin.weight
                for j, value in enumerate(column):
                    totals[j] += value * weight
            per_plugin[plugin.name] = column
        return totals, per_plugin


def _filter_applies(name: str, ctx: PodContext) -> bool:
    """Plugins that can only pass for this pod are left out of its per-node loop."""
    if name == node_affinity.NAME:
        return node_affinity.needs_filter(ctx)
    if name == DEVICES:
        return bool(ctx.device_requests)
    return True


def normalize(scores: list[int], reverse: bool) -> list[int]:
    """helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)."""
    highest = max(scores, default=0)
    if highest == 0:
        return [MAX_NODE_SCORE] * len(scores) if reverse else scores
    out = [MAX_NODE_SCORE * s // highest for s in scores]
    return [MAX_NODE_SCORE - s for s in out] if reverse else out
