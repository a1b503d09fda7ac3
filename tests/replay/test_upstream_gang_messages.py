"""An upstream (scheduling.k8s.io/v1alpha2) PodGroup's waiting members say so in kube-scheduler's
words (its GangScheduling plugin, pkg/scheduler/framework/plugins/gangscheduling in 1.36), not in
scheduler-plugins' minMember wording: a new user saw "minMember of group: 2" for a group whose
field is minCount. scheduler-plugins PodGroups keep scheduler-plugins' message."""

from __future__ import annotations

from scheduler.sim import builders as b
from tests.helpers import Run


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
    assert run.last("pg-0").message == ("0/1 nodes are available: pre-filter pod pg-0 cannot find enough sibling "
                                        "pods, current pods number: 1, minMember of group: 2.")
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
