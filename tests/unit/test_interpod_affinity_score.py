"""InterPodAffinity's score, as kube-scheduler v1.36's (pkg/scheduler/framework/plugins/
interpodaffinity/scoring.go): PreScore's topology scores, Score's per-node sum, NormalizeScore's
min-max, InterPodAffinityArgs and their validation (validation_pluginargs.go); and the counts and
scores kept per node (`NodeTally`) against a fresh count."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from scheduler.api.config_parse import parse_config
from scheduler.api.config import ConfigError
from scheduler.core.framework.interface import Normalize
from scheduler.core.framework.runtime import normalize
from scheduler.core.objects import Pod, parse_pod
from scheduler.core.framework.cycle_state import prepare
from scheduler.core.plugins.interpod_affinity import InterPodAffinity, InterPodAffinityArgs, node_score, verdict
from scheduler.core.plugins.registry import args_of
from scheduler.core.pod_terms import pod_terms, preferred_note
from scheduler.core.state import ClusterState
from scheduler.sim import builders as b
from tests.unit.topology_oracles import count, preference_scores

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def _term(app: str, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **extra}


def _weighted(weight: int, app: str, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": _term(app, key, **extra)}


def _pod(name: str, app: str, *, namespace: str = "default", **kinds: dict[str, list[dict[str, Any]]]) -> Pod:
    """kinds: podAffinity / podAntiAffinity -> {required or preferred: terms}."""
    return parse_pod(b.pod(name, namespace=namespace, labels={"app": app},
                           spec_extra={"affinity": kinds} if kinds else None))


def _scores(pod: Pod, existing: list[tuple[Pod, dict[str, str]]], hard: int = 1) -> dict[tuple[str, str], int]:
    return dict(preference_scores(pod, existing, hard))


def _assert_filed(state: ClusterState) -> None:
    """`affine_on` / `anti_affine_on` hold exactly the placed pods with any pod (anti-)affinity
    term / with a required anti-affinity term, by node."""
    affine = {uid for uid, pod in state.pods.items()
              if pod.affinity or pod.anti_affinity or pod.preferred_affinity or pod.preferred_anti_affinity}
    anti_affine = {uid for uid, pod in state.pods.items() if pod.anti_affinity}
    for members, on in ((affine, state.affine_on), (anti_affine, state.anti_affine_on)):
        assert on == {name: held for name, info in state.nodes.items() if (held := info.pods & members)}


A = {ZONE: "a", HOST: "a0"}
B = {ZONE: "b", HOST: "b0"}


def test_the_incoming_pods_preferred_terms_add_and_subtract_their_weight_at_the_matching_pods_pair() -> None:
    pod = _pod("web", "web", podAffinity={PREF: [_weighted(7, "db")]},
               podAntiAffinity={PREF: [_weighted(3, "noisy", HOST), _weighted(2, "db")]})
    db, noisy, other = _pod("db", "db"), _pod("noisy", "noisy"), _pod("x", "x")
    got = _scores(pod, [(db, A), (noisy, B), (other, B), (_pod("db2", "db"), A)])
    assert got == {(ZONE, "a"): 2 * (7 - 2), (HOST, "b0"): -3}
    assert node_score(got, {ZONE: "a", HOST: "a1"}) == 10
    assert node_score(got, B) == -3
    assert node_score(got, {HOST: "b0"}) == -3  # a node lacking a key sums the pairs it has
    assert node_score(got, {}) == 0


def test_existing_pods_terms_score_the_incoming_pod_symmetrically() -> None:
    pod = _pod("web", "web")  # no terms of its own
    likes = _pod("likes", "x", podAffinity={PREF: [_weighted(5, "web")]})
    shuns = _pod("shuns", "y", podAntiAffinity={PREF: [_weighted(4, "web", HOST)]})
    needs = _pod("needs", "z", podAffinity={REQ: [_term("web")]})
    ignores = _pod("ignores", "z", podAffinity={PREF: [_weighted(9, "other")]})
    existing = [(likes, A), (shuns, B), (needs, B), (ignores, A)]
    assert _scores(pod, existing) == {(ZONE, "a"): 5, (HOST, "b0"): -4, (ZONE, "b"): 1}
    assert _scores(pod, existing, hard=10) == {(ZONE, "a"): 5, (HOST, "b0"): -4, (ZONE, "b"): 10}
    assert _scores(pod, existing, hard=0) == {(ZONE, "a"): 5, (HOST, "b0"): -4}  # upstream: weight > 0 only
    # the incoming pod's own required terms never score (the filter has them)
    assert _scores(_pod("web", "web", podAffinity={REQ: [_term("x")]}), [(likes, A)]) == {(ZONE, "a"): 5}


def test_the_pod_itself_and_nodes_without_the_key_count_nothing() -> None:
    pod = _pod("web", "web", podAffinity={PREF: [_weighted(5, "web")]})
    assert _scores(pod, [(pod, A)]) == {}
    assert _scores(pod, [(_pod("web-1", "web"), {HOST: "bare"})]) == {}
    assert _scores(pod, [(_pod("web-1", "web"), {})]) == {}


def test_namespaces_as_upstream_and_a_namespace_selector_is_not_scored() -> None:
    mine = _pod("web", "web", podAffinity={PREF: [_weighted(5, "db")]})
    theirs = _pod("db", "db", namespace="data")
    assert _scores(mine, [(theirs, A)]) == {}  # the pod's own namespace when the term lists none
    listed = _pod("web", "web", podAffinity={PREF: [_weighted(5, "db", namespaces=["data"])]})
    assert _scores(listed, [(theirs, A)]) == {(ZONE, "a"): 5}
    every = _pod("web", "web", podAffinity={PREF: [_weighted(5, "db", namespaceSelector={})]})
    assert _scores(every, [(theirs, A)]) == {(ZONE, "a"): 5}
    # a non-empty namespaceSelector: Tessera watches no Namespaces, the term scores nothing on
    # either side (a guessed preference would steer pods by namespaces it cannot see)
    selector = {"matchLabels": {"team": "data"}}
    unknown = _pod("web", "web", podAffinity={PREF: [_weighted(5, "db", namespaceSelector=selector)]})
    assert _scores(unknown, [(theirs, A)]) == {}
    existing = _pod("db", "db", namespace="data", podAffinity={PREF: [_weighted(5, "web", namespaceSelector=selector)],
                                                               REQ: [_term("web", namespaceSelector=selector)]})
    assert _scores(_pod("web", "web"), [(existing, A)]) == {}
    existing_own = _pod("db", "db", namespace="data", podAntiAffinity={PREF: [_weighted(5, "web")]})
    assert _scores(_pod("web", "web"), [(existing_own, A)]) == {}  # its own namespace, not web's


def test_normalize_is_upstreams_min_max_in_float() -> None:
    def norm(*raw: int) -> list[int]:
        return [int(v) for v in normalize(np.array(raw, np.int64), Normalize.MIN_MAX).tolist()]

    assert norm(-3, 0, 5) == [0, 37, 100]
    assert norm(4, 4) == [0, 0] and norm(0) == [0] and norm(-2, -2, -2) == [0, 0, 0]
    assert norm(-10, -5) == [0, 100]
    # float64(100) * (29 / 100) is 28.999999999999996: upstream's int64() truncates it to 28
    assert norm(0, 29, 100) == [0, 28, 100]
    assert norm() == []


def _config(args: dict[str, Any] | None = None, **plugins: Any) -> Any:
    profile: dict[str, Any] = {"schedulerName": "tessera", **({"plugins": plugins} if plugins else {})}
    if args is not None:
        profile["pluginConfig"] = [{"name": "InterPodAffinity", "args": args}]
    return parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                         "profiles": [profile]}, "t.yaml")


def test_args_default_and_validate_as_upstream() -> None:
    profile = _config().profiles[0]
    assert profile.score_weights["InterPodAffinity"] == 2  # v1's default profile
    assert args_of(profile, InterPodAffinityArgs) == InterPodAffinityArgs(
        hard_pod_affinity_weight=1, ignore_preferred_terms_of_existing_pods=False)
    assert _config({"hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": True}).profiles[0] \
        .plugin_args["InterPodAffinity"] == InterPodAffinityArgs(hard_pod_affinity_weight=0,
                                                                 ignore_preferred_terms_of_existing_pods=True)
    for bad in (101, -1):
        with pytest.raises(ConfigError) as raised:
            _config({"hardPodAffinityWeight": bad})
        assert str(raised.value) == (f"t.yaml: profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: {bad}: "
                                     "not in valid range [0, 100]")
    weighted = _config(score={"enabled": [{"name": "InterPodAffinity", "weight": 5}]}).profiles[0]
    assert weighted.score_weights["InterPodAffinity"] == 5


def test_preferred_pod_terms_are_no_longer_told_but_a_namespace_selector_is() -> None:
    spec = {"affinity": {"podAffinity": {PREF: [_weighted(5, "db")]},
                         "podAntiAffinity": {PREF: [_weighted(5, "db")]}}}
    assert pod_terms(spec) == ((), ())
    selector = {"matchLabels": {"team": "data"}}
    spec = {"affinity": {"podAntiAffinity": {PREF: [_weighted(5, "db"),
                                                    _weighted(5, "db", namespaceSelector=selector)]}}}
    field = f"spec.affinity.podAntiAffinity.{PREF}[].namespaceSelector"
    assert pod_terms(spec) == ((), (field,))
    note = preferred_note((field,))
    assert note.startswith(f"{field}: Tessera does not score these") and "`namespaces`" in note


def test_a_weight_the_apiserver_refuses_counts_as_no_term() -> None:
    """The apiserver allows a preferred term's weight only in 1..100 (ValidateWeightedPodAffinityTerm,
    "must be in the range 1-100"); a replayed or hand-written pod outside it is read as without that
    term, as `pod_terms` reads every shape the apiserver would refuse, on either side. Before, a
    weight of 10**20 overflowed the int64 scores and crashed the cycle, and 0 or -50 scored."""
    db = _pod("db", "db")
    for bad in (0, -50, 101, 10**20):
        assert _scores(_pod("web", "web", podAffinity={PREF: [_weighted(bad, "db"), _weighted(3, "db", HOST)]}),
                       [(db, A)]) == {(HOST, "a0"): 3}
        existing = _pod("x", "x", podAntiAffinity={PREF: [_weighted(bad, "web")]})
        assert _scores(_pod("web", "web"), [(existing, A)]) == {}
    assert _scores(_pod("web", "web", podAffinity={PREF: [_weighted(100, "db"), _weighted(1, "db", HOST)]}),
                   [(db, A)]) == {(ZONE, "a"): 100, (HOST, "a0"): 1}


class _Handle:
    def __init__(self, state: ClusterState) -> None:
        self.state = state


def test_the_kept_tallies_score_and_count_as_a_fresh_count_through_every_change() -> None:
    """The plugin takes again only the nodes changed since (`NodeTally`, by `NodeInfo.generation`):
    after each change that moves a score (a placement, a relabelled pod, a node's zone changed or
    gone, a node deleted, preemption's lift and restore, a pod removed, the pod's own placement)
    its scores are `preference_scores` over every placed pod, the same pairs (a pair whose
    weights sum to 0 included), for two replicas sharing one tally, a plain pod (which reads
    only the pods with terms) and, with hardPodAffinityWeight 3, the same again; and the filter's
    counts are `count`'s over the whole state (for the replicas' required terms: a pair left at
    no pod is no pair, as upstream deletes it, which the first of a series reads)."""
    state = ClusterState(frozenset({"tessera"}))
    for name, zone in (("a0", "a"), ("a1", "a"), ("b0", "b"), ("c0", "c")):
        state.apply("ADDED", b.node(name, labels={ZONE: zone, HOST: name}))
    spec = {"affinity": {"podAffinity": {PREF: [_weighted(5, "db"), _weighted(2, "web", HOST)], REQ: [_term("web")]},
                         "podAntiAffinity": {PREF: [_weighted(5, "db", HOST), _weighted(3, "cache")],
                                             REQ: [_term("db", HOST), _term("y")]}}}
    placed = [("db0", "db", "a0", None), ("db1", "db", "b0", None), ("c0", "cache", "a1", None),
              ("likes", "x", "c0", {"affinity": {"podAffinity": {PREF: [_weighted(4, "web")], REQ: [_term("web")]}}}),
              ("shuns", "y", "a0", {"affinity": {"podAntiAffinity": {PREF: [_weighted(9, "web", HOST)]}}})]
    for name, app, node, extra in placed:
        state.apply("ADDED", b.pod(name, labels={"app": app}, node_name=node, phase="Running", spec_extra=extra))
    pending = [b.pod(f"r{i}", labels={"app": "web"}, spec_extra=spec) for i in range(2)]
    pending.append(b.pod("plain", labels={"app": "web"}))
    for obj in pending:
        state.apply("ADDED", obj)
    plugins = [InterPodAffinity(_Handle(state), InterPodAffinityArgs(hard_pod_affinity_weight=weight))  # type: ignore[arg-type]
               for weight in (1, 3)]

    def same() -> None:
        for plugin in plugins:
            for obj in pending:
                pod = state.pod_by_key(f"default/{obj['metadata']['name']}")
                assert pod is not None
                existing = [(state.pods[uid], info.labels) for info in state.nodes.values() for uid in info.pods]
                expected = preference_scores(pod, existing, plugin.args.hard_pod_affinity_weight)
                assert dict(plugin.scores(prepare(pod, state.classes))) == dict(expected)
                placed = ((uid, info.name) for info in state.nodes.values() for uid in info.pods)
                fresh = count(pod, placed, state.pods, lambda n: state.nodes[n].labels)
                kept = plugin.counts(prepare(pod, state.classes))
                assert (dict(kept.affinity), dict(kept.anti), dict(kept.existing)) == \
                    (dict(fresh.affinity), dict(fresh.anti), dict(fresh.existing))

    same()
    state.assume(pending[0]["metadata"]["uid"], "c0", None)  # r0 placed: it scores r1 and plain, not itself
    same()
    state.apply("MODIFIED", b.pod("c0", labels={"app": "db"}, node_name="a1", phase="Running"))
    same()
    state.apply("MODIFIED", b.node("a1", labels={ZONE: "c", HOST: "a1"}))
    same()
    state.apply("MODIFIED", b.node("a1"))  # no zone, no hostname: no pair there
    same()
    lifted = state.lift(state.by_key["default/shuns"])
    same()
    state.restore(lifted)
    same()
    state.apply("DELETED", b.node("b0", labels={ZONE: "b", HOST: "b0"}))
    same()
    state.apply("DELETED", b.pod("likes", labels={"app": "x"}, node_name="c0", phase="Running"))
    same()
    state.forget(pending[0]["metadata"]["uid"])
    same()
    state.apply("ADDED", b.pod("late", labels={"app": "z"}, node_name="c0", phase="Running",
                               spec_extra={"affinity": {"podAntiAffinity": {PREF: [_weighted(5, "web")]},
                                                        "podAffinity": {PREF: [_weighted(5, "web")]}}}))
    same()  # +5 and -5 at zone c: the pair is there, at 0


def test_pods_of_other_labels_namespaces_or_terms_share_no_tally() -> None:
    """A score's tally serves the pods of one namespace, labels and preferred terms, a filter's
    those of one set of required terms: pods differing in any of these, scored and counted one
    after another by one plugin, each get `preference_scores`' and `count`'s results."""
    state = ClusterState(frozenset({"tessera"}))
    for name, zone in (("a0", "a"), ("b0", "b")):
        state.apply("ADDED", b.node(name, labels={ZONE: zone, HOST: name}))
    state.apply("ADDED", b.pod("likes-a", labels={"app": "x"}, node_name="a0", phase="Running",
                               spec_extra={"affinity": {"podAffinity": {PREF: [_weighted(4, "a")]}}}))
    state.apply("ADDED", b.pod("db", labels={"app": "db"}, node_name="b0", phase="Running"))
    affinity = {PREF: [_weighted(5, "db")]}
    variants: list[tuple[str, str, dict[str, Any]]] = [
        ("default", "a", {}), ("default", "b", {}), ("team-b", "a", {}),
        ("default", "a", {"podAffinity": affinity}),
        ("default", "a", {"podAffinity": affinity, "podAntiAffinity": {PREF: [_weighted(3, "db", HOST)]}}),
        ("default", "a", {"podAntiAffinity": {REQ: [_term("db")]}}),
        ("default", "a", {"podAntiAffinity": {REQ: [_term("db")]}, "podAffinity": {REQ: [_term("db")]}}),
        ("default", "a", {"podAffinity": {REQ: [_term("db")]}})]
    for i, (ns, app, kinds) in enumerate(variants):
        state.apply("ADDED", b.pod(f"p{i}", namespace=ns, labels={"app": app},
                                   spec_extra={"affinity": kinds} if kinds else None))
    plugin = InterPodAffinity(_Handle(state), InterPodAffinityArgs())  # type: ignore[arg-type]
    existing = [(state.pods[uid], info.labels) for info in state.nodes.values() for uid in info.pods]
    for _ in range(2):
        for i, (ns, _app, _kinds) in enumerate(variants):
            pod = state.pod_by_key(f"{ns}/p{i}")
            assert pod is not None
            assert dict(plugin.scores(prepare(pod, state.classes))) == dict(preference_scores(pod, existing, 1)), i
            placed = ((uid, info.name) for info in state.nodes.values() for uid in info.pods)
            fresh = count(pod, placed, state.pods, lambda n: state.nodes[n].labels)
            kept = plugin.counts(prepare(pod, state.classes))
            assert (dict(kept.affinity), dict(kept.anti)) == (dict(fresh.affinity), dict(fresh.anti)), i


def test_the_kept_existing_anti_affinity_counts_as_a_fresh_count_through_every_change() -> None:
    """The symmetry check's counts (the placed pods' required anti-affinity terms matching the
    pod) are kept by node over the nodes holding such pods (`ClusterState.anti_affine_on`), in a
    tally per namespace and labels: after each change (a placement, the pod's own, a relabelled
    node, preemption's lift and restore, a forgotten assumption, a pod deleted, a pod bound with
    its terms) they are `count`'s over the whole state (pending anti-affine pods count for
    nothing), for pods of other labels, namespaces and terms counted one after another; and the
    index holds exactly the placed pods with terms by node (`_assert_filed`)."""
    state = ClusterState(frozenset({"tessera"}))
    for name, zone in (("a0", "a"), ("a1", "a"), ("b0", "b"), ("c0", "c")):
        state.apply("ADDED", b.node(name, labels={ZONE: zone, HOST: name}))
    shuns_web = {"affinity": {"podAntiAffinity": {REQ: [_term("web", HOST), _term("db")]}}}
    shuns_all = {"affinity": {"podAntiAffinity": {REQ: [{"labelSelector": {}, "topologyKey": ZONE,
                                                          "namespaceSelector": {}}]}}}
    likes = {"affinity": {"podAffinity": {PREF: [_weighted(3, "web")]}}}
    for name, app, node, extra in (("s0", "x", "a0", shuns_web), ("s1", "x", "b0", shuns_web),
                                   ("all", "y", "c0", shuns_all), ("l0", "z", "a1", likes),
                                   ("idle", "x", "", shuns_web)):
        state.apply("ADDED", b.pod(name, labels={"app": app}, node_name=node,
                                   phase="Running" if node else "Pending", spec_extra=extra))
    pending = [b.pod("w0", labels={"app": "web"}, spec_extra=shuns_web), b.pod("w1", labels={"app": "web"}),
               b.pod("d0", namespace="team-b", labels={"app": "db"}), b.pod("o0", labels={"app": "other"})]
    for obj in pending:
        state.apply("ADDED", obj)
    plugin = InterPodAffinity(_Handle(state), InterPodAffinityArgs())  # type: ignore[arg-type]

    def same() -> None:
        _assert_filed(state)
        for obj in pending:
            pod = state.pods[obj["metadata"]["uid"]]
            placed = ((uid, info.name) for info in state.nodes.values() for uid in info.pods)
            fresh = count(pod, placed, state.pods, lambda n: state.nodes[n].labels)
            assert dict(plugin.counts(prepare(pod, state.classes)).existing) == dict(fresh.existing), pod.key

    same()
    state.assume(pending[0]["metadata"]["uid"], "c0", None)  # w0 placed: it repels w1, not itself
    same()
    state.apply("MODIFIED", b.node("a0", labels={ZONE: "c", HOST: "a0"}))
    same()
    lifted = state.lift(state.by_key["default/s1"])
    same()
    state.restore(lifted)
    same()
    state.forget(pending[0]["metadata"]["uid"])
    same()
    state.apply("DELETED", b.pod("s0", labels={"app": "x"}, node_name="a0", phase="Running", spec_extra=shuns_web))
    same()
    state.apply("MODIFIED", b.pod("idle", labels={"app": "x"}, node_name="a1", phase="Running", spec_extra=shuns_web))
    same()
    # terms are immutable upstream; an edit taking them off a placed pod (a replayed object) is followed
    state.apply("MODIFIED", b.pod("idle", labels={"app": "x"}, node_name="a1", phase="Running"))
    same()


def test_the_hard_pod_affinity_weights_bounds_are_accepted() -> None:
    for weight in (0, 100):
        assert args_of(_config({"hardPodAffinityWeight": weight}).profiles[0], InterPodAffinityArgs) \
            .hard_pod_affinity_weight == weight


def test_a_boolean_weight_is_no_term() -> None:
    """JSON's true is no integer weight to the apiserver (YAML or a replayed pod may hold one):
    no term, though Python's bool is an int."""
    pod = _pod("web", "web", podAffinity={PREF: [_weighted(True, "db"), _weighted(3, "db", HOST)]})
    assert _scores(pod, [(_pod("db", "db"), A)]) == {(HOST, "a0"): 3}


