"""NodeResourcesFit scoring against kube-scheduler's own score tables.

Upstream (GitHub kubernetes/kubernetes), blobs read through the stored-code index:
  pkg/scheduler/framework/plugins/noderesources/least_allocated_test.go            @ 008b3652959ca58af8be3fb5b6ecfe9ae7638282
  pkg/scheduler/framework/plugins/noderesources/most_allocated_test.go             @ 030880a5dc5449403c6d1f0aa146a7dc21d6c6dc
      (same table at 072825f9a367e9ca0f73f91830945f1b7f46e0d9)
  pkg/scheduler/framework/plugins/noderesources/requested_to_capacity_ratio_test.go @ 8519d3399f10be33a45da368a48ee763acbe3999
      (same tables at 00b9ead02c37921011ebe5293558cea5277cd295)
  pkg/scheduler/framework/plugins/noderesources/test_util.go                        @ 75214d11d5c4c108c4b400688d9bcac04e838f61
  pkg/scheduler/framework/plugins/noderesources/requested_to_capacity_ratio.go      @ 0a295a8d22ebdc7ad87bb7bf9f4e639b126515e4
  pkg/scheduler/framework/plugins/helper/shape_score.go                             @ 2d58ef7868e6efda493e876aeaf72fb7dfea7c44

The rows themselves, and how each upstream helper maps onto our builders, are in upstream_cases.py.

Every score row is checked three ways:
  * through the whole scheduler (`Scheduler(config, explain=True)`, nodes + bound pods + the incoming
    pod as Kubernetes JSON, one `schedule_next`), reading the plugin's 0..100 score per node;
    nodes our Filter rejects (listed per row; upstream's Filter would reject them too) carry no score;
  * by calling `FitScore.score()` on every node of that same state, as upstream calls Score directly
    on every node whether or not the pod fits;
  * for rows with nodes the pod does not fit, by calling the strategy's scorer on the
    (requested, allocatable) vectors upstream computes for them.

Rows left out (no pytest.skip; see upstream_cases.py): LeastAllocated[2] and MostAllocated[2]
("Resources not set, pods scheduled with error") exercise the internal config API with
resources=nil. Our config is v1, where an empty list is defaulted to cpu:1, memory:1;
test_resources_not_set_is_defaulted_in_v1 checks that instead. Nothing here is about DRA: none of the
rows read have DRA or DeviceClass content.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.api.config import ConfigError, SchedulerConfig, parse_config
from scheduler.core.plugins.fit.args import ScoringStrategy, ShapePoint
from scheduler.core.plugins.registry import args_of
from scheduler.core.scheduler import Scheduler
from scheduler.core.framework import prepare
from scheduler.core.plugins.fit import (
    FitScore,
    broken_linear,
    build_scorer,
    most_allocated,
    requested_to_capacity_ratio,
)
from scheduler.sim import builders as b
from tests.unit.upstream_cases import (
    BROKEN_LINEAR_CASES,
    SCORE_ROWS,
    WEIGHT_ROWS,
    Row,
    WeightRow,
)

FIT = "NodeResourcesFit"


def fit_config(strategy: str, resources: tuple[tuple[str, int], ...] | list[tuple[str, int]],
               shape: tuple[tuple[int, int], ...] = ()) -> SchedulerConfig:
    """A v1 KubeSchedulerConfiguration scoring with NodeResourcesFit only (weight 1)."""
    scoring: dict[str, Any] = {"type": strategy,
                               "resources": [{"name": n, "weight": w} for n, w in resources]}
    if shape:  # upstream's 0..10 scale, as written in the Go tables; parse_config scales it x10
        scoring["requestedToCapacityRatio"] = {"shape": [{"utilization": u, "score": s} for u, s in shape]}
    raw = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{
            "schedulerName": "tessera",
            "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": FIT, "weight": 1}]}},
            "pluginConfig": [{"name": FIT, "args": {"scoringStrategy": scoring}}],
        }],
    }
    return parse_config(raw, "test")


def cluster(cfg: SchedulerConfig, nodes: Any, existing: Any, incoming: dict[str, Any]) -> Scheduler:
    scheduler = Scheduler(cfg, explain=True)
    for obj in (*nodes, *existing, incoming):
        scheduler.apply("ADDED", copy.deepcopy(obj), now=0.0)
    return scheduler


def row_cluster(row: Row) -> Scheduler:
    return cluster(fit_config(row.strategy, row.resources, row.shape), row.nodes, row.existing, row.pod)


def node_names(nodes: Any) -> list[str]:
    return [n["metadata"]["name"] for n in nodes]


def fit_scores_through_scheduler(scheduler: Scheduler) -> tuple[dict[str, int], Any]:
    attempts = scheduler.schedule_next(0.0)
    assert attempts is not None and len(attempts) == 1
    attempt = attempts[0]
    assert attempt.scores is not None  # explain=True
    return {node: row[FIT] for node, row in attempt.scores.items()}, attempt


def fit_scores_direct(scheduler: Scheduler, incoming: dict[str, Any], nodes: Any) -> dict[str, int]:
    """Score every node, feasible or not, the way upstream's tests call Score."""
    pod = scheduler.state.pods[incoming["metadata"]["uid"]]
    ctx = prepare(pod, scheduler.state.classes)
    assert ctx.prefilter_error is None
    scorer = FitScore(args_of(scheduler.config.profiles[0], ScoringStrategy))
    return {name: scorer.score(ctx, scheduler.state.nodes[name]) for name in node_names(nodes)}


