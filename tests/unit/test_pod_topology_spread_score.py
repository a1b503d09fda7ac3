"""PodTopologySpread's score of `whenUnsatisfiable: ScheduleAnyway` constraints, as kube-scheduler
v1.36's (pkg/scheduler/framework/plugins/podtopologyspread/scoring.go): PreScore's counts over
every node and its normalizing weights over the feasible ones (log(size + 2); the hostname key's
size is the feasible nodes that have every key), Score's cnt * weight + (maxSkew - 1) summed and
rounded, NormalizeScore's 100 * (max + min - s) / max with a node lacking a key at 0. The cases
and their scores are upstream's TestPodTopologySpreadScore's, each worked by hand in its comment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from scheduler.api.config import parse_config
from scheduler.core.framework.interface import Normalize
from scheduler.core.framework.runtime import normalize
from scheduler.core.objects import Node, Pod, parse_node, parse_pod
from scheduler.core.framework.cycle_state import prepare
from scheduler.core.plugins.pod_topology_spread import IGNORED, PodTopologySpread, _go_round, node_score, pre_score
from scheduler.core.state import ClusterState
from scheduler.core.plugins.registry import BY_NAME
from scheduler.core.pod_terms import pod_terms
from scheduler.sim import builders as b
from tests.unit.topology_oracles import spread_count

ZONE = "zone"
HOST = "kubernetes.io/hostname"


def _soft(key: str, max_skew: int = 1, app: str | None = "foo", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", **extra}
    if app is not None:
        out["labelSelector"] = {"matchExpressions": [{"key": app, "operator": "Exists"}]}
    return out


def _pod(name: str, *constraints: dict[str, Any], labels: Sequence[str] = ("foo",), **kw: Any) -> Pod:
    spec = {"topologySpreadConstraints": list(constraints)} if constraints else None
    return parse_pod(b.pod(name, labels=dict.fromkeys(labels, ""), spec_extra=spec, **kw))


def _node(name: str, zone: str | None = None, host: bool = True) -> Node:
    raw = b.node(name, labels={ZONE: zone} if zone else {})
    if not host:
        del raw["metadata"]["labels"][HOST]
    return parse_node(raw)


def _scores(pod: Pod, feasible: list[tuple[Node, list[Pod]]], failed: Sequence[tuple[Node, list[Pod]]] = ()) -> list[int]:
    """The feasible nodes' normalised scores, the pods counted over `feasible` and `failed` alike."""
    layout = [*feasible, *failed]
    pods = {p.uid: p for _, placed in layout for p in placed}
    domains = spread_count(pod, ((n, [p.uid for p in placed]) for n, placed in layout), pods, pod.soft_spread).domains
    soft = pre_score(pod.soft_spread, domains, [n.meta.labels for n, _ in feasible])
    raw = [node_score(soft, pod, n.meta.labels, [p.uid for p in placed], pods) for n, placed in feasible]
    return [int(v) for v in normalize(np.array(raw, np.int64), Normalize.SPREAD).tolist()]


def _on(node: str, n: int, *labels: str, **kw: Any) -> list[Pod]:
    return [_pod(f"{node}-{i}", labels=labels or ("foo",), **kw) for i in range(n)]


def test_hostname_counts_weighted_by_the_feasible_nodes_and_normalised() -> None:
    # 2/1/0/3 on four hostnames: weight log(4 + 2) = 1.79; raw round(3.58, 1.79, 0, 5.38) = 4, 2, 0, 5;
    # min 0, max 5: 100 * (5 + 0 - s) / 5
    nodes = [_node(n) for n in "abcd"]
    layout = list(zip(nodes, [_on("a", 2), _on("b", 1), [], _on("d", 3)]))
    assert _scores(_pod("p", _soft(HOST)), layout) == [20, 60, 100, 0]
    # maxSkew 2 adds 1 to every raw score: 5, 3, 1, 6 -> 100 * (7 - s) / 6, truncated
    assert _scores(_pod("p", _soft(HOST, 2)), layout) == [33, 66, 100, 16]



