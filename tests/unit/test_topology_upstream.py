"""Topology-aware gang placement and device locality inside a node: defects a review found.

Each test failed before its fix, for the reason its docstring gives (what docs/topology.md, or the
upstream design it says it follows, promises, and what Tessera did instead).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config
from tests.replay.test_topology import BLOCK, RACK, topology_config

REQUIRED = "tessera.dev/topology-required"
GPU_CLASS = "class.tessera.dev/gpu"


def _gang(name: str, size: int, gpus: int, annotations: dict[str, str], minimum: int | None = None,
          **pod: Any) -> list[dict[str, Any]]:
    labels = b.gang_labels(name, minimum or size)
    return [b.pod(f"{name}-{i}", labels=labels, annotations=annotations, limits={"nvidia.com/gpu": gpus}, **pod)
            for i in range(size)]


# --- 1. which rack: "tightest" by summed free GPUs, not by how many members fit (Kueue BestFit) ---


def test_the_tightest_rack_is_the_one_that_fits_the_fewest_members_as_kueue_best_fit() -> None:
    """docs/topology.md ("Which domain"): domains are tried "tightest first ... — the smallest domain it fits
    in, as KAI's and Kueue's BestFit". Kueue's BestFit (pkg/cache/tas_flavor_snapshot.go,
    `fillInCounts` + `findBestFitDomainIdx`) measures a domain by how many pods of the pod set fit
    in it (per node, summed) and takes the domain with the lowest such count that still holds the
    gang; its LeastFreeCapacity profile sorts by the same count ascending.

    Rack "a": three 4-GPU nodes with 3 free each (9 free GPUs, but only 3 members of 2 GPUs fit).
    Rack "b": one empty 8-GPU node (8 free GPUs, 4 members fit). A gang of 3 x 2 GPUs: Kueue (both
    profiles) picks rack a (3 >= 3, the tightest), which leaves the whole 8-GPU node for an 8-GPU
    job. Tessera sorts by summed free GPUs (8 < 9), takes rack b and breaks the only whole node,
    leaving rack a's nine free GPUs in 1-GPU crumbs."""
    run = Run(topology_config())
    run.add(*[b.node(f"a-{i}", gpus=4, labels={BLOCK: "x", RACK: "a"}) for i in range(3)])
    run.add(*[b.pod(f"filler-{i}", node_name=f"a-{i}", phase="Running", limits={"nvidia.com/gpu": 1})
              for i in range(3)])
    run.add(b.node("b-0", gpus=8, labels={BLOCK: "x", RACK: "b"}))
    run.add(*_gang("g", 3, 2, {REQUIRED: RACK}))
    nodes = [run.node_of(f"g-{i}") for i in range(3)]
    assert None not in nodes
    assert {node.split("-")[0] for node in nodes if node} == {"a"}, nodes


# --- 2. the room check counts nodes the members can never use: hopeless racks use up the trials --


def test_racks_the_members_cannot_use_do_not_use_up_the_domain_trials() -> None:
    """docs/topology.md: candidate domains are those "whose free capacity can hold the members still
    needed", counted so that "a domain is never skipped where the gang fits"; at most
    `maxDomainTrials` (16) of them are tried, tightest first. Kueue's TAS counts only the nodes the
    pod set can use (`fillInCounts`: untolerated NoSchedule taints and, with a hostname level, the
    node selector exclude a node).

    Tessera's room check sums the free GPUs of every labelled node, also of nodes whose labels the
    members' nodeSelector refuses. Sixteen V100 racks (2 x 8 free GPUs each: 16, "tighter") come
    before the one A100 rack (3 x 8 free: 24) that the gang of 2 x 8 GPUs with nodeSelector
    gpu=a100 fits in; all sixteen trials fail and the gang is refused with "no rack has room for 2
    pods ... (largest: 0)", although rack a100 holds it. (Taints, cordoned nodes or a class's
    devices elsewhere do the same; a preferred gang is spread over the cluster instead.)"""
    run = Run(topology_config())
    nodes = [b.node(f"v{r:02d}-{i}", gpus=8, labels={BLOCK: "x", RACK: f"v{r:02d}", "gpu": "v100"})
             for r in range(16) for i in range(2)]
    nodes += [b.node(f"a100-{i}", gpus=8, labels={BLOCK: "x", RACK: "a100", "gpu": "a100"}) for i in range(3)]
    run.add(*nodes)
    run.add(*_gang("g", 2, 8, {REQUIRED: RACK}, spec_extra={"nodeSelector": {"gpu": "a100"}}))
    placed = {run.node_of("g-0"), run.node_of("g-1")}
    assert placed <= {"a100-0", "a100-1", "a100-2"}, run.last("g-0").message


