"""NodeResourcesBalancedAllocation against kube-scheduler v1.36's own score table, and its args.

Upstream (GitHub kubernetes/kubernetes, v1.36 after kubernetes#135573), read through the
stored-code index: pkg/scheduler/framework/plugins/noderesources/balanced_allocation_test.go
(TestNodeResourcesBalancedAllocation's rows, their expected scores and the per-node balance the
comments give, e.g. "Score: 68 (100 -> 87)"), balanced_allocation.go (useRequested, the PreScore
Skip for best-effort pods, the std shortcut), v1 defaults.go SetDefaults_NodeResourcesBalancedAllocationArgs
and validation_pluginargs.go ValidateNodeResourcesBalancedAllocationArgs. The DRA rows are left
out (Tessera has no DRA extended resources). Each row is checked through the whole scheduler
(batch and per-node forms) and by calling the per-node score on every node.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.api.config import ConfigError, SchedulerConfig, load_config, parse_config
from scheduler.api.config_effective import effective_config
from scheduler.core.framework import prepare
from scheduler.core.plugins.fit.balanced import (
    NAME,
    BalancedAllocationArgs,
    NodeResourcesBalancedAllocation,
    balance,
    balanced_resource_scorer,
)
from scheduler.core.plugins.registry import args_of
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.unit.upstream_cases import make_node, st_pod

CPU_MEMORY = (("cpu", 1), ("memory", 1))
WITH_GPU = (("cpu", 1), ("memory", 1), ("nvidia.com/gpu", 1))
Obj = dict[str, Any]


def config(resources: tuple[tuple[str, int], ...] | None = CPU_MEMORY, weight: int = 1) -> SchedulerConfig:
    """A v1 file scoring with NodeResourcesBalancedAllocation only."""
    profile: dict[str, Any] = {
        "schedulerName": "tessera",
        "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": NAME, "weight": weight}]}}}
    if resources is not None:
        profile["pluginConfig"] = [{"name": NAME, "args": {"resources": [{"name": n, "weight": w} for n, w in resources]}}]
    return parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                         "profiles": [profile]}, "test")


def cpu_mem(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


@dataclass(frozen=True)
class Row:
    name: str
    pod: Obj
    nodes: tuple[Obj, ...]
    existing: tuple[Obj, ...]
    expected: dict[str, int]
    resources: tuple[tuple[str, int], ...] = CPU_MEMORY


TWO = st_pod("p", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"))
ROWS = [
    Row("nothing scheduled, resources requested, differently sized nodes", TWO,
        (make_node("node1", 4000, 10000, {}), make_node("node2", 6000, 10000, {})), (),
        {"node1": 68, "node2": 75}),  # 100 -> 87, 100 -> 100
    Row("resources requested, pods scheduled with resources", TWO,
        (make_node("node1", 10000, 20000, {}), make_node("node2", 10000, 20000, {})),
        (st_pod("e1", {"cpu": "1000m"}, {"cpu": "2000m"}, node="node1"),
         st_pod("e2", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"), node="node2")),
        {"node1": 73, "node2": 74}),  # 85 -> 82, 97 -> 95: the balances are integers first
    Row("resources requested, pods scheduled with resources, differently sized nodes", TWO,
        (make_node("node1", 10000, 20000, {}), make_node("node2", 10000, 50000, {})),
        (st_pod("e1", {"cpu": "1000m"}, {"cpu": "2000m"}, node="node1"),
         st_pod("e2", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"), node="node2")),
        {"node1": 73, "node2": 70}),  # 85 -> 82, 90 -> 80
    Row("resources requested, pods scheduled with resources, nodes to reach min/max score",
        st_pod("p", {"memory": "2000"}, {"memory": "3000"}),
        (make_node("node1", 3000, 5000, {}), make_node("node2", 3000, 5000, {})),
        (st_pod("e1", {"cpu": "1000m"}, {"cpu": "2000m"}, node="node1"),),
        {"node1": 100, "node2": 50}),  # 50 -> 100, 100 -> 50
    Row("requested resources at node capacity", st_pod("p", {"cpu": "1000m"}, {"cpu": "2000m"}),
        (make_node("node1", 6000, 10000, {}), make_node("node2", 6000, 10000, {})),
        (st_pod("e1", {"cpu": "1000m"}, {"cpu": "2000m"}, node="node1"),
         st_pod("e2", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"), node="node2")),
        {"node1": 62, "node2": 62}),  # 75 -> 50, 100 -> 75
    Row("scalar resource is included in the score computation if pod requests the scalar resource",
        st_pod("p", {"cpu": "0", "memory": "0", "nvidia.com/gpu": "1"}),
        (make_node("node1", 3500, 40000, {"nvidia.com/gpu": 8}), make_node("node2", 3500, 40000, {"nvidia.com/gpu": 8})),
        (st_pod("e1", cpu_mem("1000m", "2000"), {"cpu": "2000m", "memory": "3000", "nvidia.com/gpu": "3"}, node="node1"),
         st_pod("e2", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"), node="node2")),
        {"node1": 75, "node2": 76}, WITH_GPU),  # 69 -> 70, 62 -> 65 (three fractions: the population std)
    Row("scalar resource is not included in the score computation if pod doesn't request the scalar resource", TWO,
        (make_node("node1", 3500, 40000, {"nvidia.com/gpu": 8}), make_node("node2", 3500, 40000, {})), (),
        {"node1": 56, "node2": 56}, WITH_GPU),  # 100 -> 63 on both: node1's GPUs left out
]


def cluster(cfg: SchedulerConfig, objs: tuple[Obj, ...], batch: bool = True) -> Scheduler:
    scheduler = Scheduler(cfg, explain=True, batch=batch)
    for obj in objs:
        scheduler.apply("ADDED", copy.deepcopy(obj), now=0.0)
    return scheduler


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_upstream_row_through_the_scheduler(row: Row, batch: bool) -> None:
    scheduler = cluster(config(row.resources), (*row.nodes, *row.existing, row.pod), batch)
    [attempt] = scheduler.schedule_next(0.0) or []
    assert attempt.scores is not None
    assert {node: scores[NAME] for node, scores in attempt.scores.items()} == row.expected


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_upstream_row_score_on_every_node(row: Row) -> None:
    cfg = config(row.resources)
    scheduler = cluster(cfg, (*row.nodes, *row.existing, row.pod))
    plugin = NodeResourcesBalancedAllocation(None, args_of(cfg.profiles[0], BalancedAllocationArgs))  # type: ignore[arg-type]
    ctx = prepare(scheduler.state.pods[row.pod["metadata"]["uid"]], scheduler.state.classes)
    assert {name: plugin.score(ctx, scheduler.state.nodes[name]) for name in row.expected} == row.expected


def test_a_pod_requesting_none_of_the_resources_is_not_scored() -> None:
    """upstream's first row: a best-effort pod, PreScore's Skip (kubernetes#129138). Requests as
    written: the non-zero CPU/memory defaults NodeResourcesFit scores with do not count here."""
    cfg = config()
    scheduler = cluster(cfg, (make_node("node1", 4000, 10000, {}), make_node("node2", 4000, 10000, {}), st_pod("p")))
    plugin = NodeResourcesBalancedAllocation(None, args_of(cfg.profiles[0], BalancedAllocationArgs))  # type: ignore[arg-type]
    ctx = prepare(next(iter(scheduler.state.pods.values())), scheduler.state.classes)
    assert not plugin.score_applies(ctx)
    assert plugin.score(ctx, scheduler.state.nodes["node1"]) == 0


@pytest.mark.parametrize("resources, scored", [(CPU_MEMORY, False), (WITH_GPU, True)])
def test_a_pod_asking_only_for_a_class_is_scored_only_when_a_scalar_resource_is(
        resources: tuple[tuple[str, int], ...], scored: bool) -> None:
    """A pod whose only request is a ResourceClass's: its plan's GPUs add to `nvidia.com/gpu`, so it
    is scored where the args list that scalar resource; with cpu and memory alone it requests none
    of them and is skipped, as upstream's PreScore skips it (not scored 75 on every node)."""
    cfg = config(resources)
    objs = (make_node("node1", 4000, 10000, {"nvidia.com/gpu": 1}), b.device("node1", 0),
            b.resource_class("v100", match_labels={"model": "V100"}),
            b.pod("p", limits={"class.tessera.dev/v100": 1}))
    scheduler = cluster(cfg, objs)
    plugin = NodeResourcesBalancedAllocation(None, args_of(cfg.profiles[0], BalancedAllocationArgs))  # type: ignore[arg-type]
    ctx = prepare(next(iter(scheduler.state.pods.values())), scheduler.state.classes)
    assert ctx.device_requests and not any(plugin.per_node.pod_vector(ctx))
    assert plugin.score_applies(ctx) is scored


def test_balance_hand_computed() -> None:
    assert balance([3000, 5000], [4000, 10000]) == 87  # |0.75 - 0.5| / 2 = 0.125
    assert balance([7500, 0], [6000, 10000]) == 50  # a fraction above 1 counts as 1
    assert balance([1, 4, 3], [2, 16, 4]) == 79  # 0.5, 0.25, 0.75: sqrt(0.125 / 3) = 0.2041
    assert balance([1], [2]) == 100 and balance([], []) == 100  # fewer than two fractions: std 0
    assert balance([5, 1], [10, 0]) == 100  # a resource the node has none of is left out
    assert balanced_resource_scorer([3000, 5000], [0, 0], [4000, 10000]) == 68  # 50 + (50 + 87 - 100) / 2


def test_args_default_and_upstream_validation() -> None:
    assert args_of(config(None).profiles[0], BalancedAllocationArgs) == BalancedAllocationArgs()
    assert [r.name for r in BalancedAllocationArgs().resources] == ["cpu", "memory"]
    zero = args_of(config((("cpu", 0), ("nvidia.com/gpu", 0))).profiles[0], BalancedAllocationArgs)
    assert [(r.name, r.weight) for r in zero.resources] == [("cpu", 1), ("nvidia.com/gpu", 1)]
    with pytest.raises(ConfigError) as err:
        config((("cpu", 2), ("cpu", 1)))
    assert str(err.value) == (
        "test: [profiles[0].pluginConfig[0].args.resources[0].weight: Invalid value: 2: must be 1, "
        'profiles[0].pluginConfig[0].args.resources[1].name: Duplicate value: "cpu"]')


def test_the_trial_profile_loads_with_weight_2() -> None:
    """The user trial: a kube-scheduler profile enabling NodeResourcesBalancedAllocation at weight 2
    was refused ("Unsupported value")."""
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [{"schedulerName": "tessera", "plugins": {"score": {"enabled": [
                            {"name": NAME, "weight": 2}]}}}]}, "trial")
    assert cfg.profiles[0].score_weights.weight(NAME) == 2
    shown = effective_config(cfg)["profiles"][0]
    assert NAME in shown["plugins"]
    assert shown["pluginArgs"][NAME] == {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}


def test_not_in_tesseras_defaults() -> None:
    """Off unless a profile enables it: the built-in profile and a file without plugins keep their
    placements (upstream's default profile scores with it at weight 1)."""
    for cfg in (load_config(None), parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                                 "kind": "KubeSchedulerConfiguration"}, "bare")):
        assert cfg.profiles[0].score_weights.weight(NAME) == 0
        assert NAME not in effective_config(cfg)["profiles"][0]["plugins"]
