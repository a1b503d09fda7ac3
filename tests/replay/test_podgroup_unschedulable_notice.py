"""A gang that cannot be placed says so on its PodGroup, not only on its members.

A new user's trial: `kubectl describe pg big` for a scheduler-plugins PodGroup (3 members x 4 GPUs
on a cluster with 8 GPUs) showed `Phase: Scheduling` and `Events: <none>`; only the members'
FailedScheduling Events (and `kubectl tessera explain`) said why. A platform engineer looks at the
PodGroup first. The core now reports, for a gang cycle that tried the group and placed nothing,
one notice regarding the PodGroup object — the live shell writes it as a Warning Event — whose
message is the gang's, word for word the one its members' FailedScheduling Events carry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduler.core.framework.attempt import Attempt
from scheduler.sim import builders as b
from tests.helpers import Run

PLUGINS_LABEL = "scheduling.x-k8s.io/pod-group"
Member = Callable[[str, str], dict[str, Any]]  # a gang member of the group named, by pod name
NEVER_FITS_12_OF_8 = ("Its gang can never fit as the cluster is: its 3 members ask for 12 nvidia.com/gpu together, "
                      "and the schedulable nodes have 8 in all.")


def _plugins_member(name: str, group: str, gpus: int = 4) -> dict[str, Any]:
    return b.pod(name, labels={PLUGINS_LABEL: group}, limits={"nvidia.com/gpu": gpus})


def _workload_member(name: str, group: str, gpus: int = 4) -> dict[str, Any]:
    return b.pod(name, limits={"nvidia.com/gpu": gpus}, spec_extra={"schedulingGroup": {"podGroupName": group}})


def _too_big(group: dict[str, Any], member: Member) -> tuple[Run, list[Attempt]]:
    """Two 4-GPU nodes, and a gang of three 4-GPU members: the last arrival's cycle tries it."""
    run = Run()
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4), group, member("big-0", "big"), member("big-1", "big"))
    return run, run.add(member("big-2", "big"))


@pytest.mark.parametrize(("group", "member", "key", "api_version"), [
    (b.podgroup("big", 3), _plugins_member, "default/big", "scheduling.x-k8s.io/v1alpha1"),
    (b.workload_podgroup("big", 3), _workload_member, "default/scheduling.k8s.io/big", "scheduling.k8s.io/v1alpha2"),
], ids=["scheduler-plugins", "workload-api"])
def test_a_gang_that_does_not_fit_is_reported_on_its_podgroup(group: dict[str, Any], member: Member, key: str,
                                                              api_version: str) -> None:
    run, cycle = _too_big(group, member)
    assert {a.pod.meta.name for a in cycle} == {"big-0", "big-1", "big-2"}
    assert all(a.node is None and a.gang_outcome == "failed" for a in cycle)
    notice = run.scheduler.group_notice(cycle)
    assert notice is not None
    assert (notice.kind, notice.api_version, notice.key, notice.namespace, notice.uid) == (
        "PodGroup", api_version, key, "default", group["metadata"]["uid"])
    assert notice.reason == "Unschedulable"
    # the members' FailedScheduling note, word for word, then (12 GPUs asked of 8) that it can never fit
    (message,) = {a.message for a in cycle}
    assert message.startswith(f"pod group {key}: only 2 of the 3 members it needs fit; ")
    # the pod group's preemption status has no period (podgrouppreemption.go); FitError.Error puts
    # one after the PostFilter message (SeparatorFormat " %v."), as after every other message
    assert message.endswith(" preemption: No preemption victims found for incoming preemptor.")
    assert notice.message == f"{message} {NEVER_FITS_12_OF_8}"


def test_a_placed_gang_is_not_reported() -> None:
    run = Run()
    run.add(b.node("n1", gpus=8), b.podgroup("fits", 2), _plugins_member("fits-0", "fits"))
    cycle = run.add(_plugins_member("fits-1", "fits"))
    assert cycle and all(a.node is not None for a in cycle)
    assert run.scheduler.group_notice(cycle) is None