def test_a_hostname_constraint_counts_the_nodes_own_pods_and_weighs_by_the_feasible_nodes() -> None:
    """upstream's hostname special case: Score counts the node's own pods (not its label value's
    domain) and the weight's size is the number of feasible nodes (not of hostname values), which
    differ where two nodes carry one hostname label value."""
    x0, x1, y = (parse_node(b.node(name, labels={HOST: host})) for name, host in (("x0", "x"), ("x1", "x"), ("y", "y")))
    pod = _pod("p", _soft(HOST))
    layout = [(x0, _on("x0", 2)), (x1, []), (y, _on("y", 1))]
    pods = {p.uid: p for _, placed in layout for p in placed}
    domains = spread_count(pod, ((n, [p.uid for p in placed]) for n, placed in layout), pods, pod.soft_spread).domains
    soft = pre_score(pod.soft_spread, domains, [n.meta.labels for n, _ in layout])
    assert soft.weights == pytest.approx((np.log(3 + 2),))  # three nodes, two hostname values
    raw = [node_score(soft, pod, n.meta.labels, [p.uid for p in placed], pods) for n, placed in layout]
    assert raw == [round(2 * np.log(5)), 0, round(np.log(5))]  # x1 holds none of x0's pods


def test_go_round_takes_halves_away_from_zero() -> None:
    assert [_go_round(v) for v in (0.5, 1.5, 2.5, -0.5, -2.5, 2.4999, 2.0)] == [1, 2, 3, -1, -3, 2, 2]


def test_a_domain_not_counted_scores_no_pod() -> None:
    """A feasible node whose domain the counts lack (left out by the inclusion policies, as where
    TaintToleration is disabled and nodeTaintsPolicy is Honor) has no matching pod there."""
    pod = _pod("p", _soft(ZONE))
    soft = pre_score(pod.soft_spread, [{"a": 3}], [{ZONE: "a"}, {ZONE: "b"}])
    assert node_score(soft, pod, {ZONE: "b"}, [], {}) == 0


def test_a_pod_with_do_not_schedule_constraints_only_is_not_scored() -> None:
    """score_applies reads the ScheduleAnyway constraints alone: a DoNotSchedule one is the
    filter's, and scoring it would show a PodTopologySpread part in every node's score."""
    state = ClusterState(frozenset({"tessera"}))
    plugin = PodTopologySpread(_Over(state))  # type: ignore[arg-type]
    hard = _pod("p", {**_soft(ZONE), "whenUnsatisfiable": "DoNotSchedule"})
    assert hard.spread and not plugin.score_applies(prepare(hard, state.classes))
    assert plugin.score_applies(prepare(_pod("q", _soft(ZONE)), state.classes))


class _Over:
    def __init__(self, state: ClusterState) -> None:
        self.state = state


def test_max_skew_three_waters_the_differences_down() -> None:
    # 4/3/2/1: raw round(4w + 2, 3w + 2, 2w + 2, w + 2), w = 1.79: 9, 7, 6, 4 -> 100 * (13 - s) / 9
    nodes = [_node(n) for n in "abcd"]
    layout = list(zip(nodes, [_on("a", 4), _on("b", 3), _on("c", 2), _on("d", 1)]))
    assert _scores(_pod("p", _soft(HOST, 3)), layout) == [44, 66, 77, 100]


def test_equal_counts_all_score_the_maximum() -> None:
    nodes = [_node(n) for n in "ab"]
    assert _scores(_pod("p", _soft(HOST)), [(nodes[0], []), (nodes[1], [])]) == [100, 100]  # max 0
    assert _scores(_pod("p", _soft(HOST)), [(nodes[0], _on("a", 1)), (nodes[1], _on("b", 1))]) == [100, 100]
    # a null selector counts no pod: every raw score 0
    layout = [(nodes[0], _on("a", 2)), (nodes[1], _on("b", 1))]
    assert _scores(_pod("p", _soft(HOST, app=None)), layout) == [100, 100]
    # maxSkew 4, nothing counted: raw 3 everywhere, 100 * (3 + 3 - 3) / 3
    assert _scores(_pod("p", _soft(HOST, 4)), [(nodes[0], []), (nodes[1], [])]) == [100, 100]