# --- the upstream score tables ---------------------------------------------------------------------


@pytest.mark.parametrize("row", SCORE_ROWS, ids=[r.id for r in SCORE_ROWS])
def test_upstream_row_through_scheduler(row: Row) -> None:
    scores, attempt = fit_scores_through_scheduler(row_cluster(row))
    feasible = [n for n in node_names(row.nodes) if n not in row.infeasible]
    assert scores == {n: row.expected[n] for n in feasible}
    assert set(attempt.filtered or {}) == set(row.infeasible)
    if not feasible:
        assert attempt.node is None


@pytest.mark.parametrize("row", SCORE_ROWS, ids=[r.id for r in SCORE_ROWS])
def test_upstream_row_fit_score_on_every_node(row: Row) -> None:
    assert fit_scores_direct(row_cluster(row), row.pod, row.nodes) == row.expected


VECTOR_ROWS = [r for r in SCORE_ROWS if r.vectors]


@pytest.mark.parametrize("row", VECTOR_ROWS, ids=[r.id for r in VECTOR_ROWS])
def test_upstream_row_scorer_vectors(row: Row) -> None:
    scorer = build_scorer(args_of(fit_config(row.strategy, row.resources, row.shape).profiles[0], ScoringStrategy))
    got = {node: scorer(list(req), list(alloc)) for node, (req, alloc) in row.vectors.items()}
    assert got == {node: row.expected[node] for node in row.vectors}


@pytest.mark.parametrize("row", WEIGHT_ROWS, ids=[r.id for r in WEIGHT_ROWS])
def test_upstream_weight_validation_rows(row: WeightRow) -> None:
    if row.error_field is not None:
        with pytest.raises(ConfigError) as err:
            fit_config(row.strategy, row.resources)
        assert err.value.field == f"profiles[0].pluginConfig[0].args.{row.error_field}"
        assert "Invalid value" in err.value.message
    else:
        # Upstream's internal-API validation rejects weight 0; v1 defaulting turns it into 1 first
        # (SetDefaults_NodeResourcesFitArgs: `if Weight == 0 { Weight = 1 }`).
        fit = args_of(fit_config(row.strategy, row.resources).profiles[0], ScoringStrategy)
        assert tuple((r.name, r.weight) for r in fit.resources) == row.defaulted


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
def test_resources_not_set_is_defaulted_in_v1(strategy: str) -> None:
    """Stand-in for "[2] Resources not set, pods scheduled with error" of both tables: with the v1
    API an empty resource list becomes cpu:1, memory:1 rather than reaching Score."""
    fit = args_of(fit_config(strategy, []).profiles[0], ScoringStrategy)
    assert tuple((r.name, r.weight) for r in fit.resources) == (("cpu", 1), ("memory", 1))


def test_shape_is_scaled_to_node_score_range() -> None:
    """requestedToCapacityRatioScorer: Score * (MaxNodeScore / MaxCustomPriorityScore), utilization as is."""
    fit = args_of(fit_config("RequestedToCapacityRatio", [("cpu", 1)], ((0, 10), (100, 0))).profiles[0], ScoringStrategy)
    assert fit.shape == (ShapePoint(utilization=0, score=100), ShapePoint(utilization=100, score=0))


