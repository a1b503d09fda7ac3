"""PodTopologySpread's counting and verdict, case by case against upstream's filtering.go and
common.go (v1.36): the domains counted (nodes with every key, the inclusion policies), the pods
counted (namespace, selector, terminating), minDomains, self-match, matchLabelKeys, the queueing
hints and the args' validation."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import ConfigError, parse_config
from scheduler.core.framework.cycle_state import prepare
from scheduler.core.objects import Node, Pod, parse_node, parse_pod
from scheduler.core.plugins.pod_topology_spread import MISSING_LABEL, SKEW, TALLIES, Counts, PodTopologySpread, verdict
from scheduler.core.state import ClusterEvent, ClusterState, EventKind
from scheduler.sim import builders as b
from tests.unit.topology_oracles import spread_count

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _c(key: str = ZONE, max_skew: int = 1, app: str | None = "web", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", **extra}
    if app is not None:
        out.setdefault("labelSelector", {"matchLabels": {"app": app}})
    return out


def _pod(name: str, *constraints: dict[str, Any], labels: dict[str, str] | None = None, **kw: Any) -> Pod:
    spec = {"topologySpreadConstraints": list(constraints)} if constraints else {}
    spec.update(kw.pop("spec_extra", {}))
    return parse_pod(b.pod(name, labels={"app": "web"} if labels is None else labels, spec_extra=spec or None, **kw))


def _node(name: str, zone: str | None, **kw: Any) -> Node:
    labels = {ZONE: zone} if zone is not None else {}
    return parse_node(b.node(name, labels={**labels, **kw.pop("labels", {})}, **kw))


def _count(pod: Pod, *layout: tuple[Node, list[Pod]]) -> Counts:
    """The counts over nodes, each with the pods on it."""
    pods = {p.uid: p for _, placed in layout for p in placed}
    return spread_count(pod, ((node, [p.uid for p in placed]) for node, placed in layout), pods)


def test_skew_is_measured_from_the_global_minimum_with_self_match() -> None:
    pod = _pod("new", _c())
    a, b_, c = _node("a0", "a"), _node("b0", "b"), _node("c0", "c")
    counts = _count(pod, (a, [_pod("w1"), _pod("w2")]), (b_, [_pod("w3")]), (c, [_pod("w4")]))
    assert counts.domains == [{"a": 2, "b": 1, "c": 1}] and counts.minimum == [1]
    assert verdict(pod, counts, a) == (SKEW,)  # 2 + 1 - 1 > 1
    assert verdict(pod, counts, b_) is None
    # a pod its own selector does not match adds nothing of itself: 2 + 0 - 1 = 1
    other = _pod("other", _c(), labels={"app": "db"})
    assert verdict(other, _count(other, (a, [_pod("w1"), _pod("w2")]), (b_, [_pod("w3")])), a) is None


def test_a_node_without_the_key_is_not_a_domain_and_fails_unresolvably() -> None:
    pod = _pod("new", _c(), _c(HOST, app="web"))
    bare, zoned = _node("bare", None), _node("a0", "a")
    counts = _count(pod, (bare, [_pod("w1")]), (zoned, []))
    assert counts.domains == [{"a": 0}, {"a0": 0}]  # bare has no zone: counted for neither constraint
    assert verdict(pod, counts, bare) == (MISSING_LABEL,)
    assert MISSING_LABEL == "node(s) didn't match pod topology spread constraints (missing required label)"


def test_min_domains_makes_the_minimum_zero_while_too_few_domains() -> None:
    pod = _pod("new", _c(minDomains=3))
    a, b_ = _node("a0", "a"), _node("b0", "b")
    counts = _count(pod, (a, [_pod("w1")]), (b_, [_pod("w2")]))
    assert counts.minimum == [0]
    assert verdict(pod, counts, a) == (SKEW,)  # 1 + 1 - 0 > 1
    assert _count(_pod("new", _c(minDomains=2)), (a, [_pod("w1")]), (b_, [_pod("w2")])).minimum == [1]


def test_other_namespaces_terminating_pods_and_unmatched_labels_are_not_counted() -> None:
    pod = _pod("new", _c())
    a, b_ = _node("a0", "a"), _node("b0", "b")
    leaving = b.pod("leaving", labels={"app": "web"})
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    placed = [_pod("elsewhere", namespace="team-b"), parse_pod(leaving), _pod("db", labels={"app": "db"})]
    assert _count(pod, (a, placed), (b_, [])).domains == [{"a": 0, "b": 0}]


def test_an_empty_selector_counts_no_pod_but_matches_the_pod_itself() -> None:
    """upstream's countPodsMatchSelector returns 0 for an empty selector; a missing one matches nothing."""
    a = _node("a0", "a")
    pod = _pod("new", _c(app=None, labelSelector={}))
    assert _count(pod, (a, [_pod("w1")])).domains == [{"a": 0}]
    assert pod.spread[0].matches(pod.meta.labels)
    assert not _pod("new", _c(app=None)).spread[0].matches({"app": "web"})


