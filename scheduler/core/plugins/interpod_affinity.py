"""InterPodAffinity: required pod affinity and anti-affinity, filtered as kube-scheduler does.

The filter half of upstream's plugin (kube-scheduler v1.36
pkg/scheduler/framework/plugins/interpodaffinity/filtering.go): before the nodes are filtered,
the pods placed so far (bound, assumed, and the members of a gang placed earlier in the same
transaction: all are in `ClusterState.placements`) are counted per topology pair (key, value of
their node's label):
- `affinity`: pods matching ALL of the incoming pod's required affinity terms, per term's key;
- `anti`: pods matching each of its required anti-affinity terms;
- `existing`: pods whose own required anti-affinity terms match the incoming pod (symmetry).
A node then fails, in upstream's order:
- "node(s) didn't match pod affinity rules" when it lacks a term's topology key, or some term's
  pair has no matching pod — unless no placed pod matches at all and the pod matches its own
  terms (the first of a series with affinity to itself); UnschedulableAndUnresolvable;
- "node(s) didn't match pod anti-affinity rules" when a term's pair on the node has a matching
  pod; Unschedulable upstream;
- "node(s) didn't satisfy existing pods anti-affinity rules" when any of the node's label pairs
  is counted in `existing`; Unschedulable upstream.
A node with nominated preemptors of equal or higher priority holding room on it
(`ClusterState.nominated_on`; the cycle lifts lower ones) is judged twice, as upstream's
RunFilterPluginsWithNominatedPods: first with them added at that node's pairs, for that node alone
(addGENominatedPods -> AddPod on the node's copy of the counts, all three counts), then with the
placed pods only; the first failure is the node's. So a nominated pod repels (anti-affinity, and
its own anti-affinity terms) only on its own node, never satisfies affinity, and is no match
elsewhere for the first of a series. A pod without terms that no placed pod's anti-affinity
matches is not filtered at all (upstream's PreFilter Skip, whose AddPod is then not run either).
For a pod without affinity terms the filter runs in its batch form (`filter_rows`): the nodes whose
label pairs are counted, found over the node table's label columns, nominations' nodes per node.
Preemption as upstream: a node failing the affinity check is unresolvable (`unresolvable_rows`);
one failing anti-affinity may be resolved by evicting pods there (the dry run lifts them from
`ClusterState.placements`, which changes `touches`, so the counts are taken again without them).
Terms are namespaced as upstream:
the term's `namespaces`, the pod's own when it lists none, every namespace for a `{}`
namespaceSelector; a non-empty namespaceSelector on the incoming pod is refused by
TesseraUnhonouredTerms, on an existing pod's anti-affinity term it is taken to match every
namespace (fail safe).

The score half (scoring.go): over the pods placed (bound and assumed; not the nominated, as
upstream scores its snapshot), each at its node's pair of the term's topology key, a topology
score is summed (`_score_existing`, each pod's part):
- +weight for each of the incoming pod's preferred affinity terms an existing pod matches,
  -weight for each of its preferred anti-affinity terms;
- symmetrically, +hardPodAffinityWeight for each of an existing pod's required affinity terms
  the incoming pod matches (none when the weight is 0), +weight / -weight for each of its
  preferred affinity / anti-affinity terms it matches.
A pod without preferred terms of its own reads only the nodes' pods with terms
(`ClusterState.affine_on`, upstream's HavePodsWithAffinityList), and with
ignorePreferredTermsOfExistingPods is not scored at all. The counts of the pod's own terms, the
placed pods' anti-affinity terms matching it (over the nodes holding such pods,
`ClusterState.anti_affine_on`, upstream's HavePodsWithRequiredAntiAffinityList) and the scores
are kept per node (`NodeTally`) for the pods of the same terms (of the same namespace and labels),
so a cycle takes again only the nodes changed since.
A node scores the sum of its label pairs' scores (`node_score`); NormalizeScore maps the feasible
nodes' scores min..max onto 0..100 (`Normalize.MIN_MAX`). A pod for which no term matched is not
scored (`score_applies`, upstream's Skip). The score counts no term with a non-empty
namespaceSelector, on either side: upstream reads the Namespaces' labels, which Tessera does not
watch, and a guessed namespace set would steer pods by a preference meant for other namespaces;
the filter's match-every-namespace rule is for prohibitions only, and the incoming pod is told of
its own such terms (`pod_terms`). Its PreScore is folded into the score, as the PreFilter into the
filter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from scheduler.api.config_reader import ArgsReader, Checks, invalid
from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import (Bools, FilterPlugin, Normalize, QueueingHint, Reasons,
                                                RowVerdict, ScorePlugin, always)
from scheduler.core.framework.node_parts import NodeParts, RecentTallies
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.objects import Pod
from scheduler.core.framework.label_columns import level_column
from scheduler.core.pod_terms import PodTerm, WeightedPodTerm
from scheduler.core.state import ClusterEvent, ClusterState, EventKind, NodeInfo

NAME = "InterPodAffinity"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
# tallies kept (`NodeTally`): a workload's filter and score, a few workloads interleaved (other
# apps' replicas) without taking every node again between them
TALLIES = 32

Pair = tuple[str, str]
FIELDS = ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods")


class InterPodAffinityArgs(BaseModel):
    """upstream's InterPodAffinityArgs, with v1's defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False