# --- TestBrokenLinearFunction ------------------------------------------------------------------------

BROKEN_LINEAR = [(i, points, p, want) for i, (points, checks) in enumerate(BROKEN_LINEAR_CASES)
                 for p, want in checks]


@pytest.mark.parametrize(("case", "points", "p", "expected"), BROKEN_LINEAR,
                         ids=[f"case_{i}-p={p}" for i, _, p, _ in BROKEN_LINEAR])
def test_broken_linear_function(case: int, points: tuple[tuple[int, int], ...], p: int, expected: int) -> None:
    f = broken_linear([ShapePoint(utilization=u, score=s) for u, s in points])
    assert f(p) == expected


@pytest.mark.parametrize(("p", "expected"), [(50, 9), (41, 10), (99, 1)])
def test_broken_linear_truncates_toward_zero(p: int, expected: int) -> None:
    """Derived from shape_score.go (not an upstream table row): the segment arithmetic is Go int64,
    so a falling segment's negative quotient truncates toward zero. On (40,10)-(100,0):
    p=50: 10 + (-10*10)/60 = 10 + (-1) = 9 (floor division would give 8);
    p=41: 10 + (-10)/60 = 10; p=99: 10 + (-590)/60 = 10 - 9 = 1."""
    f = broken_linear([ShapePoint(utilization=u, score=s) for u, s in ((0, 2), (40, 10), (100, 0))])
    assert f(p) == expected


# --- derived: the worked example of kube-scheduler.md §1.3 -----------------------------------------
#
# Re-derived from requested_to_capacity_ratio.go / most_allocated.go before being written down here.
# Resources cpu:1, memory:1, nvidia.com/gpu:5; the pod asks 2 CPU, 8Gi, 2 GPUs.
# Node B (empty; 32 CPU, 128Gi, 8 GPUs): utilization cpu 2000*100/32000 = 6, memory 8/128 -> 6, gpu 25.
#   shape [(0,0),(100,1)] -> internal [(0,0),(100,10)]: f(6) = 10*6/100 = 0 (dropped: rs > 0 only),
#       f(25) = 2 -> round(2*5/5) = 2. Averaging the zeros in would give round(10/7) = 1.
#   shape [(0,0),(100,10)] -> [(0,0),(100,100)]: 6, 6, 25 -> round(137/7 = 19.57) = 20.
#   MostAllocated: 6, 6, 25 -> 137/7 floor = 19.
# Node C, "4/8 GPUs in use": the reference does not say what uses them. Its 59 / 58 come out when the
# load is proportional, e.g. two earlier pods like this one (4 CPU, 16Gi, 4 GPUs in use):
#   cpu 6000*100/32000 = 18, memory 24/128 -> 18, gpu 6/8 -> 75:
#   RTCR x10: round(411/7 = 58.71) = 59; MostAllocated: 411/7 floor = 58;
#   RTCR x1 (not in the reference): f = 1, 1, 7 -> round(37/7 = 5.29) = 5.
# Node D, the same 4 GPUs held by one pod that requests only GPUs (its container then counts as
# 100m / 200Mi for scoring): cpu 2100/32000 -> 6, memory (200Mi + 8Gi)/128Gi -> 6, gpu 75:
#   RTCR x10 round(387/7 = 55.29) = 55, MostAllocated 387/7 floor = 55 (so the reference's 59/58
#   depend on that unstated load); RTCR x1: f = 0, 0, 7 -> only the GPU counts -> 7.

WORKED_RESOURCES = (("cpu", 1), ("memory", 1), ("nvidia.com/gpu", 5))
WORKED_REQUEST = {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "2"}


def _worked_cluster(cfg: SchedulerConfig) -> tuple[Scheduler, dict[str, Any], list[dict[str, Any]]]:
    nodes = [b.node(name, cpu="32", memory="128Gi", gpus=8) for name in ("nodeB", "nodeC", "nodeD")]
    existing = [
        b.pod("c-0", requests=WORKED_REQUEST, node_name="nodeC"),
        b.pod("c-1", requests=WORKED_REQUEST, node_name="nodeC"),
        b.pod("d-0", requests={"nvidia.com/gpu": "4"}, node_name="nodeD"),
    ]
    incoming = b.pod("incoming", requests=WORKED_REQUEST)
    return cluster(cfg, nodes, existing, incoming), incoming, nodes