def test_node_affinity_policy_honor_by_default_ignore_counts_every_node() -> None:
    selector = {"nodeSelector": {"pool": "gpu"}}
    a, b_ = _node("a0", "a", labels={"pool": "gpu"}), _node("b0", "b")
    honoured = _pod("new", _c(), spec_extra=selector)
    assert _count(honoured, (a, [_pod("w1")]), (b_, [])).domains == [{"a": 1}]  # b0 is not the pod's
    ignored = _pod("new", _c(nodeAffinityPolicy="Ignore"), spec_extra=selector)
    counts = _count(ignored, (a, [_pod("w1")]), (b_, []))
    assert counts.domains == [{"a": 1, "b": 0}] and verdict(ignored, counts, a) == (SKEW,)


def test_node_taints_policy_ignore_by_default_honor_leaves_untolerated_nodes_out() -> None:
    taint = [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]
    a, b_ = _node("a0", "a"), _node("b0", "b", taints=taint)
    assert _count(_pod("new", _c()), (a, [_pod("w1")]), (b_, [])).domains == [{"a": 1, "b": 0}]
    honoured = _pod("new", _c(nodeTaintsPolicy="Honor"))
    assert _count(honoured, (a, [_pod("w1")]), (b_, [])).domains == [{"a": 1}]
    tolerating = _pod("new", _c(nodeTaintsPolicy="Honor"),
                      spec_extra={"tolerations": [{"key": "gpu", "operator": "Exists"}]})
    assert _count(tolerating, (a, [_pod("w1")]), (b_, [])).domains == [{"a": 1, "b": 0}]
    soft = _node("c0", "c", taints=[{"key": "x", "effect": "PreferNoSchedule"}])
    assert _count(honoured, (soft, [])).domains == [{"c": 0}]


