"""Adversarial equivalence of InterPodAffinity's batch form (`filter_rows`) with its per-node form:
anti terms of several keys, several holds per node, holds on deleted nodes, the pod's own hold,
nodes removed after placement, and rows masks that leave some rows (hold rows among them) out."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from scheduler.api.config import load_config
from scheduler.core.framework.cycle_state import PodContext, prepare
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.plugins.interpod_affinity import InterPodAffinity
from scheduler.core.scheduler import Scheduler
from scheduler.core.state.nodes import Placement
from scheduler.sim import builders as b
from tests.unit.test_framework_duration_metrics import Recording, _cluster, _schedule

KEYS = ["kubernetes.io/hostname", "topology.kubernetes.io/zone", "rack"]


def _terms(rng: random.Random) -> list[dict[str, Any]]:
    return [{"labelSelector": {"matchLabels": {"app": rng.choice("abc")}}, "topologyKey": key}
            for key in rng.sample(KEYS, rng.randint(1, 3))]


@pytest.mark.parametrize("seed", range(30))
def test_filter_rows_equals_filter(seed: int) -> None:
    rng = random.Random(seed)
    scheduler = Scheduler(load_config(None), seed=7)
    state = scheduler.state
    nodes = [f"n{n}" for n in range(rng.randint(3, 25))]
    for name in nodes:
        labels = {k: v for k, v in (("topology.kubernetes.io/zone", f"z{rng.randint(0, 2)}"),
                                    ("rack", f"r{rng.randint(0, 4)}")) if rng.random() < 0.8}
        scheduler.apply("ADDED", b.node(name, labels=labels), 0.0)
    for p in range(rng.randint(5, 40)):
        extra: dict[str, Any] = {}
        if rng.random() < 0.6:
            extra["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": _terms(rng)}}
        bound = rng.random() < 0.5
        obj = b.pod(f"p{p}", labels={"app": rng.choice("abc")}, requests={"cpu": "100m"}, spec_extra=extra,
                    node_name=rng.choice(nodes) if bound else "", phase="Running" if bound else "Pending",
                    scheduler="other" if bound else "tessera")
        scheduler.apply("ADDED", obj, 0.0)
    pending = [pod for pod in state.pods.values() if not pod.node_name]
    for pod in rng.sample(pending, min(len(pending), rng.randint(0, 8))):
        placement = Placement(rng.choice(nodes), {}, 0, 0, (), False, False)
        state.hold(pod.uid, placement, rng.choice([0, 100]))
    for name in rng.sample(nodes, rng.randint(0, 2)):
        scheduler.apply("DELETED", b.node(name), 0.0)
    runtime = scheduler.profiles["tessera"]
    plugin = runtime.plugins["InterPodAffinity"]
    assert isinstance(plugin, InterPodAffinity)
    table = runtime.table
    table.sync()
    for pod in list(state.pods.values()):
        _rows_agree(plugin, table, prepare(pod, state.classes), rng, 0.7, pod.key)


def test_a_pod_with_affinity_terms_is_timed_once_per_sampled_cycle_as_per_node() -> None:
    """Its batch form rules out nothing (`exact` False, no rows failed): the per-node scan that
    judges it is its one Filter observation, as without batch forms, not a Success besides."""
    affinity = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    seen: dict[bool, list[tuple[str, str, str]]] = {}
    for batch in (True, False):
        watch = Recording(sampled=True)
        core = Scheduler(load_config(None), stopwatch=watch, batch=batch)
        _cluster(core)
        _schedule(core, b.pod("x", labels={"app": "a"}))
        watch.plugins.clear()
        _schedule(core, b.pod("y", spec_extra=affinity))
        seen[batch] = [run for run in watch.plugins if run[0] == "InterPodAffinity"]
    assert seen[True] == seen[False] == [("InterPodAffinity", "Filter", "Unschedulable")]


NAMESPACES = ["default", "a", "b"]


def _namespaced_term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": {"matchLabels": {"app": rng.choice("abc")}}, "topologyKey": rng.choice(KEYS)}
    roll = rng.random()
    if roll < 0.2:
        term["namespaces"] = rng.sample(NAMESPACES, rng.randint(1, 2))
    elif roll < 0.3:
        term["namespaceSelector"] = {}
    elif roll < 0.4:
        term["namespaceSelector"] = {"matchLabels": {"team": "x"}}  # unread: matches every namespace
    return term


@pytest.mark.parametrize("seed", range(40))
def test_filter_rows_equals_filter_through_relabels_deletions_and_nominations(seed: int) -> None:
    """As above, interleaved with the changes a kept column could miss: nodes relabelled (a
    topology label changed or dropped), deleted and added again under the same name, pods of
    several namespaces with `namespaces` and namespaceSelector terms, holds of either priority;
    each pending pod judged as its attempt finds the cluster (its own hold and lower ones set aside)."""
    rng = random.Random(seed)
    scheduler = Scheduler(load_config(None), seed=7)
    state = scheduler.state
    names = [f"n{n}" for n in range(rng.randint(2, 12))]
    versions: dict[str, int] = {}

    def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        if labels is None:
            labels = {k: v for k, v in (("topology.kubernetes.io/zone", f"z{rng.randint(0, 2)}"),
                                        ("rack", f"r{rng.randint(0, 3)}")) if rng.random() < 0.7}
        versions[name] = versions.get(name, 0) + 1
        obj = b.node(name, labels=labels)
        obj["metadata"]["uid"] += f"-{versions[name] // 1000}"  # a node added again is a new object
        obj["metadata"]["resourceVersion"] = str(versions[name])
        return obj

    live = {name: node(name) for name in names}
    for obj in live.values():
        scheduler.apply("ADDED", obj, 0.0)
    runtime = scheduler.profiles["tessera"]
    plugin = runtime.plugins["InterPodAffinity"]
    assert isinstance(plugin, InterPodAffinity)
    table = runtime.table
    for step in range(rng.randint(10, 40)):
        roll = rng.random()
        if roll < 0.15 and live:
            name = rng.choice(list(live))
            labels = dict(live[name]["metadata"]["labels"])
            key = rng.choice(KEYS[1:])
            if rng.random() < 0.5:
                labels.pop(key, None)
            else:
                labels[key] = f"v{rng.randint(0, 3)}"
            live[name] = node(name, labels)
            scheduler.apply("MODIFIED", live[name], 0.0)
        elif roll < 0.22 and live:
            scheduler.apply("DELETED", live.pop(rng.choice(list(live))), 0.0)
        elif roll < 0.28:
            name = rng.choice(names)
            if name not in live:
                versions[name] = (versions[name] // 1000 + 1) * 1000
                live[name] = node(name)
                scheduler.apply("ADDED", live[name], 0.0)
        elif roll < 0.8:
            affinity: dict[str, Any] = {}
            if rng.random() < 0.6:
                affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                    _namespaced_term(rng) for _ in range(rng.randint(1, 2))]}
            if rng.random() < 0.1:
                affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_namespaced_term(rng)]}
            bound = bool(live) and rng.random() < 0.5
            scheduler.apply("ADDED", b.pod(
                f"p{step}", namespace=rng.choice(NAMESPACES), labels={"app": rng.choice("abc")},
                requests={"cpu": "100m"}, spec_extra={"affinity": affinity} if affinity else None,
                node_name=rng.choice(list(live)) if bound else "", phase="Running" if bound else "Pending",
                scheduler="other" if bound else "tessera", priority=rng.choice([0, 100])), 0.0)
        elif live:
            waiting = [pod for pod in state.pods.values() if not pod.node_name and pod.uid not in state.holds]
            if waiting:
                state.hold(rng.choice(waiting).uid, Placement(rng.choice(list(live)), {}, 0, 0, (), False, False),
                           rng.choice([0, 100]))
        table.sync()
        for pod in [pod for pod in state.pods.values() if not pod.node_name]:
            aside = {uid: hold for uid in [pod.uid, *state.holds_below(state.competing_priority(pod))]
                     if (hold := state.set_aside_hold(uid)) is not None}
            try:
                _rows_agree(plugin, table, prepare(pod, state.classes), rng, 0.8, f"step {step} {pod.key}")
            finally:
                for uid, hold in aside.items():
                    state.hold(uid, hold.placement, hold.priority)


def _rows_agree(plugin: InterPodAffinity, table: NodeTable, ctx: PodContext, rng: random.Random, keep: float,
                where: str) -> None:
    """On a random `keep` share of the rows, the batch form (when it applies and is exact) fails
    exactly the rows left whose per-node filter fails, with the same reasons, and no other row."""
    if not plugin.filter_applies(ctx):
        return
    rows = np.array([rng.random() < keep for _ in range(table.size)], np.bool_)
    verdict = plugin.filter_rows(table, ctx, rows)
    if not verdict.exact:
        return
    masks = verdict.reasons()
    for row in range(table.size):
        expected = plugin.filter(ctx, table.info(row))
        failed = verdict.fails is not None and bool(verdict.fails[row])
        assert failed == (bool(rows[row]) and expected is not None), (where, table.info(row).name)
        if failed:
            assert verdict.reasons_of(row, masks) == expected
