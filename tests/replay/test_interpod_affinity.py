"""Required pod affinity and anti-affinity are honoured as kube-scheduler's InterPodAffinity filter
(v1.36 pkg/scheduler/framework/plugins/interpodaffinity/filtering.go).

Before, TesseraUnhonouredTerms refused every pod with a required term and told it to run under
default-scheduler, which a GPU pod cannot: an inference team could not spread GPU replicas with
required podAntiAffinity by kubernetes.io/hostname.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.framework.cycle_state import prepare
from scheduler.core.plugins.interpod_affinity import ANTI_AFFINITY, InterPodAffinity
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def _term(app: str, key: str = HOST, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **extra}


def _pod(name: str, app: str, *, anti: list[dict[str, Any]] | None = None,
         affinity: list[dict[str, Any]] | None = None, **kw: Any) -> dict[str, Any]:
    terms: dict[str, Any] = {}
    if anti is not None:
        terms["podAntiAffinity"] = {REQ: anti}
    if affinity is not None:
        terms["podAffinity"] = {REQ: affinity}
    return b.pod(name, labels={"app": app, **kw.pop("labels", {})}, limits={"nvidia.com/gpu": 1},
                 spec_extra={"affinity": terms} if terms else None, **kw)


def test_two_replicas_with_anti_affinity_by_hostname_land_on_two_nodes() -> None:
    run = Run()
    run.add(b.node("n0", gpus=8), b.node("n1", gpus=8),
            _pod("infer-0", "infer", anti=[_term("infer")]), _pod("infer-1", "infer", anti=[_term("infer")]))
    nodes = {run.node_of("infer-0"), run.node_of("infer-1")}
    assert nodes == {"n0", "n1"}
    run.add(_pod("infer-2", "infer", anti=[_term("infer")]))
    assert run.node_of("infer-2") is None
    assert run.last("infer-2").message == (
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")


def test_affinity_to_an_existing_pods_zone() -> None:
    run = Run()
    run.add(b.node("a0", gpus=8, labels={ZONE: "a"}), b.node("b0", gpus=8, labels={ZONE: "b"}),
            b.node("b1", gpus=8, labels={ZONE: "b"}),
            b.pod("db", labels={"app": "db"}, node_name="b1", phase="Running", scheduler="default-scheduler"))
    run.add(_pod("web", "web", affinity=[_term("db", ZONE)]))
    assert run.node_of("web") in {"b0", "b1"}
    run.add(_pod("lost", "web", affinity=[_term("cache", ZONE)]))  # nothing matches, nor does it itself
    assert run.node_of("lost") is None
    assert "3 node(s) didn't match pod affinity rules" in run.last("lost").message


def test_affinity_needs_the_topology_key_on_the_node() -> None:
    run = Run()
    run.add(b.node("bare", gpus=8), b.node("z", gpus=8, labels={ZONE: "a"}),
            b.pod("db", labels={"app": "db"}, node_name="z", phase="Running"))
    run.add(_pod("web", "web", affinity=[_term("db", ZONE)]))
    assert run.node_of("web") == "z"


def test_existing_pods_anti_affinity_is_symmetric() -> None:
    run = Run()
    run.add(b.node("n0", gpus=8), b.node("n1", gpus=8),
            _pod("loner", "loner", anti=[_term("noisy")], node_name="n0", phase="Running"))
    run.add(_pod("noisy", "noisy"))  # no terms of its own: the loner's term keeps it off n0
    assert run.node_of("noisy") == "n1"
    run.add(_pod("noisy-2", "noisy", labels={"x": "1"}))
    assert run.node_of("noisy-2") == "n1"
    run.feed(b.event("DELETED", b.node("n1", gpus=8)))
    run.add(_pod("noisy-3", "noisy"))
    assert run.node_of("noisy-3") is None
    assert "1 node(s) didn't satisfy existing pods anti-affinity rules" in run.last("noisy-3").message


def test_namespaces_default_to_the_pods_own_and_empty_selector_means_all() -> None:
    run = Run()
    run.add(b.node("n0", gpus=8),
            b.pod("other-ns", namespace="team-b", labels={"app": "infer"}, node_name="n0", phase="Running"))
    run.add(_pod("mine", "mine", anti=[_term("infer")]))  # team-b's pod is not in its namespace
    assert run.node_of("mine") == "n0"
    run.add(_pod("all", "x", anti=[_term("infer", namespaceSelector={})]),  # `{}`: every namespace
            _pod("listed", "y", anti=[_term("infer", namespaces=["team-b"])]))
    assert run.node_of("all") is None and run.node_of("listed") is None
    assert "1 node(s) didn't match pod anti-affinity rules" in run.last("all").message


def test_a_gang_with_anti_affinity_among_its_members_spreads() -> None:
    run = Run()
    members = [_pod(f"m{i}", "train", anti=[_term("train")], labels={"scheduling.x-k8s.io/pod-group": "pg"})
               for i in range(3)]
    run.add(*(b.node(f"n{i}", gpus=8) for i in range(3)), b.podgroup("pg", 3), *members)
    assert sorted(str(run.node_of(f"m{i}")) for i in range(3)) == ["n0", "n1", "n2"]


def test_a_gang_that_cannot_spread_is_not_placed() -> None:
    run = Run()
    members = [_pod(f"m{i}", "train", anti=[_term("train")], labels={"scheduling.x-k8s.io/pod-group": "pg"})
               for i in range(3)]
    run.add(*(b.node(f"n{i}", gpus=8) for i in range(2)), b.podgroup("pg", 3), *members)
    assert [run.node_of(f"m{i}") for i in range(3)] == [None, None, None]


def test_the_first_pod_with_affinity_to_itself_is_placed() -> None:
    run = Run()
    run.add(b.node("a0", gpus=8, labels={ZONE: "a"}), b.node("b0", gpus=8, labels={ZONE: "b"}),
            b.node("c0", gpus=8))  # c0 has no zone: never for a zone affinity
    run.add(_pod("w0", "web", affinity=[_term("web", ZONE)]))
    first = run.node_of("w0")
    assert first in {"a0", "b0"}
    for i in (1, 2, 3):
        run.add(_pod(f"w{i}", "web", affinity=[_term("web", ZONE)]))
        assert run.node_of(f"w{i}") == first  # the rest follow it into its zone


def test_a_namespace_selector_is_still_refused_with_gpu_advice() -> None:
    run = Run()
    run.add(b.node("n0", gpus=8),
            _pod("ns", "infer", anti=[_term("infer", namespaceSelector={"matchLabels": {"team": "a"}})]))
    assert run.node_of("ns") is None
    message = run.last("ns").message
    assert "namespaceSelector" in message and "default-scheduler" not in message
    assert "a pod asking GPUs must stay with Tessera" in message


def test_anti_affinity_evicts_a_lower_priority_pod_affinity_does_not() -> None:
    """upstream: anti-affinity is Unschedulable (preemption may help), affinity
    UnschedulableAndUnresolvable."""
    run = Run()
    run.add(b.node("n0", gpus=8), _pod("low", "infer", priority=0))
    assert run.node_of("low") == "n0"
    run.add(_pod("lost", "web", affinity=[_term("cache")], priority=1000))
    assert run.last("lost").preempted == []
    assert run.last("lost").message == (
        "0/1 nodes are available: 1 node(s) didn't match pod affinity rules. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    run.add(_pod("high", "other", anti=[_term("infer")], priority=1000))
    assert run.node_of("high") == "n0"  # "low" was evicted for it
    assert run.state.pod_by_key("default/low") is None


def _nominated_high(run: Run) -> dict[str, Any]:
    """`high` (app=infer) preempts `low` on n0 and is nominated there while `low` terminates."""
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # terminating, not gone
    run.add(b.node("n0", gpus=8))
    low = b.pod("low", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=0)
    run.add(low)
    assert run.node_of("low") == "n0"
    run.add(b.pod("high", labels={"app": "infer"}, limits={"nvidia.com/gpu": 8}, priority=100))
    assert run.node_of("high") is None
    assert run.last("high").nominated_node == "n0"
    return low


def _nominated_high_in_zone() -> Run:
    """n0 and n1 in zone a; `high` (app=infer) preempts `low` on n0 and is nominated there while
    `low` terminates."""
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # terminating, not gone
    run.add(b.node("n0", gpus=8, labels={ZONE: "a"}), b.node("n1", labels={ZONE: "a"}))
    run.add(b.pod("low", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=0))
    run.add(b.pod("high", labels={"app": "infer"}, limits={"nvidia.com/gpu": 8}, priority=100))
    assert run.last("high").nominated_node == "n0"
    return run


def test_a_nominated_preemptor_counts_against_anti_affinity() -> None:
    """upstream's addGENominatedPods: a nominated pod of equal or higher priority is on its node
    for the filters, so a pod anti-affine to it does not take the node it is to run on."""
    run = Run(config(BINPACK))
    _nominated_high(run)
    run.add(b.pod("anti", labels={"app": "x"}, priority=0,
                  spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term("infer")]}}}))
    assert run.node_of("anti") is None
    assert "1 node(s) didn't match pod anti-affinity rules" in run.last("anti").message


def _nominated_anti_web(run: Run, key: str = HOST) -> None:
    """`high`, anti-affine to app=web by `key`, preempts `low` on n0 and is nominated there."""
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    run.add(b.node("n0", gpus=8, labels={ZONE: "a"}), b.node("n1", labels={ZONE: "a"}))
    run.add(b.pod("low", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=0))
    assert run.node_of("low") == "n0"
    run.add(b.pod("high", labels={"app": "infer"}, limits={"nvidia.com/gpu": 8}, priority=100,
                  spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term("web", key)]}}}))
    assert run.last("high").nominated_node == "n0"


def test_a_nominated_preemptors_own_anti_affinity_keeps_others_off_its_node() -> None:
    """Symmetry: a nominated pod's own anti-affinity terms count as an existing pod's on its own
    node (AddPod adds them to existingAntiAffinityCounts at that node's pairs). `web` has a term
    of its own, so the plugin is not skipped for it, and its nodeSelector asks for n0."""
    run = Run(config(BINPACK))
    _nominated_anti_web(run)
    run.add(b.pod("web", labels={"app": "web"}, priority=0,
                  spec_extra={"nodeSelector": {HOST: "n0"},
                              "affinity": {"podAntiAffinity": {REQ: [_term("nothing")]}}}))
    assert run.node_of("web") is None
    assert "1 node(s) didn't satisfy existing pods anti-affinity rules" in run.last("web").message


def test_a_nominated_preemptors_zone_anti_affinity_keeps_others_off_its_node_alone() -> None:
    """upstream adds a nominated pod only to its own node's copy of the counts: anti-affine to
    app=web by zone while nominated to n0, it does not repel `web` from n1 in the same zone
    (were it counted in zone a everywhere, n1 would be refused too)."""
    run = Run(config(BINPACK))
    _nominated_anti_web(run, ZONE)
    run.add(b.pod("web", labels={"app": "web"}, priority=0,
                  spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term("nothing")]}}}))
    assert run.node_of("web") == "n1"


def test_a_pod_without_terms_is_not_kept_off_by_a_nominated_preemptors_anti_affinity() -> None:
    """upstream's PreFilter skips the plugin for a pod with no required terms that no placed
    pod's anti-affinity matches (existingAntiAffinityCounts empty: Skip), and a skipped plugin's
    AddPod is not run for the nominated pods either: `web` may take n0 beside `high`'s hold."""
    run = Run(config(BINPACK))
    _nominated_anti_web(run)
    run.add(b.pod("web", labels={"app": "web"}, priority=0, spec_extra={"nodeSelector": {HOST: "n0"}}))
    assert run.node_of("web") == "n0"


def test_a_nominated_preemptor_does_not_satisfy_affinity() -> None:
    """upstream runs the filters on a node with nominated pods twice, with them and without
    (RunFilterPluginsWithNominatedPods): without `high`, nothing matches `near`'s affinity, and
    `near` does not match it itself, so n0 is refused ("a nominated pod never satisfies
    affinity": it may still go elsewhere)."""
    run = Run(config(BINPACK))
    _nominated_high(run)
    run.add(b.pod("near", labels={"app": "near"}, priority=0,
                  spec_extra={"affinity": {"podAffinity": {REQ: [_term("infer")]}}}))
    assert run.node_of("near") is None
    assert "1 node(s) didn't match pod affinity rules" in run.last("near").message


def test_a_nominated_preemptor_on_another_node_of_the_zone_does_not_satisfy_affinity() -> None:
    """`high` (app=infer) nominated to n0 in zone a: n1, also in zone a, has no pod nominated,
    so its single pass counts the placed pods alone and `near` (affinity to app=infer by zone)
    is refused there too."""
    run = _nominated_high_in_zone()
    run.add(b.pod("near", labels={"app": "near"}, priority=0,
                  spec_extra={"affinity": {"podAffinity": {REQ: [_term("infer", ZONE)]}}}))
    assert run.node_of("near") is None
    assert "2 node(s) didn't match pod affinity rules" in run.last("near").message


def test_a_nominated_preemptor_on_another_node_of_the_zone_does_not_repel() -> None:
    """`high` (app=infer) nominated to n0 in zone a is no pod of zone a while n1 is filtered:
    `anti`, anti-affine to app=infer by zone, takes n1 (kube-scheduler would); n0 it may not."""
    run = _nominated_high_in_zone()
    run.add(b.pod("anti", labels={"app": "x"}, priority=0,
                  spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term("infer", ZONE)]}}}))
    assert run.node_of("anti") == "n1"


