"""An upstream (scheduling.k8s.io/v1alpha2) PodGroup's waiting members say so in kube-scheduler's
words (its GangScheduling plugin, pkg/scheduler/framework/plugins/gangscheduling in 1.36), not in
scheduler-plugins' minMember wording: a new user saw "minMember of group: 2" for a group whose
field is minCount. scheduler-plugins PodGroups keep scheduler-plugins' message."""

from __future__ import annotations

from scheduler.sim import builders as b
from tests.helpers import Run, fit_config


def _member(name: str, group: str) -> dict[str, object]:
    return b.pod(name, limits={"nvidia.com/gpu": 1}, spec_extra={"schedulingGroup": {"podGroupName": group}})


def test_too_few_members_of_an_upstream_group() -> None:
    """Gated at PreEnqueue, as kube-scheduler: not attempted, the gate says why in its words."""
    run = Run()
    assert run.add(b.node("n1", gpus=4), b.workload_podgroup("train", 2), _member("train-0", "train")) == []
    assert run.node_of("train-0") is None
    assert run.scheduler.gated().get("default/train-0") == (
        "gated by Coscheduling: waiting for minCount pods from a gang to appear in scheduling queue")


def test_a_missing_upstream_group() -> None:
    run = Run()
    assert run.add(b.node("n1", gpus=4), _member("lost-0", "lost")) == []
    assert run.scheduler.gated().get("default/lost-0") == (
        "gated by Coscheduling: waiting for pods's pod group \"lost\" to appear in scheduling queue")


def test_scheduler_plugins_groups_keep_their_wording() -> None:
    """Exactly scheduler-plugins' (pkg/coscheduling/core/core.go PodGroupManager.PreFilter: "pre-filter
    pod %v cannot find enough sibling pods, current pods number: %v, minMember of group: %v" with
    the pod's name) after kube-scheduler's FitError prefix; Tessera wrote "pod default/pg-0"."""
    run = Run()
    run.add(b.node("n1", gpus=4), b.podgroup("pg", 2),
            b.pod("pg-0", labels={"scheduling.x-k8s.io/pod-group": "pg"}, limits={"nvidia.com/gpu": 1}))
    assert run.last("pg-0").message == _short(f"{NOT_HELPFUL_1}, PodGroup default/pg gets rejected due to Pod "
                                              "pg-0 is unschedulable even after PostFilter")
    assert run.last("pg-0").gang_outcome == "waiting"


def test_a_gang_cycle_that_tries_its_members_is_not_waiting() -> None:
    run = Run()
    run.add(b.node("n1", gpus=1), b.workload_podgroup("big", 2), _member("big-0", "big"), _member("big-1", "big"))
    assert run.node_of("big-0") is None and run.last("big-0").gang_outcome == "failed"


def test_a_gang_whose_minimum_is_met_by_bound_members_is_placed_even_if_a_pending_one_fails() -> None:
    run = Run()
    run.add(b.node("n1", gpus=1), b.workload_podgroup("g", 1),
            b.pod("g-0", limits={"nvidia.com/gpu": 1}, node_name="n1", phase="Running",
                  spec_extra={"schedulingGroup": {"podGroupName": "g"}}),
            _member("g-1", "g"))
    assert run.node_of("g-1") is None and run.last("g-1").gang_outcome == "placed"


PG = {"scheduling.x-k8s.io/pod-group": "pg"}
NOT_HELPFUL_1 = "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."


def _short(message: str) -> str:
    return ("0/1 nodes are available: pre-filter pod pg-0 cannot find enough sibling pods, current pods number: "
            f"1, minMember of group: 2. {message}")


