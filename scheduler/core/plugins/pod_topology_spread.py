"""PodTopologySpread: topology spread constraints, filtered (`DoNotSchedule`) and scored (`ScheduleAnyway`) as kube-scheduler does.

The filter half of upstream's plugin (kube-scheduler v1.36
pkg/scheduler/framework/plugins/podtopologyspread/filtering.go, common.go): before the nodes are
filtered, the pods on every node that has ALL the constraints' topology keys are counted per
constraint and domain (the value of its key on the node), over the nodes each constraint's
inclusion policies let in (nodeAffinityPolicy Honor: the node matches the pod's nodeSelector and
required node affinity; nodeTaintsPolicy Honor: the pod tolerates its NoSchedule/NoExecute
taints). A pod counts where it is of the spread pod's namespace, not terminating, and matched
by the constraint's selector (countPodsMatchSelector). The pods counted are those placed (bound,
assumed: a gang's members placed earlier in the same transaction among them). A nominated
preemptor of equal or higher priority holding room (the cycle lifts lower ones) counts only
while its own node is filtered, as upstream's RunFilterPluginsWithNominatedPods adds the pods
nominated to the node filtered, and those alone, to that node's copy of the counts
(addGENominatedPods -> AddPod): counted on every node, it raised the global minimum where it is
not yet and let a pod exceed maxSkew should it never come. Upstream then filters the node again
without them and passes it only if both pass; adding pods to the node's own domain never lowers
`matched - minimum` there, so the pass with them decides.
A node then fails, per constraint in order:
- "node(s) didn't match pod topology spread constraints (missing required label)" when it lacks
  the constraint's key; UnschedulableAndUnresolvable (no eviction helps: `unresolvable_rows`);
- "node(s) didn't match pod topology spread constraints" when the pods matching there, plus one
  if the pod matches its own selector, less the global minimum over the domains (0 while fewer
  domains than `minDomains` are counted) exceed `maxSkew`; Unschedulable, so preemption may
  evict matching pods there (the dry run lifts them from `ClusterState.placements`, which changes
  `touches`, so the counts are taken again without them).

The score half (scoring.go) reads the pod's `ScheduleAnyway` constraints; a pod without any is
not scored (`score_applies`, upstream's PreScore Skip). Over the feasible nodes, those lacking
one of these constraints' keys are ignored (IgnoredNodes: they score 0 after normalisation);
each constraint's normalizing weight is log(size + 2), size being the number of its key's
values among the other feasible nodes, or, for kubernetes.io/hostname, their number. The pods
matching are counted per domain over every node with all the keys that the constraint's
inclusion policies let in, the pods placed only (bound and assumed: upstream scores its
snapshot, without nominated pods); a hostname constraint counts the node's own pods instead,
whatever its policies. A node scores round(sum of count * weight + (maxSkew - 1)) (Go's
math.Round: half away from zero), and NormalizeScore gives 100 * (max + min - s) / max over the
nodes not ignored (`Normalize.SPREAD`): the fewer matching pods, the higher.

Defaulting: upstream scores a pod without constraints of its own by the default constraints
(with defaultingType System: zone maxSkew 3 and hostname maxSkew 5, ScheduleAnyway, nodes lacking
the zone key still counted by hostname, its `systemDefaulted` case; with List: `defaultConstraints`),
each taking its selector from the Services, ReplicationControllers, ReplicaSets and
StatefulSets selecting the pod. Tessera watches none of them, so it applies no default
constraint: a pod without constraints is not scored (with none of them upstream would not score
it either), a `DoNotSchedule` default constraint is refused in the configuration (`parse_args`),
and a `ScheduleAnyway` one is accepted and scores nothing (docs/not-supported.md).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from scheduler.api.config_reader import (ArgsReader, Checks, duplicate, forbidden, invalid, required,
                                         unsupported)
from scheduler.api.names import label_key_problem
from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import (FilterPlugin, Ints, Normalize, QueueingHint, Reasons,
                                                ScorePlugin, always)
from scheduler.core.framework.node_parts import NodeParts, RecentTallies
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.objects import Node, Pod, selects
from scheduler.core.plugins.taints import untolerated
from scheduler.core.pod_terms import SpreadConstraint
from scheduler.core.state import ClusterEvent, EventKind, NodeInfo

NAME = "PodTopologySpread"
SKEW = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = SKEW + " (missing required label)"

# --- args: PodTopologySpreadArgs (upstream's validation_pluginargs.go ValidatePodTopologySpreadArgs)

FIELDS = ("defaultConstraints", "defaultingType")
SYSTEM, LIST = "System", "List"
_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
_CONSTRAINT_FIELDS = ("maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains",
                      "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys")
_UNWATCHED = ("Tessera watches no Services, ReplicationControllers, ReplicaSets or StatefulSets, whose selectors "
              "a default constraint takes, so it cannot honour a DoNotSchedule one; make it ScheduleAnyway (not "
              "scored by Tessera) or give the pods topologySpreadConstraints of their own")


class DefaultConstraint(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_skew: int
    topology_key: str
    when_unsatisfiable: str


class PodTopologySpreadArgs(BaseModel):
    """Kept for /configz: no constraint they may hold changes what the filter or the score does
    (Tessera applies no default constraint: see the module's docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_constraints: tuple[DefaultConstraint, ...] = ()
    defaulting_type: str = SYSTEM  # v1's SetDefaults_PodTopologySpreadArgs


def parse_args(args: ArgsReader) -> PodTopologySpreadArgs:
    """ValidatePodTopologySpreadArgs, every error in its order, then Tessera's refusal of a
    DoNotSchedule default constraint."""
    found = Checks()
    path = args.at("defaultConstraints")
    none: list[object] = []
    raw = found.read(lambda: args.get_list("defaultConstraints"), none)
    defaulting = found.read(lambda: args.get_str("defaultingType", SYSTEM), SYSTEM)
    if defaulting not in (SYSTEM, LIST):
        found.check(lambda: unsupported(args.at("defaultingType"), defaulting, (SYSTEM, LIST)))
    elif defaulting == SYSTEM and raw:
        found.check(lambda: invalid(args.at("defaultingType"), defaulting, "when .defaultConstraints are not empty"))
    constraints: list[DefaultConstraint] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(raw):
        constraint = found.read(lambda: _default_constraint(ArgsReader(item, f"{path}[{i}]"), seen), None)
        if constraint is not None:
            constraints.append(constraint)
    found.raise_errors()
    return PodTopologySpreadArgs(default_constraints=tuple(constraints), defaulting_type=defaulting)


def _default_constraint(item: ArgsReader, seen: set[tuple[str, str]]) -> DefaultConstraint:
    item.check_keys(_CONSTRAINT_FIELDS)
    found = Checks()
    skew = found.read(lambda: item.get_int("maxSkew", 0, "int32"), 1)
    if skew <= 0:
        found.check(lambda: invalid(item.at("maxSkew"), skew, "not in valid range (0, inf)"))
    key = found.read(lambda: item.get_str("topologyKey", ""), "")
    if not key:
        found.check(lambda: required(item.at("topologyKey"), "can not be empty"))
    elif (problem := label_key_problem(key)) is not None:
        found.check(lambda: invalid(item.at("topologyKey"), key, problem))
    when = found.read(lambda: item.get_str("whenUnsatisfiable", ""), "")
    if not when:
        found.check(lambda: required(item.at("whenUnsatisfiable"), "can not be empty"))
    elif when not in _ACTIONS:
        found.check(lambda: unsupported(item.at("whenUnsatisfiable"), when, _ACTIONS))
    if item.raw("labelSelector") is not None:
        found.check(lambda: forbidden(item.at("labelSelector"),
                                      "constraint must not define a selector, as they deduced for each pod"))
    if (key, when) in seen:
        found.check(lambda: duplicate(item.path, f"{{{key}, {when}}}"))
    seen.add((key, when))
    if when == "DoNotSchedule":
        found.check(lambda: forbidden(item.at("whenUnsatisfiable"), _UNWATCHED))
    found.raise_errors()
    return DefaultConstraint(max_skew=skew, topology_key=key, when_unsatisfiable=when)


# --- the filter


class Counts:
    """upstream's preFilterState: per constraint, the matching pods per domain (every domain
    counted, those with none too), the global minimum the skew is measured from, and the two
    least counts (its criticalPaths, exact), from which `minimum_with` finds the minimum once a
    node's nominated pods are added to its domain."""

    __slots__ = ("domains", "minimum", "least", "min_domains")

    def __init__(self, domains: list[dict[str, int]], constraints: tuple[SpreadConstraint, ...]) -> None:
        self.domains = domains
        self.min_domains = [c.min_domains for c in constraints]
        self.least = [heapq.nsmallest(2, found.values()) for found in domains]
        # minMatchNum: with fewer domains than minDomains the global minimum is 0 (and with none
        # at all, as minDomains is at least 1)
        self.minimum = [self._minimum(i, least[0] if least else 0) for i, least in enumerate(self.least)]

    def _minimum(self, i: int, least: int) -> int:
        return least if len(self.domains[i]) >= self.min_domains[i] else 0

    def minimum_with(self, i: int, value: str, added: int) -> int:
        """The global minimum of constraint `i` with `added` pods more in domain `value` (one
        counted: its node has every key and is included)."""
        if not added:
            return self.minimum[i]
        least, now = self.least[i], self.domains[i][value] + added
        others = least[1] if self.domains[i][value] == least[0] and len(least) > 1 else least[0]
        return self._minimum(i, now if len(least) == 1 else min(now, others))


def _included(c: SpreadConstraint, pod: Pod, node: Node) -> bool:
    """upstream's matchNodeInclusionPolicies."""
    if c.honor_affinity and not selects(pod.node_selector.items(), pod.required_terms, node.meta.name,
                                        node.meta.labels):
        return False
    return not (c.honor_taints and untolerated(node, pod))


def _has_keys(labels: Mapping[str, str], constraints: Iterable[SpreadConstraint]) -> bool:
    """upstream's nodeLabelsMatchSpreadConstraints."""
    return all(c.topology_key in labels for c in constraints)


# per constraint: the node's domain (its key's value) and the pods matching there, or None
# where the constraint's inclusion policies leave the node out
Share = tuple[tuple[str, int] | None, ...]


def _share(pod: Pod, constraints: tuple[SpreadConstraint, ...], node: Node, uids: Iterable[str],
           pods: Mapping[str, Pod]) -> Share | None:
    """upstream's processNode in calPreFilterState (and processAllNode in PreScore): one node's
    part of the counts of the pod's `constraints`, from the pods `uids`; None when the node lacks
    one of the keys."""
    labels = node.meta.labels
    if not _has_keys(labels, constraints):
        return None
    others = _alive(uids, pods)
    return tuple((labels[c.topology_key], _matching(c, pod, others)) if _included(c, pod, node) else None
                 for c in constraints)


def _alive(uids: Iterable[str], pods: Mapping[str, Pod]) -> list[Pod]:
    """The pods `uids` that are not terminating (countPodsMatchSelector skips those)."""
    return [other for uid in uids if (other := pods.get(uid)) is not None and not other.meta.deleting]


def _matching(c: SpreadConstraint, pod: Pod, others: Iterable[Pod]) -> int:
    """upstream's countPodsMatchSelector over `others` (none terminating)."""
    return sum(1 for other in others if c.counts(other.meta.namespace, other.meta.labels, pod.meta.namespace))


class Tally(NodeParts[Share]):
    """upstream's TpValueToMatchNum kept by node (`NodeParts`: each node's `_share`), so that a
    pod's counts take again only the nodes changed since (5,000 nodes of 20 pods: 220 ms a
    count). It serves every pod of the same namespace, constraints and inclusion inputs
    (`signature`): a workload's replicas."""

    __slots__ = ("constraints", "matched", "nodes")

    def __init__(self, constraints: tuple[SpreadConstraint, ...]) -> None:
        super().__init__()
        self.constraints = constraints
        self.matched: list[dict[str, int]] = [{} for _ in constraints]
        self.nodes: list[dict[str, int]] = [{} for _ in constraints]  # the nodes counted per domain

    def _add(self, share: Share, sign: int) -> None:
        for part, matched, nodes in zip(share, self.matched, self.nodes):
            if part is None:
                continue
            value, found = part
            left = nodes.get(value, 0) + sign
            if left:
                nodes[value], matched[value] = left, matched.get(value, 0) + sign * found
            else:  # the domain's last node: no domain any more
                del nodes[value], matched[value]

    def counts(self, less: Share | None = None) -> Counts:
        """The counts, less the pods of `less` (the pod's own where it is placed)."""
        domains = [dict(matched) for matched in self.matched]
        for part, found in zip(less or (), domains):
            if part is not None:
                found[part[0]] -= part[1]
        return Counts(domains, self.constraints)


def signature(pod: Pod, constraints: tuple[SpreadConstraint, ...]) -> Hashable:
    """What a `Tally` of the pod's `constraints` depends on besides the nodes and the pods on them."""
    return (pod.meta.namespace, constraints, tuple(sorted(pod.node_selector.items())), pod.required_terms,
            pod.tolerations)


def verdict(pod: Pod, counts: Counts, node: Node, nominated: Iterable[Pod] = ()) -> Reasons | None:
    """upstream's Filter: matchNum + selfMatchNum - minMatchNum <= maxSkew for every constraint,
    with the pods `nominated` to the node added to its domain first (updateWithPod: the node
    has every key and each constraint's inclusion policies let it in)."""
    labels = node.meta.labels
    nominated = [other for other in nominated if not other.meta.deleting] if _has_keys(labels, pod.spread) else []
    for i, c in enumerate(pod.spread):
        value = labels.get(c.topology_key)
        if value is None:
            return (MISSING_LABEL,)
        added = sum(1 for other in nominated if c.counts(other.meta.namespace, other.meta.labels,
                                                           pod.meta.namespace)) if nominated and _included(c, pod, node) else 0
        own = 1 if c.matches(pod.meta.labels) else 0
        if counts.domains[i].get(value, 0) + added + own - counts.minimum_with(i, value, added) > c.max_skew:
            return (SKEW,)
    return None


# --- the score

HOSTNAME = "kubernetes.io/hostname"  # v1.LabelHostname: counted per node, in Score
IGNORED = -1  # upstream's invalidScore: a feasible node lacking a key (`Normalize.SPREAD` gives it 0)


@dataclass(frozen=True, slots=True)
class Soft:
    """upstream's preScoreState: the ScheduleAnyway constraints, the pods matching per domain
    (a `Tally` over every node, as the filter's; a hostname constraint's are counted per node
    instead) and each constraint's topologyNormalizingWeight."""

    constraints: tuple[SpreadConstraint, ...]
    domains: list[dict[str, int]]
    weights: tuple[float, ...]


def pre_score(constraints: tuple[SpreadConstraint, ...], domains: list[dict[str, int]],
              feasible: Iterable[Mapping[str, str]]) -> Soft:
    """upstream's initPreScoreState over the feasible nodes' labels: each constraint's weight is
    log(size + 2), size being the number of its key's values on the feasible nodes with every
    key (the others are IgnoredNodes), or for the hostname key the number of those nodes
    (requireAllTopologies always holds: Tessera applies no system default constraint)."""
    counted = [labels for labels in feasible if _has_keys(labels, constraints)]
    sizes = (len(counted) if c.topology_key == HOSTNAME else len({labels[c.topology_key] for labels in counted})
             for c in constraints)
    return Soft(constraints, domains, tuple(math.log(size + 2) for size in sizes))


def _go_round(value: float) -> int:
    """Go's math.Round: to the nearest integer, halves away from zero (Python's round takes halves to even)."""
    whole = math.trunc(value)
    return int(whole + math.copysign(1, value)) if abs(value - whole) >= 0.5 else int(whole)


def node_score(soft: Soft, pod: Pod, labels: Mapping[str, str], uids: Iterable[str], pods: Mapping[str, Pod]) -> int:
    """upstream's Score for a feasible node with `labels` and the pods `uids` on it: IGNORED where
    it lacks a key, else the sum over the constraints of the matching pods in its domain times
    the constraint's weight plus maxSkew - 1 (scoreForCount), rounded."""
    if not _has_keys(labels, soft.constraints):
        return IGNORED
    score = 0.0
    others: list[Pod] | None = None
    for c, found, weight in zip(soft.constraints, soft.domains, soft.weights):
        if c.topology_key == HOSTNAME:
            others = _alive(uids, pods) if others is None else others
            matched = _matching(c, pod, others)
        else:
            matched = found.get(labels[c.topology_key], 0)
        score += matched * weight + (c.max_skew - 1)
    return _go_round(score)


# tallies kept: one per workload spread at a time, a few interleaved (a rollout's two
# pod-template-hash selectors, other apps' replicas) without recounting every node between them
TALLIES = 16


class PodTopologySpread(FilterPlugin, ScorePlugin):
    name = NAME
    also_extends: ClassVar[frozenset[str]] = frozenset({"preFilter", "preScore"})  # folded into filter and score
    preemption_helps = True  # upstream: a skew is Unschedulable
    unresolvable_verdicts = frozenset({(MISSING_LABEL,)})  # the first failing constraint's, as upstream's Filter
    normalize = Normalize.SPREAD

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self._cached: tuple[Pod, int, Counts] | None = None
        self._tallies: RecentTallies[Tally] = RecentTallies(TALLIES)
        self._soft: tuple[Pod, Soft] | None = None

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        """upstream's EventsToRegister: Pod Add/UpdatePodLabel/Delete (isSchedulableAfterPodChange),
        Node Add/Delete/UpdateNodeLabel/UpdateNodeTaint (isSchedulableAfterNodeChange). A
        removal's event does not name the pod gone, so it always may help."""
        return {EventKind.ASSIGNED_POD_ADDED: self._after_pod_assigned,
                EventKind.ASSIGNED_POD_RELABELLED: self._after_pod_relabelled,
                EventKind.ASSIGNED_POD_REMOVED: always,
                EventKind.NODE_ADDED: self._has_every_key,
                EventKind.NODE_REMOVED: self._has_every_key,
                EventKind.NODE_UPDATED: self._after_node_updated}

    def _after_pod_assigned(self, uid: str, event: ClusterEvent) -> bool:
        """A pod placed in the waiting pod's namespace that one of its constraints matches."""
        pod = self.handle.state.pods.get(uid)
        other = event.pod
        if pod is None or other is None:
            return True
        return other.meta.namespace == pod.meta.namespace and any(c.matches(other.meta.labels) for c in pod.spread)

    def _after_pod_relabelled(self, uid: str, event: ClusterEvent) -> bool:
        """A placed pod of its namespace whose labels now match a constraint they did not, or
        no longer match one they did."""
        pod = self.handle.state.pods.get(uid)
        new, old = event.pod, event.old
        if pod is None or new is None or old is None:
            return True
        return new.meta.namespace == pod.meta.namespace and any(
            c.matches(old.meta.labels) != c.matches(new.meta.labels) for c in pod.spread)

    def _has_every_key(self, uid: str, event: ClusterEvent) -> bool:
        """The node has every constraint's topology key: one added may be a new domain, or
        join one; one deleted with them (its last labels) may have been the last node of the
        domain with the fewest matching pods, and the global minimum rise without it."""
        pod, info = self.handle.state.pods.get(uid), self.handle.state.nodes.get(event.node)
        return pod is None or info is None or _has_keys(info.labels, pod.spread)

    def _after_node_updated(self, uid: str, event: ClusterEvent) -> bool:
        """Upstream queues a label change that changes whether the node has every key, or the
        value of one; Tessera's event keeps no old labels, so every label change queues. A
        taint change queues where the node has every key."""
        if event.label == "NodeUpdateNodeLabel":
            return True
        return event.label == "NodeUpdateNodeTaint" and self._has_every_key(uid, event)

    def filter_applies(self, ctx: PodContext) -> bool:
        return bool(ctx.pod.spread)

    def counts(self, ctx: PodContext) -> Counts:
        """The counts of the placed pods for the pod, kept while neither it nor any node changes
        (`touches`): the same pod is prepared anew by each preemption dry run and queueing hint."""
        state, pod = self.handle.state, ctx.pod
        cached = self._cached
        if cached is not None and cached[0] is pod and cached[1] == state.touches:
            return cached[2]
        found = self._count(pod, pod.spread)
        self._cached = (pod, state.touches, found)
        return found

    def _count(self, pod: Pod, constraints: tuple[SpreadConstraint, ...]) -> Counts:
        """The counts of the placed pods for the pod's `constraints`, from the `Tally` of its
        signature brought up to date."""
        state = self.handle.state
        key = signature(pod, constraints)
        tally = self._tallies.get(key, lambda: Tally(constraints))
        tally.update(state.nodes.values(), lambda info: _share(pod, constraints, info.node, info.pods, state.pods)
                     if info.node is not None else None)
        where = state.placements.get(pod.uid)
        node = state.nodes[where.node].node if where is not None else None
        return tally.counts(_share(pod, constraints, node, (pod.uid,), state.pods) if node is not None else None)

    def pod_form(self, ctx: PodContext) -> Hashable:
        """What its counts depend on (`signature`) and whether each constraint selects the pod
        itself (`verdict`'s own match): all the filter reads of its labels, which an indexed Job's
        members differ in (its own placement set aside: `ProfileRuntime.applicable_form`)."""
        pod = ctx.pod
        return signature(pod, pod.spread), tuple(c.matches(pod.meta.labels) for c in pod.spread)

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        """The node's verdict with the preemptors nominated to it (`ClusterState.nominated_on`, the
        one home InterPodAffinity reads too; the pod's own aside) added: addGENominatedPods for
        this node alone."""
        state, node = self.handle.state, info.node
        assert node is not None
        nominated = [pod for uid in state.nominated_on(info, ctx.pod.uid) if (pod := state.pods.get(uid)) is not None]
        return verdict(ctx.pod, self.counts(ctx), node, nominated)

    def score_applies(self, ctx: PodContext) -> bool:
        """upstream's PreScore Skip: the pod has no ScheduleAnyway constraint (and Tessera applies
        no default one)."""
        return bool(ctx.pod.soft_spread)

    def prepare_scores(self, table: NodeTable, ctx: PodContext, rows: Ints) -> None:
        """upstream's PreScore: the counts over every node, the weights over the feasible nodes."""
        pod = ctx.pod
        self._soft = (pod, pre_score(pod.soft_spread, self._count(pod, pod.soft_spread).domains,
                                     (table.info(row).labels for row in rows.tolist())))

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        soft = self._soft
        assert soft is not None and soft[0] is ctx.pod, "prepare_scores comes first"
        return node_score(soft[1], ctx.pod, info.labels, info.pods, self.handle.state.pods)