def test_match_label_keys_are_merged_and_merging_twice_is_harmless() -> None:
    a = _node("a0", "a")
    old, new = _pod("old", labels={"app": "web", "hash": "1"}), _pod("new1", labels={"app": "web", "hash": "2"})
    pod = _pod("new", _c(matchLabelKeys=["hash"]), labels={"app": "web", "hash": "2"})
    assert _count(pod, (a, [old, new])).domains == [{"a": 1}]
    # as the apiserver writes it since v1.34: the key's value merged into the labelSelector too
    merged = _c(matchLabelKeys=["hash"], labelSelector={"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "hash", "operator": "In", "values": ["2"]}]})
    again = _pod("new", merged, labels={"app": "web", "hash": "2"})
    assert _count(again, (a, [old, new])).domains == [{"a": 1}]
    assert again.spread[0].matches(again.meta.labels)
    # a key the pod lacks adds nothing
    assert _count(_pod("new", _c(matchLabelKeys=["missing"])), (a, [old, new])).domains == [{"a": 2}]


def test_schedule_anyway_constraints_are_not_read_by_the_filter() -> None:
    """They are the score's (tests/unit/test_pod_topology_spread_score.py), no longer told as unread."""
    pod = _pod("new", {**_c(), "whenUnsatisfiable": "ScheduleAnyway"})
    assert pod.spread == () and len(pod.soft_spread) == 1 and pod.unread == ()
    assert pod.unhonoured == ()


def test_pods_nominated_to_the_node_are_added_to_its_domain_alone() -> None:
    """upstream's addGENominatedPods: the filtered node's nominated pods join its domain's count,
    and the global minimum is taken again over the domains (criticalPaths.update)."""
    pod = _pod("new", _c())
    a, b_, c = _node("a0", "a"), _node("b0", "b"), _node("c0", "c")
    counts = _count(pod, (a, [_pod("w1")]), (b_, []))
    assert verdict(pod, counts, a) == (SKEW,)  # 1 + 1 - 0: a pod nominated elsewhere is not counted here
    # b0 was the least domain: with one nominated there the minimum is 1 (1 + 1 - 1)
    assert verdict(pod, counts, b_, [_pod("n1")]) is None
    assert verdict(pod, counts, b_, [_pod("n1"), _pod("n2")]) == (SKEW,)  # 2 + 1 - 1
    # another domain shares the minimum: it stays 0 (1 + 1 - 0)
    tied = _count(pod, (a, [_pod("w1")]), (b_, []), (c, []))
    assert verdict(pod, tied, b_, [_pod("n1")]) == (SKEW,)
    # one domain alone: its count with them is the minimum
    assert verdict(pod, _count(pod, (b_, [])), b_, [_pod("n1"), _pod("n2")]) is None
    # not counted: another namespace, another app, terminating
    leaving = b.pod("leaving", labels={"app": "web"})
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    others = [_pod("n1", namespace="team-b"), _pod("n2", labels={"app": "db"}), parse_pod(leaving)]
    assert verdict(pod, tied, b_, others) is None  # counted, zone b would hold 3: 3 + 1 - 0


def test_nominated_pods_in_a_domain_above_the_minimum_leave_the_minimum_where_it_is() -> None:
    """minimum_with: pods added to a domain that is not the least one leave the least one the
    minimum (criticalPaths[0]), not the second least."""
    pod = _pod("new", _c(max_skew=3))
    a, b_, c = _node("a0", "a"), _node("b0", "b"), _node("c0", "c")
    counts = _count(pod, (a, []), (b_, [_pod("w1"), _pod("w2")]), (c, [_pod("w3"), _pod("w4")]))
    assert counts.minimum_with(0, "c", 1) == 0 and counts.minimum_with(0, "a", 1) == 1
    assert verdict(pod, counts, c, [_pod("n1")]) == (SKEW,)  # 2 + 1 + 1 - 0 > 3, not - 2


def test_nominated_pods_count_only_where_the_constraint_counts_the_node() -> None:
    """upstream's updateWithPod adds a nominated pod only on a node the constraint's inclusion
    policies let in (matchNodeInclusionPolicies): a node outside the pod's nodeSelector is no domain."""
    pod = _pod("new", _c(max_skew=2), spec_extra={"nodeSelector": {"pool": "gpu"}})
    a, b_, c = _node("a0", "a", labels={"pool": "gpu"}), _node("b0", "b"), _node("c0", "c", labels={"pool": "gpu"})
    counts = _count(pod, (a, []), (b_, []), (c, []))
    assert counts.domains == [{"a": 0, "c": 0}]
    # b0 is not counted: its nominated pods are not added (0 + 1 - 0, not 2 + 1 - 0)
    assert verdict(pod, counts, b_, [_pod("n1"), _pod("n2")]) is None
    assert verdict(pod, counts, a, [_pod("n1"), _pod("n2")]) == (SKEW,)


def test_the_pod_itself_is_not_counted() -> None:
    pod = _pod("new", _c())
    assert _count(pod, (_node("a0", "a"), [pod])).domains == [{"a": 0}]


def test_the_kept_tally_counts_as_a_fresh_count_through_every_change() -> None:
    """The plugin counts again only the nodes changed since (`Tally`, by `NodeInfo.generation`):
    after each change that moves a count (a placement, a relabelled pod, a terminating one, a
    node's zone changed or gone, a node deleted, preemption's lift and restore) its counts are
    those of `spread_count` over the whole state, for two replicas sharing one tally."""
    state = ClusterState(frozenset({"tessera"}))
    plugin = PodTopologySpread(_Handle.over(state))  # type: ignore[arg-type]
    for name, zone in (("a0", "a"), ("a1", "a"), ("b0", "b"), ("c0", "c")):
        state.apply("ADDED", b.node(name, labels={ZONE: zone}))
    spread = {"topologySpreadConstraints": [_c(), _c(HOST)]}
    for i, node in enumerate(("a0", "a0", "a1", "b0")):
        state.apply("ADDED", b.pod(f"w{i}", labels={"app": "web"}, node_name=node, phase="Running"))
    replicas = [b.pod(f"r{i}", labels={"app": "web"}, spec_extra=spread) for i in range(2)]
    for obj in replicas:
        state.apply("ADDED", obj)

    def same() -> None:
        for obj in replicas:
            pod = state.pod_by_key(f"default/{obj['metadata']['name']}")
            assert pod is not None
            nodes = ((info.node, info.pods) for info in state.nodes.values() if info.node is not None)
            expected, kept = spread_count(pod, nodes, state.pods), plugin.counts(prepare(pod, state.classes))
            assert (kept.domains, kept.minimum) == (expected.domains, expected.minimum)

    same()
    uid = replicas[0]["metadata"]["uid"]
    state.assume(uid, "c0", None)  # r0 placed: it counts for r1, not for itself
    same()
    state.apply("MODIFIED", b.pod("w1", labels={"app": "db"}, node_name="a0", phase="Running"))
    same()
    leaving = b.pod("w2", labels={"app": "web"}, node_name="a1", phase="Running")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    state.apply("MODIFIED", leaving)
    same()
    state.apply("MODIFIED", b.node("a1", labels={ZONE: "c"}))
    same()
    state.apply("MODIFIED", b.node("a1"))  # no zone: no domain of either constraint
    same()
    lifted = state.lift(state.by_key["default/w3"])
    same()
    state.restore(lifted)
    same()
    state.apply("DELETED", b.node("b0", labels={ZONE: "b"}))
    same()
    state.apply("DELETED", b.pod("w0", labels={"app": "web"}, node_name="a0", phase="Running"))
    same()



def test_pods_of_other_namespaces_or_inclusion_inputs_share_no_tally() -> None:
    """The kept tally serves the pods of one `signature`: pods with the same constraints but
    another namespace, nodeSelector, required node affinity or tolerations (the inclusion
    policies' inputs) get counts of their own, those of `spread_count` over the whole state."""
    state = ClusterState(frozenset({"tessera"}))
    plugin = PodTopologySpread(_Handle.over(state))  # type: ignore[arg-type]
    taint = [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]
    state.apply("ADDED", b.node("a0", labels={ZONE: "a", "pool": "gpu"}))
    state.apply("ADDED", b.node("b0", labels={ZONE: "b"}))
    state.apply("ADDED", b.node("c0", labels={ZONE: "c", "pool": "gpu"}, taints=taint))
    for i, (node, ns) in enumerate((("a0", "default"), ("b0", "default"), ("b0", "team-b"), ("b0", "team-b"),
                                    ("c0", "default"))):
        state.apply("ADDED", b.pod(f"w{i}", namespace=ns, labels={"app": "web"}, node_name=node, phase="Running"))
    constraint = _c(max_skew=1, nodeTaintsPolicy="Honor")
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}}
    variants: list[tuple[str, dict[str, Any]]] = [
        ("default", {}), ("team-b", {}), ("default", {"nodeSelector": {"pool": "gpu"}}),
        ("default", {"affinity": affinity}), ("default", {"tolerations": [{"key": "gpu", "operator": "Exists"}]})]
    for i, (ns, extra) in enumerate(variants):
        spec = {"topologySpreadConstraints": [constraint], **extra}
        state.apply("ADDED", b.pod(f"r{i}", namespace=ns, labels={"app": "web"}, spec_extra=spec))
    for i in range(len(variants)):
        pod = next(p for p in state.pods.values() if p.meta.name == f"r{i}")
        nodes = ((info.node, info.pods) for info in state.nodes.values() if info.node is not None)
        expected, kept = spread_count(pod, nodes, state.pods), plugin.counts(prepare(pod, state.classes))
        assert kept.domains == expected.domains, (i, kept.domains, expected.domains)
    assert len({str(d) for d in (plugin.counts(prepare(p, state.classes)).domains for p in state.pods.values()
                                 if p.meta.name.startswith("r"))}) == 4  # nodeSelector and node affinity: {a: 1}