def test_a_short_scheduler_plugins_gang_reads_its_postfilter_too() -> None:
    """A trial: the message stopped after PreFilter's sentence. kube-scheduler runs PostFilter after
    a PreFilter rejection too (schedule_one.go: RunPostFilterPlugins on every FitError; FitError.Error
    appends `" %v"` of its PostFilterMsg): DefaultPreemption finds every node UnschedulableAndUnresolvable
    ("preemption: 0/N nodes are available: N Preemption is not helpful for scheduling."), then
    Coscheduling's PostFilter rejects the group ("PodGroup %v gets rejected due to Pod %v is
    unschedulable even after PostFilter"); the framework joins the two reasons with ", ". The words
    of a real scheduler-plugins cluster's FailedScheduling Event, with this pod's numbers."""
    run = Run()
    run.add(b.node("n1", gpus=4), b.podgroup("pg", 2), b.pod("pg-0", labels=PG, limits={"nvidia.com/gpu": 1}))
    last = run.last("pg-0")
    assert last.message == _short(f"{NOT_HELPFUL_1}, PodGroup default/pg gets rejected due to Pod pg-0 is "
                                  "unschedulable even after PostFilter")
    assert last.gang_outcome == "waiting" and last.preemption_tried and not last.nominated_node


def test_a_short_gang_that_may_not_preempt_says_so_and_a_profile_without_preemption_says_only_the_group() -> None:
    never = {"preemptionPolicy": "Never"}
    run = Run()
    run.add(b.node("n1", gpus=4), b.podgroup("pg", 2),
            b.pod("pg-0", labels=PG, limits={"nvidia.com/gpu": 1}, spec_extra=never))
    assert run.last("pg-0").message == _short(
        "preemption: not eligible due to preemptionPolicy=Never., PodGroup default/pg gets rejected due to Pod "
        "pg-0 is unschedulable even after PostFilter")
    no_preemption = fit_config({"type": "MostAllocated"}, {"plugins": {
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit", "weight": 1}]},
        "postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}})
    run = Run(no_preemption)
    run.add(b.node("n1", gpus=4), b.podgroup("pg", 2), b.pod("pg-0", labels=PG, limits={"nvidia.com/gpu": 1}))
    assert run.last("pg-0").message == _short(
        "PodGroup default/pg gets rejected due to Pod pg-0 is unschedulable even after PostFilter")


def test_coscheduling_postfilter_is_silent_within_ten_percent_of_the_minimum_and_without_a_podgroup() -> None:
    """Coscheduling.PostFilter returns Unschedulable with no reason when the group's assigned pods
    (on a node, as the snapshot counts them) are within 10 % of minMember, and "can not find pod
    group" when its PodGroup is missing."""
    run = Run()
    members = [b.pod(f"pg-{i}", labels=PG, node_name="n1", phase="Running") for i in range(1, 10)]
    members[0]["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
    run.add(b.node("n1", gpus=4), b.podgroup("pg", 10), *members, b.pod("pg-0", labels=PG))
    assert run.last("pg-0").message == (
        "0/1 nodes are available: pre-filter pod pg-0 cannot find enough sibling pods, current pods number: 9, "
        f"minMember of group: 10. {NOT_HELPFUL_1}")
    run = Run()
    run.add(b.node("n1", gpus=4), b.pod("pg-0", labels=PG))
    assert run.last("pg-0").message == (
        f'0/1 nodes are available: podgroup "default/pg" not found. {NOT_HELPFUL_1}, can not find pod group')


def test_a_gang_with_no_possible_victim_reads_pod_group_preemptions_words() -> None:
    """A gang preempts as one preemptor (upstream's workload-aware preemption,
    podgrouppreemption.go selectVictimsOnDomain: `UnschedulableAndUnresolvable, "No preemption
    victims found for incoming preemptor"` for its one domain, the cluster); it read single-pod
    DefaultPreemption's per-node "N No preemption victims found for incoming pod." A single pod
    keeps SelectVictimsOnNode's words."""
    run = Run()
    gang = {"scheduling.x-k8s.io/pod-group": "g"}
    run.add(b.node("n1", gpus=4), b.pod("busy", limits={"nvidia.com/gpu": 1}, node_name="n1", phase="Running"),
            b.podgroup("g", 2), *(b.pod(f"g-{i}", labels=gang, limits={"nvidia.com/gpu": 2}) for i in range(2)))
    # FitError.Error puts its full stop after the PostFilter message (SeparatorFormat " %v.")
    assert run.last("g-0").message.endswith(" preemption: No preemption victims found for incoming preemptor.")
    run.add(b.pod("alone", limits={"nvidia.com/gpu": 4}))
    assert run.last("alone").message.endswith(
        " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