def test_the_first_of_a_series_is_not_held_back_by_a_nominated_peer_elsewhere() -> None:
    """`web` (app=web, affinity to app=web by zone) is the first of its series among the placed
    pods: `peer` (app=web) is only nominated, to b0 in zone b. a0 has no pod nominated, so its
    single pass counts no match at all and the first-of-a-series rule lets `web` in; counting
    `peer` in zone b everywhere refused a0 (a match exists, not in zone a). b0's taint keeps `web`
    off it."""
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    gpu_only = [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]
    tolerates = {"tolerations": [{"key": "gpu", "operator": "Exists"}]}
    run.add(b.node("a0", labels={ZONE: "a"}), b.node("b0", gpus=8, labels={ZONE: "b"}, taints=gpu_only))
    run.add(b.pod("low", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=0, spec_extra=tolerates))
    assert run.node_of("low") == "b0"
    run.add(b.pod("peer", labels={"app": "web"}, limits={"nvidia.com/gpu": 8}, priority=100, spec_extra=tolerates))
    assert run.last("peer").nominated_node == "b0"
    run.add(b.pod("web", labels={"app": "web"}, priority=0,
                  spec_extra={"affinity": {"podAffinity": {REQ: [_term("web", ZONE)]}}}))
    assert run.node_of("web") == "a0"