def test_a_gang_still_gathering_members_is_not_reported_as_unschedulable() -> None:
    """Too few members is Phase Pending (scheduler-plugins' controller says that much); the
    member's own FailedScheduling Event names the count. Not a gang that cannot be placed."""
    run = Run()
    cycle = run.add(b.node("n1", gpus=8), b.podgroup("short", 2), _plugins_member("short-0", "short"))
    assert [a.gang_outcome for a in cycle] == ["waiting"]
    assert run.scheduler.group_notice(cycle) is None


def test_a_label_gang_has_no_podgroup_to_report_on() -> None:
    run = Run()
    labels = {"pod-group.scheduling.sigs.k8s.io/name": "lbl", "pod-group.scheduling.sigs.k8s.io/min-available": "2"}
    run.add(b.node("n1", gpus=4), b.pod("lbl-0", labels=labels, limits={"nvidia.com/gpu": 4}))
    cycle = run.add(b.pod("lbl-1", labels=labels, limits={"nvidia.com/gpu": 4}))
    assert cycle and all(a.node is None and a.gang_outcome == "failed" for a in cycle)
    assert run.scheduler.group_notice(cycle) is None


def test_a_lone_pod_that_does_not_fit_is_not_a_group() -> None:
    run = Run()
    cycle = run.add(b.node("n1", gpus=1), b.pod("solo", limits={"nvidia.com/gpu": 2}))
    assert [a.node for a in cycle] == [None]
    assert run.scheduler.group_notice(cycle) is None


def test_a_gang_that_can_never_fit_the_cluster_says_so_on_its_podgroup() -> None:
    """A new user's trial: 5 members of 8 GPUs each on four 8-GPU nodes. The PodGroup's Event read
    as "wait for room" ("only 4 of the 5 members it needs fit; ... No preemption victims found"),
    word for word its members' FailedScheduling (upstream's words, kept), though no amount of
    waiting places it; `kubectl tessera explain` knew. The PodGroup's Event is Tessera's own: it
    adds explain's sentence. The members' messages stay as they were."""
    run = Run()
    run.add(*(b.node(f"n{i}", gpus=8) for i in range(4)), b.podgroup("train", 5),
            *(_plugins_member(f"train-{i}", "train", gpus=8) for i in range(4)))
    cycle = run.add(_plugins_member("train-4", "train", gpus=8))
    assert cycle and all(a.node is None and a.gang_outcome == "failed" for a in cycle)
    (message,) = {a.message for a in cycle}
    assert message.startswith("pod group default/train: only 4 of the 5 members it needs fit; ")
    assert "never fit" not in message
    notice = run.scheduler.group_notice(cycle)
    assert notice is not None
    assert notice.message == (f"{message} Its gang can never fit as the cluster is: its 5 members ask for "
                              "40 nvidia.com/gpu together, and the schedulable nodes have 32 in all.")


def test_a_gang_that_waits_for_room_is_told_its_members_words_only() -> None:
    """Room held by a running pod of the same priority (no preemption): the gang would fit an
    empty cluster, so its PodGroup is told what its members are, nothing more."""
    run = Run()
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4), b.pod("busy", limits={"nvidia.com/gpu": 4}),
            b.podgroup("wait", 2), _plugins_member("wait-0", "wait"))
    cycle = run.add(_plugins_member("wait-1", "wait"))
    assert cycle and all(a.node is None and a.gang_outcome == "failed" for a in cycle)
    notice = run.scheduler.group_notice(cycle)
    assert notice is not None and {a.message for a in cycle} == {notice.message}