@pytest.mark.parametrize("seed", range(12))
def test_the_node_index_and_kept_counts_match_their_definition_through_random_changes(seed: int) -> None:
    """Random sequences of what moves a placed pod with terms (bound or assumed, forgotten, lifted
    and restored in any order, deleted, re-read with other terms or labels, pending or placed; nodes
    relabelled or deleted with their pods): after each, `affine_on` / `anti_affine_on` hold exactly
    the placed pods with their terms by node (`_assert_filed`), and the plugin's kept counts and verdicts
    are those of a fresh count over the whole state (the verdict reading only `existing_keys`)."""
    rng = random.Random(seed)
    state = ClusterState(frozenset({"tessera"}))
    plugin = InterPodAffinity(_Handle(state), InterPodAffinityArgs())  # type: ignore[arg-type]
    apps, spaces = ("web", "db", "x"), ("default", "team-b")
    nodes = [f"n{i}" for i in range(5)]

    def node_obj(name: str) -> dict[str, Any]:
        labels = {HOST: name, **({ZONE: rng.choice("ab")} if rng.random() < 0.8 else {}),
                  **({"rack": rng.choice("rs")} if rng.random() < 0.5 else {})}
        return b.node(name, labels=labels)

    def terms() -> dict[str, Any] | None:
        kinds: dict[str, Any] = {}
        key = rng.choice((HOST, ZONE, "rack"))
        if rng.random() < 0.5:
            kinds["podAntiAffinity"] = {REQ: [_term(rng.choice(apps), key,
                                                    **({"namespaceSelector": {}} if rng.random() < 0.3 else {}))]}
        if rng.random() < 0.3:
            kinds["podAffinity"] = {REQ: [_term(rng.choice(apps), key)]}
        if rng.random() < 0.2:
            kinds["podAffinity"] = {**kinds.get("podAffinity", {}), PREF: [_weighted(2, rng.choice(apps), key)]}
        return {"affinity": kinds} if kinds else None

    live: dict[str, dict[str, Any]] = {}  # pod key -> its last object
    lifted: list[Any] = []
    made = 0
    for name in nodes:
        state.apply("ADDED", node_obj(name))

    def pod_obj(name: str, namespace: str, node_name: str) -> dict[str, Any]:
        return b.pod(name, namespace=namespace, labels={"app": rng.choice(apps)}, node_name=node_name,
                     phase="Running" if node_name else "Pending", spec_extra=terms())

    def same() -> None:
        _assert_filed(state)
        for uid, pod in list(state.pods.items())[:6]:
            placed = [(other, info.name) for info in state.nodes.values() for other in info.pods]
            fresh = count(pod, placed, state.pods, lambda n: state.nodes[n].labels)
            kept = plugin.counts(prepare(pod, state.classes))
            assert (dict(+kept.affinity), dict(+kept.anti), dict(+kept.existing)) == \
                (dict(+fresh.affinity), dict(+fresh.anti), dict(+fresh.existing)), (seed, pod.key)
            for info in state.nodes.values():
                every = fresh.existing and any(fresh.existing[pair] > 0 for pair in info.labels.items())
                found = verdict(pod, kept, info.labels)
                assert (found is not None) == (verdict(pod, fresh, info.labels) is not None), (seed, pod.key)
                if found is None:
                    assert not every, (seed, pod.key, info.name)

    for _ in range(120):
        step = rng.random()
        if lifted and (step < 0.15 or len(lifted) > 3):
            state.restore(lifted.pop(rng.randrange(len(lifted))))
        elif step < 0.35 or not live:
            made += 1
            obj = pod_obj(f"p{made}", rng.choice(spaces), rng.choice(["", *nodes]))
            live[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = obj
            state.apply("ADDED", obj)
        elif step < 0.45:
            pending = sorted(state.pending)
            if pending:
                state.assume(rng.choice(pending), rng.choice(nodes), None)
        elif step < 0.5:
            assumed = sorted(uid for uid, placement in state.placements.items() if placement.assumed)
            if assumed and not lifted:
                state.forget(rng.choice(assumed))
        elif step < 0.6:
            placed = sorted(state.placements)
            if placed:
                lifted.append(state.lift(rng.choice(placed)))
        elif step < 0.75 and not lifted:  # re-read with other terms / labels, pending or placed alike
            key = rng.choice(sorted(live))
            old = live[key]
            obj = pod_obj(old["metadata"]["name"], old["metadata"]["namespace"], old["spec"].get("nodeName", ""))
            live[key] = obj
            state.apply("MODIFIED", obj)
        elif step < 0.85 and not lifted:
            key = rng.choice(sorted(live))
            state.apply("DELETED", live.pop(key))
        elif step < 0.95:
            state.apply("MODIFIED", node_obj(rng.choice(nodes)))
        elif not lifted:
            name = rng.choice(nodes)
            state.apply("DELETED", node_obj(name))
            state.apply("ADDED", node_obj(name))
        same()