def test_the_preemptor_is_placed_once_its_victim_is_gone() -> None:
    run = Run(config(BINPACK))
    low = _nominated_high(run)
    run.add(b.pod("anti", labels={"app": "x"}, priority=0,
                  spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term("infer")]}}}))
    run.feed(b.event("DELETED", low))
    assert run.node_of("high") == "n0"


def _tries(run: Run, name: str) -> int:
    return sum(1 for a in run.attempts if a.pod.meta.name == name)


def test_a_node_given_the_terms_key_takes_the_waiting_pod_at_once() -> None:
    """EventsToRegister: Node UpdateNodeLabel requeues a pod InterPodAffinity rejected (here the
    first of its series, refused only for the node's missing zone)."""
    run = Run()
    run.add(b.node("n0", gpus=8))
    run.add(_pod("web", "web", affinity=[_term("web", ZONE)]))
    assert run.node_of("web") is None and _tries(run, "web") == 1
    run.feed(b.event("MODIFIED", b.node("n0", gpus=8, labels={ZONE: "a"})))
    assert _tries(run, "web") == 2 and run.node_of("web") == "n0"


def test_a_new_pod_it_has_affinity_to_requeues_the_waiting_pod() -> None:
    """A pod waiting for affinity to a pod not there yet is tried again when that pod arrives."""
    run = Run()
    run.add(b.node("n0", gpus=8))
    run.add(_pod("web", "web", affinity=[_term("db")]))
    assert run.node_of("web") is None and _tries(run, "web") == 1
    run.add(_pod("db", "db"))
    assert run.node_of("db") == "n0"
    assert _tries(run, "web") >= 2 and run.node_of("web") == "n0"


