"""NodeAffinity: `nodeSelector` and required node affinity filter; preferred terms score.

Upstream semantics: nodeSelector AND required affinity; terms of the required affinity are ORed,
expressions within a term ANDed; the score is the sum of matching preferred weights, normalised to
0..100 over the feasible nodes (helper.DefaultNormalizeScore). Per node only: label matching has
no column form worth keeping, and the plugin only runs for pods that carry selectors.

PreFilter, as upstream's: when every required term names its nodes (`matchFields` `metadata.name
In`), only those nodes are filtered (`node_names`, upstream's PreFilterResult) and the others read
"node(s) didn't satisfy plugin(s) [NodeAffinity]"; when the terms leave no name at all the pod is
refused with "pod affinity terms conflict".

PreScore, as upstream's: the apiserver accepts preferred terms whose values the scheduler cannot
parse (a Gt value that is no integer, an In value that is no label value), and upstream's PreScore
(NewPreferredSchedulingTerms) fails the cycle with their parse errors — an error, not a rejection.
With the PreScore disabled (`plugins.preScore`) and the Score on, the Score parses the terms itself
(upstream's fallback) and fails with the same errors. A required term with such a value only
matches nothing (upstream's LazyErrorNodeSelector).

Added affinity (NodeAffinityArgs.addedAffinity, `node_affinity_args`), as upstream's: its required
terms filter every pod of the profile first, with their own reason (REASON_ENFORCED); its
preferred terms add to every pod's score. PreFilter's node-name shortcut and conflict read the
pod's own terms only, and the queueing hints are the pod's (a node that changes to match the
added terms is a node update like any other).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import (FilterPlugin, Normalize, PreFilterPlugin, PreScorePlugin,
                                                QueueingHint, Reasons, ScorePlugin)
from scheduler.core.objects import Pod, aggregate_error, selects
from scheduler.core.plugins.node_affinity_args import NodeAffinityArgs
from scheduler.core.state import EventKind, NodeInfo

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"  # upstream's errReasonEnforced
CONFLICT = "pod affinity terms conflict"  # upstream's errReasonConflict (sic: node affinity terms)


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    name = NAME
    normalize = Normalize.MAX

    def __init__(self, handle: Handle, args: NodeAffinityArgs) -> None:
        self.handle = handle
        self.added_required = args.required_terms
        self.added_preferred = args.preferred_terms

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        return dict.fromkeys((EventKind.NODE_ADDED, EventKind.NODE_UPDATED), self.handle.node_hint(self.name))

    def pre_filter(self, ctx: PodContext) -> str | None:
        return CONFLICT if self.node_names(ctx) == frozenset() else None

    def node_names(self, ctx: PodContext) -> frozenset[str] | None:
        return named_nodes(ctx.pod)

    def filter_applies(self, ctx: PodContext) -> bool:
        return bool(ctx.pod.node_selector) or ctx.pod.required_terms is not None or self.added_required is not None

    def pod_form(self, ctx: PodContext) -> Hashable:
        """Its nodeSelector and required node affinity."""
        return (tuple(sorted(ctx.pod.node_selector.items())), ctx.pod.required_terms)

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        node = info.node
        assert node is not None
        pod = ctx.pod
        if self.added_required is not None and not selects((), self.added_required, node.meta.name, node.meta.labels):
            return (REASON_ENFORCED,)
        return None if selects(pod.node_selector.items(), pod.required_terms, node.meta.name, node.meta.labels) \
            else (REASON,)

    def score_applies(self, ctx: PodContext) -> bool:
        return bool(ctx.pod.preferred_terms) or bool(self.added_preferred)

    def pre_score(self, ctx: PodContext) -> str | None:
        """NewPreferredSchedulingTerms' errors: every term's, under its index (`[0].matchExpressions
        [0].values[0]: ...`), flattened into one aggregate."""
        errors = [error for i, preferred in enumerate(ctx.pod.preferred_terms)
                  for error in preferred.term.parse_errors(f"[{i}]")]
        return aggregate_error(errors) if errors else None

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        node = info.node
        assert node is not None
        return sum(p.weight for p in (*self.added_preferred, *ctx.pod.preferred_terms)
                   if p.term.matches(node.meta.name, node.meta.labels))


def named_nodes(pod: Pod) -> frozenset[str] | None:
    """The nodes the pod's required terms name by `metadata.name`, when every term names some
    (terms are ORed: one term without names leaves every node to the filters), else None."""
    terms = pod.required_terms
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        named = term.named_nodes()
        if named is None:
            return None
        names |= named
    return frozenset(names)
