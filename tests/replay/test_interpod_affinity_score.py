"""Preferred pod affinity and anti-affinity score nodes as kube-scheduler v1.36's InterPodAffinity
(interpodaffinity/scoring.go), through the pure core.

Before, preferred pod terms were only told (IgnoredPreferredTerms) and changed nothing: a web pod
preferring its database's zone landed wherever the other scores put it.
"""

from __future__ import annotations

from typing import Any

import orjson

from scheduler.api.config import BUILTIN_SOURCE
from scheduler.api.config_parse import parse_config
from scheduler.core.pod_terms import IGNORED_PREFERRED_TERMS
from scheduler.kubectl import explain as explaining
from scheduler.kubectl.output import dump
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def _weighted(app: str, weight: int = 50, key: str = ZONE) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}}


def _cluster() -> list[dict[str, Any]]:
    """Two empty, equal nodes in zones a and b, and a full one in b running the database."""
    return [b.node("a0", gpus=8, labels={ZONE: "a"}), b.node("b0", gpus=8, labels={ZONE: "b"}),
            b.node("b9", gpus=8, labels={ZONE: "b"}),
            b.pod("db", labels={"app": "db"}, node_name="b9", phase="Running", limits={"nvidia.com/gpu": 8})]


def _web(name: str, **affinity: Any) -> dict[str, Any]:
    return b.pod(name, labels={"app": "web"}, limits={"nvidia.com/gpu": 1},
                 spec_extra={"affinity": affinity} if affinity else None)


def test_preferred_affinity_and_anti_affinity_split_two_equal_nodes() -> None:
    run = Run()
    run.add(*_cluster(), _web("near", podAffinity={PREF: [_weighted("db")]}))
    assert run.node_of("near") == "b0"
    run = Run()
    run.add(*_cluster(), _web("far", podAntiAffinity={PREF: [_weighted("db")]}))
    assert run.node_of("far") == "a0"
    assert not [n for n in run.notices() if n.startswith(IGNORED_PREFERRED_TERMS)]  # scored, not told


def test_an_existing_pods_preferred_anti_affinity_repels_a_plain_pod() -> None:
    run = Run()
    shy = b.pod("shy", labels={"app": "shy"}, node_name="b9", phase="Running", limits={"nvidia.com/gpu": 8},
                spec_extra={"affinity": {"podAntiAffinity": {PREF: [_weighted("web")]}}})
    run.add(*_cluster()[:3], shy, _web("plain"))
    assert run.node_of("plain") == "a0"


def test_ignore_preferred_terms_of_existing_pods() -> None:
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "tessera", "pluginConfig": [
               {"name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": True}}]}]}
    shy = b.pod("shy", labels={"app": "shy"}, node_name="b9", phase="Running", limits={"nvidia.com/gpu": 8},
                spec_extra={"affinity": {"podAntiAffinity": {PREF: [_weighted("web", 100)]}}})
    for cfg, plain in ((None, "a0"), (parse_config(raw, "t.yaml"), "b0")):
        run = Run(cfg)
        run.add(*_cluster()[:3], shy, _web("plain"))
        # the existing pod's preference keeps it out of zone b unless ignored (the tie-break takes b0)
        assert run.node_of("plain") == plain
    # a pod with preferred terms of its own still counts the existing pods' preferences
    run = Run(parse_config(raw, "t.yaml"))
    run.add(*_cluster()[:3], shy, _web("own", podAffinity={PREF: [_weighted("nothing")]}))
    assert run.node_of("own") == "a0"


def test_explain_shows_the_score_and_no_longer_says_not_read() -> None:
    result = explaining.explain([*_cluster(), _web("near", podAffinity={PREF: [_weighted("db")]})], "default/near",
                                config(BINPACK), [], 0.0)
    assert result is not None
    text = explaining.render(result, 0.0)
    fits = [line.split() for line in text.splitlines() if "fits, score" in line]
    assert [(line[0], line[3]) for line in fits] == [("b0", "512"), ("a0", "312")]  # + 2 x 100 in zone b
    assert not [line for line in text.splitlines() if line.startswith("Not read:")]


def test_a_weight_beyond_the_apiservers_range_is_no_term_and_no_crash() -> None:
    """A replayed pod whose preferred weight the apiserver would refuse (1..100): before, 10**20
    overflowed the int64 scores (OverflowError, the cycle crashed); now the term is not read and
    the pod places as without it (the tie-break's node, as a pod with no terms)."""
    plain = Run()
    plain.add(*_cluster(), _web("near"))
    for weight in (10**20, 0, -50):
        run = Run()
        run.add(*_cluster(), _web("near", podAffinity={PREF: [_weighted("db", weight)]}))
        assert run.node_of("near") == plain.node_of("near")


