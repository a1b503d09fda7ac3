"""A GPU is never counted twice nor lost when a pod's devices are named under the resource name
the node's ExtendedResources carry themselves (`nvidia.com/gpu`).

Found in a new user's trial of `tessera dev-cluster`: a ResourceClass `any-gpu` with
`resourceName: nvidia.com/gpu` turned a plain `nvidia.com/gpu: 1` pod into a class request, the
pod was bound with one device in its `tessera.dev/devices` annotation under `nvidia.com/gpu`, and
once the class was deleted the pod counted twice against the node's `nvidia.com/gpu: 8`: its
request as a count and its device as busy (a 7-GPU pod then stayed Pending with `Insufficient
nvidia.com/gpu` next to 7 idle GPUs), also after a restart. The annotation is what the pod holds
(DESIGN §2 "Assigned devices"): its devices count, once, and its request of that name is theirs.
"""

from __future__ import annotations

from typing import Any

from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from scheduler.view.cluster import build_view
from tests.helpers import config

GPU = "nvidia.com/gpu"


def _device_name(index: int) -> str:
    return str(b.device("n", index)["metadata"]["name"])


def _holder(name: str = "p1", *, amount: Any = None, count: int = 1) -> dict[str, Any]:
    """A pod bound with device 0 named in its annotation under `nvidia.com/gpu` (as a class that
    owned that name gave it, whole or — `amount` — a slice of its memory)."""
    device = b.device("n", 0)
    grant = {"main": {GPU: (ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], amount,
                                            "memory" if amount is not None else ""),)}}
    return b.pod(name, limits={GPU: count}, node_name="n",
                 annotations={ann.DEVICES: ann.encode_devices(grant), ann.PHASE: ann.PHASE_ALLOCATED})


def _scheduler(*, devices_first: bool = True, holder: dict[str, Any] | None = None) -> Scheduler:
    """A node with 8 GPUs described by ExtendedResources of resourceName `nvidia.com/gpu`, and the
    holder; `devices_first=False` lists the pods before the devices, as a restart does (informer
    order: nodes, pods, ExtendedResources, classes)."""
    scheduler = Scheduler(config("config/binpack.yaml"))
    devices = [b.device("n", i, model="T4", memory="16Gi") for i in range(8)]
    pods = [holder or _holder()]
    for obj in [b.node("n", gpus=8), *(devices + pods if devices_first else pods + devices)]:
        scheduler.apply("ADDED", obj, 0.0)
    return scheduler


def _used(scheduler: Scheduler) -> int:
    return scheduler.state.nodes["n"].used(GPU)


def _place(scheduler: Scheduler, name: str, gpus: int) -> str | None:
    scheduler.apply("ADDED", b.pod(name, limits={GPU: gpus}), 0.0)
    attempts = scheduler.schedule_next(0.0)
    assert attempts is not None and len(attempts) == 1
    return attempts[0].node


def test_a_pod_holding_a_device_under_its_own_resource_name_counts_it_once() -> None:
    scheduler = _scheduler()
    assert _used(scheduler) == 1
    [node] = build_view(scheduler, source="simulate", now=0.0).nodes  # `kubectl tessera nodes` reads this
    assert (node.gpus_used, [gpu.holders[0].pod for gpu in node.gpus if gpu.holders]) == (1, ["default/p1"])
    assert _place(scheduler, "p7", 7) == "n"
    assert _place(scheduler, "one-more", 1) is None  # the holder's GPU is not given again


def test_after_a_restart_that_lists_the_pod_before_its_devices_it_still_counts_once() -> None:
    scheduler = _scheduler(devices_first=False)
    assert _used(scheduler) == 1
    assert _place(scheduler, "p7", 7) == "n"
    assert _place(scheduler, "one-more", 1) is None


def test_the_count_comes_back_whole_when_the_holder_ends() -> None:
    holder = _holder()
    scheduler = _scheduler(holder=holder)
    scheduler.apply("DELETED", holder, 0.0)
    assert _used(scheduler) == 0
    assert _place(scheduler, "p8", 8) == "n"


def test_a_slice_under_the_resource_name_counts_its_device_once() -> None:
    """A slice (4 units of a sharing class that owned `nvidia.com/gpu`) holds one GPU, not 4+1."""
    scheduler = _scheduler(holder=_holder(amount=4 * 2**30, count=4))
    assert _used(scheduler) == 1
    assert _place(scheduler, "p7", 7) == "n"
    assert _place(scheduler, "one-more", 1) is None


def test_a_partial_annotation_keeps_the_rest_of_the_request_counted() -> None:
    """Two GPUs asked, one named: the named one counts once and the other stays a count (fail
    closed: the device plugin may have given it)."""
    scheduler = _scheduler(holder=_holder(count=2))
    assert _used(scheduler) == 2
    assert _place(scheduler, "p6", 6) == "n"
    assert _place(scheduler, "one-more", 1) is None