def test_a_required_topology_gang_no_domain_can_ever_hold_says_it_can_never_fit() -> None:
    """A new user's trial (rk3): three 8-GPU members that must share a rack, every rack two 8-GPU
    nodes. The members and the PodGroup only said `no rack has room for 3 pods of gang default/rk3
    (largest: 2)`, which reads like a shortage that passes; a gang without topology that can never
    fit is told so. Racks are domains as TopologyPlacement's levels name them: rack r1 of blocks a
    and b are two racks of 16 GPUs, not one of 32."""
    from tests.replay.test_topology import BLOCK, RACK, rack_nodes, topology_config
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2, ("b", "r1"): 2}, gpus=8),
            b.podgroup("rk3", 3, annotations={"tessera.dev/topology-required": RACK}),
            _plugins_member("rk3-0", "rk3", gpus=8), _plugins_member("rk3-1", "rk3", gpus=8))
    cycle = run.add(_plugins_member("rk3-2", "rk3", gpus=8))
    assert cycle and all(a.node is None and a.gang_outcome == "failed" for a in cycle)
    (message,) = {a.message for a in cycle}
    assert "no rack has room for 3 pods of gang default/rk3 (largest: 2)" in message
    notice = run.scheduler.group_notice(cycle)
    assert notice is not None
    assert notice.message == (f"{message} Its gang can never fit as the cluster is: its 3 members must share one "
                              f"rack ({RACK}) and ask for 24 nvidia.com/gpu together, and no rack's schedulable "
                              "nodes have more than 16 in all.")
    assert BLOCK  # the racks are named by block and rack


def test_a_required_topology_gang_some_domain_could_hold_is_told_its_members_words_only() -> None:
    """The same gang with a rack of three 8-GPU nodes, one of them busy: it waits for room, nothing
    more is said."""
    from tests.replay.test_topology import RACK, rack_nodes, topology_config
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 3, ("a", "r2"): 2}, gpus=8), b.pod("busy", limits={"nvidia.com/gpu": 8}, node_name="a-r1-0",
                                                                                 phase="Running"),
            b.podgroup("rk3", 3, annotations={"tessera.dev/topology-required": RACK}),
            _plugins_member("rk3-0", "rk3", gpus=8), _plugins_member("rk3-1", "rk3", gpus=8))
    cycle = run.add(_plugins_member("rk3-2", "rk3", gpus=8))
    if not cycle or any(a.node is not None for a in cycle):
        pytest.fail(f"the gang was expected to wait: {[(a.pod.meta.name, a.node) for a in cycle]}")
    notice = run.scheduler.group_notice(cycle)
    assert notice is not None and {a.message for a in cycle} == {notice.message}


