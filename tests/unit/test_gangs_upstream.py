"""Gang scheduling as scheduler-plugins does it (Coscheduling, the PodGroup controller): cases a review found.

Each test states what scheduler-plugins (sigs.k8s.io/scheduler-plugins) does; the first four
failed before their fixes for the reason given in their docstrings.
"""

from __future__ import annotations

from scheduler.api.config import load_config
from scheduler.core.plugins import coscheduling
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import BINPACK, Run, config

PG_LABEL = "scheduling.x-k8s.io/pod-group"


def test_a_podgroup_with_min_member_zero_does_not_strand_its_pods() -> None:
    """scheduler-plugins' PodGroup CRD (manifests/coscheduling/crd.yaml, apis/scheduling/v1alpha1
    `MinMember int32 json:"minMember,omitempty"`) sets no minimum on minMember, so `minMember: 0`
    is a valid object, and its Coscheduling plugin then lets every member through (PreFilter
    `len(pods) < 0` is false, Permit `assigned+1 >= 0` is Success): the pod is scheduled.

    Tessera refuses the object (parse_podgroup: "must be an integer >= 1"), keeps no PodGroup, and
    the pod waits for good with `podgroup "default/zero" not found` — although the PodGroup exists."""
    run = Run(config(BINPACK))
    group = b.podgroup("zero", 1)
    group["spec"]["minMember"] = 0
    run.add(b.node("n1", gpus=4), group)
    run.add(b.pod("zero-0", labels={PG_LABEL: "zero"}, limits={"nvidia.com/gpu": 1}))
    assert "not found" not in run.last("zero-0").message
    assert run.node_of("zero-0") == "n1"


def test_min_resources_of_a_podgroup_gate_its_members() -> None:
    """scheduler-plugins' PreFilter (pkg/coscheduling/core/core.go, PodGroupManager.PreFilter):
    when `spec.minResources` is set, the group passes only if the cluster's free resources cover
    it (CheckClusterResource, "resource gap: ..."); DESIGN.md §2 lists minResources among the
    PodGroup fields Tessera takes. Here the group wants 8 GPUs before any member starts and the
    cluster has 4: upstream binds nothing. Tessera ignores minResources (it is never parsed) and
    binds the member."""
    run = Run(config(BINPACK))
    group = b.podgroup("big", 1)
    group["spec"]["minResources"] = {"nvidia.com/gpu": "8"}
    run.add(b.node("n1", gpus=4), group)
    run.add(b.pod("big-0", labels={PG_LABEL: "big"}, limits={"nvidia.com/gpu": 1}))
    assert run.node_of("big-0") is None


def test_podgroup_status_counts_only_pods_labelled_with_that_podgroup() -> None:
    """scheduler-plugins' PodGroup controller (pkg/controllers/podgroup_controller.go) lists the
    group's pods by the label `scheduling.x-k8s.io/pod-group=<name>`. Tessera's status reads the
    gang index's `history`, keyed by namespace/name only, so pods of the *label* form
    (`pod-group.scheduling.sigs.k8s.io/name`) that happen to use the same name count too: the
    PodGroup says Scheduling with 2 scheduled members while its only real member waits ("current
    pods number: 1") — the scheduler itself (ClusterState.gang_uids) keeps the two gangs apart."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), b.podgroup("train", 2))
    run.add(*[b.pod(f"legacy-{i}", labels=b.gang_labels("train", 2), limits={"nvidia.com/gpu": 1})
              for i in range(2)])
    run.add(b.pod("crd-0", labels={PG_LABEL: "train"}, limits={"nvidia.com/gpu": 1}))
    assert "current pods number: 1, minMember of group: 2" in run.last("crd-0").message
    status = coscheduling.group_status(run.state, "default/scheduling.x-k8s.io/train")
    assert status is not None
    assert (status.phase, status.scheduled) == ("Pending", 0)


def test_a_finished_podgroup_is_not_rewritten_before_the_watch_echoes_it() -> None:
    """docs/running.md: PodGroup phases follow the scheduler-plugins controller, "`Failed` and `Finished`
    are final". Tessera treats a phase as final only once the PodGroup object *read back* says so
    (`PodGroup.final_phase`). Its member succeeded: Tessera wishes Finished; the Job's pod is then
    deleted before the watch has echoed Finished, and Tessera wishes Pending over it (the same
    race `_groups_settled` already closes for upstream PodGroups' PodGroupScheduled=True)."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    for informer in loop.informers.informers:  # PodGroup statuses are written from a complete cache only
        informer.synced.set()
    loop._on_event("ADDED", b.node("n", gpus=4))
    loop._on_event("ADDED", b.podgroup("g", 1))
    pod = b.pod("g-0", labels={PG_LABEL: "g"}, limits={"nvidia.com/gpu": 1}, node_name="n", phase="Succeeded")
    loop._on_event("ADDED", pod)
    assert [body["status"]["phase"] for body in loop.statuses._dirty.values()] == ["Finished"]
    loop.statuses._dirty.clear()  # written; the PodGroup's MODIFIED event has not arrived yet
    loop._on_event("DELETED", pod)
    phases = [body["status"]["phase"] for body in loop.statuses._dirty.values()]
    assert phases in ([], ["Finished"]), phases


def test_min_resources_covered_by_all_nodes_together_let_the_group_through() -> None:
    """CheckClusterResource sums what every node has free: 8 GPUs over two 4-GPU nodes pass, and
    the waiting message before that names the gap as upstream's `resource gap: map[...]`."""
    run = Run(config(BINPACK))
    group = b.podgroup("big", 1)
    group["spec"]["minResources"] = {"nvidia.com/gpu": "8", "cpu": "500m"}
    run.add(b.node("n1", gpus=4), group)
    run.add(b.pod("big-0", labels={PG_LABEL: "big"}, limits={"nvidia.com/gpu": 1}))
    assert "resource gap: map[nvidia.com/gpu:4]" in run.last("big-0").message
    run.add(b.node("n2", gpus=4))
    assert run.node_of("big-0") is not None


def test_min_resources_count_the_groups_own_members_as_free() -> None:
    """getNodeResource removes the group's own pods from each node before taking what is left: a
    group whose bound member holds part of minResources is not blocked by itself."""
    run = Run(config(BINPACK))
    group = b.podgroup("own", 1)
    group["spec"]["minResources"] = {"nvidia.com/gpu": "4"}
    run.add(b.node("n1", gpus=4), group)
    run.add(b.pod("own-0", labels={PG_LABEL: "own"}, limits={"nvidia.com/gpu": 2}))
    assert run.node_of("own-0") == "n1"
    run.add(b.pod("own-1", labels={PG_LABEL: "own"}, limits={"nvidia.com/gpu": 2}))
    assert run.node_of("own-1") == "n1"


def test_min_member_zero_and_minresources_are_read_from_the_object() -> None:
    """parse_podgroup: minMember <= 0 is a group of one; minResources in scheduler units; a
    minResources that is not a resource list is refused with its field path."""
    import pytest

    from scheduler.core.objects import ObjectError, parse_podgroup
    group = b.podgroup("g", 1)
    group["spec"].update(minMember=-3, minResources={"cpu": "1500m", "nvidia.com/gpu": 2})
    parsed = parse_podgroup(group)
    assert (parsed.min_member, dict(parsed.min_resources)) == (1, {"cpu": 1500, "nvidia.com/gpu": 2})
    group["spec"]["minResources"] = {"cpu": "lots"}
    with pytest.raises(ObjectError, match="PodGroup.spec.minResources"):
        parse_podgroup(group)