def test_after_a_restart_a_device_named_only_once_its_object_arrives_still_counts_once() -> None:
    """Listed before its ExtendedResource, a held device counts as `nvidia.com/gpu` until its
    object names it (`amd.com/gpu` here): the holder's request of that name is then its device."""
    amd = "amd.com/gpu"
    device = b.device("n", 0, resource_name=amd)
    grant = {"main": {amd: (ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], None),)}}
    holder = b.pod("p1", limits={amd: 1}, node_name="n",
                   annotations={ann.DEVICES: ann.encode_devices(grant), ann.PHASE: ann.PHASE_ALLOCATED})
    scheduler = Scheduler(config("config/binpack.yaml"))
    for obj in [b.node("n", extra={amd: "8"}), holder, *(b.device("n", i, resource_name=amd) for i in range(8))]:
        scheduler.apply("ADDED", obj, 0.0)
    info = scheduler.state.nodes["n"]
    assert (info.used(amd), info.used(GPU)) == (1, 0)
    scheduler.apply("DELETED", holder, 0.0)
    assert (info.used(amd), info.used(GPU)) == (0, 0)


# --- a class that takes over the resourceName the devices carry themselves ---------------------

ANY_GPU = b.resource_class("any-gpu", match_labels={"model": "A100"}, resource_name=GPU)  # no T4 matches
TAKEN = ('spec.resourceName: Invalid value: "nvidia.com/gpu": ExtendedResources carry this resourceName '
         "as their own, so a plain request for it is a count of those devices; use a name of its own "
         "(without resourceName the class's is class.tessera.dev/any-gpu)")


def _apply(scheduler: Scheduler, *objects: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(n.kind, n.reason, n.message) for obj in objects for n in scheduler.apply("ADDED", obj, 0.0)]


def test_a_class_taking_over_the_devices_own_resource_name_is_not_valid_and_plain_requests_stay_counts() -> None:
    """The trial: `any-gpu` (resourceName nvidia.com/gpu, matching no T4) made a plain 1-GPU pod
    wait with `Insufficient nvidia.com/gpu` on a node with 8 free T4s, and no view named the
    class. The class is refused instead (Valid=False, with a Warning saying why), and plain
    requests stay counts of the node's GPUs."""
    scheduler = Scheduler(config("config/binpack.yaml"))
    _apply(scheduler, b.node("n", gpus=8), *(b.device("n", i, model="T4", memory="16Gi") for i in range(8)))
    assert _apply(scheduler, ANY_GPU) == [("ResourceClass", "InvalidResourceClass",
                                           f"ResourceClass any-gpu is not valid: {TAKEN}")]
    assert scheduler.state.class_status("any-gpu") == (False, TAKEN, 0, "InvalidSpec")
    assert _place(scheduler, "p1", 1) == "n"
    assert ann.DEVICES not in scheduler.state.pod_by_key("default/p1").meta.annotations  # type: ignore[union-attr]
    assert _used(scheduler) == 1


def test_the_verdict_follows_the_devices_whichever_came_first() -> None:
    """Listed before the node's devices (a restart), the class is judged again as they arrive,
    and is valid again once no device carries the name (on a node Tessera's agent serves, which
    does not advertise nvidia.com/gpu itself)."""
    for gpus in (8, 0):  # advertised by the node (a device plugin's count) or not
        scheduler = Scheduler(config("config/binpack.yaml"))
        _apply(scheduler, ANY_GPU, b.node("n", gpus=gpus, extra={"example.com/other": "1"}))
        devices = [b.device("n", i, model="A100", memory="80Gi") for i in range(2)]
        _apply(scheduler, *devices)
        assert scheduler.state.class_status("any-gpu") == (False, TAKEN, 0, "InvalidSpec"), gpus
        scheduler.apply("DELETED", devices[0], 0.0)
        assert scheduler.state.class_status("any-gpu")[0] is False, gpus
        scheduler.apply("DELETED", devices[1], 0.0)
        assert scheduler.state.class_status("any-gpu")[0] is (gpus == 0), gpus


def test_a_pod_bound_by_count_keeps_its_gpu_when_such_a_class_arrives() -> None:
    """The reverse: a pod holding a GPU by count (no annotation; the device plugin chose it)
    still holds one when a class names nvidia.com/gpu: no other pod is given more than the rest."""
    scheduler = Scheduler(config("config/binpack.yaml"))
    _apply(scheduler, b.node("n", gpus=8), *(b.device("n", i, model="A100", memory="80Gi") for i in range(8)),
           b.pod("counted", limits={GPU: 1}, node_name="n"), ANY_GPU)
    assert _used(scheduler) == 1
    assert _place(scheduler, "p7", 7) == "n"
    assert _place(scheduler, "one-more", 1) is None


def test_a_class_owning_the_name_and_a_holder_under_it_count_each_gpu_once_until_the_class_goes() -> None:
    """The trial's pod p1, bound while `any-gpu` owned the name: one GPU, with the class there
    (refused now) and after it is deleted."""
    scheduler = _scheduler()
    _apply(scheduler, ANY_GPU)
    assert _used(scheduler) == 1
    scheduler.apply("DELETED", ANY_GPU, 0.0)
    assert _used(scheduler) == 1
    assert _place(scheduler, "p7", 7) == "n"