class _Handle:
    """The state a hint reads: the waiting pod and the nodes."""

    def __init__(self, pod: Pod, nodes: list[Node]) -> None:
        self.state = ClusterState(frozenset({"tessera"}))
        for node in nodes:
            self.state.apply("ADDED", b.node(node.meta.name, labels=dict(node.meta.labels)))
        self.state.pods[pod.uid] = pod

    @classmethod
    def over(cls, state: ClusterState) -> _Handle:
        handle = cls.__new__(cls)
        handle.state = state
        return handle


def _hints(pod: Pod, nodes: list[Node]) -> Any:
    return PodTopologySpread(_Handle(pod, nodes)).queueing_hints()  # type: ignore[arg-type]


def test_queueing_hints_follow_upstreams() -> None:
    pod = _pod("new", _c())
    hints = _hints(pod, [_node("a0", "a"), _node("bare", None)])
    assert set(hints) == {EventKind.ASSIGNED_POD_ADDED, EventKind.ASSIGNED_POD_RELABELLED,
                          EventKind.ASSIGNED_POD_REMOVED, EventKind.NODE_ADDED, EventKind.NODE_REMOVED,
                          EventKind.NODE_UPDATED}
    added = hints[EventKind.ASSIGNED_POD_ADDED]
    assert added(pod.uid, ClusterEvent(EventKind.ASSIGNED_POD_ADDED, pod=_pod("w")))
    assert not added(pod.uid, ClusterEvent(EventKind.ASSIGNED_POD_ADDED, pod=_pod("db", labels={"app": "db"})))
    assert not added(pod.uid, ClusterEvent(EventKind.ASSIGNED_POD_ADDED, pod=_pod("w", namespace="other")))
    relabelled = hints[EventKind.ASSIGNED_POD_RELABELLED]
    assert relabelled(pod.uid, ClusterEvent(EventKind.ASSIGNED_POD_RELABELLED, pod=_pod("w", labels={}),
                                            old=_pod("w")))
    assert not relabelled(pod.uid, ClusterEvent(EventKind.ASSIGNED_POD_RELABELLED,
                                                pod=_pod("w", labels={"app": "web", "x": "1"}), old=_pod("w")))
    node_added = hints[EventKind.NODE_ADDED]
    assert node_added(pod.uid, ClusterEvent(EventKind.NODE_ADDED, node="a0"))
    assert not node_added(pod.uid, ClusterEvent(EventKind.NODE_ADDED, node="bare"))
    updated = hints[EventKind.NODE_UPDATED]
    assert updated(pod.uid, ClusterEvent(EventKind.NODE_UPDATED, node="bare", label="NodeUpdateNodeLabel"))
    assert updated(pod.uid, ClusterEvent(EventKind.NODE_UPDATED, node="a0", label="NodeUpdateNodeTaint"))
    assert not updated(pod.uid, ClusterEvent(EventKind.NODE_UPDATED, node="bare", label="NodeUpdateNodeTaint"))
    assert not updated(pod.uid, ClusterEvent(EventKind.NODE_UPDATED, node="a0", label="NodeUpdateNodeAllocatable"))


