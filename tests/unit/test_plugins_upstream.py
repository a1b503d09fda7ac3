"""The upstream-compatible filter/score plugins against kube-scheduler v1.36: cases a review found.

Each failed before its fix for the reason in its docstring. Upstream references
(kubernetes/kubernetes, read through the stored-code index):
- pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go (Filter; PR #134740,
  "remove taint values from unschedulable messages in pod status", merged 2025-10, cherry-picked
  to release-1.34 as #135023);
- pkg/scheduler/framework/plugins/noderesources/fit.go (fitsRequest, Filter: InsufficientResource
  .Unresolvable);
- pkg/scheduler/framework/preemption/preemption.go (nodesWherePreemptionMightHelp);
- pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go (PreFilter: PreFilterResult,
  errReasonConflict) and pkg/scheduler/schedule_one.go (findNodesThatFitPod: absent nodes get
  "node(s) didn't satisfy plugin(s) [...]");
- staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go
  (LazyErrorNodeSelector: a term that fails to parse matches nothing, other terms still can)
  and staging/src/k8s.io/apimachinery/pkg/labels/selector.go (NewRequirement validates every
  value as a label value and Gt/Lt values with strconv.ParseInt; Matches parses the node's label
  with strconv.ParseInt(v, 10, 64));
- staging/src/k8s.io/component-helpers/scheduling/corev1/helpers.go / k8s.io/api core/v1
  toleration.go (ToleratesTaint: only "", Equal, Exists — and Lt/Gt behind the alpha
  TaintTolerationComparisonOperators gate — ever tolerate; any other operator returns false).
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    term: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        term["values"] = list(values)
    return {"matchExpressions": [term]}


def _first_part(message: str) -> str:
    """The FitError part of a FailedScheduling message (before the preemption part)."""
    return message.split(" preemption: ")[0]


def _running(name: str, node: str, requests: dict[str, str], priority: int = 0) -> dict[str, Any]:
    pod = b.pod(name, requests=requests, node_name=node, phase="Running", priority=priority)
    pod["status"]["startTime"] = "2026-01-01T00:00:00Z"
    return pod


# --- TaintToleration ------------------------------------------------------------------------------

def test_untolerated_taint_reason_no_longer_names_the_taint() -> None:
    """v1.36 TaintToleration.Filter returns
    `fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) had untolerated taint(s)")` and only
    logs the taint (PR #134740: taint keys/values may be sensitive). Tessera still prints the
    pre-1.35 `node(s) had untolerated taint {key: value}`."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", taints=[{"key": "dedicated", "value": "secret-team", "effect": "NoSchedule"}]))
    run.add(b.pod("p", requests={"cpu": "1"}))
    assert _first_part(run.last("p").message) == "0/1 nodes are available: 1 node(s) had untolerated taint(s)."


def test_toleration_with_an_unknown_operator_tolerates_nothing() -> None:
    """ToleratesTaint: `switch t.Operator { case "", Equal: value ==; case Exists: true;
    case Lt, Gt: (gate off by default in 1.36) false / numeric compare; default: false }`.
    Tessera's Toleration.tolerates treats every operator other than Exists as Equal, so a `Gt`
    toleration whose value equals the taint's value tolerates it (upstream: never — with the gate
    off it is false, with it on 5 > 5 is false too)."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", taints=[{"key": "gen", "value": "5", "effect": "NoSchedule"}]))
    run.add(b.pod("p", requests={"cpu": "1"},
                  spec_extra={"tolerations": [{"key": "gen", "operator": "Gt", "value": "5", "effect": "NoSchedule"}]}))
    assert run.last("p").node is None


# --- NodeResourcesFit -----------------------------------------------------------------------------

def test_too_many_pods_does_not_hide_insufficient_resources() -> None:
    """fitsRequest appends "Too many pods" and then goes on checking cpu, memory, ephemeral-storage
    and scalar resources: a node can report both, and FitError counts every reason of the status.
    Tessera's filter (and filter_rows' reasons) return only "Too many pods"."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="4", memory="8Gi", pods=1))
    run.add(_running("x", "n", {"cpu": "3500m"}))
    run.add(b.pod("p", requests={"cpu": "1"}))
    assert _first_part(run.last("p").message) == "0/1 nodes are available: 1 Insufficient cpu, 1 Too many pods."