def parse_args(args: ArgsReader) -> InterPodAffinityArgs:
    """ValidateInterPodAffinityArgs: hardPodAffinityWeight within 0..100."""
    found = Checks()
    weight = found.read(lambda: args.get_int("hardPodAffinityWeight", 1, "int32"), None)
    ignore = found.read(lambda: args.get_bool("ignorePreferredTermsOfExistingPods", False), False)
    if weight is not None and not 0 <= weight <= 100:
        found.check(lambda: invalid(args.at("hardPodAffinityWeight"), weight, "not in valid range [0, 100]"))
    found.raise_errors()
    assert weight is not None
    return InterPodAffinityArgs(hard_pod_affinity_weight=weight, ignore_preferred_terms_of_existing_pods=ignore)


def _matches_all(terms: tuple[PodTerm, ...], pod: Pod) -> bool:
    return bool(terms) and all(t.matches(pod.meta.namespace, pod.meta.labels) for t in terms)


def _left_any(terms: tuple[PodTerm, ...], old: Pod, new: Pod) -> bool:
    """Whether the pod, relabelled from `old` to `new`, no longer matches one of the terms it
    matched: that term's domains around it may open (any one term repels)."""
    return any(t.matches(old.meta.namespace, old.meta.labels) and not t.matches(new.meta.namespace, new.meta.labels)
               for t in terms)


# a pair's two numbers, kept by node (`NodeTally`): the filter's counts of placed pods matching
# [all the affinity terms, an anti-affinity term]; the score's [topology score, term matches]
# (a pair some term matched is in upstream's topologyScore, and keeps the plugin from Skip,
# even where the weights sum to 0); the symmetry check's [placed pods' anti-affinity terms
# matching the pod, nothing]
Share = dict[Pair, list[int]]
AFFINE_AT, ANTI_AT = 0, 1
SCORE_AT, MATCHES_AT = 0, 1
EXISTING_AT = 0


def _bump(into: Share, pair: Pair, at: int, by: int) -> None:
    into.setdefault(pair, [0, 0])[at] += by


