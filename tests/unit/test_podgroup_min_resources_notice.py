"""A scheduler-plugins PodGroup whose `spec.minResources` holds its gang back is told so on the
PodGroup (a Warning Event live, `Scheduler.group_notice`), and only groups with a pod of Tessera's
scheduler names (or none yet) have their status written by Tessera (`Scheduler.take_touched_groups`).

scheduler-plugins' Coscheduling rejects such a member in PreFilter with `resource gap: map[...]`
(pkg/coscheduling/core/core.go CheckClusterResource) and records no Event; its PodGroup controller's
only Event is `Timeout`. A trial's PodGroup asking 40 GPUs of a cluster with 8 showed `Events:
<none>` on `kubectl describe pg`, though docs/api.md promised an `Unschedulable` Warning.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from scheduler.core import annotations as ann
from scheduler.core import capacity
from scheduler.core.capacity import own_used
from scheduler.core.plugins import coscheduling
from scheduler.core.plugins.coscheduling import resource_gap
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

PG_LABEL = "scheduling.x-k8s.io/pod-group"


def _member(name: str, group: str = "big", scheduler: str = "tessera", gpus: int = 4) -> dict[str, Any]:
    return b.pod(name, labels={PG_LABEL: group}, limits={"nvidia.com/gpu": gpus}, scheduler=scheduler)


def _group(name: str, minimum: int, gpus: int | None = None) -> dict[str, Any]:
    group = b.podgroup(name, minimum)
    if gpus is not None:
        group["spec"]["minResources"] = {"nvidia.com/gpu": str(gpus)}
    return group


def test_min_resources_beyond_the_cluster_are_told_on_the_podgroup_once_for_every_member() -> None:
    """40 GPUs asked of 8: every member's waiting cycle gives the PodGroup the same note (no
    member's name in it: one Event series, not one per member), upstream's gap and that it can
    never be met."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4), _group("big", 2, gpus=40))
    run.add(_member("big-0"), _member("big-1"))
    notes = set()
    for name in ("big-0", "big-1"):
        attempt = run.last(name)
        assert attempt.node is None and "resource gap: map[nvidia.com/gpu:32]" in attempt.message
        notice = run.scheduler.group_notice([attempt])
        assert notice is not None, name
        assert (notice.kind, notice.key, notice.reason, notice.api_version) == (
            "PodGroup", "default/big", "Unschedulable", "scheduling.x-k8s.io/v1alpha1")
        notes.add(notice.message)
    assert notes == {"pod group default/big: resource gap: map[nvidia.com/gpu:32]. The PodGroup's minResources "
                     "can never be met as the cluster is: they ask for 40 nvidia.com/gpu free, and the nodes have "
                     "8 in all."}