def test_a_hold_let_go_no_longer_counts_its_pod_on_the_node() -> None:
    """Once a nominated preemptor's hold is released (it is still pending, placed nowhere), the
    filters count it on no node (`ClusterState.nominated_on`, which InterPodAffinity and, through
    `on_node`, NodePorts read) until a hold is made for it again (the next cycle's
    `hold_nominated`)."""
    run = Run(config(BINPACK))
    _nominated_high(run)
    high = run.state.pod_by_key("default/high")
    n0 = run.state.nodes["n0"]
    assert high is not None and high.uid in run.state.nominated_on(n0)
    assert high.uid not in run.state.nominated_on(n0, skip=high.uid)
    assert run.state.release_hold(high.uid) is not None
    assert high.uid not in run.state.on_node(n0) and high.uid not in run.state.nominated_on(n0)


def test_a_held_pods_relabel_is_seen_by_the_filter() -> None:
    """A nominated preemptor relabelled while it holds room: the counts cached for another pod
    (kept while `touches` stands) are of the placed pods alone, and the node's nominated pods are
    read at each filter call, so `anti`, repelled by app=infer, passes n0 once `high` is
    app=other."""
    run = Run(config(BINPACK))
    _nominated_high(run)
    run.add(b.pod("anti", labels={"app": "x"}, priority=0,
                  spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term("infer")]}}}))
    assert run.node_of("anti") is None
    anti = run.state.pod_by_key("default/anti")
    assert anti is not None
    plugin = run.scheduler._engine.profiles["tessera"].plugins["InterPodAffinity"]
    assert isinstance(plugin, InterPodAffinity)
    ctx, n0 = prepare(anti, run.state.classes), run.state.nodes["n0"]
    assert not plugin.counts(ctx).anti and plugin.filter(ctx, n0) == (ANTI_AFFINITY,)
    relabelled = b.pod("high", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=100)
    relabelled["status"]["nominatedNodeName"] = "n0"
    run.scheduler.apply("MODIFIED", relabelled, 100.0)  # the update alone, no cycle after it
    assert run.state.holds, "the hold stands"
    assert plugin.filter(ctx, n0) is None