def test_a_cycle_that_is_no_failed_gangs_reads_no_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live loop asks `group_notice` after every cycle; only a gang that tried and placed
    nothing needs the cluster's totals. Building them walked every node first, for every decision:
    at 5,000 nodes that was most of the scheduler's CPU per pod (`bench.live --profile cprofile`:
    25 million `node_infos` steps for 5,000 pods). A placed pod's cycle, or a gang still waiting,
    must not read the nodes at all."""
    run = Run()
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4), b.podgroup("small", 2))
    placed = run.add(b.pod("plain", limits={"nvidia.com/gpu": 1}))
    waiting = run.add(_plugins_member("small-0", "small", 1))
    state = run.scheduler.state
    walks: list[int] = []

    def node_infos() -> Any:
        walks.append(1)
        return iter(())
    monkeypatch.setattr(state, "node_infos", node_infos)
    assert run.scheduler.group_notice(placed) is None
    assert run.scheduler.group_notice(waiting) is None
    assert walks == []


def _v100_member(name: str, spec_extra: dict[str, Any]) -> dict[str, Any]:
    return b.pod(name, labels={PLUGINS_LABEL: "vt"}, limits={"nvidia.com/gpu": 8}, spec_extra=spec_extra)


V100 = {"nodeSelector": {"nvidia.com/gpu.product": "V100"}}
V100_AFFINITY = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["V100"]}]}]}}}}


@pytest.mark.parametrize("selection", [V100, V100_AFFINITY], ids=["nodeSelector", "required-affinity"])
def test_a_gang_that_can_never_fit_the_nodes_it_may_use_says_so(selection: dict[str, Any]) -> None:
    """A trial (Volcano migration): 4 members of 8 GPUs each, selecting V100 nodes, on three 8-GPU
    V100 nodes (and two A100 nodes it may not use). The PodGroup's Event read "only 3 of the 4
    members it needs fit" without "can never fit": the totals counted every schedulable node,
    the A100s too. Only the nodes its members may go to count."""
    run = Run()
    run.add(*(b.node(f"v{i}", gpus=8, labels={"nvidia.com/gpu.product": "V100"}) for i in range(3)),
            *(b.node(f"a{i}", gpus=8, labels={"nvidia.com/gpu.product": "A100"}) for i in range(2)),
            b.podgroup("vt", 4), *(_v100_member(f"vt-{i}", selection) for i in range(3)))
    cycle = run.add(_v100_member("vt-3", selection))
    assert cycle and all(a.node is None and a.gang_outcome == "failed" for a in cycle)
    (message,) = {a.message for a in cycle}
    assert message.startswith("pod group default/vt: only 3 of the 4 members it needs fit; ")
    notice = run.scheduler.group_notice(cycle)
    assert notice is not None
    assert notice.message == (f"{message} Its gang can never fit as the cluster is: its 4 members ask for "
                              "32 nvidia.com/gpu together, and the schedulable nodes they may go to "
                              "(by their nodeSelector and required node affinity) have 24 in all.")


def test_a_gang_whose_selection_leaves_room_is_not_told_never() -> None:
    """The same gang selecting A100 and V100 alike (either In value) could fit 4 of the 5 nodes:
    no "never"."""
    either = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["V100", "A100"]}]}]}}}}
    run = Run()
    run.add(*(b.node(f"v{i}", gpus=8, labels={"nvidia.com/gpu.product": "V100"}) for i in range(3)),
            b.node("a0", gpus=8, labels={"nvidia.com/gpu.product": "A100"}),
            b.pod("hog", limits={"nvidia.com/gpu": 8}, node_name="a0", phase="Running", priority=100),
            b.podgroup("vt", 4), *(_v100_member(f"vt-{i}", either) for i in range(3)))
    cycle = run.add(_v100_member("vt-3", either))
    assert cycle and all(a.node is None for a in cycle)
    notice = run.scheduler.group_notice(cycle)
    assert notice is not None and "never fit" not in notice.message


# --- the selection's edges (review: slips in capacity.selection, _suits and the totals' cache key passed) ---

def _selecting(name: str, group: str, limits: dict[str, Any], selector: dict[str, str] | None) -> dict[str, Any]:
    return b.pod(name, labels={PLUGINS_LABEL: group}, limits=limits,
                 spec_extra={"nodeSelector": selector} if selector else None)


def _never(run: Run, pod_name: str, totals: Any = None) -> str:
    from scheduler.core.capacity import beyond_the_cluster
    pod = next(pod for pod in run.state.pods.values() if pod.meta.name == pod_name)
    return beyond_the_cluster(run.state, pod, totals if totals is not None else run.scheduler.cluster_totals())


CPU_POOL = {"pool": "cpu"}
A100 = {"nvidia.com/gpu.product": "A100"}


def test_a_gang_whose_members_select_different_nodes_counts_each_ones_nodes() -> None:
    """A launcher on the CPU pool and workers on the A100s (an MPIJob): a node counts when it
    suits any member's selection, not only one that suits all (none does: no "never" then)."""
    run = Run()
    run.add(b.node("cpu0", cpu="64", labels=CPU_POOL), *(b.node(f"a{i}", cpu="16", gpus=8, labels=A100) for i in range(2)),
            b.node("v0", cpu="16", gpus=8, labels={"nvidia.com/gpu.product": "V100"}),
            b.podgroup("mpi", 3), _selecting("mpi-launcher", "mpi", {"cpu": "40"}, CPU_POOL),
            *(_selecting(f"mpi-w{i}", "mpi", {"nvidia.com/gpu": 8}, A100) for i in range(2)))
    assert _never(run, "mpi-w0") == ""
    # and what the selected nodes lack is still told: three workers of 8 on the two A100 nodes
    run.add(b.podgroup("mpi3", 4), _selecting("mpi3-launcher", "mpi3", {"cpu": "4"}, CPU_POOL),
            *(_selecting(f"mpi3-w{i}", "mpi3", {"nvidia.com/gpu": 8}, A100) for i in range(3)))
    assert "ask for 24 nvidia.com/gpu together" in _never(run, "mpi3-w0") and "have 16 in all" in _never(run, "mpi3-w0")