def test_request_above_node_allocatable_is_unresolvable_for_preemption() -> None:
    """fitsRequest sets `Unresolvable: podRequest.MilliCPU > allocatable.MilliCPU` and Filter then
    returns UnschedulableAndUnresolvable; nodesWherePreemptionMightHelp skips such nodes and
    Preempt reports them as "Preemption is not helpful for scheduling". Tessera marks every Fit
    rejection as resolvable (`preemption_helps = True`), dry-runs evictions on a node that can never
    hold the pod, and reports "Insufficient cpu" in the preemption part."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="1", memory="4Gi"))
    run.add(_running("lo", "n", {"cpu": "100m"}, priority=1))
    run.add(b.pod("p", requests={"cpu": "2"}, priority=100))
    assert run.last("p").message == ("0/1 nodes are available: 1 Insufficient cpu. "
                                     "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


# --- NodeAffinity: PreFilter ----------------------------------------------------------------------

def test_gt_does_not_match_a_label_go_cannot_parse_as_int64_underscores() -> None:
    """labels Requirement.Matches (Gt/Lt): `strconv.ParseInt(ls.Get(r.key), 10, 64)`; an error means
    no match. "1_000" is a valid label value that ParseInt rejects; Python's int() accepts it."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", labels={"gen": "1_000"}))
    run.add(b.pod("p", spec_extra=_affinity(_expr("gen", "Gt", "5"))))
    assert run.last("p").node is None


def test_gt_does_not_match_a_label_beyond_int64() -> None:
    """As above: a 20-digit label value overflows int64, ParseInt fails, the requirement does not
    match. Python's int() is unbounded and Tessera matches it."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", labels={"gen": "99999999999999999999"}))
    run.add(b.pod("p", spec_extra=_affinity(_expr("gen", "Gt", "5"))))
    assert run.last("p").node is None


def test_not_in_with_an_invalid_label_value_matches_nothing() -> None:
    """labels.NewRequirement validates every value with validateLabelValue; pod validation does not
    (ValidateNodeSelectorRequirement only counts values), so such a pod exists. The term has a
    parse error and LazyErrorNodeSelector.Match skips it: the pod matches no node. Tessera
    evaluates NotIn and places the pod."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", labels={"zone": "a"}))
    run.add(b.pod("p", spec_extra=_affinity(_expr("zone", "NotIn", "not a label value!"))))
    assert run.last("p").node is None


def test_in_with_one_invalid_label_value_matches_nothing() -> None:
    """Same root cause: one invalid value makes the whole requirement (so the term) unparseable,
    even though the node's label equals the other, valid value."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", labels={"zone": "a"}))
    run.add(b.pod("p", spec_extra=_affinity(_expr("zone", "In", "a", "not a label value!"))))
    assert run.last("p").node is None


def test_a_non_integer_gt_value_only_disables_its_own_term() -> None:
    """Pod validation accepts `Gt` with any single value; upstream's NewLazyErrorNodeSelector keeps
    the term's parse error and Match tries the other terms (ORed), so the pod lands on n1 through
    its second term. Tessera refuses the whole pod at parse time (InvalidObject: "must be an
    integer") and never schedules it."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", labels={"zone": "a"}))
    run.add(b.pod("p", spec_extra=_affinity(_expr("gen", "Gt", "abc"), _expr("zone", "In", "a"))))
    assert run.state.pod_by_key("default/p") is not None, run.notices()
    assert run.node_of("p") == "n1"


# --- resources: NonZeroRequested with pod-level resources -----------------------------------------

def test_overhead_counts_as_a_requested_cpu_for_the_nodes_non_zero_total() -> None:
    """framework NodeInfo calculateResource: `requests := PodRequests(pod, opts)` (overhead included,
    ExcludeOverhead is false), then getNonMissingContainerRequests(requests, podLevelSet) adds the
    100m CPU default only `if _, exists := requests[cpu]; !exists`. A pod with pod-level memory,
    `spec.overhead.cpu: 250m` and no container CPU request has cpu in `requests` (the overhead), so
    it adds 250m to the node's NonZeroRequested. Tessera's `named` set (objects.parse_pod) leaves the
    overhead out, applies the default and adds 350m."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="4", memory="8Gi"))
    run.add(b.pod("x", node_name="n", phase="Running", containers=[b.container("c")],
                  spec_extra={"resources": {"requests": {"memory": "1Gi"}}, "overhead": {"cpu": "250m"}}))
    assert run.state.nodes["n"].scoring_cpu == 250
