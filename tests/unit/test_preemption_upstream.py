"""DefaultPreemption against kube-scheduler v1.36: cases a review found (each failed before its fix).

Upstream references (kubernetes/kubernetes):
- pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go:
  PodEligibleToPreemptOthers, SelectVictimsOnNode;
- pkg/scheduler/framework/preemption/preemption.go: Preempt, prepareCandidate(Async),
  getLowerPriorityNominatedPods, DryRunPreemption;
- pkg/scheduler/framework/types.go: FitError.Error (every reason of every node's status);
- pkg/scheduler/framework/runtime/framework.go: RunFilterPluginsWithNominatedPods (pods nominated
  to the node with priority >= the pod's are added to the NodeInfo, so they count as pods).
Tessera's own notes agree: docs/research/preemption-upstream.md sections 1.3, 1.10, 2.3.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.core.framework.attempt import Attempt
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

LOW, MID, HIGH = 0, 100, 1000
ONE = {"cpu": "1", "memory": "1Gi"}


def _running(name: str, node: str, priority: int, requests: dict[str, str] | None = None) -> dict[str, Any]:
    pod = b.pod(name, requests=requests or ONE, priority=priority, node_name=node, phase="Running")
    pod["status"]["startTime"] = "2026-01-01T00:00:00Z"
    return pod


def _slow_evictions(run: Run) -> None:
    """Victims stay (terminating) until a test deletes them: the replay evicts nothing."""
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]


def _retry_all(run: Run) -> list[Attempt]:
    run.scheduler.queue.flush_unschedulable(1e9)
    return list(run.replay.drain())


def _tries_after_node_m(run: Run, name: str) -> list[Attempt]:
    """Node m (1 CPU, 1Gi) arrives: the attempts of pod `name` it brings, then those of a retry of
    everything."""
    before = len(run.attempts)
    run.add(b.node("m", cpu="1", memory="1Gi"))
    return [a for a in run.attempts[before:] + _retry_all(run) if a.pod.meta.name == name]


def _victims(attempt: Attempt) -> list[str]:
    return sorted(v.meta.name for v in attempt.preempted)


# --- 1. PodEligibleToPreemptOthers: an UnschedulableAndUnresolvable nominated node ----------------

@pytest.mark.parametrize("change", ["tainted", "deleted"])
def test_nominated_node_that_became_unresolvable_does_not_block_preempting_elsewhere(change: str) -> None:
    """upstream PodEligibleToPreemptOthers: `if nominatedNodeStatus.Code() == UnschedulableAndUnresolvable
    { return true, "" }` before looking for terminating victims on the nominated node (a node that
    left the snapshot reads as absent: UnschedulableAndUnresolvable, and `nodeInfos.Get` finds nothing).
    Tessera's `DefaultPreemption.ineligible` skips that check: the pod is stuck on "a terminating pod
    on the nominated node" although it can never go there, and does not preempt where it could."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="1", memory="1Gi"))
    run.add(_running("low", "n", LOW))
    _slow_evictions(run)
    run.add(b.pod("p", requests=ONE, priority=MID))
    first = run.last("p")
    assert first.nominated_node == "n" and _victims(first) == ["low"]
    if change == "tainted":  # TaintToleration: UnschedulableAndUnresolvable
        run.feed(b.event("MODIFIED", b.node("n", cpu="1", memory="1Gi",
                                            taints=[{"key": "maintenance", "effect": "NoSchedule"}])))
    else:
        run.feed(b.event("DELETED", b.node("n", cpu="1", memory="1Gi")))
    run.add(_running("low2", "m", LOW))  # bound before its node is known: m is full when it arrives
    retry = _tries_after_node_m(run, "p")  # p can preempt there: the node hint requeues it
    assert retry, "p was not retried"
    # the first retry preempts on m (a later one, while low2 terminates, is rightly not eligible)
    assert "not eligible due to a terminating pod on the nominated node" not in retry[0].message
    assert _victims(retry[0]) == ["low2"] and retry[0].nominated_node == "m"


# --- 2. prepareCandidate: lower-priority nominations on the chosen node are cleared ---------------

