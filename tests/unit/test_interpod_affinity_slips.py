"""InterPodAffinity's and the pod-term parser's corners, each a slip the mutation review found no
test for (kube-scheduler v1.36 interpodaffinity/filtering.go, metav1.LabelSelectorAsSelector,
GetNamespacesFromPodAffinityTerm)."""

from __future__ import annotations

from typing import Any

from scheduler.core.objects import Pod, parse_pod
from scheduler.core.plugins.interpod_affinity import AFFINITY, ANTI_AFFINITY, EXISTING, Counts, verdict
from scheduler.core.pod_terms import label_selector, required_pod_terms
from scheduler.sim import builders as b
from tests.helpers import Run
from tests.unit.topology_oracles import count

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def _term(selector: dict[str, Any] | None, key: str = HOST, **extra: Any) -> dict[str, Any]:
    return {**({"labelSelector": selector} if selector is not None else {}), "topologyKey": key, **extra}


def _pod(name: str, labels: dict[str, str], *, namespace: str = "default", affinity: list[dict[str, Any]] | None = None,
         anti: list[dict[str, Any]] | None = None) -> Pod:
    terms: dict[str, Any] = {}
    if affinity:
        terms["podAffinity"] = {REQ: affinity}
    if anti:
        terms["podAntiAffinity"] = {REQ: anti}
    return parse_pod(b.pod(name, namespace=namespace, labels=labels, spec_extra={"affinity": terms} if terms else None))


def _count(pod: Pod, placed: list[tuple[Pod, str]], labels: dict[str, dict[str, str]]) -> Counts:
    return count(pod, [(p.uid, node) for p, node in placed], {p.uid: p for p, _ in placed},
                 lambda node: labels.get(node, {}))


def test_a_pod_with_affinity_to_itself_is_first_only_when_no_pod_matches_anywhere() -> None:
    """satisfyPodAffinity: the self-match exception holds only while affinityCounts is empty; a
    match in another zone means the pod must go there."""
    web = _pod("web", {"app": "web"}, affinity=[_term({"matchLabels": {"app": "web"}}, ZONE)])
    counts = Counts()
    assert verdict(web, counts, {ZONE: "b"}) is None  # the first of the series
    counts.affinity[(ZONE, "a")] = 1
    assert verdict(web, counts, {ZONE: "b"}) == (AFFINITY,)
    assert verdict(web, counts, {ZONE: "a"}) is None


def test_a_node_without_an_affinity_terms_key_fails() -> None:
    web = _pod("web", {"app": "web"}, affinity=[_term({"matchLabels": {"app": "db"}}, ZONE)])
    counts = Counts()
    counts.affinity[(ZONE, "a")] = 1
    assert verdict(web, counts, {HOST: "n0"}) == (AFFINITY,)


def test_an_existing_pod_counts_for_affinity_only_when_it_matches_every_term() -> None:
    web = _pod("web", {"app": "web"}, affinity=[_term({"matchLabels": {"app": "db"}}),
                                               _term({"matchLabels": {"tier": "hot"}})])
    db = _pod("db", {"app": "db"})
    hot_db = _pod("hot-db", {"app": "db", "tier": "hot"})
    labels = {"n0": {HOST: "n0"}, "n1": {HOST: "n1"}}
    assert not _count(web, [(db, "n0")], labels).affinity
    assert _count(web, [(db, "n0"), (hot_db, "n1")], labels).affinity == {(HOST, "n1"): 2}


def test_an_existing_pods_anti_affinity_looks_in_its_own_namespace_not_the_incoming_pods() -> None:
    """A term with no namespaces names its own pod's namespace: team-a's pod keeps only team-a's
    web pods off its node."""
    guard = _pod("guard", {"app": "guard"}, namespace="team-a", anti=[_term({"matchLabels": {"app": "web"}})])
    labels = {"n0": {HOST: "n0"}}
    assert not _count(_pod("web", {"app": "web"}, namespace="team-b"), [(guard, "n0")], labels).existing
    assert _count(_pod("web", {"app": "web"}, namespace="team-a"), [(guard, "n0")], labels).existing == {(HOST, "n0"): 1}