def test_a_member_that_selects_nothing_lets_every_node_count() -> None:
    """A launcher without a nodeSelector may go anywhere: the CPU node's 64 cores count for it,
    though the workers select the A100s (16 cores each)."""
    run = Run()
    run.add(b.node("cpu0", cpu="64"), *(b.node(f"a{i}", cpu="16", gpus=8, labels=A100) for i in range(2)),
            b.podgroup("mpi", 3), _selecting("mpi-launcher", "mpi", {"cpu": "40"}, None),
            *(_selecting(f"mpi-w{i}", "mpi", {"nvidia.com/gpu": 8}, A100) for i in range(2)))
    assert _never(run, "mpi-w0") == ""


def test_a_required_level_counts_only_the_selected_nodes_of_each_domain() -> None:
    """Two racks, each a V100 node and an A100 node of 8 GPUs; a gang of two 8-GPU members that
    select V100 and must share a rack: 8 selected GPUs per rack, never 16 (all nodes: 16)."""
    from tests.replay.test_topology import BLOCK, RACK, topology_config
    run = Run(topology_config())
    for rack in ("r1", "r2"):
        for model in ("V100", "A100"):
            run.add(b.node(f"{model}-{rack}", gpus=8, labels={"nvidia.com/gpu.product": model, RACK: rack, BLOCK: "a"}))
    run.add(b.podgroup("rk", 2, annotations={"tessera.dev/topology-required": RACK}),
            *(_selecting(f"rk-{i}", "rk", {"nvidia.com/gpu": 8}, {"nvidia.com/gpu.product": "V100"}) for i in range(2)))
    run.add(b.podgroup("rkall", 2, annotations={"tessera.dev/topology-required": RACK}),
            *(_selecting(f"rkall-{i}", "rkall", {"nvidia.com/gpu": 8}, None) for i in range(2)))
    totals = run.scheduler.cluster_totals()  # shared: the unselecting gang's rack sums first
    assert _never(run, "rkall-0", totals) == ""
    said = _never(run, "rk-0", totals)
    assert "must share one rack" in said and "no rack's schedulable nodes" in said and "more than 8 in all" in said, said


def test_gangs_sharing_one_totals_each_get_their_own_selections_sum() -> None:
    """`Scheduler.cluster_totals` is shared by the gangs a view asks about: a gang selecting V100
    (24 GPUs) and one selecting nothing (40) must not read each other's cached sums, either order."""
    for order in (("vt-0", "any-0"), ("any-0", "vt-0")):
        run = Run()
        run.add(*(b.node(f"v{i}", gpus=8, labels={"nvidia.com/gpu.product": "V100"}) for i in range(3)),
                *(b.node(f"a{i}", gpus=8, labels=A100) for i in range(2)),
                b.podgroup("vt", 4), *(_v100_member(f"vt-{i}", V100) for i in range(4)),
                b.podgroup("any", 4), *(_selecting(f"any-{i}", "any", {"nvidia.com/gpu": 8}, None) for i in range(4)))
        totals = run.scheduler.cluster_totals()
        said = {name: _never(run, name, totals) for name in order}
        assert "have 24 in all" in said["vt-0"] and said["any-0"] == "", (order, said)