def test_every_nominated_preemptor_holding_room_on_a_node_counts_there() -> None:
    """Two preemptors nominated to n0 (4 GPUs each, `low`'s 8 terminating) both hold room there:
    a pod anti-affine to either is kept off n0."""
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # terminating, not gone
    run.add(b.node("n0", gpus=8), b.pod("low", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=0))
    run.add(b.pod("one", labels={"app": "one"}, limits={"nvidia.com/gpu": 4}, priority=100))
    run.add(b.pod("two", labels={"app": "two"}, limits={"nvidia.com/gpu": 4}, priority=100))
    assert run.last("one").nominated_node == run.last("two").nominated_node == "n0" and len(run.state.holds) == 2
    for app in ("one", "two"):
        run.add(b.pod(f"anti-{app}", labels={"app": "x"}, priority=0,
                      spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term(app)]}}}))
        assert run.node_of(f"anti-{app}") is None
        assert "1 node(s) didn't match pod anti-affinity rules" in run.last(f"anti-{app}").message


def test_a_node_whose_nominated_pod_alone_satisfies_affinity_is_no_preemption_candidate() -> None:
    """`both` (affinity to app=infer, anti-affinity to app=x, by host) on n0, where `high`
    (app=infer) is nominated and `xlow` (app=x) placed. With `high` added n0 fails anti-affinity
    (Unschedulable: preemption may try it); evicting `xlow` in the dry run passes that pass, but
    without `high` nothing satisfies the affinity, so upstream finds no victims (SelectVictimsOnNode
    returns that pass's status). Counting `high` as if placed evicted `xlow` for a node `both`
    could not be sure of."""
    run = Run(config(BINPACK))
    _nominated_high(run)
    run.add(b.pod("xlow", labels={"app": "x"}, requests={"cpu": "1"}, priority=0))
    assert run.node_of("xlow") == "n0"
    run.add(b.pod("both", labels={"app": "both"}, requests={"cpu": "1"}, priority=50,
                  spec_extra={"affinity": {"podAffinity": {REQ: [_term("infer")]},
                                           "podAntiAffinity": {REQ: [_term("x")]}}}))
    assert run.node_of("both") is None and run.last("both").preempted == []
    assert run.last("both").message == (
        "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules. "
        "preemption: 0/1 nodes are available: 1 node(s) didn't match pod affinity rules.")