def test_a_min_resources_gap_room_can_close_is_told_without_never() -> None:
    """8 GPUs asked while another pod holds 4 of the 8: the gap, and nothing about never."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4), b.pod("other", limits={"nvidia.com/gpu": 4}))
    assert run.node_of("other") is not None
    run.add(_group("big", 1, gpus=8), _member("big-0", gpus=1))
    notice = run.scheduler.group_notice([run.last("big-0")])
    assert notice is not None
    assert notice.message == "pod group default/big: resource gap: map[nvidia.com/gpu:4]"


def test_min_member_beyond_every_nodes_pod_slots_is_never_met() -> None:
    """minResources add a pod slot per minMember (upstream's `pods` quantity)."""
    run = Run(config(BINPACK))
    node = b.node("n1", gpus=4)
    node["status"]["allocatable"]["pods"] = "2"
    group = _group("wide", 3, gpus=1)
    run.add(node, group)
    run.add(*(_member(f"wide-{i}", group="wide", gpus=0) for i in range(3)))
    notice = run.scheduler.group_notice([run.last("wide-2")])
    assert notice is not None
    assert notice.message.endswith("The PodGroup's minResources can never be met as the cluster is: its minMember "
                                   "of 3 asks for 3 pods free, and the nodes have 2 in all.")


def test_a_gang_short_of_members_is_still_not_told_on_its_podgroup() -> None:
    """Too few members: the group was not tried (its phase says Pending), with or without minResources."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), _group("big", 2, gpus=40), _member("big-0"))
    assert "cannot find enough sibling pods" in run.last("big-0").message
    assert run.scheduler.group_notice([run.last("big-0")]) is None


def test_tessera_writes_the_status_of_podgroups_a_pod_of_its_own_names() -> None:
    """scheduler-plugins' PodGroup controller writes every PodGroup (a fresh one `Pending` with no
    pod at all: pkg/controllers/podgroup_controller.go, case ""); a group whose pods are all
    another scheduler's is that scheduler's (and its controller's) to report, and two writers
    reverted each other in a trial. Tessera's: a group with one pod of its scheduler names. A
    group no pod names yet may be anybody's (the PodGroup names no scheduler): it is left alone
    until a pod of ours names it (tests/unit/test_podgroup_status_owner.py)."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), _group("theirs", 1), _group("ours", 1), _group("mixed", 2), _group("fresh", 1))
    run.add(_member("theirs-0", group="theirs", scheduler="other", gpus=0),
            _member("ours-0", group="ours", gpus=0),
            _member("mixed-0", group="mixed", scheduler="other", gpus=0), _member("mixed-1", group="mixed", gpus=0))
    # upstream's Workload API group of kube-scheduler's pods: its PodGroupScheduled is kube-scheduler's to write
    run.add(b.workload_podgroup("kube", 1), b.pod("kube-0", scheduler="default-scheduler",
                                                  spec_extra={"schedulingGroup": {"podGroupName": "kube"}}))
    touched = run.scheduler.take_touched_groups()
    assert touched == {f"default/scheduling.x-k8s.io/{name}" for name in ("ours", "mixed")}
    run.scheduler.touch_all_groups()  # a new term writes every group again: still only those
    assert run.scheduler.take_touched_groups() == touched
    run.add(_member("fresh-0", group="fresh", gpus=0))  # its first pod is ours: it is ours to write
    assert run.scheduler.take_touched_groups() == {"default/scheduling.x-k8s.io/fresh"}


NEVER = ("The PodGroup's minResources can never be met as the cluster is: they ask for 40 nvidia.com/gpu free, "
         "and the nodes have 8 in all.")


def _never_met() -> list[dict[str, Any]]:
    return [b.node("n1", gpus=4), b.node("n2", gpus=4), _group("big", 2, gpus=40), _member("big-0"),
            _member("big-1")]


def test_explain_what_if_and_the_gpu_map_say_the_min_resources_can_never_be_met() -> None:
    """Tessera's own outputs say it after the members' message (which stays upstream's), as they
    say a gang that can never fit (`capacity.never_fits`: one computation for all)."""
    from scheduler.kubectl import explain as explaining
    from scheduler.kubectl import whatif
    from scheduler.view.listed import listed_view

    result = explaining.explain(_never_met(), "default/big-0", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert "resource gap: map[nvidia.com/gpu:32]" in result.dry_run.message
    assert result.beyond_min_resources == NEVER
    assert f"\n  {NEVER}\n" in explaining.render(result, 0.0)
    outcome = next(o for o in whatif.what_if(_never_met(), config(BINPACK), 0.0).outcomes if o.pod == "default/big-0")
    assert outcome.message.endswith(f"PostFilter. {NEVER}"), outcome.message
    (gang,) = listed_view(config(BINPACK), _never_met(), 0.0).gangs
    assert gang.message.endswith(NEVER), gang.message


# --- minResources naming a ResourceClass's resource ----------------------------------------------
# Kubeflow's training operator fills minResources by summing its pods' requests, so a job asking for
# `class.tessera.dev/v100: 2` per pod gets a PodGroup asking for `class.tessera.dev/v100: 8`. The
# nodes (dev-cluster's, a device plugin's) allocate only `nvidia.com/gpu`: the class's resource is
# served by the devices it matches (docs/api.md), so those are what the check counts, as
# scheduler-plugins' CheckClusterResource counts a node's allocatable less what its pods request.

V100 = "class.tessera.dev/v100"


def _class_cluster(nodes: int = 3) -> list[dict[str, Any]]:
    """`nodes` nodes of 4 V100s each (ExtendedResources), and the class `v100` matching them."""
    objs: list[dict[str, Any]] = [b.resource_class("v100", {"model": "V100"})]
    for n in range(1, nodes + 1):
        objs += [b.node(f"n{n}", gpus=4), *(b.device(f"n{n}", i) for i in range(4))]
    return objs


def _class_group(name: str, minimum: int, devices: int) -> dict[str, Any]:
    group = b.podgroup(name, minimum)
    group["spec"]["minResources"] = {V100: str(devices)}
    return group


def _class_member(name: str, group: str, devices: int = 2) -> dict[str, Any]:
    return b.pod(name, labels={PG_LABEL: group}, limits={V100: devices})


def test_min_resources_of_a_class_count_the_devices_it_matches() -> None:
    """A PyTorchJob of 4 pods x 2 V100s under minResources `class.tessera.dev/v100: 8`, on 12 V100
    devices: placed. Before, the nodes' allocatable of the class's name (none) was counted, and
    every member waited for ever with `resource gap: map[class.tessera.dev/v100:8]`."""
    run = Run(config(BINPACK))
    run.add(*_class_cluster(), _class_group("pt", 4, 8))
    run.add(*(_class_member(f"pt-{i}", "pt") for i in range(4)))
    for i in range(4):
        assert run.node_of(f"pt-{i}") is not None, run.last(f"pt-{i}").message


def test_a_class_min_resources_gap_counts_the_devices_other_pods_hold() -> None:
    """8 of 12 V100s held by other pods: 4 free, the group asking 8 waits 4 short (only the
    class's devices count: the nodes' 12 `nvidia.com/gpu` are no V100s to it)."""
    run = Run(config(BINPACK))
    run.add(*_class_cluster(), b.pod("other", limits={V100: 4}), b.pod("other2", limits={V100: 4}))
    assert run.node_of("other") is not None and run.node_of("other2") is not None
    run.add(_class_group("pt", 1, 8), _class_member("pt-0", "pt", devices=1))
    assert run.node_of("pt-0") is None
    notice = run.scheduler.group_notice([run.last("pt-0")])
    assert notice is not None
    assert notice.message == f"pod group default/pt: resource gap: map[{V100}:4]"


def test_a_class_min_resources_check_counts_the_groups_own_devices_as_free() -> None:
    """Two members placed holding 8 of the 12 V100s: for their group all 12 are free (upstream's
    getNodeResource removes the group's own pods from each node before subtracting)."""
    run = Run(config(BINPACK))
    run.add(*_class_cluster(), b.podgroup("pt", 2), _class_member("pt-0", "pt", 4), _class_member("pt-1", "pt", 4))
    assert run.node_of("pt-0") is not None and run.node_of("pt-1") is not None
    member = run.state.pod_by_key("default/pt-0")
    assert resource_gap(run.state, member, {V100: 12}, 2) is None
    assert resource_gap(run.state, member, {V100: 13}, 2) == f"resource gap: map[{V100}:1]"


def test_class_min_resources_beyond_the_devices_it_matches_are_never_met_in_the_classes_words() -> None:
    """40 V100s asked of 12: the never sentence names the class's devices, not the nodes' (which
    allocate none of the class's name)."""
    run = Run(config(BINPACK))
    run.add(*_class_cluster(), _class_group("pt", 1, 40), _class_member("pt-0", "pt"))
    notice = run.scheduler.group_notice([run.last("pt-0")])
    assert notice is not None
    assert notice.message == (f"pod group default/pt: resource gap: map[{V100}:28]. The PodGroup's minResources can "
                              f"never be met as the cluster is: they ask for 40 {V100} free, and the devices of "
                              f"ResourceClass v100 hold 12 in all.")


def test_devices_arriving_close_a_class_min_resources_gap() -> None:
    """A node agent publishing a node's devices after the gang was held back closes the gap: the
    members are retried at once (a device or class change is Coscheduling's event too when its
    PodGroup's minResources may name a class), not at the 5-minute flush."""
    run = Run(config(BINPACK))
    run.add(*_class_cluster(1), b.node("n2", gpus=4), _class_group("pt", 4, 8))
    run.add(*(_class_member(f"pt-{i}", "pt") for i in range(4)))
    assert run.node_of("pt-0") is None and f"resource gap: map[{V100}:4]" in run.last("pt-0").message
    run.add(*(b.device("n2", i) for i in range(4)))
    assert all(run.node_of(f"pt-{i}") is not None for i in range(4)), run.last("pt-0").message


def test_a_sharing_class_min_resources_count_slices() -> None:
    """A sharing class's resource is counted in slices: 4 devices of 32Gi in 8Gi slices hold 16;
    another pod's 3 leave 13, and a group's own member's slices count as free for it."""
    sliced = "class.tessera.dev/v100-8g"
    run = Run(config(BINPACK))
    run.add(b.resource_class("v100-8g", {"model": "V100"}, sharing={"dimension": "memory", "unit": "8Gi"}),
            b.node("n1", gpus=4), *(b.device("n1", i) for i in range(4)), b.pod("other", limits={sliced: 3}))
    assert run.node_of("other") is not None
    group = b.podgroup("pt", 1)
    group["spec"]["minResources"] = {sliced: "16"}
    run.add(group, b.pod("pt-0", labels={PG_LABEL: "pt"}, limits={sliced: 1}))
    assert run.node_of("pt-0") is None
    assert f"resource gap: map[{sliced}:3]" in run.last("pt-0").message
    run.add(b.podgroup("own", 1), b.pod("own-0", labels={PG_LABEL: "own"}, limits={sliced: 2}))
    assert run.node_of("own-0") is not None
    member = run.state.pod_by_key("default/own-0")
    assert resource_gap(run.state, member, {sliced: 13}, 1) is None
    assert resource_gap(run.state, member, {sliced: 14}, 1) == f"resource gap: map[{sliced}:1]"


# What a class's resource counts as free on a node (`capacity.class_free`), and what the other
# resources do (`resource_gap`): the cases a mutation round found no test reading.

SLICED = "class.tessera.dev/v100-8g"


def _both_classes() -> list[dict[str, Any]]:
    """`v100` whole and `v100-8g` in 8Gi slices, matching the same devices."""
    return [b.resource_class("v100", {"model": "V100"}),
            b.resource_class("v100-8g", {"model": "V100"}, sharing={"dimension": "memory", "unit": "8Gi"})]


def _on(node: str) -> dict[str, Any]:
    return {"nodeSelector": {"kubernetes.io/hostname": node}}


def _waiting_member(run: Run) -> Any:
    """A member of group `pt` held back by a minResources no node meets, so none of it is placed."""
    group = b.podgroup("pt", 1)
    group["spec"]["minResources"] = {"cpu": "1000"}
    run.add(group, b.pod("pt-0", labels={PG_LABEL: "pt"}, limits={V100: 1}))
    assert run.node_of("pt-0") is None
    return run.state.pod_by_key("default/pt-0")


def test_a_class_min_resources_count_the_devices_no_other_pod_holds_whole_or_in_slices() -> None:
    """4 V100s on a node that allocates no `nvidia.com/gpu` (its devices are all it has): one held
    whole, one in a slice by other pods, 2 free. Then on a node allocating 8 with the same 4
    devices: still 2, the devices free and not the node's count."""
    for gpus in (0, 8):
        run = Run(config(BINPACK))
        run.add(*_both_classes(), b.node("n1", gpus=gpus), *(b.device("n1", i) for i in range(4)),
                b.pod("whole", limits={V100: 1}), b.pod("slice", limits={SLICED: 1}))
        assert run.node_of("whole") == run.node_of("slice") == "n1"
        member = _waiting_member(run)
        assert resource_gap(run.state, member, {V100: 2}, 1) is None, gpus
        assert resource_gap(run.state, member, {V100: 3}, 1) == f"resource gap: map[{V100}:1]", gpus


def test_a_groups_own_plain_requests_on_a_node_free_its_count_for_the_class_there_alone() -> None:
    """n1 allocates 3 `nvidia.com/gpu` for 4 V100s: one held whole and one in a slice by others,
    and the group's own member requests 1 `nvidia.com/gpu` plainly (no device of the ledger's):
    the node's count leaves 1 for others, 1 more for the group (what its own member holds is
    free to it), though 2 devices are free; another pod's slice is no device of the group's.
    n2's 2 devices are under another pod's plain request of its 2: none free there, for the
    group too (its member is not there); so is its plain `nvidia.com/gpu`."""
    run = Run(config(BINPACK))
    run.add(*_both_classes(), b.node("n1", gpus=3), *(b.device("n1", i) for i in range(4)),
            b.node("n2", gpus=2), *(b.device("n2", i) for i in range(2)),
            b.pod("whole", limits={V100: 1}, spec_extra=_on("n1")),
            b.pod("slice", limits={SLICED: 1}, spec_extra=_on("n1")),
            b.pod("plain", limits={"nvidia.com/gpu": 2}, spec_extra=_on("n2")),
            b.podgroup("own", 1), b.pod("own-0", labels={PG_LABEL: "own"}, limits={"nvidia.com/gpu": 1},
                                         spec_extra=_on("n1")))
    assert [run.node_of(name) for name in ("whole", "slice", "plain", "own-0")] == ["n1", "n1", "n2", "n1"]
    own = run.state.pod_by_key("default/own-0")
    assert resource_gap(run.state, own, {V100: 1}, 1) is None
    assert resource_gap(run.state, own, {V100: 2}, 1) == f"resource gap: map[{V100}:1]"
    assert resource_gap(run.state, own, {"nvidia.com/gpu": 1}, 1) is None
    assert resource_gap(run.state, own, {"nvidia.com/gpu": 2}, 1) == "resource gap: map[nvidia.com/gpu:1]"
    other = _waiting_member(run)
    assert resource_gap(run.state, other, {V100: 1}, 1) == f"resource gap: map[{V100}:1]"


def test_an_overcommitted_node_takes_from_the_plain_sum_but_not_below_none_of_a_class() -> None:
    """n1's allocatable drops to 2 GPUs under a pod holding 4 plainly: upstream's sum takes its
    -2 from the other nodes' free `nvidia.com/gpu`, while its 4 free V100 devices count as none
    (no device is free beyond the node's count), not as -2."""
    run = Run(config(BINPACK))
    run.add(b.resource_class("v100", {"model": "V100"}), *(b.node(n, gpus=4) for n in ("n1", "n2")),
            *(b.device(n, i) for n in ("n1", "n2") for i in range(4)),
            b.pod("big", limits={"nvidia.com/gpu": 4}, spec_extra=_on("n1")))
    assert run.node_of("big") == "n1"
    run.feed(b.event("MODIFIED", b.node("n1", gpus=2)))
    member = _waiting_member(run)
    assert resource_gap(run.state, member, {"nvidia.com/gpu": 2}, 1) is None
    assert resource_gap(run.state, member, {"nvidia.com/gpu": 3}, 1) == "resource gap: map[nvidia.com/gpu:1]"
    assert resource_gap(run.state, member, {V100: 4}, 1) is None
    assert resource_gap(run.state, member, {V100: 5}, 1) == f"resource gap: map[{V100}:1]"


def test_pod_slots_free_the_groups_own_and_not_the_others() -> None:
    """A node of 3 pod slots with another pod and the group's member on it: 2 free for the
    group (`pods: minMember`); no minResources at all is no check, whatever minMember asks."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", pods=3), b.pod("other", requests={"cpu": "1"}),
            b.podgroup("own", 1), b.pod("own-0", labels={PG_LABEL: "own"}, requests={"cpu": "1"}))
    assert run.node_of("other") == run.node_of("own-0") == "n1"
    own = run.state.pod_by_key("default/own-0")
    assert resource_gap(run.state, own, {"cpu": 1000}, 2) is None
    assert resource_gap(run.state, own, {"cpu": 1000}, 3) == "resource gap: map[pods:1]"
    assert resource_gap(run.state, own, {}, 1000) is None


def test_a_class_resource_no_usable_class_serves_counts_nothing_though_a_node_allocates_its_name() -> None:
    """minResources naming a class resource no ResourceClass serves: none free, even where a node
    allocates that name, and the never sentence says no class serves it; a pod bound to a node
    not seen yet is no node to count. CPU is shown as a quantity: whole cores, else millicores."""
    unserved = "class.tessera.dev/none"
    run = Run(config(BINPACK))
    run.add(b.node("n1", extra={unserved: "4"}),
            b.pod("elsewhere", requests={"cpu": "1"}, node_name="not-seen-yet", phase="Running"))
    group = b.podgroup("pt", 1)
    group["spec"]["minResources"] = {unserved: "1"}
    run.add(group, b.pod("pt-0", labels={PG_LABEL: "pt"}, requests={"cpu": "1"}))
    member = run.state.pod_by_key("default/pt-0")
    assert run.node_of("pt-0") is None
    assert resource_gap(run.state, member, {unserved: 1}, 1) == f"resource gap: map[{unserved}:1]"
    notice = run.scheduler.group_notice([run.last("pt-0")])
    assert notice is not None and notice.message.endswith(
        f"they ask for 1 {unserved} free, and no usable ResourceClass serves it.")
    assert resource_gap(run.state, member, {"cpu": 34000}, 1) == "resource gap: map[cpu:2]"
    assert resource_gap(run.state, member, {"cpu": 32500}, 1) == "resource gap: map[cpu:500m]"


def test_a_pod_leaving_or_a_node_growing_closes_a_min_resources_gap_at_once() -> None:
    """Room made by a pod deleted, or by a node's allocatable growing, is Coscheduling's event
    while its PodGroup has minResources: the members are retried at once, not at the flush."""
    for change in ("pod deleted", "node grown"):
        run = Run(config(BINPACK))
        other = b.pod("other", limits={"nvidia.com/gpu": 4})
        run.add(b.node("n1", gpus=8), other, _group("big", 2, gpus=8))
        run.add(_member("big-0"), _member("big-1"))
        assert run.node_of("big-0") is None and "resource gap: map[nvidia.com/gpu:4]" in run.last("big-0").message
        run.feed(b.event("DELETED", other) if change == "pod deleted" else b.event("MODIFIED", b.node("n1", gpus=12)))
        assert run.node_of("big-0") is not None and run.node_of("big-1") is not None, (change, run.last("big-0").message)


def test_a_device_shrunk_beneath_its_slices_counts_as_none_free_not_fewer() -> None:
    """A device whose memory went down to 8Gi under another pod's 24Gi of slices has no slice
    free: none, not -2 taken from the other devices' 4."""
    run = Run(config(BINPACK))
    run.add(*_both_classes(), b.node("n1", gpus=2), b.device("n1", 0), b.device("n1", 1),
            b.pod("slices", limits={SLICED: 3}))
    assert run.node_of("slices") == "n1"
    slices = run.state.pod_by_key("default/slices")
    [held] = run.state.placements[slices.uid].devices
    index = next(i for i in (0, 1) if b.device("n1", i)["metadata"]["name"] == held)
    run.feed(b.event("MODIFIED", b.device("n1", index, memory="8Gi")))
    member = _waiting_member(run)
    assert resource_gap(run.state, member, {SLICED: 4}, 1) is None
    assert resource_gap(run.state, member, {SLICED: 5}, 1) == f"resource gap: map[{SLICED}:1]"


def test_a_groups_own_request_its_devices_stand_for_frees_the_nodes_count_once() -> None:
    """The group's member runs on n1 (a count of 3 for 4 V100s) holding device 0 by name under
    `nvidia.com/gpu`, the name it requests 1 of (a class owned the name then): its request is
    that device, charged once (`ledger.counted_requests`). Free to the group of V100: its own
    device and the 2 more the count leaves, 3 — counting its request beside its device read 4,
    a device more than the node's count allows."""
    device = b.device("n1", 0)
    grant = {"main": {"nvidia.com/gpu": (ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"],
                                                         None),)}}
    run = Run(config(BINPACK))
    run.add(b.resource_class("v100", {"model": "V100"}), b.node("n1", gpus=3), device,
            *(b.device("n1", i) for i in range(1, 4)), b.podgroup("own", 1),
            b.pod("own-0", labels={PG_LABEL: "own"}, limits={"nvidia.com/gpu": 1}, node_name="n1", phase="Running",
                  annotations={ann.DEVICES: ann.encode_devices(grant), ann.PHASE: ann.PHASE_ALLOCATED}))
    own = run.state.pod_by_key("default/own-0")
    info = run.state.nodes["n1"]
    assert run.state.placements[own.uid].devices == [device["metadata"]["name"]] and info.used("nvidia.com/gpu") == 1
    assert resource_gap(run.state, own, {V100: 3}, 1) is None
    assert resource_gap(run.state, own, {V100: 4}, 1) == f"resource gap: map[{V100}:1]"


def test_a_device_only_the_groups_own_member_slices_counts_whole_for_a_whole_class() -> None:
    """The group's own member holds a slice of one of n1's 4 V100s (the sharing class over the same
    devices): for the group, the whole class `v100` has all 4 free (its own pods are removed from
    the node, as upstream's getNodeResource does); for another group, 3."""
    run = Run(config(BINPACK))
    run.add(*_both_classes(), b.node("n1", gpus=0), *(b.device("n1", i) for i in range(4)),
            b.podgroup("own", 1), b.pod("own-0", labels={PG_LABEL: "own"}, limits={SLICED: 1}))
    assert run.node_of("own-0") == "n1"
    own = run.state.pod_by_key("default/own-0")
    assert resource_gap(run.state, own, {V100: 4}, 1) is None
    other = _waiting_member(run)
    assert resource_gap(run.state, other, {V100: 4}, 1) == f"resource gap: map[{V100}:1]"


def test_a_gpu_only_the_groups_own_member_slices_is_idle_to_it_and_under_the_nodes_count() -> None:
    """n1 counts 2 `nvidia.com/gpu` for 3 V100s of 4 8Gi slices; another pod's plain request takes
    one, the group's own member a slice of a V100. For the group its member's GPU is idle (its
    own pods are removed from the node), so it is one of the GPUs the count must make busy: the
    count leaves 1, so 4 slices, not the member's GPU's 4 besides the 4 of another."""
    run = Run(config(BINPACK))
    run.add(*_both_classes(), b.node("n1", gpus=2), *(b.device("n1", i) for i in range(3)),
            b.pod("plain", limits={"nvidia.com/gpu": 1}))
    run.add(b.podgroup("own", 1), b.pod("own-0", labels={PG_LABEL: "own"}, limits={SLICED: 1}))
    assert run.node_of("plain") == run.node_of("own-0") == "n1"
    own = run.state.pod_by_key("default/own-0")
    assert resource_gap(run.state, own, {SLICED: 4}, 1) is None
    assert resource_gap(run.state, own, {SLICED: 5}, 1) == f"resource gap: map[{SLICED}:1]"


def test_a_count_short_of_the_gpus_counts_the_roomiest_ones() -> None:
    """n1 counts 1 `nvidia.com/gpu` for a 16Gi and a 32Gi V100: a slice may make one of them busy,
    and the planner can take the 32Gi one, so 4 8Gi slices are free (not the 16Gi one's 2)."""
    run = Run(config(BINPACK))
    run.add(*_both_classes(), b.node("n1", gpus=1), b.device("n1", 0, memory="16Gi"), b.device("n1", 1, memory="32Gi"))
    member = _waiting_member(run)
    assert resource_gap(run.state, member, {SLICED: 4}, 1) is None
    assert resource_gap(run.state, member, {SLICED: 5}, 1) == f"resource gap: map[{SLICED}:1]"


def test_the_groups_own_devices_free_the_nodes_count_only_of_their_own_resource_name() -> None:
    """n1 allocates 2 `nvidia.com/gpu` and 2 `example.com/gpu`, with 4 V100s, 2 under each name.
    Another pod requests 1 `nvidia.com/gpu` plainly; the group's member holds 2 V100s, one of each
    name. For the group: both `example.com/gpu` devices are free, and of the `nvidia.com/gpu` ones
    only its own (the node's count of 2 less the plain request): 3. Its `example.com/gpu` device
    frees none of the node's `nvidia.com/gpu` count."""
    run = Run(config(BINPACK))
    run.add(*_both_classes(), b.node("n1", gpus=2, extra={"example.com/gpu": "2"}),
            *(b.device("n1", i, resource_name="nvidia.com/gpu" if i < 2 else "example.com/gpu") for i in range(4)),
            b.pod("plain", limits={"nvidia.com/gpu": 1}),
            b.podgroup("own", 1), b.pod("own-0", labels={PG_LABEL: "own"}, limits={V100: 2}))
    assert run.node_of("plain") == run.node_of("own-0") == "n1"
    assert sorted(d.resource_name for d in run.state.nodes["n1"].devices.values()
                  if d.name in run.state.ledger.use) == ["example.com/gpu", "nvidia.com/gpu"]
    own = run.state.pod_by_key("default/own-0")
    assert resource_gap(run.state, own, {V100: 3}, 1) is None
    assert resource_gap(run.state, own, {V100: 4}, 1) == f"resource gap: map[{V100}:1]"


def test_the_groups_own_slices_of_no_known_dimension_are_free_to_it_too() -> None:
    """The group's member, bound before Tessera saw it, holds 8Gi of a V100 under a grant naming no
    dimension and a resource name no sharing class owns (its class gone): counted against every
    dimension of the device for others, so `v100-16g` has 7 16Gi slices free for another group;
    for its own group, the 8 of all 4 devices (its own slices are free to it, whatever they name)."""
    sliced16 = "class.tessera.dev/v100-16g"
    devices = [b.device("n1", i) for i in range(4)]
    grant = {"id": devices[0]["spec"]["deviceID"], "device": devices[0]["metadata"]["name"], "amount": "8Gi"}
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=0), *devices, b.podgroup("own", 1),
            b.pod("own-0", labels={PG_LABEL: "own"}, limits={SLICED: 1}, node_name="n1", phase="Running",
                  annotations={ann.DEVICES: json.dumps({"version": ann.VERSION,
                                                        "containers": {"main": {SLICED: [grant]}}})}),
            b.resource_class("v100-16g", {"model": "V100"}, sharing={"dimension": "memory", "unit": "16Gi"}))
    assert [set(use.shared[uid]) for use in run.state.ledger.use.values() for uid in use.shared] == [{(SLICED, "")}]
    own = run.state.pod_by_key("default/own-0")
    assert resource_gap(run.state, own, {sliced16: 8}, 1) is None
    other = _waiting_member(run)
    assert resource_gap(run.state, other, {sliced16: 7}, 1) is None
    assert resource_gap(run.state, other, {sliced16: 8}, 1) == f"resource gap: map[{sliced16}:1]"


