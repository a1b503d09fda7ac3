"""Devices of init containers and sidecars, as the kubelet's device manager hands them out.

Upstream v1.36.3: kube-scheduler charges `resourcehelper.PodRequests` (component-helpers
resource/helpers.go): max(each plain init container + the sidecars started before it, the app
containers + all sidecars). The kubelet's device manager (pkg/kubelet/cm/devicemanager/manager.go
`Allocate`, `devicesToAllocate`) allocates containers in that order, reusing first the devices of
finished plain init containers (`devicesToReuse`, per resource name); a sidecar's or an app
container's devices leave that set (they keep running), so no later container gets them.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from scheduler.agent.allocate import find_allocation, pending_entries
from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from scheduler.core.state import Notice
from tessera_testing.invariants import ClusterView, check_capacity
from tests.helpers import last_attempts

GPU = "class.tessera.dev/v100"
SLICE = "class.tessera.dev/v100-mem"


def _scheduler(batch: bool = True) -> Scheduler:
    return Scheduler(load_config(None), seed=7, batch=batch, explain=True)


def _devices(line: tuple[str | None, dict[str, str], str]) -> dict[str, list[str]]:
    """container -> device names granted (all resources)."""
    doc = orjson.loads(line[1][ann.DEVICES])["containers"]
    return {c: [g["device"] for grants in by_res.values() for g in grants] for c, by_res in doc.items()}


def _cluster(gpus: int, sharing: bool = False) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [b.node("n", gpus=gpus)]
    objects += [b.device("n", i, memory="8Gi") for i in range(gpus)]
    objects.append(b.resource_class("v100", match_labels={"model": "V100"}))
    if sharing:
        objects.append(b.resource_class("v100-mem", match_labels={"model": "V100"},
                                        sharing={"dimension": "memory", "unit": "1Gi"}))
    return objects


def _pod(name: str, resource: str, init: int = 0, sidecar: int = 0, app: int = 1,
         sidecar_first: bool = False) -> dict[str, Any]:
    inits = []
    if init:
        inits.append(b.container("setup", limits={resource: init}))
    if sidecar:
        side = b.container("proxy", limits={resource: sidecar}, restart_policy="Always")
        inits.insert(0 if sidecar_first else len(inits), side)
    return b.pod(name, containers=[b.container("main", limits={resource: app})], init_containers=inits)


def test_plain_extended_resource_init_and_app_count_once() -> None:
    """`nvidia.com/gpu` (no class): an init container of 1 and an app container of 1 need 1 GPU
    (PodRequests' max), so the pod fits a 1-GPU node and a second 1-GPU pod then does not."""
    scheduler = _scheduler()
    objects = [b.node("n", gpus=1), _pod("p", "nvidia.com/gpu", init=1), _pod("q", "nvidia.com/gpu")]
    lines = last_attempts(scheduler, objects)
    assert lines["p"][0] == "n", lines["p"][2]
    assert lines["q"][0] is None and "Insufficient nvidia.com/gpu" in lines["q"][2], lines["q"]


def test_class_init_container_device_is_reused_by_the_app_container() -> None:
    """A 1-GPU class init container and a 1-GPU app container hold one GPU, as the kubelet
    reuses the finished init container's device for the app container: the pod fits a 1-GPU
    node, both containers are assigned that GPU, and no second pod gets it."""
    scheduler = _scheduler()
    lines = last_attempts(scheduler, [*_cluster(1), _pod("p", GPU, init=1), _pod("q", GPU)])
    assert lines["p"][0] == "n", lines["p"][2]
    granted = _devices(lines["p"])
    assert granted["setup"] == granted["main"] and len(granted["main"]) == 1, granted
    assert lines["q"][0] is None and f"Insufficient {GPU}" in lines["q"][2], lines["q"]


@pytest.mark.parametrize("batch", [True, False])
def test_class_init_container_charge_is_the_larger_of_init_and_app(batch: bool) -> None:
    """Init 2, app 1 on a 3-GPU node: the pod holds 2 (the app reuses one of the init's GPUs),
    so a 1-GPU pod still fits and a further one does not — in the batch (columns) and the
    per-node forms alike."""
    scheduler = _scheduler(batch)
    lines = last_attempts(scheduler, [*_cluster(3), _pod("p", GPU, init=2), _pod("q", GPU), _pod("r", GPU)])
    assert lines["p"][0] == "n", lines["p"][2]
    granted = _devices(lines["p"])
    assert set(granted["main"]) <= set(granted["setup"]), granted
    assert lines["q"][0] == "n", lines["q"][2]
    assert not set(_devices(lines["q"])["main"]) & set(granted["setup"]), (granted, _devices(lines["q"]))
    assert lines["r"][0] is None, lines["r"]


def test_sidecar_device_is_never_reused() -> None:
    """Init 1, sidecar 1, app 1: the sidecar reuses the finished init's GPU (kubelet order) and
    keeps it; the app needs its own: 2 GPUs (PodRequests: max(1, 1+1)). On a 1-GPU node it does
    not fit; on a 2-GPU node the app's GPU is not the sidecar's."""
    lines = last_attempts(_scheduler(), [*_cluster(1), _pod("p", GPU, init=1, sidecar=1)])
    assert lines["p"][0] is None and f"Insufficient {GPU}" in lines["p"][2], lines["p"]
    lines = last_attempts(_scheduler(), [*_cluster(2), _pod("p", GPU, init=1, sidecar=1), _pod("q", GPU)])
    assert lines["p"][0] == "n", lines["p"][2]
    granted = _devices(lines["p"])
    assert granted["proxy"] != granted["main"], granted
    assert granted["setup"] == granted["proxy"], granted  # the kubelet's devicesToReuse hands it on
    assert lines["q"][0] is None, lines["q"]


def test_sidecar_started_before_an_init_container_is_held_through_it() -> None:
    """Sidecar 1 then init 1 then app 1: the sidecar runs beside the init container and the app
    (PodRequests: max(1+1, 1+1) = 2); the app reuses the init's GPU."""
    lines = last_attempts(_scheduler(), [*_cluster(2), _pod("p", GPU, init=1, sidecar=1, sidecar_first=True),
                                _pod("q", GPU)])
    assert lines["p"][0] == "n", lines["p"][2]
    granted = _devices(lines["p"])
    assert granted["setup"] == granted["main"] != granted["proxy"], granted
    assert lines["q"][0] is None, lines["q"]


def test_shared_slices_of_init_and_app_on_one_device_charge_the_larger() -> None:
    """Slices: init 6Gi and app 6Gi of a 1Gi-unit class on one 8Gi GPU: the init container is
    done before the app starts, so the pod holds 6Gi (the kubelet holds 6 slots), not 12Gi: it
    fits, and a pod asking for 2Gi more fits beside it, one asking for 3Gi does not."""
    scheduler = _scheduler()
    lines = last_attempts(scheduler, [*_cluster(1, sharing=True), _pod("p", SLICE, init=6, app=6),
                             _pod("q", SLICE, app=2), _pod("r", SLICE, app=3)])
    assert lines["p"][0] == "n", lines["p"][2]
    assert lines["q"][0] == "n", lines["q"][2]
    assert lines["r"][0] is None, lines["r"]
    [use] = scheduler.state.ledger.use.values()
    assert scheduler.state.ledger.shared_use(use, "memory") == 8 * 2**30


@pytest.mark.parametrize("batch", [True, False])
def test_an_init_containers_slice_goes_where_the_larger_app_slice_can_reuse_it(batch: bool) -> None:
    """Two 8Gi GPUs, one with 2Gi held by another pod; a pod with a 6Gi init slice and a 7Gi app
    slice (PodRequests: 7). Tessera placed the init slice first, on the fuller GPU (6 + 2 = 8), so
    the app slice could not reuse it and went to the other GPU: the pod held 6 + 7 = 13Gi for
    its whole life and a 3Gi pod was refused, 6Gi stranded (the kubelet counts 7 slots for it).
    Both on the other GPU the pod holds 7Gi, as upstream counts it, and the 3Gi pod fits."""
    scheduler = _scheduler(batch)
    pod = b.pod("p", containers=[b.container("main", limits={SLICE: 7})],
                init_containers=[b.container("setup", limits={SLICE: 6})])
    lines = last_attempts(scheduler, [*_cluster(2, sharing=True), _pod("other", SLICE, app=2), pod,
                                      _pod("q", SLICE, app=3)])
    assert lines["p"][0] == "n", lines["p"][2]
    granted = _devices(lines["p"])
    assert granted["setup"] == granted["main"], granted
    assert lines["q"][0] == "n", lines["q"][2]
    used = [scheduler.state.ledger.shared_use(use, "memory") for use in scheduler.state.ledger.use.values()]
    assert sorted(used) == [5 * 2**30, 7 * 2**30], used


def test_ledger_rebuilt_from_the_annotation_charges_a_reused_device_once() -> None:
    """A bound pod whose init and app containers name the same GPU (what the planner writes, and
    what the kubelet gives) is charged once, with no DeviceConflict, and the node's other GPU
    stays free for another pod."""
    scheduler = _scheduler()
    notices = _bound_naming_one_gpu_twice(scheduler, _pod("p", GPU, init=1), "setup", "main")
    assert not [n for n in notices if n.reason == "DeviceConflict"], notices
    lines = last_attempts(scheduler, [_pod("q", GPU), _pod("r", GPU)])
    assert lines["q"][0] == "n", lines["q"][2]
    assert lines["r"][0] is None, lines["r"]


def test_agent_hands_each_container_what_the_scheduler_charged_in_kubelet_order() -> None:
    """The contract end to end: the planner's annotation for init 1 + sidecar 1 + app 1 (two
    GPUs), bound, then the kubelet's Allocate calls in its order (init, sidecar, app; one slot
    each): the agent serves the init container and the sidecar the same GPU (the kubelet hands the
    finished init's device on), the app the other one — the sidecar's GPU to no later container."""
    scheduler = _scheduler()
    lines = last_attempts(scheduler, [*_cluster(2), _pod("p", GPU, init=1, sidecar=1)])
    node, annotations, message = lines["p"]
    assert node == "n", message
    pod = _pod("p", GPU, init=1, sidecar=1)
    pod["spec"]["nodeName"] = "n"
    pod["metadata"]["annotations"] = annotations
    served: set[tuple[str, str, str]] = set()
    handed: dict[str, list[str]] = {}
    for container in ("setup", "proxy", "main"):
        allocation = find_allocation([pod], "n", GPU, 1, None, served)
        assert allocation.container == container
        served.add(allocation.key)
        handed[container] = allocation.device_names
    assert handed == _devices(lines["p"])
    assert handed["setup"] == handed["proxy"] != handed["main"], handed
    assert pending_entries(pod, served) == []


def test_invariant_checker_tells_a_handed_on_device_from_a_shared_one() -> None:
    """The test harness's capacity check (what the e2e and property tests judge by) counts a
    device the init and app containers of one pod are given once, and still flags one GPU given
    whole to two containers of a pod that run at once, or to two pods."""
    def bound(name: str, containers: dict[str, str], init: list[str]) -> dict[str, Any]:
        def grant(device: str) -> list[dict[str, str]]:
            return [{"id": device.upper(), "device": device}]

        doc = {"version": 1, "containers": {c: {GPU: grant(d)} for c, d in containers.items()}}
        pod = b.pod(name, containers=[b.container(c, limits={GPU: 1}) for c in containers if c not in init],
                    init_containers=[b.container(c, limits={GPU: 1}) for c in init],
                    annotations={ann.DEVICES: orjson.dumps(doc).decode()}, node_name="n")
        return pod

    def violations(*pods: dict[str, Any]) -> list[str]:
        view = ClusterView(nodes={"n": b.node("n", gpus=2)}, pods={p["metadata"]["uid"]: p for p in pods})
        return [v.detail for v in check_capacity(view)]

    assert violations(bound("p", {"setup": "d0", "main": "d0"}, ["setup"])) == []
    assert violations(bound("p", {"main": "d0", "other": "d0"}, []))
    assert violations(bound("p", {"main": "d0"}, []), bound("q", {"main": "d0"}, []))


def test_one_gpu_named_whole_for_two_containers_that_run_together_is_a_device_conflict() -> None:
    """A bound pod whose annotation (hand-written: the planner never does it) gives one GPU whole
    to its sidecar and its app container, which run at the same time: the pod is charged the GPU
    once (no other pod can get it), but the pod is told, with a DeviceConflict Event naming the
    two containers, since the kubelet would hand that GPU to both. An init container and the app
    container sharing one (handed on) stays silent: see the test above."""
    scheduler = _scheduler()
    notices = [n for n in _bound_naming_one_gpu_twice(scheduler, _pod("p", GPU, sidecar=1), "proxy", "main")
               if n.reason == "DeviceConflict"]
    assert len(notices) == 1, notices
    first = sorted(scheduler.state.devices)[0]
    assert first in notices[0].message and "proxy" in notices[0].message and "main" in notices[0].message
    lines = last_attempts(scheduler, [_pod("q", GPU), _pod("r", GPU)])
    assert lines["q"][0] == "n", lines["q"][2]
    assert lines["r"][0] is None, lines["r"]


def _bound_naming_one_gpu_twice(scheduler: Scheduler, pod: dict[str, Any], first: str, second: str) -> list[Notice]:
    """`pod` bound to node n of a 2-GPU cluster with an annotation giving containers `first` and
    `second` the cluster's first GPU whole; the notices its arrival raised."""
    last_attempts(scheduler, _cluster(2))
    device = sorted(scheduler.state.devices)[0]
    grant = [{"id": scheduler.state.devices[device].device_id, "device": device}]
    doc = {"version": 1, "containers": {first: {GPU: grant}, second: {GPU: grant}}}
    pod["spec"]["nodeName"] = "n"
    pod["metadata"]["annotations"] = {ann.DEVICES: orjson.dumps(doc).decode()}
    return scheduler.apply("ADDED", pod, 0.0)


def _mixed(name: str, init: tuple[str, int] | None = None, sidecar: tuple[str, int] | None = None,
           app: tuple[str, int] | None = None, sidecar_first: bool = False) -> dict[str, Any]:
    """A pod whose plain init container ("setup"), sidecar ("proxy") and app container ("main")
    each ask for (resource, amount) or nothing: whole GPUs of one class, slices of another."""
    inits = [b.container("setup", limits={init[0]: init[1]})] if init else []
    if sidecar:
        side = b.container("proxy", limits={sidecar[0]: sidecar[1]}, restart_policy="Always")
        inits.insert(0 if sidecar_first else len(inits), side)
    return b.pod(name, containers=[b.container("main", limits={app[0]: app[1]} if app else None)],
                 init_containers=inits)


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("later", ["sidecar", "app"])
def test_a_slice_after_a_whole_init_container_takes_a_gpu_the_init_container_had(batch: bool, later: str) -> None:
    """A 2-GPU plain init container, then a sidecar (or an app container) asking a 2Gi slice of a
    shared class, on a 2-GPU node: the init container has finished and given its GPUs back before
    the slice's container starts (the kubelet counts 2 slots of the one class, 2 of the other),
    so the pod fits (PodRequests: 2 GPUs of one class, 2Gi of the other, never together). Tessera
    refused it (`Insufficient class.tessera.dev/v100-mem`): a slice never went on a GPU the pod
    held whole. The slice goes on one of the init container's GPUs, the pod holds the two GPUs
    whole, and no other pod gets either, nor a slice of one."""
    scheduler = _scheduler(batch)
    slice_at = {later: (SLICE, 2)}
    pod = _mixed("p", init=(GPU, 2), sidecar=slice_at.get("sidecar"), app=slice_at.get("app"))
    lines = last_attempts(scheduler, [*_cluster(2, sharing=True), pod, _pod("q", SLICE, app=1), _pod("r", GPU)])
    assert lines["p"][0] == "n", lines["p"][2]
    granted = _devices(lines["p"])
    holder = "proxy" if later == "sidecar" else "main"
    assert len(granted["setup"]) == 2 and len(granted[holder]) == 1 and granted[holder][0] in granted["setup"], granted
    assert lines["q"][0] is None and lines["r"][0] is None, (lines["q"], lines["r"])
    uses = scheduler.state.ledger.use
    assert sorted(uses) == sorted(granted["setup"]) and all(use.exclusive == {pod["metadata"]["uid"]}
                                                            and not use.shared for use in uses.values()), uses


@pytest.mark.parametrize("batch", [True, False])
def test_a_slice_init_container_before_a_whole_app_container_takes_its_gpu(batch: bool) -> None:
    """The other order: a plain init container's 6Gi slice, then an app container asking a whole
    GPU, on a 1-GPU node: the slice is done before the app starts; the pod fits, both on the GPU,
    held whole."""
    scheduler = _scheduler(batch)
    lines = last_attempts(scheduler, [*_cluster(1, sharing=True), _mixed("p", init=(SLICE, 6), app=(GPU, 1)),
                                      _pod("q", SLICE, app=1)])
    assert lines["p"][0] == "n", lines["p"][2]
    granted = _devices(lines["p"])
    assert granted["setup"] == granted["main"] and len(granted["main"]) == 1, granted
    assert lines["q"][0] is None, lines["q"]


@pytest.mark.parametrize("batch", [True, False])
def test_a_sidecar_slice_started_before_a_whole_init_container_never_shares_its_gpu(batch: bool) -> None:
    """A sidecar's 2Gi slice started before a 2-GPU init container runs beside it: it may not go
    on either of the init container's GPUs (the kubelet would hand one GPU to two running
    containers). On a 2-GPU node the pod does not fit; on a 3-GPU node the slice is on the third."""
    pod = _mixed("p", init=(GPU, 2), sidecar=(SLICE, 2), sidecar_first=True)
    lines = last_attempts(_scheduler(batch), [*_cluster(2, sharing=True), pod])
    assert lines["p"][0] is None and f"Insufficient {SLICE}" in lines["p"][2], lines["p"]
    lines = last_attempts(_scheduler(batch), [*_cluster(3, sharing=True), pod])
    assert lines["p"][0] == "n", lines["p"][2]
    granted = _devices(lines["p"])
    assert len(granted["setup"]) == 2 and not set(granted["proxy"]) & set(granted["setup"]), granted


def test_a_slice_beside_a_whole_gpu_of_a_later_init_container_is_never_planned_on_it() -> None:
    """Init 1 whole, then a sidecar slice, then a second init container of 1 whole GPU, on a
    2-GPU node: the sidecar may take the first init container's GPU, and the second init
    container, running beside the sidecar, must then take the other GPU (the planner places whole
    GPUs first; the slice must not land on the GPU the second one reuses)."""
    pod = b.pod("p", containers=[b.container("main")],
                init_containers=[b.container("setup", limits={GPU: 1}),
                                 b.container("proxy", limits={SLICE: 2}, restart_policy="Always"),
                                 b.container("later", limits={GPU: 1})])
    lines = last_attempts(_scheduler(), [*_cluster(2, sharing=True), pod])
    assert lines["p"][0] == "n", lines["p"][2]
    granted = _devices(lines["p"])
    assert granted["proxy"] != granted["later"], granted


def test_agent_serves_a_sidecar_slice_on_the_gpu_its_init_container_had() -> None:
    """The planner's annotation for a 2-GPU init container and a sidecar's 2Gi slice on one of
    its GPUs, bound, then the kubelet's Allocate calls in its order (2 slots of the whole class,
    2 of the slice class): the agent serves both, and the capacity check passes."""
    from scheduler.agent.allocate import check_shared_capacity

    lines = last_attempts(_scheduler(), [*_cluster(2, sharing=True), _mixed("p", init=(GPU, 2), sidecar=(SLICE, 2))])
    node, annotations, message = lines["p"]
    assert node == "n", message
    pod = _mixed("p", init=(GPU, 2), sidecar=(SLICE, 2))
    pod["spec"]["nodeName"] = "n"
    pod["metadata"]["annotations"] = annotations
    served: set[tuple[str, str, str]] = set()
    handed: dict[str, list[str]] = {}
    for container, resource, slots, unit in (("setup", GPU, 2, None), ("proxy", SLICE, 2, 2**30)):
        allocation = find_allocation([pod], "n", resource, slots, unit, served)
        assert allocation.container == container
        check_shared_capacity([pod], "n", allocation, {g.device_id: {"memory": 8 * 2**30} for g in allocation.grants},
                              lambda name: "memory" if name == SLICE else "")
        served.add(allocation.key)
        handed[container] = allocation.device_names
    assert handed == _devices(lines["p"]) and handed["proxy"][0] in handed["setup"], handed
    assert pending_entries(pod, served) == []


@pytest.mark.parametrize("batch", [True, False])
def test_a_whole_gpu_of_an_init_container_goes_to_a_later_container_of_another_class(batch: bool) -> None:
    """Two exclusive classes selecting the same GPUs (a per-model default class beside an admin's
    class): a plain init container asking one, the app container the other, on a 1-GPU node. The
    kubelet counts one slot of each (its devicesToReuse is per resource name, its slots too), and
    the init container is done before the app starts: the pod fits, both containers are given
    the GPU, held once. Tessera handed a finished init container's GPU on only under the same
    resource name and refused the pod. A sidecar of the other class started before the init
    container still needs its own GPU."""
    other = "class.tessera.dev/v100-other"
    cluster = [*_cluster(1), b.resource_class("v100-other", match_labels={"model": "V100"})]
    scheduler = _scheduler(batch)
    lines = last_attempts(scheduler, [*cluster, _mixed("p", init=(GPU, 1), app=(other, 1)), _pod("q", GPU)])
    assert lines["p"][0] == "n", lines["p"][2]
    granted = _devices(lines["p"])
    assert granted["setup"] == granted["main"] and len(granted["main"]) == 1, granted
    assert lines["q"][0] is None, lines["q"]
    lines = last_attempts(_scheduler(batch), [*cluster, _mixed("p", init=(GPU, 1), sidecar=(other, 1),
                                                               sidecar_first=True)])
    assert lines["p"][0] is None, lines["p"]


def _bound_with(scheduler: Scheduler, pod: dict[str, Any], doc: dict[str, Any]) -> list[Notice]:
    """`pod` bound to node n with `tessera.dev/devices` `doc`; the notices its arrival raised."""
    pod["spec"]["nodeName"] = "n"
    pod["metadata"]["annotations"] = {ann.DEVICES: orjson.dumps(doc).decode()}
    return scheduler.apply("ADDED", pod, 0.0)


@pytest.mark.parametrize("sidecar_first", [False, True])
def test_a_gpu_whole_in_one_container_and_sliced_in_another_is_a_conflict_only_if_they_run_together(
        sidecar_first: bool) -> None:
    """A bound pod (a restart's listing) whose init container has GPU 0 whole and whose sidecar a
    2Gi slice of it: started after the init container (what the planner writes), it is held once,
    whole, with no DeviceConflict, and no other pod gets the GPU nor a slice of it. Started before
    (a hand-written annotation: the kubelet would hand the GPU to both while they run together),
    the pod is told with a DeviceConflict naming both containers, as for a GPU given whole to two
    such containers; it was silent."""
    scheduler = _scheduler()
    last_attempts(scheduler, _cluster(2, sharing=True))
    device = sorted(scheduler.state.devices)[0]
    device_id = scheduler.state.devices[device].device_id
    doc = {"version": 1, "containers": {
        "setup": {GPU: [{"id": device_id, "device": device}]},
        "proxy": {SLICE: [{"id": device_id, "device": device, "amount": "2Gi", "dimension": "memory"}]}}}
    notices = [n for n in _bound_with(scheduler, _mixed("p", init=(GPU, 1), sidecar=(SLICE, 2),
                                                        sidecar_first=sidecar_first), doc)
               if n.reason == "DeviceConflict"]
    if sidecar_first:
        assert len(notices) == 1, notices
        assert device in notices[0].message and "setup" in notices[0].message and "proxy" in notices[0].message
    else:
        assert notices == [], notices
    use = scheduler.state.ledger.use[device]
    assert len(use.exclusive) == 1 and not use.shared, use
    lines = last_attempts(scheduler, [_pod("q", SLICE, app=1), _pod("r", GPU), _pod("s", GPU)])
    assert lines["q"][0] == "n" and device not in _devices(lines["q"])["main"], lines["q"]
    assert lines["r"][0] is None and lines["s"][0] is None, (lines["r"], lines["s"])


def test_agent_refuses_a_slice_of_a_gpu_its_pod_has_whole_while_another_pod_holds_a_slice_of_it() -> None:
    """The agent's last line of defence agrees with the pod's hold: a pod whose init container has
    GPU 0 whole and whose sidecar a slice of it holds GPU 0 whole, so another live pod's slice
    of GPU 0 (a late Binding of a deposed leader) excludes it at the sidecar's call too — not only
    at the init container's (the agent compared the call's own slice with the other's slice, found
    room, and served it)."""
    from scheduler.agent.allocate import AllocationError

    def annotated(pod: dict[str, Any], doc: dict[str, Any], phase: str) -> dict[str, Any]:
        pod["spec"]["nodeName"] = "n"
        pod["metadata"]["annotations"] = {ann.DEVICES: orjson.dumps(doc).decode(), ann.PHASE: phase}
        pod["status"] = {"phase": "Running" if phase == "Allocated" else "Pending"}
        return pod

    whole = {"id": "GPU-0", "device": "n.gpu-0"}
    piece = {**whole, "amount": "2Gi", "dimension": "memory"}
    other = annotated(_pod("q", SLICE, app=2), {"version": 1, "containers": {"main": {SLICE: [piece]}}}, "Allocated")
    pod = annotated(_mixed("p", init=(GPU, 1), sidecar=(SLICE, 2)),
                    {"version": 1, "containers": {"setup": {GPU: [whole]}, "proxy": {SLICE: [piece]}}},
                    ann.PHASE_ALLOCATING)
    served = {(pod["metadata"]["uid"], "setup", GPU)}
    with pytest.raises(AllocationError, match=r"GPU-0 is also assigned to default/q"):
        find_allocation([other, pod], "n", SLICE, 2, 2**30, served)
    alone = find_allocation([pod], "n", SLICE, 2, 2**30, served)  # without the other pod: served
    assert alone.container == "proxy"
