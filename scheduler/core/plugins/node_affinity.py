"""NodeAffinity: `nodeSelector` and required node affinity filter; preferred terms score.

Upstream semantics: nodeSelector AND required affinity; terms of the required affinity are ORed,
expressions within a term ANDed; the score is the sum of matching preferred weights, normalised to
0..100 over the feasible nodes (helper.DefaultNormalizeScore).
"""

from __future__ import annotations

from scheduler.core.framework import PodContext
from scheduler.core.state import NodeInfo

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"


def filter_node(ctx: PodContext, info: NodeInfo) -> tuple[str, ...] | None:
    pod = ctx.pod
    node = info.node
    assert node is not None
    labels = node.meta.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return (REASON,)
    terms = pod.required_terms
    if terms is not None and not any(term.matches(node.meta.name, labels) for term in terms):
        return (REASON,)
    return None


def score(ctx: PodContext, info: NodeInfo) -> int:
    node = info.node
    assert node is not None
    return sum(p.weight for p in ctx.pod.preferred_terms if p.term.matches(node.meta.name, node.meta.labels))


def needs_filter(ctx: PodContext) -> bool:
    return bool(ctx.pod.node_selector) or ctx.pod.required_terms is not None


def needs_score(ctx: PodContext) -> bool:
    return bool(ctx.pod.preferred_terms)