def test_an_existing_pods_anti_affinity_by_zone_keeps_the_whole_zone() -> None:
    guard = _pod("guard", {"app": "guard"}, anti=[_term({"matchLabels": {"app": "web"}}, ZONE)])
    web = _pod("web", {"app": "web"})
    labels = {"n0": {HOST: "n0", ZONE: "a"}, "n1": {HOST: "n1", ZONE: "a"}, "n2": {HOST: "n2", ZONE: "b"}}
    counts = _count(web, [(guard, "n0")], labels)
    assert verdict(web, counts, labels["n1"]) == (EXISTING,)
    assert verdict(web, counts, labels["n2"]) is None


def test_listed_namespaces_are_the_only_ones() -> None:
    """GetNamespacesFromPodAffinityTerm: the pod's own namespace only when the term lists none."""
    spec = {"affinity": {"podAntiAffinity": {REQ: [_term({"matchLabels": {"app": "a"}}, namespaces=["other"])]}}}
    _, (term,) = required_pod_terms(spec, "default")
    assert term.namespaces == frozenset({"other"})
    assert not term.matches("default", {"app": "a"})
    assert term.matches("other", {"app": "a"})


def test_not_in_and_does_not_exist_match_a_pod_without_the_key() -> None:
    not_in = label_selector({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["hot"]}]})
    absent = label_selector({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]})
    assert not_in is not None and absent is not None
    assert not_in.matches({}) and not_in.matches({"tier": "cold"}) and not not_in.matches({"tier": "hot"})
    assert absent.matches({"app": "a"}) and not absent.matches({"tier": "cold"})


def test_a_term_without_a_label_selector_matches_no_pod() -> None:
    spec = {"affinity": {"podAntiAffinity": {REQ: [_term(None)]}}}
    _, (term,) = required_pod_terms(spec, "default")
    assert not term.matches("default", {}) and not term.matches("default", {"app": "a"})


def test_a_pod_refused_for_anti_affinity_is_placed_once_the_pod_it_avoids_is_gone() -> None:
    """The plugin's counts are kept while no node changes (ClusterState.touches): the deletion
    must count as a change, or the counts taken with the deleted pod would be reused."""
    run = Run()
    db = b.pod("db", labels={"app": "db"}, limits={"nvidia.com/gpu": 1})
    run.add(b.node("n0", gpus=8), db)
    assert run.node_of("db") == "n0"
    run.add(b.pod("web", labels={"app": "web"}, limits={"nvidia.com/gpu": 1},
                  spec_extra={"affinity": {"podAntiAffinity": {REQ: [_term({"matchLabels": {"app": "db"}})]}}}))
    assert run.node_of("web") is None
    run.feed(b.event("DELETED", db))
    assert run.node_of("web") == "n0"


def test_a_placed_pods_relabel_is_seen_by_the_cached_counts() -> None:
    """The counts are cached by (pod, state.touches); a bound pod relabelled into an anti-affinity
    term's selector must move `touches`, or the same pending pod's next try reuses counts that
    miss it and is placed beside it (the before-stop read's repro)."""
    from scheduler.core.framework.cycle_state import PodContext
    from scheduler.core.plugins.interpod_affinity import InterPodAffinity, InterPodAffinityArgs

    run = Run()
    run.add(b.node("n0", gpus=8),
            b.pod("db", labels={"app": "other"}, node_name="n0", phase="Running", scheduler="default-scheduler"))
    handle = type("H", (), {"state": run.state})()
    plugin = InterPodAffinity(handle, InterPodAffinityArgs())
    web = _pod("web", {"app": "web"}, anti=[_term({"matchLabels": {"app": "db"}})])
    ctx = PodContext(web, (), ())
    assert plugin.filter(ctx, run.state.nodes["n0"]) is None
    run.feed(b.event("MODIFIED", b.pod("db", labels={"app": "db"}, node_name="n0", phase="Running",
                                       scheduler="default-scheduler")))
    assert plugin.filter(ctx, run.state.nodes["n0"]) is not None


