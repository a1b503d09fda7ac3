"""A scheduler-plugins PodGroup `ns/x` and a Workload API PodGroup `ns/x` are two gangs.

The two APIs name their groups independently (a pod joins a scheduler-plugins group by the label
`scheduling.x-k8s.io/pod-group`, an upstream one by `spec.schedulingGroup.podGroupName`), so the
same name in both is two groups: kube-scheduler's GangScheduling knows only its own
(scheduling.k8s.io) PodGroups and scheduler-plugins' Coscheduling only its own. Tessera keyed
both by `ns/x`: the second one seen was held back ("DuplicatePodGroup") and neither gang was
placed until one of the objects was deleted — a cluster moving from one API to the other, with
a job controller creating a group in each under the job's name, scheduled none of those jobs.
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from scheduler.view.cluster import build_view
from tests.helpers import Run

PLUGINS_LABEL = "scheduling.x-k8s.io/pod-group"


def _plugins_member(name: str, group: str) -> dict[str, Any]:
    return b.pod(name, labels={PLUGINS_LABEL: group}, limits={"nvidia.com/gpu": 1})


def _workload_member(name: str, group: str) -> dict[str, Any]:
    return b.pod(name, limits={"nvidia.com/gpu": 1}, spec_extra={"schedulingGroup": {"podGroupName": group}})


def _one_name_in_both_apis(plugins_min: int, workload_min: int) -> Run:
    """A 4-GPU node, PodGroups `g` in both APIs, one scheduler-plugins member `p-0` and two
    Workload API members `w-0`, `w-1`."""
    run = Run()
    run.add(b.node("n", gpus=4))
    run.add(b.podgroup("g", plugins_min))
    run.add(b.workload_podgroup("g", workload_min))
    run.add(_plugins_member("p-0", "g"))
    run.add(*[_workload_member(f"w-{i}", "g") for i in range(2)])
    return run


def test_one_name_in_both_apis_is_two_gangs_each_placed_on_its_own() -> None:
    run = _one_name_in_both_apis(plugins_min=1, workload_min=2)
    assert not any("DuplicatePodGroup" in notice for notice in run.notices())
    assert [run.node_of(n) for n in ("p-0", "w-0", "w-1")] == ["n", "n", "n"]


def test_members_of_one_api_do_not_count_towards_the_other_apis_minimum() -> None:
    """The scheduler-plugins group needs 3 and has 1 member; the upstream group of the name has 2
    members and needs 1: those two are no siblings of the first."""
    run = _one_name_in_both_apis(plugins_min=3, workload_min=1)
    assert run.node_of("p-0") is None
    assert "current pods number: 1, minMember of group: 3" in run.last("p-0").message
    assert run.node_of("w-0") == run.node_of("w-1") == "n"


def test_deleting_one_apis_group_leaves_the_other_as_it_was() -> None:
    run = Run()
    run.add(b.node("n", gpus=4))
    run.add(b.podgroup("g", 2))
    run.add(b.workload_podgroup("g", 3))
    run.add(*[_workload_member(f"w-{i}", "g") for i in range(2)])
    run.feed(b.event("DELETED", b.podgroup("g", 2)))
    assert run.node_of("w-0") is None
    assert run.scheduler.gated().get("default/w-0") == (
        "gated by Coscheduling: waiting for minCount pods from a gang to appear in scheduling queue")
    run.add(_workload_member("w-2", "g"))
    assert [run.node_of(f"w-{i}") for i in range(3)] == ["n", "n", "n"]


def _label_member(name: str, group: str, min_available: int) -> dict[str, Any]:
    return b.pod(name, labels=b.gang_labels(group, min_available), limits={"nvidia.com/gpu": 1})


def test_a_label_gang_and_a_scheduler_plugins_podgroup_of_one_name_are_two_gangs() -> None:
    """A label gang (`pod-group.scheduling.sigs.k8s.io/name` + `min-available`) and a
    scheduler-plugins PodGroup (`scheduling.x-k8s.io/pod-group`) are two ways to form a group,
    unrelated by name. Tessera keyed both `ns/g`: the label gang's two pods and the PodGroup's two
    counted as one gang of four, so the PodGroup's minimum of 3 was met by pods that are not its
    members and all four were placed. The label gang (minimum 2, both there) is placed; the
    PodGroup's two wait for a third member, in scheduler-plugins' words."""
    run = Run()
    run.add(b.node("n", gpus=4))
    run.add(b.podgroup("g", 3))
    run.add(*[_plugins_member(f"p-{i}", "g") for i in range(2)])
    run.add(*[_label_member(f"l-{i}", "g", 2) for i in range(2)])
    assert [run.node_of(f"l-{i}") for i in range(2)] == ["n", "n"]
    assert [run.node_of(f"p-{i}") for i in range(2)] == [None, None]
    assert "current pods number: 2, minMember of group: 3" in run.last("p-0").message
    assert 'podgroup "default/g"' not in run.last("p-0").message
    gangs = {pod.gang.key for pod in run.state.pods.values() if pod.gang is not None}
    assert len(gangs) == 2
    # each is shown by the name it always had; the waiting one counts its own two members, not four
    view = build_view(run.scheduler, source="simulate", now=run.replay.now)
    assert [(g.gang, g.minimum, g.members, g.placed, g.pending) for g in view.gangs] == [("default/g", 3, 2, 0, 2)]
    assert {p.pod: p.gang for p in view.pending} == {"default/p-0": "default/g", "default/p-1": "default/g"}