def test_a_feasible_node_lacking_a_key_scores_zero_and_is_left_out_of_the_weight() -> None:
    # 4/?2?/1/~3~: node-b lacks the hostname label, node-y is not feasible; the hostname size is
    # 3 feasible - 1 ignored = 2, weight log(4): raw round(5.55) = 6 and round(1.39) = 1
    a, x, y = _node("a"), _node("x"), _node("y")
    bare = _node("b", host=False)
    pod = _pod("p", _soft(HOST))
    assert _scores(pod, [(a, _on("a", 4)), (bare, _on("b", 2)), (x, _on("x", 1))], [(y, _on("y", 3))]) == [16, 0, 100]
    soft = pre_score(pod.soft_spread, [{}], [bare.meta.labels])
    assert node_score(soft, pod, bare.meta.labels, [], {}) == IGNORED
    # only nodes lacking a key: every one 0
    assert normalize(np.array([IGNORED, IGNORED], np.int64), Normalize.SPREAD).tolist() == [0, 0]
    # the others normalise among themselves: min 5 = max 5
    assert normalize(np.array([5, IGNORED, 5], np.int64), Normalize.SPREAD).tolist() == [100, 0, 100]


def test_zone_counts_take_every_node_the_weight_only_the_feasible_domains() -> None:
    # 4/2/1/~3~ in zone1 (a, b) and zone2 (x, y): zone1 6, zone2 4 (y counted though not feasible);
    # two feasible zones, weight log(4): round(8.32) = 8, 8, round(5.55) = 6 -> 100 * (14 - s) / 8
    pod = _pod("p", _soft(ZONE))
    a, b_, x, y = _node("a", "zone1"), _node("b", "zone1"), _node("x", "zone2"), _node("y", "zone2")
    assert _scores(pod, [(a, _on("a", 4)), (b_, _on("b", 2)), (x, _on("x", 1))], [(y, _on("y", 3))]) == [75, 75, 100]


def test_zone_and_hostname_constraints_sum() -> None:
    # 2/~1~/2/~4~: zone1 3, zone2 6, weight log(4) each (two zones; two feasible hostnames):
    # a: 3w + 2w = 6.93 -> 7; x: 6w + 2w = 11.09 -> 11; 100 * (18 - s) / 11
    pod = _pod("p", _soft(ZONE), _soft(HOST))
    a, b_, x, y = _node("a", "zone1"), _node("b", "zone1"), _node("x", "zone2"), _node("y", "zone2")
    assert _scores(pod, [(a, _on("a", 2)), (x, _on("x", 2))], [(b_, _on("b", 1)), (y, _on("y", 4))]) == [100, 63]


def test_two_constraints_on_one_key_with_different_selectors() -> None:
    # zone1 foo 3, bar 2; zone2 foo 3, bar 1 (b and y not feasible); weight log(4) each:
    # a: 5w = 6.93 -> 7; x: 4w = 5.55 -> 6; 100 * (13 - s) / 7
    pod = _pod("p", _soft(ZONE), _soft(ZONE, app="bar"), labels=("foo", "bar"))
    a, b_, x, y = _node("a", "zone1"), _node("b", "zone1"), _node("x", "zone2"), _node("y", "zone2")
    both = ("foo", "bar")
    assert _scores(pod, [(a, [_pod("a-1", labels=both), _pod("a-2")]), (x, [])],
                   [(b_, [_pod("b-1", labels=both)]), (y, [_pod("y-1"), _pod("y-2", labels=both), _pod("y-3")])]) \
        == [85, 100]


def test_zone_and_hostname_with_different_selectors() -> None:
    # a P{foo}, b P{foo, bar}, y P{foo} P{bar}: zone (foo) zone1 2, zone2 1, weight log(4);
    # hostname (bar) 0/1/0/1, weight log(6): raw round(2.77, 4.57, 1.39, 3.18) = 3, 5, 1, 3
    # -> 100 * (6 - s) / 5
    pod = _pod("p", _soft(ZONE), _soft(HOST, app="bar"), labels=("foo", "bar"))
    nodes = [_node("a", "zone1"), _node("b", "zone1"), _node("x", "zone2"), _node("y", "zone2")]
    placed = [[_pod("a-1")], [_pod("b-1", labels=("foo", "bar"))], [], [_pod("y-1"), _pod("y-2", labels=("bar",))]]
    assert _scores(pod, list(zip(nodes, placed))) == [60, 20, 100, 60]


