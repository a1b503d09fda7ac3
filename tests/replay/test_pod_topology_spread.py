"""`topologySpreadConstraints` with `whenUnsatisfiable: DoNotSchedule` are honoured as kube-scheduler's
PodTopologySpread filter (v1.36 pkg/scheduler/framework/plugins/podtopologyspread/filtering.go).

Before, TesseraUnhonouredTerms refused every such pod and told it to use required podAntiAffinity
or run under default-scheduler, which a GPU pod cannot: a Deployment of GPU replicas could not be
spread over zones.
"""

from __future__ import annotations

from typing import Any

from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

ZONE = "topology.kubernetes.io/zone"
SKEW = "node(s) didn't match pod topology spread constraints"


def _spread(app: str = "web", key: str = ZONE, max_skew: int = 1, **extra: Any) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}}, **extra}


def _replica(name: str, *constraints: dict[str, Any], app: str = "web", **kw: Any) -> dict[str, Any]:
    return b.pod(name, labels={"app": app, **kw.pop("labels", {})}, limits={"nvidia.com/gpu": 1},
                 spec_extra={"topologySpreadConstraints": list(constraints or (_spread(app),))}, **kw)


def _zones(run: Run) -> None:
    run.add(*(b.node(f"{z}{i}", gpus=8, labels={ZONE: z}) for z in "abc" for i in range(2)))