def test_lower_priority_nomination_on_the_chosen_node_is_cleared() -> None:
    """upstream prepareCandidate / prepareCandidateAsync: `getLowerPriorityNominatedPods(node)` then
    `clearNominatedNodeName(...)`, so such a pod is nominated nowhere and, retried, may preempt on
    another node at once. Tessera drops the lower pod's hold (`Cycle._put_back_holds`) but never
    writes `nominatedNodeName: ""` for it: its status keeps naming the node, and on its next try
    `ineligible` reads that stale nomination and refuses it ("a terminating pod on the nominated
    node" — the higher pod's victim), so it does not preempt where it could."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="1", memory="1Gi"))
    run.add(_running("low", "n", LOW))
    _slow_evictions(run)
    run.add(b.pod("mid", requests=ONE, priority=MID))
    first = run.last("mid")
    assert first.nominated_node == "n" and _victims(first) == ["low"]
    # the live loop writes status.nominatedNodeName (kube/status.py); the watch brings it back
    mid = copy.deepcopy(run.replay.pods[first.pod.uid])
    mid["status"]["nominatedNodeName"] = "n"
    mid["metadata"]["resourceVersion"] = "5"
    run.feed(b.event("MODIFIED", mid))
    run.add(b.pod("high", requests=ONE, priority=HIGH))  # preempts on n too: mid's nomination there goes
    high = next(a for a in run.attempts if a.pod.meta.name == "high")
    assert high.nominated_node == "n" and _victims(high) == ["low"]
    assert {run.state.pods[uid].meta.name for uid in run.state.holds} == {"high"}
    run.add(_running("low2", "m", LOW))
    retry = _tries_after_node_m(run, "mid")  # mid can preempt there: the node hint requeues it
    assert retry, "mid was not retried"
    assert "not eligible due to a terminating pod on the nominated node" not in retry[0].message
    assert _victims(retry[0]) == ["low2"] and retry[0].nominated_node == "m"


# --- 3. the dry run's per-node status: every reason of the rejecting filter -----------------------

def test_dry_run_failure_reports_every_reason_of_the_rejecting_filter() -> None:
    """upstream SelectVictimsOnNode returns the status of RunFilterPluginsWithNominatedPods as the
    node's status, and FitError.Error counts `for _, reason := range status.Reasons()` — all of
    them (NodeResourcesFit: "Insufficient cpu" and "Insufficient memory"), as Tessera's own first
    part of the message does. `DefaultPreemption.victims_on` returns `rejected[1][0]`: the
    preemption part drops every reason but the first."""
    run = Run(config(BINPACK))
    run.add(b.node("node1", cpu="500m", memory="500"))
    run.add(_running("hi", "node1", HIGH, {"cpu": "200m", "memory": "200"}),
            _running("lo", "node1", LOW, {"cpu": "100m", "memory": "100"}))
    run.add(b.pod("p", requests={"cpu": "500m", "memory": "500"}, priority=MID))
    assert run.last("p").message == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. "
        "preemption: 0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.")


# --- 4. nominated pods count as pods on their node ------------------------------------------------

def test_a_nominated_pods_hold_counts_against_the_nodes_pod_limit() -> None:
    """upstream RunFilterPluginsWithNominatedPods adds every pod nominated to the node with priority
    >= the pod's to the NodeInfo (`AddPodInfo`: `len(nodeInfo.Pods)` grows), so NodeResourcesFit's
    "Too many pods" counts them, in the main filter and in the preemption dry run. Tessera's hold
    (`ClusterState.hold`) charges requests and devices but not `info.pods`: on a 1-pod node whose
    only slot `a` (priority 100) made room for, a lower-priority pod `c` dry-runs as fitting and is
    nominated to the same slot too (victim: `a`'s own terminating victim)."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="4", memory="4Gi", pods=1))
    run.add(_running("low", "n", LOW))
    _slow_evictions(run)
    run.add(b.pod("a", requests=ONE, priority=MID))
    assert run.last("a").nominated_node == "n" and _victims(run.last("a")) == ["low"]
    run.add(b.pod("c", requests=ONE, priority=50))
    c = run.last("c")
    assert c.preempted == [] and not c.nominated_node
    assert c.message == ("0/1 nodes are available: 1 Too many pods. "
                         "preemption: 0/1 nodes are available: 1 Too many pods.")
    assert {run.state.pods[uid].meta.name for uid in run.state.holds} == {"a"}


# --- PostFilter runs after a PreFilter rejection too ---------------------------------------------

def test_prefilter_rejection_still_runs_postfilter_with_every_node_unresolvable() -> None:
    """upstream schedule_one.go findNodesThatFitPod: a rejecting PreFilter status is set on every
    node (`diagnosis.NodeToStatus.SetAbsentNodesStatus(s)`) and a FitError returned; schedulingCycle
    then runs PostFilter on it like any FitError. DefaultPreemption.PostFilter counts an attempt
    (`metrics.PreemptionAttempts.Inc()`) and, every node being UnschedulableAndUnresolvable (a
    class that does not exist: DRA's PreFilter gives that code), says so: "preemption: 0/N nodes
    are available: N Preemption is not helpful for scheduling.". Tessera skipped PostFilter after
    a PreFilter rejection: no preemption attempt counted, and the message stopped short."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="1", memory="1Gi"), b.node("m", cpu="1", memory="1Gi"))
    run.add(b.pod("q", limits={"class.tessera.dev/none": 1}, priority=HIGH))
    attempt = run.last("q")
    assert attempt.message == ('0/2 nodes are available: no ResourceClass provides "class.tessera.dev/none" '
                               "(no valid ResourceClass exists). "
                               "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    assert attempt.preemption_tried and not attempt.preempted


def test_prefilter_rejection_of_a_never_preempting_pod_says_it_is_not_eligible() -> None:
    """upstream DefaultPreemption.PostFilter -> Preempt: PodEligibleToPreemptOthers is asked first,
    also after a PreFilter rejection; a pod with preemptionPolicy Never gets "preemption: not
    eligible due to preemptionPolicy=Never."."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="1", memory="1Gi"))
    pod = b.pod("q", limits={"class.tessera.dev/none": 1}, priority=HIGH)
    pod["spec"]["preemptionPolicy"] = "Never"
    run.add(pod)
    assert run.last("q").message == ('0/1 nodes are available: no ResourceClass provides "class.tessera.dev/none" '
                                     "(no valid ResourceClass exists). "
                                     "preemption: not eligible due to preemptionPolicy=Never.")
