"""The per-node tallies kept by PodTopologySpread and InterPodAffinity (`node_parts.NodeParts`,
`RecentTallies`) against a fresh count, through random interleavings of every change that may
leave a kept part stale: nodes added, relabelled, tainted, deleted with their pods on them and
added again under the same name; pods added pending or bound, relabelled, marked terminating,
deleted; a gang's tentative placements (assume) rolled back (forget) in any order; preemption's
lift and restore; nominated preemptors' holds made and released. After each change, for every
pod, each plugin's kept counts (and InterPodAffinity's scores) equal `topology_oracles`' fresh
counts and each node's filter verdict (nominated pods added) equals the one from the fresh counts;
one instance of each plugin keeps a single tally, so that tallies are dropped and taken again
between pods (the eviction order must not change a result)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.framework.cycle_state import prepare
from scheduler.core.framework.node_parts import RecentTallies
from scheduler.core.objects import Pod
from scheduler.core.plugins import interpod_affinity as ipa
from scheduler.core.plugins import pod_topology_spread as pts
from scheduler.core.state import ClusterState
from scheduler.core.state.cluster import placement_of
from scheduler.sim import builders as b
from tests.unit.topology_oracles import count, preference_scores, spread_count

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
NODES = ("n0", "n1", "n2", "n3")
APPS = ("web", "db")
SPACES = ("default", "team-b")


class _Handle:
    def __init__(self, state: ClusterState) -> None:
        self.state = state


def _node(rng: random.Random, name: str) -> dict[str, Any]:
    labels = {HOST: name, **({ZONE: rng.choice("ab")} if rng.random() < 0.8 else {}),
              **({"rack": rng.choice("rs")} if rng.random() < 0.4 else {})}
    taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.3 else None
    return b.node(name, labels=labels, taints=taints)


def _spec(rng: random.Random) -> dict[str, Any] | None:
    """Inter-pod terms and spread constraints, each maybe, and what the spread's inclusion
    policies read (nodeSelector, tolerations)."""
    spec: dict[str, Any] = {}
    kinds: dict[str, Any] = {}
    term = {"labelSelector": {"matchLabels": {"app": rng.choice(APPS)}}, "topologyKey": rng.choice((HOST, ZONE, "rack"))}
    if rng.random() < 0.3:
        kinds["podAntiAffinity"] = {REQ: [{**term, **({"namespaceSelector": {}} if rng.random() < 0.3 else {})}]}
    if rng.random() < 0.2:
        kinds["podAffinity"] = {REQ: [term]}
    if rng.random() < 0.3:
        kinds.setdefault("podAffinity", {})[PREF] = [{"weight": rng.choice((1, 5)), "podAffinityTerm": term}]
    if rng.random() < 0.2:
        kinds.setdefault("podAntiAffinity", {})[PREF] = [{"weight": 3, "podAffinityTerm": term}]
    if kinds:
        spec["affinity"] = kinds
    constraints = [{"maxSkew": 1, "topologyKey": rng.choice((ZONE, HOST)),
                    "whenUnsatisfiable": rng.choice(("DoNotSchedule", "ScheduleAnyway")),
                    "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
                    **({"nodeTaintsPolicy": "Honor"} if rng.random() < 0.4 else {})}
                   for _ in range(rng.choice((0, 0, 1, 2)))]
    if constraints:
        spec["topologySpreadConstraints"] = constraints
    if rng.random() < 0.2:
        spec["nodeSelector"] = {ZONE: "a"}
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    return spec or None


class _World:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.state = ClusterState(frozenset({"tessera"}))
        handle = _Handle(self.state)
        self.spreads = [pts.PodTopologySpread(handle) for _ in range(2)]  # type: ignore[arg-type]
        self.affinities = [ipa.InterPodAffinity(handle, ipa.InterPodAffinityArgs(hard_pod_affinity_weight=w))  # type: ignore[arg-type]
                           for w in (1, 2)]
        self.spreads[1]._tallies = RecentTallies(1)
        self.affinities[1]._tallies = RecentTallies(1)
        self.live: dict[str, dict[str, Any]] = {}  # pod uid -> its last object
        self.nodes: dict[str, dict[str, Any]] = {}  # node name -> its object, while it stands
        self.lifted: list[Any] = []
        self.made = 0
        for name in NODES[:3]:
            self.put_node(name)

    def put_node(self, name: str) -> None:
        self.nodes[name] = obj = _node(self.rng, name)
        self.state.apply("ADDED" if name not in self.state.nodes or self.state.nodes[name].node is None else "MODIFIED",
                         obj)

    def pod_obj(self, name: str, namespace: str, node: str, spec: dict[str, Any] | None) -> dict[str, Any]:
        return b.pod(name, namespace=namespace, labels={"app": self.rng.choice(APPS)}, node_name=node,
                     phase="Running" if node else "Pending", spec_extra=spec)

    def step(self) -> None:
        rng, state = self.rng, self.state
        pending = sorted(state.pending)
        assumed = sorted(uid for uid, p in state.placements.items() if p.assumed)
        choice = rng.random()
        if self.lifted and (choice < 0.1 or len(self.lifted) > 2):
            state.restore(self.lifted.pop(rng.randrange(len(self.lifted))))
        elif choice < 0.25 or not self.live:
            self.made += 1
            standing = sorted(self.nodes)
            obj = self.pod_obj(f"p{self.made}", rng.choice(SPACES),
                               rng.choice(["", "", *standing]), _spec(rng))
            self.live[obj["metadata"]["uid"]] = obj
            state.apply("ADDED", obj)
        elif choice < 0.35 and pending and self.nodes:  # a gang's tentative placements
            for uid in rng.sample(pending, min(len(pending), rng.randint(1, 3))):
                state.assume(uid, rng.choice(sorted(self.nodes)), None)
        elif choice < 0.42 and assumed and not self.lifted:  # and their rollback, in any order
            for uid in rng.sample(assumed, len(assumed)):
                state.forget(uid)
        elif choice < 0.5 and state.placements:
            self.lifted.append(state.lift(rng.choice(sorted(state.placements))))
        elif choice < 0.58 and pending and self.nodes:  # a nominated preemptor's hold
            uid = rng.choice(pending)
            state.hold(uid, placement_of(state.pods[uid], rng.choice(sorted(self.nodes)), None,
                                         state.ledger.counted_as), rng.choice((0, 10)))
        elif choice < 0.62 and state.holds:
            state.release_hold(rng.choice(sorted(state.holds)))
        elif choice < 0.72 and not self.lifted:  # relabelled, re-read with other terms, or terminating
            uid = rng.choice(sorted(self.live))
            old = self.live[uid]
            obj = self.pod_obj(old["metadata"]["name"], old["metadata"]["namespace"], old["spec"].get("nodeName", ""),
                               None)
            obj["spec"] = dict(old["spec"]) if rng.random() < 0.7 else {**old["spec"], **(_spec(rng) or {})}
            if rng.random() < 0.2:
                obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
            self.live[uid] = obj
            state.apply("MODIFIED", obj)
        elif choice < 0.78 and not self.lifted:
            uid = rng.choice(sorted(self.live))
            state.apply("DELETED", self.live.pop(uid))
        elif choice < 0.9:
            self.put_node(rng.choice(NODES))  # relabelled, (un)tainted, or added again
        elif self.nodes and not self.lifted:
            name = rng.choice(sorted(self.nodes))
            state.apply("DELETED", self.nodes.pop(name))  # its pods stay, in the domain of its last labels

    def check(self) -> None:
        state = self.state
        placed = [(uid, info.name) for info in state.nodes.values() for uid in info.pods]
        existing = [(state.pods[uid], state.nodes[name].labels) for uid, name in placed]
        standing = [(info.node, info.pods) for info in state.nodes.values() if info.node is not None]
        for pod in list(state.pods.values()):
            ctx = prepare(pod, state.classes)
            fresh = count(pod, placed, state.pods, lambda n: state.nodes[n].labels)
            for plugin in self.affinities:
                kept = plugin.counts(ctx)
                assert (dict(+kept.affinity), dict(+kept.anti), dict(+kept.existing)) == \
                    (dict(+fresh.affinity), dict(+fresh.anti), dict(+fresh.existing)), pod.key
                assert dict(plugin.scores(ctx)) == dict(preference_scores(
                    pod, existing, plugin.args.hard_pod_affinity_weight)), pod.key
            hard = spread_count(pod, standing, state.pods)
            soft = spread_count(pod, standing, state.pods, pod.soft_spread)
            for spread in self.spreads:
                counts = spread.counts(ctx)
                assert (counts.domains, counts.minimum) == (hard.domains, hard.minimum), pod.key
                assert spread._count(pod, pod.soft_spread).domains == soft.domains, pod.key
            for info in state.nodes.values():
                if info.node is None:
                    continue
                nominated = [state.pods[uid] for uid in state.nominated_on(info, pod.uid)]
                expected = _affinity_verdict(pod, fresh, nominated, info.labels)
                assert {p.filter(ctx, info) for p in self.affinities} == {expected}, (pod.key, info.name)
                if pod.spread:
                    expected = pts.verdict(pod, hard, info.node, nominated)
                    assert {p.filter(ctx, info) for p in self.spreads} == {expected}, (pod.key, info.name)


def _affinity_verdict(pod: Pod, fresh: ipa.Counts, nominated: list[Pod], labels: Any) -> Any:
    """RunFilterPluginsWithNominatedPods over fresh counts: the nominated pods added, then not."""
    own: ipa.Share = {}
    theirs: ipa.Share = {}
    for other in nominated:
        ipa._count_placed(own, pod, other, labels)
        ipa._existing_of(theirs, pod, other, labels)
    if own or theirs:
        found = ipa.verdict(pod, fresh.plus(ipa.Counts.of(own, theirs)), labels)
        if found is not None:
            return found
    return ipa.verdict(pod, fresh, labels)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(20, 60))
def test_kept_tallies_equal_a_fresh_count_through_random_changes(rng: random.Random, steps: int) -> None:
    world = _World(rng)
    world.check()
    for _ in range(steps):
        world.step()
        world.check()