def test_other_namespaces_and_terminating_pods_do_not_count() -> None:
    pod = _pod("p", _soft(HOST))
    a, b_ = _node("a"), _node("b")
    # a: 1 of its 2 is in ns1; b: 2 -> raw round(1.39) = 1, round(2.77) = 3 -> 100 * (4 - s) / 3
    assert _scores(pod, [(a, [_pod("a-1", namespace="ns1"), _pod("a-2")]), (b_, _on("b", 2))]) == [100, 33]
    raw = b.pod("a-1", labels={"foo": ""})
    raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    gone = parse_pod(raw)
    assert _scores(pod, [(a, [gone]), (b_, _on("b", 1))]) == [100, 0]


def test_the_zone_counts_honour_the_pods_node_affinity() -> None:
    """nodeAffinityPolicy Honor (the default): pods on a node the pod's nodeSelector leaves out
    are not counted in its zone; Ignore counts them."""
    gpu = {"pool": "gpu"}
    a = parse_node(b.node("a", labels={ZONE: "z1", HOST: "a", "pool": "gpu"}))
    x = parse_node(b.node("x", labels={ZONE: "z2", HOST: "x", "pool": "gpu"}))
    cpu = parse_node(b.node("c", labels={ZONE: "z2", HOST: "c", "pool": "cpu"}))
    layout = [(a, _on("a", 1)), (x, [])]
    honour = parse_pod(b.pod("p", labels={"foo": ""}, spec_extra={"topologySpreadConstraints": [_soft(ZONE)],
                                                                   "nodeSelector": gpu}))
    # z1 1, z2 0: raw round(1.39) = 1, 0 -> 100 * (1 - s) / 1
    assert _scores(honour, layout, [(cpu, _on("c", 5))]) == [0, 100]
    ignore = parse_pod(b.pod("p", labels={"foo": ""}, spec_extra={
        "topologySpreadConstraints": [_soft(ZONE, nodeAffinityPolicy="Ignore")], "nodeSelector": gpu}))
    # z1 1, z2 5: raw 1, round(6.93) = 7 -> 100 * (8 - s) / 7
    assert _scores(ignore, layout, [(cpu, _on("c", 5))]) == [100, 14]


def test_schedule_anyway_is_read_for_the_score_and_not_told() -> None:
    spec = {"topologySpreadConstraints": [_soft(ZONE), {**_soft(HOST), "whenUnsatisfiable": "DoNotSchedule"}]}
    pod = parse_pod(b.pod("p", labels={"foo": ""}, spec_extra=spec))
    assert [c.topology_key for c in pod.soft_spread] == [ZONE] and [c.topology_key for c in pod.spread] == [HOST]
    assert pod_terms(spec) == ((), ()) and pod.unread == ()


def test_default_weight_is_upstreams_two() -> None:
    assert BY_NAME["PodTopologySpread"].default_weight == 2
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "tessera"}]}
    [profile] = parse_config(raw, "t.yaml").profiles
    assert dict(profile.score_weights)["PodTopologySpread"] == 2


@pytest.mark.parametrize("raw, out", [
    ([3, 1, 2], [33, 100, 66]),  # 100 * (4 - s) / 3
    ([0, 0], [100, 100]),
    ([7], [100]),
    ([0, 4], [100, 0]),  # min 0: 100 * (4 - 4) / 4
    ([0, IGNORED, 0], [100, 0, 100]),  # max 0: 100 but for an ignored node
    ([IGNORED, IGNORED], [0, 0]),
])
def test_normalise_score_integer_arithmetic(raw: list[int], out: list[int]) -> None:
    assert normalize(np.array(raw, np.int64), Normalize.SPREAD).tolist() == out