def test_racks_only_a_members_pod_affinity_refuses_do_not_use_up_the_domain_trials() -> None:
    """As the nodeSelector case above, with a filter whose batch form leaves the pod to its per-node
    form: members with required pod affinity (InterPodAffinity judges a pod with affinity terms per
    node) to the data pods, which run in rack a100 only. The sixteen tighter V100 racks must not
    count as room (`usable_rows` asks that filter per node), or all sixteen trials fail there."""
    run = Run(topology_config())
    nodes = [b.node(f"v{r:02d}-{i}", gpus=8, labels={BLOCK: "x", RACK: f"v{r:02d}", "gpu": "v100"})
             for r in range(16) for i in range(2)]
    nodes += [b.node(f"a100-{i}", gpus=8, labels={BLOCK: "x", RACK: "a100", "gpu": "a100"}) for i in range(3)]
    run.add(*nodes)
    run.add(*[b.pod(f"data-{i}", node_name=f"a100-{i}", phase="Running", labels={"app": "data"}) for i in range(3)])
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "data"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    run.add(*_gang("g", 2, 8, {REQUIRED: RACK}, spec_extra={"affinity": affinity}))
    placed = {run.node_of("g-0"), run.node_of("g-1")}
    assert placed <= {"a100-0", "a100-1", "a100-2"}, run.last("g-0").message


# --- 3. inside a node: GPUs without NVLink peers are not "one group" -----------------------------


def _device_node(run: Run, name: str, groups: list[dict[str, str]]) -> None:
    run.add(b.node(name, gpus=len(groups)))
    run.add(*[b.device(name, i, attributes=attributes) for i, attributes in enumerate(groups)])


def _load(run: Run, node: str, indexes: tuple[int, ...]) -> None:
    """A running pod holding the node's devices at `indexes`."""
    names = sorted((d.name for d in run.state.devices.values() if d.node_name == node),
                   key=lambda name: int(run.state.devices[name].attributes["index"]))
    grants = tuple(ann.DeviceGrant(run.state.devices[names[i]].device_id, names[i], None) for i in indexes)
    run.add(b.pod(f"load-{node}", node_name=node, phase="Running", limits={GPU_CLASS: len(indexes)},
                  annotations={ann.DEVICES: ann.encode_devices({"main": {GPU_CLASS: grants}})}))


def test_two_gpus_without_nvlink_peers_count_as_spanning_groups() -> None:
    """docs/topology.md ("Inside a node"): the agent publishes `nvlinkGroup` for GPUs joined by NVLink (a GPU
    without NVLink peers gets none: scheduler/agent/nvml.py); "a node where the request would have
    to span groups (NVLink groups when the node describes them, even if one NUMA node holds it)
    scores half"; the planner itself says "a device without it is a group of its own".

    Node "split" describes NVLink groups (GPUs 0-1, group a, busy) and has two free GPUs with no
    NVLink peers; node "whole" (equally full) has its two free GPUs in NVLink group a. A 2-GPU
    request spans two groups on "split" (two GPUs with no NVLink between them) and must score half
    of "whole". Tessera looks for the attribute only on the *free* GPUs: none carries it, so the
    node counts as undescribed, both nodes score 100 and the pair lands on the unlinked GPUs for
    some tie-breaks (seeds 1-4), while two free GPUs in *different* groups are halved."""
    run = Run(config(BINPACK), explain=True)
    run.add(b.resource_class("gpu", match_labels={"model": "V100"}))
    _device_node(run, "split", [{"nvlinkGroup": "a"}, {"nvlinkGroup": "a"}, {}, {}])
    _device_node(run, "whole", [{"nvlinkGroup": "a"}, {"nvlinkGroup": "a"}, {"nvlinkGroup": "b"}, {"nvlinkGroup": "b"}])
    _load(run, "split", (0, 1))
    _load(run, "whole", (2, 3))
    run.add(b.pod("pair", limits={GPU_CLASS: 2}))
    scores = run.last("pair").scores
    assert scores is not None
    assert scores["split"]["TesseraDevices"] * 2 == scores["whole"]["TesseraDevices"], scores


