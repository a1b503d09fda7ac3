"""kube-scheduler's NodeResourcesFit score tables, transcribed row by row for test_fit_upstream.py.

Upstream sources (GitHub kubernetes/kubernetes, read through the stored-code index; the blob commit
is the one the index returned for that path):

  pkg/scheduler/framework/plugins/noderesources/least_allocated_test.go
      commit 008b3652959ca58af8be3fb5b6ecfe9ae7638282 (TestLeastAllocatedScoringStrategy, 16 rows)
  pkg/scheduler/framework/plugins/noderesources/most_allocated_test.go
      commit 030880a5dc5449403c6d1f0aa146a7dc21d6c6dc (TestMostAllocatedScoringStrategy, 14 rows;
      the table is identical at 072825f9a367e9ca0f73f91830945f1b7f46e0d9)
  pkg/scheduler/framework/plugins/noderesources/requested_to_capacity_ratio_test.go
      commit 8519d3399f10be33a45da368a48ee763acbe3999 (TestRequestedToCapacityRatioScoringStrategy 3 rows,
      TestBrokenLinearFunction 3 shapes / 28 assertions, TestResourceBinPackingSingleExtended 4 rows,
      TestResourceBinPackingMultipleExtended 4 rows; tables identical at 00b9ead02c37921011ebe5293558cea5277cd295)
  pkg/scheduler/framework/plugins/noderesources/test_util.go
      commit 75214d11d5c4c108c4b400688d9bcac04e838f61 (defaultResources, extendedRes = "abc.com/xyz",
      extendedResourceSet, makeNode)
  pkg/scheduler/framework/plugins/helper/shape_score.go
      commit 2d58ef7868e6efda493e876aeaf72fb7dfea7c44 (BuildBrokenLinearFunction)
  pkg/scheduler/framework/plugins/noderesources/requested_to_capacity_ratio.go
      commit 0a295a8d22ebdc7ad87bb7bf9f4e639b126515e4 (the scorer these tables exercise)
  pkg/scheduler/testing/wrappers.go (st.MakeNode() == Capacity(nil): allocatable pods=32 only;
      Capacity(m) = pods 32 + m, as both capacity and allocatable; st.MakePod().Req(m) appends one
      container requesting m; .Container(name) appends one container with no requests)

Translation rules (upstream helper -> builder object here):
  * Quantities are passed through verbatim, so "cpu": "4000" is 4000 cores (4_000_000 millicores)
    exactly as resource.MustParse reads it upstream; memory "10000" is 10000 bytes.
  * st.MakePod().Obj() has NO containers: it requests nothing, not even the 100m/200Mi scoring
    defaults. `st_pod()` reproduces that (our `builders.pod()` always adds a container).
  * An explicit "memory": "0" request stays 0 for scoring (only a missing request is defaulted).
  * `Node("node1")` on upstream's *incoming* pod is dropped: upstream calls Score directly and never
    looks at it, while for us a pod with spec.nodeName is already bound.
  * Unbound "existing" pods (st.MakePod().Obj() without .Node()) are dropped: upstream's snapshot
    files them under node "" which no node in the table is, so they affect no score.
  * makeNode() sets no "pods" allocatable (upstream never runs Filter in these tests); we add
    pods=32 so our Filter admits the pod. "pods" is not a scored resource here, so no score changes.

Rows upstream's Filter would reject on some node still get a Score call upstream. Those nodes are
listed in `infeasible`; the test checks that our scheduler filters them (so --explain has no score
for them), checks FitScore.score() on them directly, and checks the scorer on the hand-derived
(requested, allocatable) vectors in `vectors`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.sim import builders as b

Obj = dict[str, Any]

LEAST = "TestLeastAllocatedScoringStrategy"
MOST = "TestMostAllocatedScoringStrategy"
RTCR = "TestRequestedToCapacityRatioScoringStrategy"
SINGLE = "TestResourceBinPackingSingleExtended"
MULTI = "TestResourceBinPackingMultipleExtended"

EXTENDED_RES = "abc.com/xyz"  # test_util.go extendedRes
DEFAULT_RESOURCES = (("cpu", 1), ("memory", 1))  # test_util.go defaultResources
EXTENDED_RESOURCE_SET = (("cpu", 1), ("memory", 1), (EXTENDED_RES, 1))  # test_util.go extendedResourceSet

# Shapes on upstream's 0..10 score scale, as written in the Go tests (parse_config scales them x10).
RTCR_SHAPE = ((0, 10), (100, 0))  # TestRequestedToCapacityRatioScoringStrategy `shape`
BINPACK_SHAPE = ((0, 0), (100, 1))  # TestResourceBinPacking{Single,Multiple}Extended


# --- upstream test helpers, as builder objects ---------------------------------------------------


def st_node(name: str, capacity: dict[str, str] | None = None) -> Obj:
    """st.MakeNode().Name(name).Capacity(capacity): allocatable = capacity = {pods: 32} + capacity."""
    obj = b.node(name)
    alloc = {"pods": "32", **(capacity or {})}
    obj["status"] = {"allocatable": dict(alloc), "capacity": dict(alloc)}
    return obj


def make_node(name: str, milli_cpu: int, memory: int, extended: dict[str, int]) -> Obj:
    """test_util.go makeNode (plus pods=32, see the module docstring)."""
    alloc = {"cpu": f"{milli_cpu}m", "memory": str(memory), **{k: str(v) for k, v in extended.items()},
             "pods": "32"}
    obj = b.node(name)
    obj["status"] = {"allocatable": dict(alloc), "capacity": dict(alloc)}
    return obj


def st_pod(name: str, *reqs: dict[str, str], node: str = "", bare: int = 0) -> Obj:
    """st.MakePod()[.Node(node)].Req(r1).Req(r2)...[.Container("container") x bare].Obj()."""
    obj = b.pod(name, node_name=node)
    containers = [b.container(f"c{i}", r) for i, r in enumerate(reqs)]
    containers += [b.container("container" if bare == 1 else f"container{i}") for i in range(bare)]
    obj["spec"]["containers"] = containers  # may be empty, like st.MakePod().Obj()
    return obj


@dataclass(frozen=True)
class Row:
    func: str  # upstream test function
    index: int  # 0-based position in upstream's table
    name: str  # upstream's row name
    strategy: str
    resources: tuple[tuple[str, int], ...]
    pod: Obj
    nodes: tuple[Obj, ...]
    existing: tuple[Obj, ...]
    expected: dict[str, int]  # node -> upstream expectedScores
    shape: tuple[tuple[int, int], ...] = ()
    infeasible: frozenset[str] = frozenset()  # nodes upstream's (and our) Filter rejects
    # node -> (requested, allocatable) in resource order, as upstream's Score computes them
    vectors: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.func}[{self.index}] {self.name}"


@dataclass(frozen=True)
class WeightRow:
    """A row whose only content is argument validation (wantErrs)."""

    func: str
    index: int
    name: str
    strategy: str
    resources: tuple[tuple[str, int], ...]
    error_field: str | None  # upstream wantErrs field; None = our v1 API defaults it instead
    defaulted: tuple[tuple[str, int], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.func}[{self.index}] {self.name}"


# Pods used by several rows.
def _two_container_pod() -> Obj:  # Req(cpu 1000, mem 2000).Req(cpu 2000, mem 3000)
    return st_pod("incoming", {"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})


def _empty_pod() -> Obj:  # st.MakePod().Obj()
    return st_pod("incoming")


C4K_M10K = {"cpu": "4000", "memory": "10000"}
C6K_M10K = {"cpu": "6000", "memory": "10000"}
C10K_M20K = {"cpu": "10000", "memory": "20000"}


# --- TestLeastAllocatedScoringStrategy -------------------------------------------------------------

LEAST_ROWS: list[Row] = [
    Row(LEAST, 0, "nothing scheduled, nothing requested", "LeastAllocated", DEFAULT_RESOURCES,
        pod=_empty_pod(),
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C4K_M10K)),
        existing=(),
        expected={"node1": 100, "node2": 100}),
    Row(LEAST, 1, "nothing scheduled, resources requested, differently sized nodes", "LeastAllocated",
        DEFAULT_RESOURCES,
        pod=_two_container_pod(),
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C6K_M10K)),
        existing=(),
        expected={"node1": 37, "node2": 50}),
    # [2] "Resources not set, pods scheduled with error": resources=nil in the *internal* config, which
    # upstream's Score turns into an Error status. Not expressible: our config is v1, where an empty
    # resources list is defaulted to cpu:1, memory:1 (SetDefaults_NodeResourcesFitArgs);
    # test_fit_upstream.py checks that defaulting instead.
    Row(LEAST, 3, "no resources requested, pods scheduled", "LeastAllocated", DEFAULT_RESOURCES,
        pod=_empty_pod(),
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C4K_M10K)),
        existing=(st_pod("e0", node="node1"), st_pod("e1", node="node1"),
                  st_pod("e2", node="node2"), st_pod("e3", node="node2")),
        expected={"node1": 100, "node2": 100}),
    Row(LEAST, 4, "no resources requested, pods scheduled with resources", "LeastAllocated", DEFAULT_RESOURCES,
        pod=_empty_pod(),
        nodes=(st_node("node1", C10K_M20K), st_node("node2", C10K_M20K)),
        existing=(st_pod("e0", {"cpu": "3000", "memory": "0"}, node="node1"),
                  st_pod("e1", {"cpu": "3000", "memory": "0"}, node="node1"),
                  st_pod("e2", {"cpu": "3000", "memory": "0"}, node="node2"),
                  st_pod("e3", {"cpu": "3000", "memory": "5000"}, node="node2")),
        expected={"node1": 70, "node2": 57}),
    Row(LEAST, 5, "resources requested, pods scheduled with resources", "LeastAllocated", DEFAULT_RESOURCES,
        pod=_two_container_pod(),
        nodes=(st_node("node1", C10K_M20K), st_node("node2", C10K_M20K)),
        existing=(st_pod("e0", {"cpu": "3000", "memory": "0"}, node="node1"),
                  st_pod("e1", {"cpu": "3000", "memory": "5000"}, node="node2")),
        expected={"node1": 57, "node2": 45}),
    Row(LEAST, 6, "resources requested, pods scheduled with resources, differently sized nodes",
        "LeastAllocated", DEFAULT_RESOURCES,
        pod=_two_container_pod(),
        nodes=(st_node("node1", C10K_M20K), st_node("node2", {"cpu": "10000", "memory": "50000"})),
        existing=(st_pod("e0", {"cpu": "3000", "memory": "0"}, node="node1"),
                  st_pod("e1", {"cpu": "3000", "memory": "5000"}, node="node2")),
        expected={"node1": 57, "node2": 60}),
    # Existing 3000 + incoming 3000 cores > 4000 on both nodes: Filter rejects both (Insufficient cpu);
    # upstream scores them anyway. CPU over capacity scores 0, memory (explicit 0 request) counts as is.
    Row(LEAST, 7, "requested resources exceed node capacity", "LeastAllocated", DEFAULT_RESOURCES,
        pod=st_pod("incoming", {"cpu": "3000", "memory": "0"}),
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C4K_M10K)),
        existing=(st_pod("e0", {"cpu": "3000", "memory": "0"}, node="node1"),
                  st_pod("e1", {"cpu": "3000", "memory": "5000"}, node="node2")),
        expected={"node1": 50, "node2": 25},
        infeasible=frozenset({"node1", "node2"}),
        vectors={"node1": ([6_000_000, 0], [4_000_000, 10000]),
                 "node2": ([6_000_000, 5000], [4_000_000, 10000])}),
    # st.MakeNode().Obj(): allocatable is only pods=32, so cpu and memory are skipped (allocatable 0).
    Row(LEAST, 8, "zero node resources, pods scheduled with resources", "LeastAllocated", DEFAULT_RESOURCES,
        pod=_empty_pod(),
        nodes=(st_node("node1"), st_node("node2")),
        existing=(st_pod("e0", {"cpu": "3000", "memory": "0"}, node="node1"),
                  st_pod("e1", {"cpu": "3000", "memory": "5000"}, node="node2")),
        expected={"node1": 0, "node2": 0}),
    Row(LEAST, 9, "nothing scheduled, resources requested with different weight on CPU and memory, "
        "differently sized nodes", "LeastAllocated", (("memory", 2), ("cpu", 1)),
        pod=_two_container_pod(),  # upstream also sets .Node("node1") on it; see module docstring
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C6K_M10K)),
        existing=(),
        expected={"node1": 41, "node2": 50}),
    # [10], [11], [12]: weight validation only -> LEAST_WEIGHT_ROWS.
    Row(LEAST, 13, "bypass extended resource if the pod does not request", "LeastAllocated",
        EXTENDED_RESOURCE_SET,
        pod=_two_container_pod(),
        nodes=(st_node("node1", C6K_M10K), st_node("node2", {**C6K_M10K, EXTENDED_RES: "4"})),
        existing=(),
        expected={"node1": 50, "node2": 50}),
    Row(LEAST, 14, "honor extended resource if the pod requests", "LeastAllocated", EXTENDED_RESOURCE_SET,
        pod=st_pod("incoming", {"cpu": "3000", "memory": "5000", EXTENDED_RES: "2"}),
        nodes=(st_node("node1", {**C6K_M10K, EXTENDED_RES: "4"}),
               st_node("node2", {**C6K_M10K, EXTENDED_RES: "10"})),
        existing=(),
        expected={"node1": 50, "node2": 60}),
    Row(LEAST, 15, "if the node doesn't have a resource", "LeastAllocated",
        ((EXTENDED_RES, 2), ("cpu", 1), ("memory", 1)),
        pod=st_pod("incoming", {"cpu": "3000", "memory": "4000"}),
        nodes=(st_node("node1", C6K_M10K), st_node("node2", {**C6K_M10K, EXTENDED_RES: "4"})),
        existing=(),
        expected={"node1": 55, "node2": 55}),
]

LEAST_WEIGHT_ROWS: list[WeightRow] = [
    WeightRow(LEAST, 10, "resource with negative weight", "LeastAllocated",
              (("memory", -1), ("cpu", 1)), "scoringStrategy.resources[0].weight"),
    # Upstream feeds the *internal* args straight to validation, which rejects weight 0. Through the
    # v1 API (the only one we read) SetDefaults_NodeResourcesFitArgs first turns 0 into 1, so the v1
    # equivalent of this row is "accepted, weight 1".
    WeightRow(LEAST, 11, "resource with zero weight", "LeastAllocated",
              (("memory", 1), ("cpu", 0)), None, defaulted=(("memory", 1), ("cpu", 1))),
    WeightRow(LEAST, 12, "resource weight larger than MaxNodeScore", "LeastAllocated",
              (("memory", 1), ("cpu", 101)), "scoringStrategy.resources[1].weight"),
]


# --- TestMostAllocatedScoringStrategy --------------------------------------------------------------

MOST_ROWS: list[Row] = [
    Row(MOST, 0, "nothing scheduled, nothing requested", "MostAllocated", DEFAULT_RESOURCES,
        pod=_empty_pod(),
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C4K_M10K)),
        existing=(),
        expected={"node1": 0, "node2": 0}),
    Row(MOST, 1, "nothing scheduled, resources requested, differently sized nodes", "MostAllocated",
        DEFAULT_RESOURCES,
        pod=_two_container_pod(),
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C6K_M10K)),
        existing=(),
        expected={"node1": 62, "node2": 50}),
    # [2] "Resources not set, pods scheduled with error": internal-API only, as LEAST [2].
    Row(MOST, 3, "no resources requested, pods scheduled with resources", "MostAllocated", DEFAULT_RESOURCES,
        pod=_empty_pod(),
        nodes=(st_node("node1", C10K_M20K), st_node("node2", C10K_M20K)),
        existing=(st_pod("e0", {"cpu": "3000", "memory": "0"}, node="node1"),
                  st_pod("e1", {"cpu": "3000", "memory": "0"}, node="node1"),
                  st_pod("e2", {"cpu": "3000", "memory": "0"}, node="node2"),
                  st_pod("e3", {"cpu": "3000", "memory": "5000"}, node="node2")),
        expected={"node1": 30, "node2": 42}),
    Row(MOST, 4, "resources requested, pods scheduled with resources", "MostAllocated", DEFAULT_RESOURCES,
        pod=_two_container_pod(),
        nodes=(st_node("node1", C10K_M20K), st_node("node2", C10K_M20K)),
        existing=(st_pod("e0", {"cpu": "3000", "memory": "0"}, node="node1"),
                  st_pod("e1", {"cpu": "3000", "memory": "5000"}, node="node2")),
        expected={"node1": 42, "node2": 55}),
    Row(MOST, 5, "resources requested equal node capacity", "MostAllocated", DEFAULT_RESOURCES,
        pod=st_pod("incoming", {"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}),
        nodes=(st_node("node1", {"cpu": "5000", "memory": "10000"}),
               st_node("node2", {"cpu": "10000", "memory": "9000"})),
        existing=(),
        expected={"node1": 95, "node2": 75}),
    Row(MOST, 6, "nothing scheduled, resources requested, differently sized nodes", "MostAllocated",
        (("memory", 2), ("cpu", 1)),
        pod=_two_container_pod(),
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C6K_M10K)),
        existing=(),
        expected={"node1": 58, "node2": 50}),
    # Containers without requests: the 100m / 200Mi scoring defaults (NonMissingContainerRequests for
    # the incoming pod, NonZeroRequested for the two existing ones). 300m > 250m clamps to 100.
    Row(MOST, 7, "no resources requested, pods scheduled, nonzero request for resource", "MostAllocated",
        DEFAULT_RESOURCES,
        pod=st_pod("incoming", bare=1),
        nodes=(st_node("node1", {"cpu": "250m", "memory": "1000Mi"}),
               st_node("node2", {"cpu": "250m", "memory": "1000Mi"})),
        existing=(st_pod("e0", node="node1", bare=1), st_pod("e1", node="node1", bare=1)),
        expected={"node1": 80, "node2": 30}),
    # [8], [9], [10]: weight validation only -> MOST_WEIGHT_ROWS.
    Row(MOST, 11, "bypass extended resource if the pod does not request", "MostAllocated",
        EXTENDED_RESOURCE_SET,
        pod=_two_container_pod(),
        nodes=(st_node("node1", C6K_M10K), st_node("node2", {**C6K_M10K, EXTENDED_RES: "4"})),
        existing=(),
        expected={"node1": 50, "node2": 50}),
    Row(MOST, 12, "honor extended resource if the pod request", "MostAllocated", EXTENDED_RESOURCE_SET,
        pod=st_pod("incoming", {"cpu": "3000", "memory": "5000", EXTENDED_RES: "2"}),
        nodes=(st_node("node1", {**C6K_M10K, EXTENDED_RES: "4"}),
               st_node("node2", {**C6K_M10K, EXTENDED_RES: "10"})),
        existing=(),
        expected={"node1": 50, "node2": 40}),
    Row(MOST, 13, "if the node doesn't have a resource", "MostAllocated",
        ((EXTENDED_RES, 2), ("cpu", 1), ("memory", 1)),
        pod=st_pod("incoming", {"cpu": "3000", "memory": "4000"}),
        nodes=(st_node("node1", C6K_M10K), st_node("node2", {**C6K_M10K, EXTENDED_RES: "4"})),
        existing=(),
        expected={"node1": 45, "node2": 45}),
]

MOST_WEIGHT_ROWS: list[WeightRow] = [
    WeightRow(MOST, 8, "resource with negative weight", "MostAllocated",
              (("memory", -1), ("cpu", 1)), "scoringStrategy.resources[0].weight"),
    WeightRow(MOST, 9, "resource with zero weight", "MostAllocated",
              (("memory", 1), ("cpu", 0)), None, defaulted=(("memory", 1), ("cpu", 1))),
    WeightRow(MOST, 10, "resource weight larger than MaxNodeScore", "MostAllocated",
              (("memory", 101),), "scoringStrategy.resources[0].weight"),
]


# --- TestRequestedToCapacityRatioScoringStrategy ---------------------------------------------------

RTCR_ROWS: list[Row] = [
    Row(RTCR, 0, "nothing scheduled, nothing requested (default - least requested nodes have priority)",
        "RequestedToCapacityRatio", DEFAULT_RESOURCES, shape=RTCR_SHAPE,
        pod=_empty_pod(),
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C4K_M10K)),
        existing=(st_pod("e0", node="node1"), st_pod("e1", node="node1")),
        expected={"node1": 100, "node2": 100}),
    # node1: cpu 75% -> 100 + (-100*75)/100 = 25, memory 50% -> 50; round(75/2 = 37.5) = 38.
    Row(RTCR, 1, "nothing scheduled, resources requested, differently sized nodes "
        "(default - least requested nodes have priority)",
        "RequestedToCapacityRatio", DEFAULT_RESOURCES, shape=RTCR_SHAPE,
        pod=_two_container_pod(),
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C6K_M10K)),
        existing=(st_pod("e0", node="node1"), st_pod("e1", node="node1")),
        expected={"node1": 38, "node2": 50}),
    Row(RTCR, 2, "no resources requested, pods scheduled with resources "
        "(default - least requested nodes have priority)",
        "RequestedToCapacityRatio", DEFAULT_RESOURCES, shape=RTCR_SHAPE,
        pod=_empty_pod(),
        nodes=(st_node("node1", C4K_M10K), st_node("node2", C6K_M10K)),
        existing=(st_pod("e0", {"cpu": "3000", "memory": "5000"}, node="node1"),
                  st_pod("e1", {"cpu": "3000", "memory": "5000"}, node="node2")),
        expected={"node1": 38, "node2": 50}),
]


# --- TestResourceBinPackingSingleExtended ----------------------------------------------------------

_MIB = 1024 * 1024
_FOO8 = {"intel.com/foo": 8}  # extendedResource2
_FOO4 = {"intel.com/foo": 4}  # extendedResource1


def _single_nodes() -> tuple[Obj, Obj]:
    return (make_node("node1", 4000, 10000 * _MIB, _FOO8), make_node("node2", 4000, 10000 * _MIB, _FOO4))


SINGLE_ROWS: list[Row] = [
    # The pod requests no intel.com/foo, so it is skipped on both nodes: no weight, score 0.
    Row(SINGLE, 0, "nothing scheduled, nothing requested", "RequestedToCapacityRatio",
        (("intel.com/foo", 1),), shape=BINPACK_SHAPE,
        pod=_empty_pod(), nodes=_single_nodes(), existing=(),
        expected={"node1": 0, "node2": 0}),
    # upstream also lists one unbound st.MakePod() as existing: dropped (module docstring).
    Row(SINGLE, 1, "resources requested, pods scheduled with less resources", "RequestedToCapacityRatio",
        (("intel.com/foo", 1),), shape=BINPACK_SHAPE,
        pod=st_pod("incoming", {"intel.com/foo": "2"}), nodes=_single_nodes(), existing=(),
        expected={"node1": 2, "node2": 5}),
    Row(SINGLE, 2, "resources requested, pods scheduled with resources, on node with existing pod running ",
        "RequestedToCapacityRatio", (("intel.com/foo", 1),), shape=BINPACK_SHAPE,
        pod=st_pod("incoming", {"intel.com/foo": "2"}), nodes=_single_nodes(),
        existing=(st_pod("e0", {"intel.com/foo": "2"}, node="node2"),),
        expected={"node1": 2, "node2": 10}),
    Row(SINGLE, 3, "resources requested, pods scheduled with more resources", "RequestedToCapacityRatio",
        (("intel.com/foo", 1),), shape=BINPACK_SHAPE,
        pod=st_pod("incoming", {"intel.com/foo": "4"}), nodes=_single_nodes(), existing=(),
        expected={"node1": 5, "node2": 10}),
]


# --- TestResourceBinPackingMultipleExtended --------------------------------------------------------

_RES1 = {"intel.com/foo": 4, "intel.com/bar": 8}  # extendedResources1
_RES2 = {"intel.com/foo": 8, "intel.com/bar": 4}  # extendedResources2
_POD1 = {"intel.com/foo": "2", "intel.com/bar": "2"}  # extendedResourcePod1
_POD2 = {"intel.com/foo": "4", "intel.com/bar": "2"}  # extendedResourcePod2
_MULTI_RESOURCES = (("intel.com/foo", 3), ("intel.com/bar", 5))


def _multi_nodes() -> tuple[Obj, Obj]:
    return (make_node("node1", 4000, 10000 * _MIB, _RES2), make_node("node2", 4000, 10000 * _MIB, _RES1))


MULTI_ROWS: list[Row] = [
    Row(MULTI, 0, "nothing scheduled, nothing requested", "RequestedToCapacityRatio", _MULTI_RESOURCES,
        shape=BINPACK_SHAPE, pod=_empty_pod(), nodes=_multi_nodes(), existing=(),
        expected={"node1": 0, "node2": 0}),
    # node1: foo 25% -> 2, bar 50% -> 5: round((2*3 + 5*5) / 8 = 3.875) = 4; node2: round(25/8) = 3.
    Row(MULTI, 1, "resources requested, pods scheduled with less resources", "RequestedToCapacityRatio",
        _MULTI_RESOURCES, shape=BINPACK_SHAPE,
        pod=st_pod("incoming", _POD1), nodes=_multi_nodes(), existing=(),
        expected={"node1": 4, "node2": 3}),
    # The existing pod on node2 is extendedResourcePod2 (foo 4, bar 2); upstream's comment says
    # "(2+2),4" for foo but the table uses foo 4, so foo is 6 > 4: over capacity -> f(100) = 10, and
    # Filter rejects node2 (Insufficient intel.com/foo). bar (2+2)/8 = 50% -> 5. round(55/8) = 7.
    Row(MULTI, 2, "resources requested, pods scheduled with resources, on node with existing pod running ",
        "RequestedToCapacityRatio", _MULTI_RESOURCES, shape=BINPACK_SHAPE,
        pod=st_pod("incoming", _POD1), nodes=_multi_nodes(),
        existing=(st_pod("e0", _POD2, node="node2"),),
        expected={"node1": 4, "node2": 7},
        infeasible=frozenset({"node2"}),
        vectors={"node1": ([2, 2], [8, 4]), "node2": ([6, 4], [4, 8])}),
    # node1: 50%, 50% -> 5, 5 -> 5; node2: foo 100% -> 10, bar 25% -> 2: round(40/8) = 5.
    Row(MULTI, 3, "resources requested, pods scheduled with more resources", "RequestedToCapacityRatio",
        _MULTI_RESOURCES, shape=BINPACK_SHAPE,
        pod=st_pod("incoming", _POD2), nodes=_multi_nodes(), existing=(),
        expected={"node1": 5, "node2": 5}),
]

SCORE_ROWS: list[Row] = LEAST_ROWS + MOST_ROWS + RTCR_ROWS + SINGLE_ROWS + MULTI_ROWS
WEIGHT_ROWS: list[WeightRow] = LEAST_WEIGHT_ROWS + MOST_WEIGHT_ROWS


# --- TestBrokenLinearFunction ----------------------------------------------------------------------
# (points as (utilization, score), [(p, expected), ...]); raw helper.FunctionShapePoint values, not scaled.

BROKEN_LINEAR_CASES: list[tuple[tuple[tuple[int, int], ...], list[tuple[int, int]]]] = [
    (((10, 1), (90, 9)),
     [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9), (99, 9), (100, 9),
      (110, 9)]),
    (((0, 2), (40, 10), (100, 0)),
     [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
    (((0, 2), (40, 2), (100, 2)),
     [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
]