def test_the_first_of_a_series_still_needs_every_terms_key_on_the_node() -> None:
    """satisfyPodAffinity returns false for a node lacking any term's topology key before the
    self-match exception is looked at: a later term's missing key fails too."""
    web = _pod("web", {"app": "web"}, affinity=[_term({"matchLabels": {"app": "web"}}, HOST),
                                               _term({"matchLabels": {"app": "web"}}, ZONE)])
    assert verdict(web, Counts(), {HOST: "n0", ZONE: "a"}) is None  # the first of its series
    assert verdict(web, Counts(), {HOST: "n0"}) == (AFFINITY,)
    assert verdict(web, Counts(), {ZONE: "a"}) == (AFFINITY,)


def test_every_listed_namespace_is_looked_in() -> None:
    spec = {"affinity": {"podAntiAffinity": {REQ: [_term({"matchLabels": {"app": "a"}}, namespaces=["x", "y"])]}}}
    _, (term,) = required_pod_terms(spec, "default")
    assert term.matches("x", {"app": "a"}) and term.matches("y", {"app": "a"})
    assert not term.matches("default", {"app": "a"})


def test_a_term_entry_that_is_no_object_is_skipped_not_the_rest() -> None:
    """pod_terms reads any shape: an entry the apiserver would refuse counts as no term; the
    terms after it are still read."""
    spec = {"affinity": {"podAntiAffinity": {REQ: ["junk", _term({"matchLabels": {"app": "a"}})]}}}
    _, terms = required_pod_terms(spec, "default")
    assert len(terms) == 1 and terms[0].matches("default", {"app": "a"})


def test_the_pod_itself_is_never_counted() -> None:
    """A pod still counted on a node (its own nomination's hold, where a caller has not lifted it)
    neither satisfies its own affinity, nor trips its own anti-affinity, nor is kept off by it."""
    web = _pod("web", {"app": "web"}, affinity=[_term({"matchLabels": {"app": "web"}}, ZONE)],
               anti=[_term({"matchLabels": {"app": "web"}})])
    counts = _count(web, [(web, "n0")], {"n0": {HOST: "n0", ZONE: "a"}})
    assert not counts.affinity and not counts.anti and not counts.existing


def test_a_matching_pod_on_a_node_without_the_terms_key_is_in_no_pair_and_the_first_still_goes() -> None:
    """upstream's topologyToMatchedTermCount.update counts a pair only when the node has the
    term's key: a web pod on an unzoned node leaves affinityCounts empty, so the next web pod,
    with affinity to web by zone, is still the first of its series on a zoned node (counting
    the unzoned one under an empty zone would refuse it everywhere)."""
    web = _pod("web", {"app": "web"}, affinity=[_term({"matchLabels": {"app": "web"}}, ZONE)])
    other = _pod("web-0", {"app": "web"})
    counts = _count(web, [(other, "bare")], {"bare": {HOST: "bare"}, "n0": {HOST: "n0", ZONE: "a"}})
    assert not counts.affinity
    assert verdict(web, counts, {HOST: "n0", ZONE: "a"}) is None


def test_every_anti_affinity_term_is_read_not_only_the_first() -> None:
    """satisfyPodAntiAffinity: a node fails when any term's pair there has a matching pod (the
    first term, by zone, has none on the unzoned node; the second, by host, has one)."""
    web = _pod("web", {"app": "web"}, anti=[_term({"matchLabels": {"app": "db"}}, ZONE),
                                           _term({"matchLabels": {"app": "cache"}})])
    counts = _count(web, [(_pod("cache", {"app": "cache"}), "n0")], {"n0": {HOST: "n0"}})
    assert counts.anti == {(HOST, "n0"): 1}
    assert verdict(web, counts, {HOST: "n0"}) == (ANTI_AFFINITY,)