def _per_zone(run: Run, names: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        node = run.node_of(name)
        assert node is not None, name
        counts[node[0]] = counts.get(node[0], 0) + 1
    return counts


def test_six_replicas_over_three_zones_land_two_per_zone() -> None:
    run = Run()  # binpack: without the constraint they would all go to one node
    _zones(run)
    for i in range(6):
        run.add(_replica(f"web-{i}"))
    assert _per_zone(run, [f"web-{i}" for i in range(6)]) == {"a": 2, "b": 2, "c": 2}


def test_a_replica_that_would_exceed_the_skew_pends_and_a_deletion_requeues_it() -> None:
    run = Run()
    run.add(b.node("a0", gpus=8, labels={ZONE: "a"}), b.node("b0", gpus=1, labels={ZONE: "b"}))
    run.add(_replica("web-0"), _replica("web-1"))
    assert sorted(str(run.node_of(n)) for n in ("web-0", "web-1")) == ["a0", "b0"]
    run.add(_replica("web-2"))  # a0 would make a 2:1 skew, fine; but b0 is full: a0
    assert run.node_of("web-2") == "a0"
    run.add(_replica("web-3"))  # a0: 3 - 1 = 2 > 1; b0 has no GPU left
    assert run.node_of("web-3") is None
    assert run.last("web-3").message == (
        f"0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 {SKEW}. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    run.feed(b.event("DELETED", _replica("web-2", node_name="a0", phase="Running")))
    assert run.state.pod_by_key("default/web-2") is None
    assert run.node_of("web-3") == "a0"  # requeued by the deletion: 2 - 1 = 1


def test_a_node_without_the_key_is_unresolvable() -> None:
    run = Run()
    run.add(b.node("bare", gpus=8), _replica("web-0"))
    assert run.node_of("web-0") is None
    assert run.last("web-0").message == (
        f"0/1 nodes are available: 1 {SKEW} (missing required label). "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


def test_min_domains_counts_the_global_minimum_as_zero() -> None:
    run = Run()
    run.add(b.node("a0", gpus=8, labels={ZONE: "a"}), b.node("b0", gpus=8, labels={ZONE: "b"}))
    spread = _spread(minDomains=3)
    for i in range(2):
        run.add(_replica(f"web-{i}", spread))
    assert sorted(str(run.node_of(f"web-{i}")) for i in range(2)) == ["a0", "b0"]
    run.add(_replica("web-2", spread))  # 2 domains < 3: min is 0, and 1 + 1 - 0 > 1 everywhere
    assert run.node_of("web-2") is None
    assert f"2 {SKEW}" in run.last("web-2").message
    run.add(b.node("c0", gpus=8, labels={ZONE: "c"}))
    assert run.node_of("web-2") == "c0"


def test_a_gang_spreads_its_members_in_one_transaction() -> None:
    run = Run()
    _zones(run)
    members = [_replica(f"m{i}", labels={"scheduling.x-k8s.io/pod-group": "pg"}) for i in range(3)]
    run.add(b.podgroup("pg", 3), *members)
    assert _per_zone(run, [f"m{i}" for i in range(3)]) == {"a": 1, "b": 1, "c": 1}


def test_schedule_anyway_never_keeps_a_pod_off_a_node() -> None:
    """A node lacking the key only scores 0 (the score: tests/replay/test_pod_topology_spread_score.py)."""
    run = Run()
    run.add(b.node("bare", gpus=8))
    run.add(_replica("soft", {**_spread(), "whenUnsatisfiable": "ScheduleAnyway"}))
    assert run.node_of("soft") == "bare"
    assert not any("ScheduleAnyway" in n for n in run.notices())


def test_evicting_a_lower_priority_replica_resolves_the_skew() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a0", gpus=2, labels={ZONE: "a"}), b.node("b0", gpus=1, labels={ZONE: "b"}))
    run.add(b.pod("filler", limits={"nvidia.com/gpu": 1}, node_name="b0", phase="Running", priority=2000))
    run.add(_replica("low", priority=0))
    assert run.node_of("low") == "a0"
    run.add(_replica("high", priority=1000))  # a0: 1 + 1 - 0 = 2 > 1; evicting low resolves it
    assert run.node_of("high") == "a0"
    assert run.state.pod_by_key("default/low") is None


def test_a_nominated_preemptor_of_higher_priority_is_counted() -> None:
    """upstream's addGENominatedPods: `high`, nominated to a0 while its victim terminates, counts
    in zone a for a pod of lower priority."""
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # terminating, not gone
    run.add(b.node("a0", gpus=8, labels={ZONE: "a"}), b.node("b0", labels={ZONE: "b"}))
    run.add(b.pod("low", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=0))
    run.add(b.pod("high", labels={"app": "web"}, limits={"nvidia.com/gpu": 8}, priority=100))
    assert run.node_of("high") is None and run.last("high").nominated_node == "a0"
    pinned = b.pod("pinned", labels={"app": "web"}, requests={"cpu": "1"}, spec_extra={
        "nodeSelector": {ZONE: "a"}, "topologySpreadConstraints": [_spread(nodeAffinityPolicy="Ignore")]})
    run.add(pinned)  # zone a: 1 (high) + 1 - 0 (zone b) > 1
    assert run.node_of("pinned") is None
    assert f"1 {SKEW}" in run.last("pinned").message


def test_explain_prints_the_plugins_reasons_per_node() -> None:
    objs = [b.node("a0", gpus=8, labels={ZONE: "a"}), b.node("b0", gpus=8, labels={ZONE: "b"}),
            b.node("bare", gpus=8), _replica("w0", node_name="a0", phase="Running"), _replica("new")]
    result = explaining.explain(objs, "default/new", config(BINPACK), [], 0.0)
    assert result is not None
    lines = explaining.render(result, 0.0).splitlines()
    assert "  would go to b0" in lines
    assert f"  a0     {SKEW}" in lines and f"  bare   {SKEW} (missing required label)" in lines


def test_a_nominated_preemptor_on_another_node_does_not_raise_the_global_minimum() -> None:
    """upstream's RunFilterPluginsWithNominatedPods adds the pods nominated to the node filtered,
    and only those (addGENominatedPods on that node's copy of the PreFilter state): `high`,
    nominated to b0 while its victim terminates, is no pod of zone b while a0 is filtered, so
    zone b's count stays 0 and a0 (1 + 1 - 0 > 1) is refused. Counting it in zone b everywhere
    made the minimum 1 and placed `new` on a0: were `high` to go elsewhere, zone a held 2 and
    zone b none, a skew of 2 against a maxSkew of 1."""
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # terminating, not gone
    gpu_only = [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]
    tolerates = {"tolerations": [{"key": "gpu", "operator": "Exists"}]}
    run.add(b.node("a0", labels={ZONE: "a"}), b.node("b0", gpus=8, labels={ZONE: "b"}, taints=gpu_only))
    run.add(b.pod("w0", labels={"app": "web"}, requests={"cpu": "1"}, node_name="a0", phase="Running"))
    run.add(b.pod("low", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=0, spec_extra=tolerates))
    assert run.node_of("low") == "b0"
    run.add(b.pod("high", labels={"app": "web"}, limits={"nvidia.com/gpu": 8}, priority=100, spec_extra=tolerates))
    assert run.node_of("high") is None and run.last("high").nominated_node == "b0"
    run.add(b.pod("new", labels={"app": "web"}, requests={"cpu": "1"},
                  spec_extra={"topologySpreadConstraints": [_spread()]}))  # b0: its taint
    assert run.node_of("new") is None
    assert f"1 {SKEW}" in run.last("new").message


def test_a_node_with_a_nominated_pod_must_pass_with_and_without_it() -> None:
    """upstream runs the filters twice on a node with nominated pods of the pod's priority or
    higher: with them added, then without (RunFilterPluginsWithNominatedPods); it passes only if
    both do. `high` nominated to b0 (zone b) while zone a has one replica: with it zone b holds
    1 and the minimum is 1 (b0: 1 + 1 - 1, fine); without it the minimum is 0 and b0 passes too,
    so `new` lands on b0 beside `high`'s hold, as kube-scheduler would place it."""
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    run.add(b.node("a0", labels={ZONE: "a"}), b.node("b0", gpus=8, labels={ZONE: "b"}))
    run.add(b.pod("w0", labels={"app": "web"}, requests={"cpu": "1"}, node_name="a0", phase="Running"))
    run.add(b.pod("low", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=0))
    run.add(b.pod("high", labels={"app": "web"}, limits={"nvidia.com/gpu": 8}, priority=100))
    assert run.last("high").nominated_node == "b0"
    run.add(b.pod("new", labels={"app": "web"}, requests={"cpu": "1"},
                  spec_extra={"topologySpreadConstraints": [_spread()]}))
    assert run.node_of("new") == "b0"