def test_a_deleted_node_queues_by_the_labels_it_had() -> None:
    """upstream's isSchedulableAfterNodeChange for Node/Delete: Queue when the deleted node (the
    hint's oldObj) matched every constraint's key, QueueSkip otherwise."""
    pod = _pod("new", _c())
    handle = _Handle(pod, [_node("a0", "a"), _node("bare", None)])
    for name in ("a0", "bare"):
        events, _ = handle.state.apply("DELETED", b.node(name))  # the last state need not carry the labels
        assert events == [ClusterEvent(EventKind.NODE_REMOVED, node=name)]
    removed = PodTopologySpread(handle).queueing_hints()[EventKind.NODE_REMOVED]  # type: ignore[arg-type]
    assert removed(pod.uid, ClusterEvent(EventKind.NODE_REMOVED, node="a0"))
    assert not removed(pod.uid, ClusterEvent(EventKind.NODE_REMOVED, node="bare"))


def _args(args: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "tessera", "pluginConfig": [{"name": "PodTopologySpread", "args": args}]}]}


ARGS = "profiles[0].pluginConfig[0].args"


def test_args_default_to_system_and_schedule_anyway_defaults_are_accepted() -> None:
    parse_config(_args({}), "t.yaml")
    parse_config(_args({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 3, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"}]}), "t.yaml")


@pytest.mark.parametrize(("args", "message"), [
    ({"defaultingType": "Other"}, f'{ARGS}.defaultingType: Unsupported value: "Other": supported values: "System", "List"'),
    ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"}]},
     f'{ARGS}.defaultingType: Invalid value: "System": when .defaultConstraints are not empty'),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"}]},
     f"{ARGS}.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]},
     f"{ARGS}.defaultConstraints[0].topologyKey: Required value: can not be empty"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "Maybe"}]},
     f'{ARGS}.defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Maybe": supported values: '
     '"DoNotSchedule", "ScheduleAnyway"'),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway",
                                                        "labelSelector": {}}]},
     f"{ARGS}.defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 2, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"}]},
     f'{ARGS}.defaultConstraints[1]: Duplicate value: "{{{HOST}, ScheduleAnyway}}"'),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]},
     f"{ARGS}.defaultConstraints[0].whenUnsatisfiable: Forbidden: Tessera watches no Services"),
])
def test_args_are_validated_as_upstream_and_do_not_schedule_defaults_refused(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_args(args), "t.yaml")
    assert message in str(caught.value), str(caught.value)


