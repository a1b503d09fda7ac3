"""A configured profile turned into the ordered filter and weighted score plugins one cycle runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler.api.config import Profile
from scheduler.core.framework import MAX_NODE_SCORE, PodContext
from scheduler.core.plugins import fit, node_affinity, node_unschedulable, taints
from scheduler.core.plugins.devices import NAME as DEVICES, DevicePlanner
from scheduler.core.state import ClusterState, NodeInfo

FilterFn = Callable[[PodContext, NodeInfo], "tuple[str, ...] | None"]
ScoreFn = Callable[[PodContext, NodeInfo], int]


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
    def __init__(self, profile: Profile, state: ClusterState) -> None:
        self.profile = profile
        self.devices = DevicePlanner(state)
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
        available: dict[str, tuple[ScoreFn, str, Callable[[PodContext], bool]]] = {
            fit.NAME: (fit_score.score, "", _always),
            node_affinity.NAME: (node_affinity.score, "max", node_affinity.needs_score),
            taints.NAME: (taints.score, "reverse", _always),
            DEVICES: (self.devices.score, "", _has_devices),
        }
        self.scores: list[ScorePlugin] = []
        for name, weight in profile.score_weights.items():
            if name in available:
                fn, normalize, applies = available[name]
                self.scores.append(ScorePlugin(name, weight, fn, normalize, applies))

    def run_filters(self, ctx: PodContext, info: NodeInfo) -> tuple[str, tuple[str, ...]] | None:
        """(plugin, reasons) of the first plugin that rejects the node, or None if it passes."""
        for name, fn in self.filters:
            reasons = fn(ctx, info)
            if reasons:
                return name, reasons
        return None

    def score_nodes(self, ctx: PodContext, nodes: list[NodeInfo]) -> tuple[list[int], dict[str, list[int]]]:
        """Weighted totals per node, plus each plugin's normalised 0..100 scores (for --explain)."""
        totals = [0] * len(nodes)
        per_plugin: dict[str, list[int]] = {}
        for plugin in self.scores:
            if plugin.applies(ctx):
                raw = [plugin.score(ctx, info) for info in nodes]
            elif plugin.normalize == "reverse":
                raw = [0] * len(nodes)
            else:
                per_plugin[plugin.name] = [0] * len(nodes)
                continue
            if plugin.normalize:
                raw = normalize(raw, reverse=plugin.normalize == "reverse")
            per_plugin[plugin.name] = raw
            for i, value in enumerate(raw):
                totals[i] += value * plugin.weight
        return totals, per_plugin


def normalize(scores: list[int], reverse: bool) -> list[int]:
    """helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)."""
    highest = max(scores, default=0)
    if highest == 0:
        return [MAX_NODE_SCORE] * len(scores) if reverse else scores
    out = [MAX_NODE_SCORE * s // highest for s in scores]
    return [MAX_NODE_SCORE - s for s in out] if reverse else out