# --- 4. the NVLink preference overrides the planner's "never take another request's only GPU" ----


def test_an_nvlink_group_choice_does_not_take_the_gpu_another_request_of_the_pod_needs() -> None:
    """docs/topology.md ("Inside a node"): a pod asking for several classes has "the request with the fewest
    devices to choose from first, so one request never takes the only GPU another can use"; the
    planner's contract is "a node is feasible exactly when a plan exists".

    A 4-GPU node with two NVLink pairs: g1 = {GPU 1 (classes x and y), GPU 2 (y)}, g2 = {GPU 0
    (x), GPU 3 (neither)}. One container asks for x: 1 and y: 2. The plan x -> GPU 0, y -> GPUs 1
    and 2 exists (and is found when the devices carry no nvlinkGroup). With the groups, x (two
    choices, as y) goes first and `within_one_group` takes "the group with the fewest free devices"
    — both of x's candidates are alone in their group, so the tie goes to the group name: g1,
    GPU 1 — overriding the preference for the device matching the fewest other classes (GPU 0).
    y is left with GPU 2 alone: "Insufficient class.tessera.dev/y" on a node that holds the pod."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=4))
    run.add(*[b.device("n", i, attributes={"role": role, "nvlinkGroup": group})
              for i, (role, group) in enumerate((("x", "g2"), ("xy", "g1"), ("y", "g1"), ("z", "g2")))])
    run.add(b.resource_class("x", expressions=[{"key": "role", "operator": "In", "values": ["x", "xy"]}]),
            b.resource_class("y", expressions=[{"key": "role", "operator": "In", "values": ["y", "xy"]}]))
    run.add(b.pod("p", limits={"class.tessera.dev/x": 1, "class.tessera.dev/y": 2}))
    assert run.node_of("p") == "n", run.last("p").message


# --- 5. a member of a gang whose minimum is already met never preempts ---------------------------


def test_a_basic_policy_podgroup_member_preempts_like_a_plain_pod() -> None:
    """Upstream's Workload API: a PodGroup with the `basic` policy has its pods scheduled "as
    independent entities ... using the standard Kubernetes behavior" (and TAS with basic policy
    pins later pods to the domain of those already scheduled); scheduler-plugins' Coscheduling
    PostFilter likewise lets DefaultPreemption run for a member whose group already has minMember
    assigned. docs/preemption.md: "When a pod fits nowhere, the
    DefaultPreemption PostFilter evicts lower-priority pods to make room, as kube-scheduler's does".

    wl-0 (priority 100) takes n1; wl-1 (priority 100, same basic PodGroup) fits nowhere, and n2
    holds only `low` (priority 0). A plain pod evicts `low` and takes n2. Tessera's gang path
    counts wl-0 as bound, calls the gang "placed" (bound >= minimum 1) and marks wl-1
    unschedulable without ever running PostFilter: no victims, no nomination, no `preemption:`
    part in its message. The same holds for any gang whose minimum is met (a recreated worker of a
    running job, the members above minMember) and for a basic PodGroup with a preferred topology."""
    run = Run()
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4))
    run.add(b.pod("low", node_name="n2", phase="Running", limits={"nvidia.com/gpu": 4}, priority=0))
    run.add(b.workload_podgroup("wl", None))
    member = {"schedulingGroup": {"podGroupName": "wl"}}
    run.add(b.pod("wl-0", limits={"nvidia.com/gpu": 4}, priority=100, spec_extra=member))
    assert run.node_of("wl-0") == "n1"
    run.add(b.pod("wl-1", limits={"nvidia.com/gpu": 4}, priority=100, spec_extra=member))
    tries = [a for a in run.attempts if a.pod.meta.name == "wl-1"]
    assert [[p.key for p in a.preempted] for a in tries if a.preempted] == [["default/low"]], [a.message for a in tries]
    assert run.node_of("wl-1") == "n2", tries[-1].message


# --- 6. the room check asks each member's own filters, not one member's for all -------------


def test_one_members_anti_affinity_does_not_rule_out_nodes_for_the_rest() -> None:
    """docs/topology.md: a domain's room counts "the nodes the members can use (the batch filters
    of each distinct member)" — a union, never too strict. Members were told apart by requests,
    selector, required node affinity and tolerations only, so a member differing in what other
    filters read (here its pod anti-affinity) shared the first member's pass.

    Rack "a": two 8-GPU nodes; a-0 runs a pod labelled app=x. A gang of 2 x 8 GPUs, required rack:
    g-0 refuses nodes with an app=x pod, g-1 does not. g-1 on a-0 and g-0 on a-1 fit; with g-0's
    usable rows standing for both, rack a held 1 member and the gang waited forever."""
    run = Run(topology_config())
    run.add(*[b.node(f"a-{i}", gpus=8, labels={BLOCK: "x", RACK: "a"}) for i in range(2)])
    run.add(b.pod("blocker", node_name="a-0", phase="Running", labels={"app": "x"}))
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    labels = b.gang_labels("g", 2)
    run.add(b.pod("g-0", labels=labels, annotations={REQUIRED: RACK}, limits={"nvidia.com/gpu": 8},
                  spec_extra=anti),
            b.pod("g-1", labels=labels, annotations={REQUIRED: RACK}, limits={"nvidia.com/gpu": 8}))
    assert (run.node_of("g-0"), run.node_of("g-1")) == ("a-1", "a-0"), run.last("g-0").message


def test_a_members_labels_that_a_running_pods_anti_affinity_refuses_do_not_rule_out_nodes_for_the_rest() -> None:
    """As above, with the member's labels: a-0 runs a pod refusing nodes with app=y pods, g-0 is
    labelled app=y, g-1 is not (an indexed Job's members differ in labels alone). g-1 on a-0 and g-0
    on a-1 fit; with labels outside the members' form, g-0's rows stood for g-1's."""
    run = Run(topology_config())
    run.add(*[b.node(f"a-{i}", gpus=8, labels={BLOCK: "x", RACK: "a"}) for i in range(2)])
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "y"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    run.add(b.pod("guard", node_name="a-0", phase="Running", spec_extra=anti))
    labels = b.gang_labels("g", 2)
    run.add(b.pod("g-0", labels={**labels, "app": "y"}, annotations={REQUIRED: RACK}, limits={"nvidia.com/gpu": 8}),
            b.pod("g-1", labels=labels, annotations={REQUIRED: RACK}, limits={"nvidia.com/gpu": 8}))
    assert (run.node_of("g-0"), run.node_of("g-1")) == ("a-1", "a-0"), run.last("g-0").message


# --- 7. a room check asks the filters once per distinct form, not once per member ---------------


INDEX = "batch.kubernetes.io/job-completion-index"
IN_RACK_A = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": RACK, "operator": "In", "values": ["a"]}]}]}}}


def _anti(app: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}


def _count_passes(monkeypatch: Any) -> tuple[list[int], list[int]]:
    """Per room check from now on (`Handle.usable_rows`), how many members it was given and how
    many filter passes it ran (`ProfileRuntime._batch_pass`, one per distinct form)."""
    from scheduler.core.framework.runtime import ProfileRuntime

    members: list[int] = []
    passes: list[int] = []
    inside: list[bool] = []
    usable_rows, batch_pass = ProfileRuntime.usable_rows, ProfileRuntime._batch_pass

    def counted_rows(self: ProfileRuntime, given: Any) -> Any:
        members.append(len(given))
        passes.append(0)
        inside.append(True)
        try:
            return usable_rows(self, given)
        finally:
            inside.pop()

    def counted_pass(self: ProfileRuntime, *args: Any) -> Any:
        if inside:
            passes[-1] += 1
        return batch_pass(self, *args)

    monkeypatch.setattr(ProfileRuntime, "usable_rows", counted_rows)
    monkeypatch.setattr(ProfileRuntime, "_batch_pass", counted_pass)
    return members, passes


def _indexed_gang(name: str, size: int, spec: dict[str, Any], app: str = "g") -> list[dict[str, Any]]:
    """An indexed Job's members: alike but their completion-index label and annotation."""
    labels = {**b.gang_labels(name, size), "app": app}
    return [b.pod(f"{name}-{k}", labels={**labels, INDEX: str(k)}, annotations={REQUIRED: RACK, INDEX: str(k)},
                  limits={"nvidia.com/gpu": 8}, spec_extra=spec) for k in range(size)]


@pytest.mark.parametrize("spec", [
    {"affinity": IN_RACK_A},
    {"affinity": {**IN_RACK_A, **_anti("g")}},  # one member per node: InterPodAffinity applies
    {"affinity": IN_RACK_A, "topologySpreadConstraints": [  # PodTopologySpread applies
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "g"}}}]},
], ids=["node-affinity", "own-anti-affinity", "spread"])
def test_members_differing_in_their_completion_index_alone_share_one_pass_of_the_filters(
        monkeypatch: Any, spec: dict[str, Any]) -> None:
    """An indexed Job's members differ in their completion-index label and annotation, which no
    filter's verdict reads. InterPodAffinity's and PodTopologySpread's forms held the pod's
    labels, so where either applies (the members' own anti-affinity; a running pod's
    anti-affinity, however little it matches) each member had a pass of the filters per room
    check, and with a filter checking rows one by one (required node affinity) a 64-member gang
    took 1.2 s at 5,000 nodes. A running pod anti-affine to none of them changes nothing: its term
    matches none, so every member reads the nodes alike (each room check: one pass)."""
    run = Run(topology_config())
    run.add(*[b.node(f"a-{i}", gpus=8, labels={BLOCK: "x", RACK: "a"}) for i in range(4)],
            b.node("b-0", gpus=8, labels={BLOCK: "y", RACK: "b"}))
    run.add(b.pod("lone", node_name="b-0", phase="Running", labels={"app": "lone"}, spec_extra={"affinity": _anti("lone")}))
    members, passes = _count_passes(monkeypatch)
    run.add(*_indexed_gang("g", 4, spec))
    assert sorted(run.node_of(f"g-{k}") or "" for k in range(4)) == [f"a-{i}" for i in range(4)], run.last("g-0").message
    assert members and set(members) == {4} and set(passes) == {1}, (members, passes)