@pytest.mark.parametrize(("strategy", "shape", "expected"), [
    ("RequestedToCapacityRatio", ((0, 0), (100, 1)), {"nodeB": 2, "nodeC": 5, "nodeD": 7}),
    ("RequestedToCapacityRatio", ((0, 0), (100, 10)), {"nodeB": 20, "nodeC": 59, "nodeD": 55}),
    ("MostAllocated", (), {"nodeB": 19, "nodeC": 58, "nodeD": 55}),
], ids=["rtcr-shape-0..1", "rtcr-shape-0..10", "most-allocated"])
def test_reference_worked_example(strategy: str, shape: tuple[tuple[int, int], ...],
                                  expected: dict[str, int]) -> None:
    cfg = fit_config(strategy, WORKED_RESOURCES, shape)
    scheduler, incoming, nodes = _worked_cluster(cfg)
    assert fit_scores_direct(scheduler, incoming, nodes) == expected
    scores, _ = fit_scores_through_scheduler(_worked_cluster(cfg)[0])
    assert scores == expected


def test_reference_worked_example_vectors() -> None:
    """The same example on the scorer functions, with the vectors written out (cpu in millicores)."""
    gib = 1024 ** 3
    node_b = ([2000, 8 * gib, 2], [32000, 128 * gib, 8])
    node_c = ([6000, 24 * gib, 6], [32000, 128 * gib, 8])
    weights = [1, 1, 5]
    rtcr_1 = requested_to_capacity_ratio([ShapePoint(utilization=0, score=0), ShapePoint(utilization=100, score=10)],
                                         weights)
    rtcr_10 = requested_to_capacity_ratio([ShapePoint(utilization=0, score=0),
                                           ShapePoint(utilization=100, score=100)], weights)
    most = most_allocated(weights)
    assert rtcr_1(*node_b) == 2
    assert rtcr_10(*node_b) == 20 and rtcr_10(*node_c) == 59
    assert most(*node_b) == 19 and most(*node_c) == 58
    # The rs > 0 rule matters: averaging the dropped zeros in would give 1, not 2.
    f = broken_linear([ShapePoint(utilization=0, score=0), ShapePoint(utilization=100, score=10)])
    per_resource = [f(req * 100 // alloc) for req, alloc in zip(*node_b)]
    assert per_resource == [0, 0, 2]
    naive = sum(s * w for s, w in zip(per_resource, weights)) / sum(weights)
    assert round(naive) == 1


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize("name", ["pods", "example.kubernetes.io/slots"])
def test_an_unrequested_pods_or_prefixed_native_resource_is_not_scored(strategy: str, name: str) -> None:
    """Regression (review): upstream skips `pods` always (never a scalar resource of a node) and
    any unrequested scalar resource (IsScalarResourceName includes `*kubernetes.io/*`); Tessera
    averaged them in. 16 CPU / 64Gi on 32 CPU / 128Gi: cpu 50, memory 50 -> 50."""
    cfg = fit_config(strategy, (("cpu", 1), ("memory", 1), (name, 1)))
    extra = {} if name == "pods" else {name: "10"}
    core = Scheduler(cfg, explain=True)
    for obj in (b.node("n1", extra=extra), b.node("n2", extra=extra),
                b.pod("p", requests={"cpu": "16", "memory": "64Gi"})):
        core.apply("ADDED", obj, 0.0)
    attempts = core.schedule_next(0.0)
    assert attempts is not None and attempts[0].scores is not None
    assert attempts[0].scores["n1"]["NodeResourcesFit"] == 50


def test_a_resource_listed_twice_counts_once_per_entry_as_upstream() -> None:
    """16 CPU / 32Gi on 32 CPU / 128Gi, LeastAllocated [cpu, cpu, memory]: (50 + 50 + 75) // 3 = 58."""
    core = Scheduler(fit_config("LeastAllocated", (("cpu", 1), ("cpu", 1), ("memory", 1))), explain=True)
    for obj in (b.node("n1"), b.node("n2"), b.pod("p", requests={"cpu": "16", "memory": "32Gi"})):
        core.apply("ADDED", obj, 0.0)
    attempts = core.schedule_next(0.0)
    assert attempts is not None and attempts[0].scores is not None
    assert attempts[0].scores["n1"]["NodeResourcesFit"] == 58