class NodeTally(NodeParts[Share]):
    """A pod's `Share` kept by node (`NodeParts`: each node's part, its pods', the pod's own
    included), so that the pod's counts and scores take again only the nodes changed since (5,000
    nodes of 20 pods: about 200 ms the counts, 500 ms the scores). It serves every pod of the same
    terms (`InterPodAffinity._kept`'s key): a workload's replicas."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        super().__init__()
        self.total: Share = {}

    def _add(self, part: Share, sign: int) -> None:
        total = self.total
        for pair, (first, second) in part.items():
            entry = total.setdefault(pair, [0, 0])
            entry[0] += sign * first
            entry[1] += sign * second
            if not any(entry):  # nothing counted there any more: no pair
                del total[pair]

    def less(self, part: Share | None) -> Share:
        """The total less `part` (the pod's own where it is placed), pairs left at nothing dropped."""
        if not part:
            return self.total
        found: Share = {}
        for pair, (first, second) in self.total.items():
            mine = part.get(pair, (0, 0))
            if first != mine[0] or second != mine[1]:
                found[pair] = [first - mine[0], second - mine[1]]
        return found


class Counts:
    """upstream's preFilterState: affinityCounts, antiAffinityCounts, existingAntiAffinityCounts."""

    __slots__ = ("_existing_keys", "affinity", "anti", "existing")

    def __init__(self) -> None:
        self.affinity: Counter[Pair] = Counter()
        self.anti: Counter[Pair] = Counter()
        self.existing: Counter[Pair] = Counter()
        self._existing_keys: tuple[str, ...] | None = None

    def existing_keys(self) -> tuple[str, ...]:
        """The topology keys of the `existing` pairs, taken once the counts are complete: the
        only labels of a node that can meet one (each node's every label looked up in `existing`
        is most of a cycle's filtering when many pods are anti-affine)."""
        if self._existing_keys is None:
            self._existing_keys = tuple({key: None for key, _ in self.existing})
        return self._existing_keys

    def plus(self, added: Counts) -> Counts:
        """These counts with `added`'s: a copy, as upstream clones the state for a node's
        nominated pods (the counts are positive, so Counter's + drops none)."""
        found = Counts()
        found.affinity, found.anti, found.existing = \
            self.affinity + added.affinity, self.anti + added.anti, self.existing + added.existing
        return found

    @classmethod
    def of(cls, placed: Share, existing: Share) -> Counts:
        """The counts of a filter's `Share` (`_count_placed`'s: affinity, anti-affinity) and of a
        symmetry check's (`_existing_of`'s: existing)."""
        found = cls()
        found.affinity.update({pair: entry[AFFINE_AT] for pair, entry in placed.items() if entry[AFFINE_AT]})
        found.anti.update({pair: entry[ANTI_AT] for pair, entry in placed.items() if entry[ANTI_AT]})
        found.existing.update({pair: entry[EXISTING_AT] for pair, entry in existing.items()})
        return found


def _matched(terms: tuple[PodTerm, ...], target: Pod, labels: Mapping[str, str]) -> Iterator[Pair]:
    """The topology pair, on a node with `labels`, of each term matching `target` (a node
    without the term's key is in no pair of it)."""
    for term in terms:
        value = labels.get(term.topology_key)
        if value is not None and term.matches(target.meta.namespace, target.meta.labels):
            yield term.topology_key, value


def _count_placed(into: Share, pod: Pod, other: Pod, labels: Mapping[str, str]) -> None:
    """upstream's updateWithPod for the incoming pod's own terms: `other`, on a node with
    `labels`, at each affinity term's pair when it matches them all, at each anti-affinity
    term's pair it matches."""
    if _matches_all(pod.affinity, other):
        for term in pod.affinity:
            if term.topology_key in labels:
                _bump(into, (term.topology_key, labels[term.topology_key]), AFFINE_AT, 1)
    for pair in _matched(pod.anti_affinity, other, labels):
        _bump(into, pair, ANTI_AT, 1)


def _existing_of(into: Share, pod: Pod, other: Pod, labels: Mapping[str, str]) -> None:
    """`other`'s anti-affinity terms matching `pod`, on a node with `labels`, each at its pair."""
    for pair in _matched(other.anti_affinity, pod, labels):
        _bump(into, pair, EXISTING_AT, 1)


def repelled_by(state: ClusterState, pod: Pod, node: str) -> list[tuple[Pod, str]]:
    """The placed pods (with their nodes) whose required anti-affinity terms match `pod` in a
    topology domain of `node`: who makes the filter say `EXISTING` there, by the rule that counts
    them (`_existing_of` at each such pod's node, then the node's label pairs), in pod order.
    `kubectl tessera explain` names them, where the reason (upstream's) does not; the placed pods
    only (`ClusterState.anti_affine_on`), not the nominated ones the filter adds on their own node."""
    info = state.nodes.get(node)
    if info is None or info.node is None:
        return []
    pairs = set(info.labels.items())
    found = []
    for other_node, uids in state.anti_affine_on.items():
        other_info = state.nodes.get(other_node)
        labels = other_info.labels if other_info is not None and other_info.node is not None else {}
        for uid in uids:
            other = state.pods.get(uid)
            if other is not None and uid != pod.uid and not pairs.isdisjoint(_matched(other.anti_affinity, pod, labels)):
                found.append((other, other_node))
    return sorted(found, key=lambda pair: pair[0].key)


def verdict(pod: Pod, counts: Counts, labels: Mapping[str, str]) -> Reasons | None:
    """upstream's Filter: satisfyPodAffinity, satisfyPodAntiAffinity, satisfyExistingPodsAntiAffinity."""
    # `.get`, not the Counter's [] (a call of its __missing__ per pair counted nowhere: most
    # nodes, for every node a cycle filters)
    if pod.affinity:
        exist = True
        for term in pod.affinity:
            value = labels.get(term.topology_key)
            if value is None:
                return (AFFINITY,)
            if counts.affinity.get((term.topology_key, value), 0) <= 0:
                exist = False
        if not exist and not (not counts.affinity and _matches_all(pod.affinity, pod)):
            return (AFFINITY,)
    if counts.anti:
        for term in pod.anti_affinity:
            value = labels.get(term.topology_key)
            if value is not None and counts.anti.get((term.topology_key, value), 0) > 0:
                return (ANTI_AFFINITY,)
    if counts.existing:
        for key in counts.existing_keys():
            value = labels.get(key)
            if value is not None and counts.existing.get((key, value), 0) > 0:
                return (EXISTING,)
    return None


def _rows_counted(table: NodeTable, counted: Counter[Pair]) -> Bools:
    """The table's rows whose node has a label pair counted above 0: `verdict`'s look-up of
    each node's pairs, one numpy pass per topology key over its column of label values."""
    values: dict[str, list[str]] = {}
    for (key, value), count in counted.items():
        if count > 0:
            values.setdefault(key, []).append(value)
    found = np.zeros(table.size, np.bool_)
    for key, of_key in values.items():
        column = level_column(table, (key,))
        codes = [code for value in of_key if (code := column.ids.get((value,))) is not None]
        if codes:
            found |= np.isin(column.codes[: table.size], codes)
    return found


def _add(into: Share, terms: Iterable[WeightedPodTerm], target: Pod, labels: Mapping[str, str], sign: int) -> None:
    """upstream's processTerms: each term matching `target` adds sign * weight at its pair on a
    node with `labels`; a term with a namespaceSelector Tessera cannot read counts nothing."""
    for weighted in terms:
        term = weighted.term
        value = labels.get(term.topology_key)
        if value is not None and not term.unknown_namespaces \
                and term.matches(target.meta.namespace, target.meta.labels):
            pair = (term.topology_key, value)
            _bump(into, pair, SCORE_AT, sign * weighted.weight)
            _bump(into, pair, MATCHES_AT, 1)


def _score_existing(into: Share, pod: Pod, other: Pod, labels: Mapping[str, str], hard_weight: int) -> None:
    """upstream's processExistingPod: `other`, on a node with `labels`, in `pod`'s topology scores."""
    if not labels:
        return
    _add(into, pod.preferred_affinity, other, labels, 1)
    _add(into, pod.preferred_anti_affinity, other, labels, -1)
    if hard_weight > 0:
        _add(into, (WeightedPodTerm(hard_weight, term) for term in other.affinity), pod, labels, 1)
    _add(into, other.preferred_affinity, pod, labels, 1)
    _add(into, other.preferred_anti_affinity, pod, labels, -1)


def _topology_scores(share: Share) -> Counter[Pair]:
    """The scores of a score's `Share`: every pair some term matched."""
    return Counter({pair: entry[SCORE_AT] for pair, entry in share.items() if entry[MATCHES_AT]})


def node_score(scores: Mapping[Pair, int], labels: Mapping[str, str]) -> int:
    """upstream's Score: the sum of the scores of the node's label pairs."""
    return sum(scores.get(pair, 0) for pair in labels.items())


class InterPodAffinity(FilterPlugin, ScorePlugin):
    name = NAME
    also_extends: ClassVar[frozenset[str]] = frozenset({"preFilter", "preScore"})  # folded into filter and score
    preemption_helps = True  # upstream: anti-affinity is Unschedulable
    unresolvable_verdicts = frozenset({(AFFINITY,)})  # in either pass of `filter`: the first failing one's
    normalize = Normalize.MIN_MAX

    def __init__(self, handle: Handle, args: InterPodAffinityArgs) -> None:
        self.handle = handle
        self.args = args
        self._cached: tuple[Pod, int, Counts] | None = None
        self._anti_terms: tuple[int, frozenset[PodTerm]] | None = None
        self._scored: tuple[Pod, int, Counter[Pair]] | None = None
        self._tallies: RecentTallies[NodeTally] = RecentTallies(TALLIES)

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        # upstream's EventsToRegister: assigned Pod Add/UpdatePodLabel/Delete, Node Add/UpdateNodeLabel.
        # A removal's event does not name the pod gone, so it always may help
        hints: dict[EventKind, QueueingHint] = dict.fromkeys(
            (EventKind.NODE_ADDED, EventKind.NODE_UPDATED, EventKind.ASSIGNED_POD_REMOVED, EventKind.POD_ADDED),
            always)
        hints[EventKind.ASSIGNED_POD_ADDED] = self._after_pod_assigned
        hints[EventKind.ASSIGNED_POD_RELABELLED] = self._after_pod_relabelled
        return hints

    def _after_pod_assigned(self, uid: str, event: ClusterEvent) -> bool:
        """upstream's isSchedulableAfterPodChange for an added assigned pod: it helps only when it
        matches all of the waiting pod's affinity terms (a pod placed can only add to the
        anti-affinity counts)."""
        pod = self.handle.state.pods.get(uid)
        if pod is None or event.pod is None:
            return True
        return _matches_all(pod.affinity, event.pod)

    def _after_pod_relabelled(self, uid: str, event: ClusterEvent) -> bool:
        """upstream's isSchedulableAfterPodChange for an updated assigned pod: it helps when it
        matches all of the waiting pod's affinity terms and did not before, or no longer matches
        an anti-affinity term it matched (its own terms, read for the symmetric check, cannot
        change: a pod's affinity is immutable). Asked per term: v1.36 asks whether it matched
        all of them and no longer does, which misses a pod that matched one and now none
        (kubernetes#139161 moves upstream to any-term matching for anti-affinity); a pod still
        repelled by one term may also have opened another term's wider domain. Every relabel
        upstream queues for is queued here (docs/semantics.md)."""
        pod = self.handle.state.pods.get(uid)
        new, old = event.pod, event.old
        if pod is None or new is None or old is None:
            return True
        return (_matches_all(pod.affinity, new) and not _matches_all(pod.affinity, old)) \
            or _left_any(pod.anti_affinity, old, new)

    def filter_applies(self, ctx: PodContext) -> bool:
        pod = ctx.pod
        if pod.affinity or pod.anti_affinity:
            return True
        # upstream's PreFilter Skip: a pod without terms that no placed pod's anti-affinity
        # matches is not filtered, nor are the nodes' nominated pods added for it (AddPod skips
        # a skipped plugin), though one of them be anti-affine to it
        return bool(self.counts(ctx).existing)

    def counts(self, ctx: PodContext) -> Counts:
        """The counts of the placed pods for the pod, kept while neither it nor any node changes
        (`touches`): the same pod is prepared anew by each preemption dry run and queueing hint;
        its own terms' counts from the tally of its terms, the placed pods' anti-affinity terms
        matching it from the tally of its namespace and labels (over the nodes holding such pods,
        `ClusterState.anti_affine_on`), whose nodes changed since are taken again."""
        state = self.handle.state
        cached = self._cached
        if cached is not None and cached[0] is ctx.pod and cached[1] == state.touches:
            return cached[2]
        pod = ctx.pod
        placed: Share = {}
        existing: Share = {}
        if pod.affinity or pod.anti_affinity:
            placed = self._kept(pod, ("filter", pod.affinity, pod.anti_affinity),
                                lambda into, other, labels: _count_placed(into, pod, other, labels))
        if state.anti_affine_on:
            existing = self._kept(pod, ("existing", pod.meta.namespace, tuple(sorted(pod.meta.labels.items()))),
                                  lambda into, other, labels: _existing_of(into, pod, other, labels),
                                  state.anti_affine_on)
        found = Counts.of(placed, existing)
        self._cached = (ctx.pod, state.touches, found)
        return found

    def pod_form(self, ctx: PodContext) -> Hashable:
        """Its namespace and terms, whether its labels match all its affinity terms (`verdict`'s
        first-pod rule) and which of the placed and nominated pods' anti-affinity terms match it
        (`_existing_of`, `filter_applies`): all the filter reads of its labels, so an indexed
        Job's members (labels differing per index) share a form (its own hold and placement set
        aside: the runtime keys a pod having either by itself, `ProfileRuntime.applicable_form`)."""
        pod, state = ctx.pod, self.handle.state
        held = (t for uid in state.holds if uid != pod.uid and (other := state.pods.get(uid)) is not None
                for t in other.anti_affinity)
        namespace, labels = pod.meta.namespace, pod.meta.labels
        return (namespace, pod.affinity, pod.anti_affinity, _matches_all(pod.affinity, pod),
                frozenset(t for t in (*self._placed_anti_terms(), *held) if t.matches(namespace, labels)))

    def _placed_anti_terms(self) -> frozenset[PodTerm]:
        """The distinct required anti-affinity terms of the placed pods (`anti_affine_on`), kept
        while no node changes (`touches`: a placement, removal or term change touches its node)."""
        state = self.handle.state
        kept = self._anti_terms
        if kept is None or kept[0] != state.touches:
            kept = self._anti_terms = (state.touches, frozenset(
                t for uids in state.anti_affine_on.values() for uid in uids
                if (other := state.pods.get(uid)) is not None for t in other.anti_affinity))
        return kept[1]

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        return self._filter(ctx.pod, self.counts(ctx), info)

    def node_filter(self, ctx: PodContext) -> Callable[[NodeInfo], Reasons | None]:
        """`filter` with the pod's counts looked up once for the cycle's nodes, not per node (the
        cache check alone was a tenth of an anti-affine pod's filtering)."""
        pod, counts = ctx.pod, self.counts(ctx)
        return lambda info: self._filter(pod, counts, info)

    def filter_rows(self, table: NodeTable, ctx: PodContext, rows: Bools) -> RowVerdict:
        """`filter` over the table, for a pod without affinity terms (theirs weigh every term and
        the pod's own match at once: judged per node, `exact` False): a row fails where one of its
        node's label pairs is counted, the pod's anti-affinity terms' first, then the placed pods'
        (`verdict`'s order). The rows of nodes holding others' nominations, whose counts are
        their own, are judged by `_filter`. Per node, this was most of an anti-affine pod's cycle."""
        pod = ctx.pod
        if pod.affinity:
            return RowVerdict(None, exact=False)
        state, counts = self.handle.state, self.counts(ctx)
        anti = _rows_counted(table, counts.anti) & rows if counts.anti else np.zeros(table.size, np.bool_)
        existing = _rows_counted(table, counts.existing) & rows & ~anti if counts.existing else \
            np.zeros(table.size, np.bool_)
        judged: dict[int, Reasons] = {}
        for uid, hold in state.holds.items():
            row = state.node_position(hold.node)
            if uid != pod.uid and row is not None and row < table.size and rows[row] and row not in judged:
                anti[row] = existing[row] = False
                if (found := self._filter(pod, counts, table.info(row))) is not None:
                    judged[row] = found
        fails = anti | existing
        if judged:
            fails[list(judged)] = True
        return RowVerdict(fails, lambda: ((ANTI_AFFINITY, anti), (EXISTING, existing)), judged.__getitem__)

    def _filter(self, pod: Pod, counts: Counts, info: NodeInfo) -> Reasons | None:
        """The node's verdict as RunFilterPluginsWithNominatedPods: with the preemptors nominated
        to it (the pod's own aside) counted at its pairs, then, should that pass, without them."""
        assert info.node is not None
        state = self.handle.state
        placed: Share = {}
        existing: Share = {}
        for uid in state.nominated_on(info, pod.uid):
            if (other := state.pods.get(uid)) is not None:
                _count_placed(placed, pod, other, info.labels)
                _existing_of(existing, pod, other, info.labels)
        if placed or existing:
            found = verdict(pod, counts.plus(Counts.of(placed, existing)), info.labels)
            if found is not None:
                return found
        return verdict(pod, counts, info.labels)

    def _labels(self, node_name: str) -> Mapping[str, str]:
        info = self.handle.state.nodes.get(node_name)
        return info.labels if info is not None else {}

    def score_applies(self, ctx: PodContext) -> bool:
        """upstream's PreScore Skip: no term matched a pod anywhere (every node would score 0)."""
        return bool(self.scores(ctx))

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        return node_score(self.scores(ctx), info.labels)

    def scores(self, ctx: PodContext) -> Counter[Pair]:
        """The pod's topology scores, kept while neither it nor any node changes (`touches`);
        from the tally of its namespace, labels and preferred terms, whose nodes changed since are
        taken again."""
        state = self.handle.state
        cached = self._scored
        if cached is not None and cached[0] is ctx.pod and cached[1] == state.touches:
            return cached[2]
        pod = ctx.pod
        found: Counter[Pair] = Counter()
        if self._every(pod) or not self.args.ignore_preferred_terms_of_existing_pods:
            weight = self.args.hard_pod_affinity_weight
            found = _topology_scores(self._kept(
                pod, ("score", pod.meta.namespace, tuple(sorted(pod.meta.labels.items())), pod.preferred_affinity,
                      pod.preferred_anti_affinity),
                lambda into, other, labels: _score_existing(into, pod, other, labels, weight),
                None if self._every(pod) else state.affine_on))
        self._scored = (pod, state.touches, found)
        return found

    @staticmethod
    def _every(pod: Pod) -> bool:
        """The pod has preferred terms: every placed pod may score it, not only those with terms
        (upstream's HavePodsWithAffinityList, `ClusterState.affine_on`)."""
        return bool(pod.preferred_affinity or pod.preferred_anti_affinity)

    def _kept(self, pod: Pod, key: Hashable, add: Callable[[Share, Pod, Mapping[str, str]], None],
              among: Mapping[str, Collection[str]] | None = None) -> Share:
        """The pod's `Share` over the placed pods (`among` them only, by node: the nodes of none
        keep no part), the pod itself aside: from the tally kept under `key`, its nodes changed
        since taken again, each node's part `add` of each of its pods."""
        state = self.handle.state
        tally = self._tallies.get(key, NodeTally)
        infos: Iterable[NodeInfo] = state.nodes.values()
        if among is not None:
            names = set(among)
            names.update(name for name, (_, _, part) in tally.parts.entries.items() if part is not None)
            infos = (state.nodes[name] for name in names)

        def take(info: NodeInfo) -> Share | None:
            part: Share = {}
            for uid in info.pods if among is None else among.get(info.name, ()):
                if (other := state.pods.get(uid)) is not None:
                    add(part, other, info.labels)
            return part or None

        tally.update(infos, take)
        own: Share = {}  # the pod's own part where it is placed: no pod counts or scores itself
        if (node := state.node_of(pod.uid)) is not None and (among is None or pod.uid in among.get(node, ())):
            add(own, pod, self._labels(node))
        return tally.less(own)