def test_a_sharing_class_counts_the_slices_of_its_devices_under_every_resource_name() -> None:
    """`v100-8g` over n1's 4 V100s, 2 under `nvidia.com/gpu` and 2 under `example.com/gpu`: 16 8Gi
    slices free in all, the two names' added up."""
    run = Run(config(BINPACK))
    run.add(*_both_classes(), b.node("n1", gpus=2, extra={"example.com/gpu": "2"}),
            *(b.device("n1", i, resource_name="nvidia.com/gpu" if i < 2 else "example.com/gpu") for i in range(4)))
    member = _waiting_member(run)
    assert resource_gap(run.state, member, {SLICED: 16}, 1) is None
    assert resource_gap(run.state, member, {SLICED: 17}, 1) == f"resource gap: map[{SLICED}:1]"


def test_the_groups_own_class_devices_free_the_nodes_plain_count_of_their_name() -> None:
    """The group's member holds 2 of n1's 4 V100s through the class (its request names no
    `nvidia.com/gpu`): they count as 2 busy `nvidia.com/gpu` on the node, and being its own they
    are free to it: 4 `nvidia.com/gpu` free for the group (adding back its requests of the name,
    none, read 2), and still 2 for another group."""
    run = Run(config(BINPACK))
    run.add(b.resource_class("v100", {"model": "V100"}), b.node("n1", gpus=4), *(b.device("n1", i) for i in range(4)),
            b.podgroup("own", 1), b.pod("own-0", labels={PG_LABEL: "own"}, limits={V100: 2}))
    assert run.node_of("own-0") == "n1" and run.state.nodes["n1"].used("nvidia.com/gpu") == 2
    own = run.state.pod_by_key("default/own-0")
    assert resource_gap(run.state, own, {"nvidia.com/gpu": 4}, 1) is None
    assert resource_gap(run.state, own, {"nvidia.com/gpu": 5}, 1) == "resource gap: map[nvidia.com/gpu:1]"
    other = _waiting_member(run)
    assert resource_gap(run.state, other, {"nvidia.com/gpu": 2}, 1) is None
    assert resource_gap(run.state, other, {"nvidia.com/gpu": 3}, 1) == "resource gap: map[nvidia.com/gpu:1]"