def test_a_member_differing_in_what_a_filter_reads_gets_its_own_pass(monkeypatch: Any) -> None:
    """The forms stay exact: a member with an anti-affinity the others lack, or one a running
    pod's anti-affinity selects, is asked apart from them (two passes per room check)."""
    run = Run(topology_config())
    run.add(*[b.node(f"a-{i}", gpus=8, labels={BLOCK: "x", RACK: "a"}) for i in range(4)],
            b.node("b-0", gpus=8, labels={BLOCK: "y", RACK: "b"}))
    run.add(b.pod("lone", node_name="b-0", phase="Running", labels={"app": "lone"}, spec_extra={"affinity": _anti("h")}))
    members, passes = _count_passes(monkeypatch)
    gang = _indexed_gang("g", 2, {"affinity": IN_RACK_A})
    gang[0]["spec"]["affinity"] = {**IN_RACK_A, **_anti("x")}
    run.add(*gang)
    assert run.node_of("g-0") and run.node_of("g-1"), run.last("g-0").message
    assert members and set(passes) == {2}, (members, passes)
    members.clear()
    passes.clear()
    gang = _indexed_gang("h", 2, {"affinity": IN_RACK_A}, app="other")
    gang[0]["metadata"]["labels"]["app"] = "h"  # the running pod's anti-affinity selects this one
    run.add(*gang)
    assert run.node_of("h-0") and run.node_of("h-1"), run.last("h-0").message
    assert members and set(passes) == {2}, (members, passes)