def test_a_default_constraints_duplicate_is_its_key_and_action_together() -> None:
    """upstream's duplicate check keys on (topologyKey, whenUnsatisfiable): one key under both
    actions is no Duplicate (the DoNotSchedule one is refused for itself)."""
    with pytest.raises(ConfigError) as caught:
        parse_config(_args({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}), "t.yaml")
    assert "Forbidden: Tessera watches no Services" in str(caught.value)
    assert "Duplicate" not in str(caught.value), str(caught.value)


def test_the_tallies_kept_are_bounded() -> None:
    """One tally per signature, the least recently used dropped past TALLIES: a namespace per
    workload would otherwise keep every node's share for every workload ever spread."""
    state = ClusterState(frozenset({"tessera"}))
    plugin = PodTopologySpread(_Handle.over(state))  # type: ignore[arg-type]
    state.apply("ADDED", b.node("a0", labels={ZONE: "a"}))
    for i in range(TALLIES + 4):
        state.apply("ADDED", b.pod(f"r{i}", namespace=f"ns{i}", labels={"app": "web"},
                                   spec_extra={"topologySpreadConstraints": [_c()]}))
    for pod in list(state.pods.values()):
        plugin.counts(prepare(pod, state.classes))
    assert len(plugin._tallies) == TALLIES