def test_the_groups_own_plain_request_a_shared_device_stands_for_frees_no_device_another_pod_holds() -> None:
    """n1's one GPU (a count of 1) is shared: the group's member, bound before Tessera saw it, holds
    a slice of it under `nvidia.com/gpu`, the name it requests 1 of (its request is that device,
    `ledger.counted_requests`), and another pod holds a slice too. The device stays busy for the
    other pod, so none of `nvidia.com/gpu` is free to the group either (adding back its request
    read 1: another pod's device counted as the group's)."""
    device = b.device("n1", 0)
    grant = {"id": device["spec"]["deviceID"], "device": device["metadata"]["name"], "amount": "8Gi"}

    def bound(name: str, resource: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        return b.pod(name, labels=labels, limits={resource: 1}, node_name="n1", phase="Running",
                     annotations={ann.DEVICES: json.dumps({"version": ann.VERSION,
                                                           "containers": {"main": {resource: [grant]}}})})

    run = Run(config(BINPACK))
    run.add(*_both_classes(), b.node("n1", gpus=1), device, b.podgroup("own", 1),
            bound("own-0", "nvidia.com/gpu", {PG_LABEL: "own"}), bound("other", SLICED))
    use = run.state.ledger.use[device["metadata"]["name"]]
    own = run.state.pod_by_key("default/own-0")
    assert set(use.shared) == {own.uid, run.state.pod_by_key("default/other").uid}
    assert "nvidia.com/gpu" not in run.state.placements[own.uid].requests
    assert run.state.nodes["n1"].used("nvidia.com/gpu") == 1
    assert resource_gap(run.state, own, {"nvidia.com/gpu": 1}, 1) == "resource gap: map[nvidia.com/gpu:1]"


def _boss_nominated_beside_a_terminating_victim(boss_priority: int) -> Scheduler:
    """n1 (4 GPUs) runs `victim` (2 GPUs, priority -1); `boss` (4 GPUs, pinned to n1) preempts it
    and is nominated there while it terminates, its hold of 4 counted on n1; n2 (4 GPUs) is empty."""
    core = Scheduler(config(BINPACK), seed=0)
    victim = b.pod("victim", limits={"nvidia.com/gpu": 2}, node_name="n1", phase="Running", priority=-1)
    for obj in (b.node("n1", gpus=4), b.node("n2", gpus=4), victim,
                b.pod("boss", limits={"nvidia.com/gpu": 4}, priority=boss_priority, spec_extra=_on("n1"))):
        core.apply("ADDED", obj, 0.0)
    [attempt] = core.schedule_next(0.0) or []
    assert attempt.nominated_node == "n1" and [v.meta.name for v in attempt.preempted] == ["victim"]
    victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    core.apply("MODIFIED", victim, 0.0)
    assert b.uid_for("Pod", "default", "boss") in core.state.holds
    return core


def test_min_resources_do_not_count_nominated_pods_holds_as_used() -> None:
    """scheduler-plugins' CheckClusterResource reads the scheduling cycle's snapshot
    (PodGroupManager.PreFilter: snapshotSharedLister.NodeInfos(); getNodeResource: allocatable
    less Requested of the snapshot's pods), which holds the bound and assumed pods only: the
    nominated pods are added per node in Filter alone (framework.go RunFilterPluginsWithNominatedPods
    / addGENominatedPods). Here the cluster has 2 GPUs free on n1 (beside the terminating victim)
    and 4 on n2: a group asking `minResources` 6 passes upstream's PreFilter and its member (2
    GPUs) is placed — on n2 beside a higher-priority nominee, anywhere beside a lower-priority one.
    Tessera counted boss's hold of 4 as used too and refused the group "resource gap:
    map[nvidia.com/gpu:4]"."""
    for boss_priority in (0, 1000):
        core = _boss_nominated_beside_a_terminating_victim(boss_priority)
        group = b.podgroup("mid", 1)
        group["spec"]["minResources"] = {"nvidia.com/gpu": "6"}
        member = b.pod("mid-0", labels={PG_LABEL: "mid"}, limits={"nvidia.com/gpu": 2}, priority=100)
        for obj in (group, member):
            core.apply("ADDED", obj, 0.0)
        pod = core.state.pod_by_key("default/mid-0")
        assert pod is not None
        assert coscheduling.waiting_message(core.state, pod) is None, boss_priority
        assert resource_gap(core.state, pod, {"nvidia.com/gpu": 7}, 1) == "resource gap: map[nvidia.com/gpu:1]"
        [attempt] = core.schedule_next(0.0) or []
        assert attempt.pod.meta.name == "mid-0" and attempt.node is not None, (boss_priority, attempt.message)
        assert boss_priority < 100 or attempt.node == "n2"


def test_the_groups_own_gpu_kept_elsewhere_is_free_to_it() -> None:
    """The group's one member holds n0's one GPU (through class v100) by a name the ledger keeps on
    another node (its pod was moved to n9 and back: a ghost there, the GPU counted busy on n0 by
    its deviceID under `nvidia.com/gpu`, `DeviceLedger.elsewhere`). getNodeResource removes the
    group's own pods from the node, so its GPU is free to the group: `minResources` of 1
    `nvidia.com/gpu` is met. Tessera counted it busy (no device of n0 names it, so `own_used`
    missed it) and said "resource gap: map[nvidia.com/gpu:1]". Another group's it stays used."""
    run = Run(config(BINPACK))
    run.add(b.node("n0", gpus=1), b.device("n0", 0), b.resource_class("v100", {"model": "V100"}),
            b.podgroup("g", 1), b.pod("p0", labels={PG_LABEL: "g"}, limits={V100: 1}))
    member = run.state.pod_by_key("default/p0")
    bound = copy.deepcopy(run.replay.pods[member.uid])
    assert bound["spec"]["nodeName"] == "n0" and ann.DEVICES in bound["metadata"]["annotations"]
    moved = copy.deepcopy(bound)
    moved["spec"]["nodeName"] = "n9"
    run.feed(b.event("MODIFIED", moved), b.event("MODIFIED", bound))
    assert run.state.ledger.elsewhere.get("n0") and run.state.nodes["n0"].used("nvidia.com/gpu") == 1
    assert resource_gap(run.state, member, {"nvidia.com/gpu": 1}, 1) is None
    other = _waiting_member(run)
    assert resource_gap(run.state, other, {"nvidia.com/gpu": 1}, 1) == "resource gap: map[nvidia.com/gpu:1]"


def test_the_groups_gpu_another_pod_holds_by_the_name_of_a_device_kept_elsewhere_stays_used() -> None:
    """p0 (group g) holds n0's GPU by a name the ledger keeps elsewhere (moved to n9 and back, as
    above); the GPU is published again on n0 as `n0.dup` (a duplicate: given to no pod) and q
    (group h) is bound there by hand naming it. Two pods hold the one GPU: removing h's own pods
    leaves p0 on it, so it is not free to h. `own_used` judged `n0.dup` by its own holders alone
    (q only) and freed it: minResources of 2 `nvidia.com/gpu` on n0 (allocatable 2, one GPU in
    use) was met. p0's group is not freed it either (q holds it too)."""
    run = Run(config(BINPACK))
    device = b.device("n0", 0)
    run.add(b.node("n0", gpus=2), device, b.resource_class("v100", {"model": "V100"}),
            b.podgroup("g", 1), b.pod("p0", labels={PG_LABEL: "g"}, limits={V100: 1}))
    member = run.state.pod_by_key("default/p0")
    bound = copy.deepcopy(run.replay.pods[member.uid])
    moved = copy.deepcopy(bound)
    moved["spec"]["nodeName"] = "n9"
    run.feed(b.event("MODIFIED", moved), b.event("MODIFIED", bound))
    dup = copy.deepcopy(device)
    dup["metadata"]["name"], dup["metadata"]["uid"] = "n0.dup", "dup-uid"
    by_hand = {key: value.replace(device["metadata"]["name"], "n0.dup")
               for key, value in bound["metadata"]["annotations"].items()}
    run.add(dup, b.podgroup("h", 1), b.pod("q", labels={PG_LABEL: "h"}, limits={V100: 1}, node_name="n0",
                                           phase="Running", annotations=by_hand))
    state, info = run.state, run.state.nodes["n0"]
    other = state.pod_by_key("default/q")
    assert info.real_used("nvidia.com/gpu") == 1 and run.state.ledger.elsewhere.get("n0")
    assert own_used(state, info, {other.uid}, "nvidia.com/gpu") == 0
    assert own_used(state, info, {member.uid}, "nvidia.com/gpu") == 0
    assert resource_gap(state, other, {"nvidia.com/gpu": 2}, 1) == "resource gap: map[nvidia.com/gpu:1]"



@pytest.mark.parametrize(("resource", "gpus"), [(V100, 4), (SLICED, 1)])
def test_min_resources_of_a_class_do_not_count_nominated_pods_holds_as_used(resource: str, gpus: int) -> None:
    """The test above through a ResourceClass (`capacity.class_free`): boss (4 of the class,
    pinned to n1: 4 V100s, or 4 slices of 8Gi of n1's one 32Gi V100) is nominated there while the
    victim (2 of them) terminates, its hold on all 4; n1 has 2 no real holder uses, n2 4. A group
    asking `minResources` 6 of the class is met (upstream's snapshot has no nominated pod); 7 is
    1 short. Counting the hold, n1 had none."""
    core = Scheduler(config(BINPACK), seed=0)
    victim = b.pod("victim", limits={resource: 2}, priority=-1, spec_extra=_on("n1"))
    for obj in (*_both_classes(), b.node("n1", gpus=gpus), b.node("n2", gpus=gpus),
                *(b.device(n, i) for n in ("n1", "n2") for i in range(gpus)), victim):
        core.apply("ADDED", obj, 0.0)
    [placed] = core.schedule_next(0.0) or []
    assert placed.node == "n1"  # assumed there, its devices chosen
    core.apply("ADDED", b.pod("boss", limits={resource: 4}, priority=1000, spec_extra=_on("n1")), 0.0)
    [attempt] = core.schedule_next(0.0) or []
    assert attempt.nominated_node == "n1" and [v.meta.name for v in attempt.preempted] == ["victim"], attempt.message
    victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    core.apply("MODIFIED", victim, 0.0)
    assert b.uid_for("Pod", "default", "boss") in core.state.holds
    for obj in (b.podgroup("mid", 1), b.pod("mid-0", labels={PG_LABEL: "mid"}, limits={resource: 1}, priority=100)):
        core.apply("ADDED", obj, 0.0)
    pod = core.state.pod_by_key("default/mid-0")
    assert pod is not None
    assert resource_gap(core.state, pod, {resource: 6}, 1) is None
    assert resource_gap(core.state, pod, {resource: 7}, 1) == f"resource gap: map[{resource}:1]"


@pytest.mark.parametrize(("count", "free"), [(2, 3), (3, 7)])
def test_a_sharing_class_counts_no_slices_of_a_free_gpu_the_nodes_count_cannot_make_busy(count: int,
                                                                                       free: int) -> None:
    """n1's 3 V100s (4 slices of 8Gi each): one has another pod's slice, and a plain
    `nvidia.com/gpu: 1` pod takes one more of the node's count. Allocating 2, the count has no GPU
    left to make busy, so only the used GPU's 3 slices are free (the planner gives none on the free
    GPUs); allocating 3, one free GPU's 4 more. The whole class already counted so; the sharing
    class counted all 11, and the gate opened for slices no pod could get."""
    run = Run(config(BINPACK))
    run.add(*_both_classes(), b.node("n1", gpus=count), *(b.device("n1", i) for i in range(3)),
            b.pod("slice", limits={SLICED: 1}), b.pod("plain", limits={"nvidia.com/gpu": 1}))
    assert run.node_of("slice") == run.node_of("plain") == "n1"
    member = _waiting_member(run)
    assert resource_gap(run.state, member, {SLICED: free}, 1) is None
    assert resource_gap(run.state, member, {SLICED: free + 1}, 1) == f"resource gap: map[{SLICED}:1]"


def test_a_sharing_class_min_resources_beyond_what_the_nodes_count_lets_its_gpus_give_are_never_met() -> None:
    """n1 allocates 2 `nvidia.com/gpu` for 3 V100s of 4 8Gi slices each: empty, the planner gives
    slices on 2 of them at most (a third would be one GPU more busy than the count has), so 8 in
    all. 10 asked can never be met; the check summed all 12 slices and left the sentence out
    (the gap alone read as room that frees up). 8 asked is no never."""
    run = Run(config(BINPACK))
    run.add(*_both_classes(), b.node("n1", gpus=2), *(b.device("n1", i) for i in range(3)))
    group = b.podgroup("pt", 1)
    group["spec"]["minResources"] = {SLICED: "10"}
    run.add(group, b.pod("pt-0", labels={PG_LABEL: "pt"}, limits={SLICED: 1}))
    assert run.node_of("pt-0") is None
    notice = run.scheduler.group_notice([run.last("pt-0")])
    assert notice is not None
    assert notice.message == (f"pod group default/pt: resource gap: map[{SLICED}:2]. The PodGroup's minResources can "
                              f"never be met as the cluster is: they ask for 10 {SLICED} free, and the devices of "
                              f"ResourceClass v100-8g hold 8 in all.")
    fits = b.podgroup("fits", 1)
    fits["spec"]["minResources"] = {SLICED: "8"}
    run.add(fits)
    assert capacity.min_resources_beyond(run.state, run.state.gangs.podgroups["default/scheduling.x-k8s.io/fits"]) == ""
