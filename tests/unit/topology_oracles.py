"""The fresh counts the plugins' per-node tallies are checked against, each taken afresh over every
pod and node: PodTopologySpread's `Tally` (tests/unit/test_pod_topology_spread*.py) against
`spread_count`, InterPodAffinity's `NodeTally` counts and scores (tests/unit/test_interpod_affinity*.py)
against `count` and `preference_scores`.

Why here and not in the plugins: the plugins keep their counts by node and never count afresh, so
these would be dead code in the product; they are test oracles, beside the tests that share them
(as upstream_cases.py, trace_rows.py). They read one node's or one pod's part with the plugins'
own small pure helpers (`_share`, `_count_placed`, `_existing_of`, `_score_existing`): what they
check is the bookkeeping kept across changes (generations, removal of a node's old part, the
pod's own part), not those parts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from scheduler.core.objects import Node, Pod
from scheduler.core.plugins.interpod_affinity import Counts as AffinityCounts
from scheduler.core.plugins.interpod_affinity import (Pair, Share, _count_placed, _existing_of, _score_existing,
                                                      _topology_scores)
from scheduler.core.plugins.pod_topology_spread import Counts, Tally, _share
from scheduler.core.pod_terms import SpreadConstraint
from scheduler.core.state import NodeInfo


def spread_count(pod: Pod, nodes: Iterable[tuple[Node, Iterable[str]]], pods: Mapping[str, Pod],
                 constraints: tuple[SpreadConstraint, ...] | None = None) -> Counts:
    """upstream's calPreFilterState over `nodes`, each with the uids of the pods on it, for the
    pod's `constraints` (its DoNotSchedule ones unless given); the pod itself, were it among
    them, is not counted."""
    constraints = pod.spread if constraints is None else constraints
    tally = Tally(constraints)
    less = None
    for node, uids in nodes:
        listed = tuple(uids)
        tally.put(NodeInfo(node.meta.name), _share(pod, constraints, node, listed, pods))
        if pod.uid in listed:
            less = _share(pod, constraints, node, (pod.uid,), pods)
    return tally.counts(less)


def preference_scores(pod: Pod, existing: Iterable[tuple[Pod, Mapping[str, str]]], hard_weight: int) -> Counter[Pair]:
    """upstream's PreScore topologyScore over `existing` (each pod with its node's labels): see
    interpod_affinity's docstring. The plugin keeps it by node (`NodeTally`), which must come to
    the same."""
    share: Share = {}
    for other, labels in existing:
        if other.uid != pod.uid:
            _score_existing(share, pod, other, labels, hard_weight)
    return _topology_scores(share)


def count(pod: Pod, placed: Iterable[tuple[str, str]], pods: Mapping[str, Pod],
          labels_of: Callable[[str], Mapping[str, str]]) -> AffinityCounts:
    """upstream's PreFilter counts (preFilterState) over `placed` (uid, name of its node): the pod's
    own terms' and the placed pods' anti-affinity terms matching it; the pod itself, were it
    among them, is not counted. The plugin keeps them by node (`NodeTally`), which must come to
    the same."""
    own: Share = {}
    existing: Share = {}
    for uid, node in placed:
        other = pods.get(uid)
        if other is not None and uid != pod.uid:
            _count_placed(own, pod, other, labels_of(node))
            _existing_of(existing, pod, other, labels_of(node))
    return AffinityCounts.of(own, existing)
