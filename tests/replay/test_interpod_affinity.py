"""Required pod affinity and anti-affinity are honoured as kube-scheduler's InterPodAffinity filter
(v1.36 pkg/scheduler/framework/plugins/interpodaffinity/filtering.go).

Before, TesseraUnhonouredTerms refused every pod with a required term and told it to run under
default-scheduler, which a GPU pod cannot: an inference team could not spread GPU replicas with
required podAntiAffinity by kubernetes.io/hostname.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.framework.cycle_state import prepare
from scheduler.core.plugins.interpod_affinity import InterPodAffinity
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


def test_a_nominated_preemptor_counts_against_anti_affinity() -> None:
    """upstream's addGENominatedPods: a nominated pod of equal or higher priority is on its node
    for the filters, so a pod anti-affine to it does not take the node it is to run on."""
    run = Run(config(BINPACK))
    _nominated_high(run)
    run.add(b.pod("anti", labels={"app": "x"}, priority=0,
                  spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term("infer")]}}}))
    assert run.node_of("anti") is None
    assert "1 node(s) didn't match pod anti-affinity rules" in run.last("anti").message


def test_a_nominated_preemptors_own_anti_affinity_keeps_others_off() -> None:
    """Symmetry: a nominated pod's own anti-affinity terms count as an existing pod's."""
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    run.add(b.node("n0", gpus=8))
    run.add(b.pod("low", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=0))
    run.add(b.pod("high", labels={"app": "infer"}, limits={"nvidia.com/gpu": 8}, priority=100,
                  spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term("web")]}}}))
    assert run.last("high").nominated_node == "n0"
    run.add(b.pod("web", labels={"app": "web"}, priority=0))
    assert run.node_of("web") is None
    assert "1 node(s) didn't satisfy existing pods anti-affinity rules" in run.last("web").message


def test_a_nominated_preemptor_satisfies_affinity() -> None:
    run = Run(config(BINPACK))
    _nominated_high(run)
    run.add(b.pod("near", labels={"app": "near"}, priority=0,
                  spec_extra={"affinity": {"podAffinity": {REQ: [_term("infer")]}}}))
    assert run.node_of("near") == "n0"


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
    filters count it on no node (`ClusterState.on_node`, which InterPodAffinity and NodePorts
    walk) until a hold is made for it again (the next cycle's `hold_nominated`)."""
    run = Run(config(BINPACK))
    _nominated_high(run)
    high = run.state.pod_by_key("default/high")
    assert high is not None and high.uid in run.state.on_node(run.state.nodes["n0"])
    assert run.state.release_hold(high.uid) is not None
    assert high.uid not in run.state.on_node(run.state.nodes["n0"]) and run.state.counted_on(high.uid) is None


def test_a_held_pods_relabel_is_seen_by_the_cached_counts() -> None:
    """A nominated preemptor relabelled while it holds room: what InterPodAffinity counts on its
    node changed, so counts cached for another pod (kept while `touches` stands) are taken again:
    `anti`, repelled by app=infer, is no longer counted against once `high` is app=other."""
    run = Run(config(BINPACK))
    _nominated_high(run)
    run.add(b.pod("anti", labels={"app": "x"}, priority=0,
                  spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term("infer")]}}}))
    assert run.node_of("anti") is None
    anti = run.state.pod_by_key("default/anti")
    assert anti is not None
    plugin = run.scheduler._engine.profiles["tessera"].plugins["InterPodAffinity"]
    assert isinstance(plugin, InterPodAffinity)
    assert plugin.counts(prepare(anti, run.state.classes)).anti
    relabelled = b.pod("high", labels={"app": "other"}, limits={"nvidia.com/gpu": 8}, priority=100)
    relabelled["status"]["nominatedNodeName"] = "n0"
    run.scheduler.apply("MODIFIED", relabelled, 100.0)  # the update alone, no cycle after it
    assert run.state.holds, "the hold stands"
    assert not plugin.counts(prepare(anti, run.state.classes)).anti


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