def _trial(weight: int = 0) -> tuple[list[dict[str, Any]], Any]:
    """A trial's case: a cache pod in zone-b, a filler holding 4 GPUs in zone-a, and a 1-GPU pod
    preferring the cache's zone (weight 100); under the built-in profile, or one raising
    InterPodAffinity's score weight to `weight` (docs/configuration.md shows the snippet)."""
    objs = [b.node("a0", gpus=8, labels={ZONE: "zone-a"}), b.node("b0", gpus=8, labels={ZONE: "zone-b"}),
            b.pod("cache", labels={"app": "cache"}, node_name="b0", phase="Running", requests={"cpu": "1"}),
            b.pod("filler", labels={"app": "filler"}, node_name="a0", phase="Running", limits={"nvidia.com/gpu": 4}),
            b.pod("trainer", limits={"nvidia.com/gpu": 1},
                  spec_extra={"affinity": {"podAffinity": {PREF: [_weighted("cache", 100)]}}})]
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "tessera", "plugins": {"score": {"enabled": [
               {"name": "TesseraFragmentation", "weight": 10}, {"name": "InterPodAffinity", "weight": weight}]}}}]}
    return objs, parse_config(raw, "raised.yaml") if weight else config(None)


def test_explain_breaks_each_nodes_score_down_by_plugin() -> None:
    """A trial finding: explain showed only each node's total (`score 699`), so a user could not
    see that TesseraFragmentation (weight 10) outweighed the pod's preferred affinity
    (InterPodAffinity, weight 2). Each scored node's RESULT now adds up its plugins' normalised
    scores times their weights (those scoring 0 left out); -o json has every plugin's."""
    objs, cfg = _trial()
    result = explaining.explain(objs, "default/trainer", cfg, [], 0.0)
    assert result is not None and result.dry_run is not None and cfg.source == BUILTIN_SOURCE
    rows = {line.split()[0]: line.split(None, 2)[2] for line in explaining.render(result, 0.0).splitlines()
            if "fits, score" in line}
    for verdict in result.dry_run.nodes:
        parts = {p.plugin: (p.score, p.weight) for p in verdict.scores}
        assert parts["TesseraFragmentation"][1] == 10 and parts["InterPodAffinity"][1] == 2
        assert verdict.detail == rows[verdict.node]
        assert int(verdict.detail.split()[1]) == sum(score * weight for score, weight in parts.values())
        shown = " + ".join(f"{name} {score}x{weight}" for name, (score, weight) in
                           sorted(parts.items(), key=lambda item: (-item[1][0] * item[1][1], item[0])) if score)
        assert verdict.detail.endswith(f" = {shown}")
    assert result.dry_run.node == "a0"
    assert "InterPodAffinity 100x2" in rows["b0"] and "InterPodAffinity" not in rows["a0"]
    doc = orjson.loads(dump(explaining.as_dict(result), "json"))["dry_run"]["nodes"]
    assert {p["plugin"] for p in doc[0]["scores"]} >= {"TesseraFragmentation", "InterPodAffinity", "NodeResourcesFit"}


def test_raising_interpod_affinitys_weight_lets_the_preference_decide() -> None:
    """The snippet in docs/configuration.md: with InterPodAffinity weighing 20, the preference
    (100 x 20) outweighs packing (at most 100 x 10), as kube-scheduler would honour it."""
    for weight, node in ((0, "a0"), (20, "b0")):
        objs, cfg = _trial(weight)
        run = Run(cfg)
        run.add(*objs)
        assert run.node_of("trainer") == node


def test_explain_says_its_dry_run_learned_only_the_listed_pods() -> None:
    """A trial finding: the dry run is a fresh core over the listed cluster, whose packing score
    learned task types only from the pods listed now, while a long-running scheduler's has learned
    from every pod it has seen (docs/semantics.md, Fragmentation): the dry-run line says so."""
    objs, cfg = _trial()
    result = explaining.explain(objs, "default/trainer", cfg, [], 0.0)
    assert result is not None
    assert ("now, as if it were next (nothing is written; a fresh core: its packing score learned task types "
            "only from the pods listed now, a long-running scheduler's from every pod it has seen, so it may "
            "place differently):") in explaining.render(result, 0.0)
