"""Deleted ExtendedResources still count while a pod holds them (never double-allocate a GPU).

Regression for the fault-suite failure `node-allocatable: v100-000: nvidia.com/gpu: 5 used > 4`:
a class pod was assumed on device D, every ExtendedResource of the node was then deleted (D became
a cordoned "ghost" because a pod held it), and the class pod's Binding came back through the
watch. Re-placing the pod from its annotation first released the assumption — the ghost's last
holder was gone for an instant, so the ghost was dropped — and then charged D again, but D was no
longer a known device, so it no longer counted against the node's `nvidia.com/gpu: 4`. A plain
1-GPU pod then got the GPU the class pod still held.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from scheduler.view.cluster import build_view
from tests.helpers import BINPACK, Run, config

CLASS = "class.tessera.dev/v100"


def _scheduler() -> Scheduler:
    scheduler = Scheduler(config("config/binpack.yaml"))
    for obj in [b.node("n", gpus=4), *(b.device("n", i) for i in range(4)),
                b.resource_class("v100", match_labels={"model": "V100"})]:
        scheduler.apply("ADDED", obj, 0.0)
    return scheduler


def _schedule(scheduler: Scheduler, pod: dict[str, Any]) -> Attempt:
    scheduler.apply("ADDED", pod, 0.0)
    attempts = scheduler.schedule_next(0.0)
    assert attempts is not None and len(attempts) == 1
    return attempts[0]


def _bound(pod: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
    """The pod as the apiserver returns it after our Binding (node and annotations applied)."""
    out = copy.deepcopy(pod)
    out["spec"]["nodeName"] = attempt.node
    out["metadata"]["annotations"] = {**out["metadata"].get("annotations", {}), **attempt.annotations}
    out["metadata"]["resourceVersion"] = "100"
    return out


def _used_gpus(scheduler: Scheduler) -> int:
    return scheduler.state.nodes["n"].used("nvidia.com/gpu")


def test_a_bound_class_pod_keeps_its_deleted_device_counted_against_the_node() -> None:
    scheduler = _scheduler()
    plain = b.pod("plain", limits={"nvidia.com/gpu": 3})
    assert _schedule(scheduler, plain).node == "n"
    scheduler.apply("MODIFIED", {**plain, "spec": {**plain["spec"], "nodeName": "n"}}, 0.0)
    cls_pod = b.pod("cls", limits={CLASS: 1})
    placed = _schedule(scheduler, cls_pod)
    assert placed.node == "n" and ann.DEVICES in placed.annotations
    assert _used_gpus(scheduler) == 4

    # the node's devices are deleted while the class pod's Binding is in flight ...
    for i in range(4):
        scheduler.apply("DELETED", b.device("n", i), 0.0)
    assert _used_gpus(scheduler) == 4
    # ... and then the Binding comes back through the watch
    scheduler.apply("MODIFIED", _bound(cls_pod, placed), 0.0)
    assert _used_gpus(scheduler) == 4

    late = _schedule(scheduler, b.pod("late", limits={"nvidia.com/gpu": 1}))
    assert late.node is None
    assert late.message == ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
                            " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_the_ghost_is_released_when_its_holder_is_gone() -> None:
    scheduler = _scheduler()
    cls_pod = b.pod("cls", limits={CLASS: 1})
    placed = _schedule(scheduler, cls_pod)
    for i in range(4):
        scheduler.apply("DELETED", b.device("n", i), 0.0)
    bound = _bound(cls_pod, placed)
    scheduler.apply("MODIFIED", bound, 0.0)
    assert _used_gpus(scheduler) == 1
    scheduler.apply("DELETED", bound, 0.0)
    assert _used_gpus(scheduler) == 0
    assert scheduler.state.devices == {}
    assert _schedule(scheduler, b.pod("four", limits={"nvidia.com/gpu": 4})).node == "n"


def test_a_bound_pod_seen_before_its_device_counts_once_the_device_arrives() -> None:
    """After a restart pods may be listed before ExtendedResources: the count must catch up."""
    scheduler = Scheduler(config("config/binpack.yaml"))
    scheduler.apply("ADDED", b.node("n", gpus=4), 0.0)
    scheduler.apply("ADDED", b.resource_class("v100", match_labels={"model": "V100"}), 0.0)
    device = b.device("n", 0)
    grant = {"main": {CLASS: (ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], None),)}}
    holder = b.pod("holder", limits={CLASS: 1}, node_name="n",
                   annotations={ann.DEVICES: ann.encode_devices(grant), ann.PHASE: ann.PHASE_ALLOCATED})
    scheduler.apply("ADDED", holder, 0.0)
    for i in range(4):
        scheduler.apply("ADDED", b.device("n", i), 0.0)
    assert _used_gpus(scheduler) == 1
    assert _schedule(scheduler, b.pod("three", limits={"nvidia.com/gpu": 3})).node == "n"
    assert _schedule(scheduler, b.pod("one-more", limits={"nvidia.com/gpu": 1})).node is None


def _holder_of(index: int) -> dict[str, Any]:
    device = b.device("n", index)
    grant = {"main": {CLASS: (ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], None),)}}
    return b.pod("holder", limits={CLASS: 1}, node_name="n",
                 annotations={ann.DEVICES: ann.encode_devices(grant), ann.PHASE: ann.PHASE_ALLOCATED})


def test_a_bound_pod_naming_a_device_deleted_before_its_holder_was_seen_still_counts() -> None:
    """Found by bench.soak (`node-allocatable: v100-010: nvidia.com/gpu: 5 used > 4`): a replica
    that took over after a kill saw device D deleted while it knew no holder of D (so D was simply
    forgotten), and then the Binding of D's holder, made by the killed leader, came back through
    the watch. The holder still has the GPU: it must count against the node, as a ghost, until
    the holder is gone."""
    scheduler = _scheduler()
    scheduler.apply("DELETED", b.device("n", 0), 0.0)
    holder = _holder_of(0)
    scheduler.apply("ADDED", holder, 0.0)
    assert _used_gpus(scheduler) == 1
    assert _schedule(scheduler, b.pod("four", limits={"nvidia.com/gpu": 4})).node is None
    scheduler.apply("DELETED", holder, 0.0)
    assert _used_gpus(scheduler) == 0
    assert sorted(scheduler.state.devices) == sorted(b.device("n", i)["metadata"]["name"] for i in range(1, 4))


def test_a_bound_pod_naming_a_device_never_seen_counts_on_its_node() -> None:
    """A replica that starts after D was deleted lists the holder naming a device it never saw."""
    scheduler = Scheduler(config("config/binpack.yaml"))
    for obj in [b.node("n", gpus=4), *(b.device("n", i) for i in range(1, 4)),
                b.resource_class("v100", match_labels={"model": "V100"}), _holder_of(0)]:
        scheduler.apply("ADDED", obj, 0.0)
    assert _used_gpus(scheduler) == 1
    assert _schedule(scheduler, b.pod("four", limits={"nvidia.com/gpu": 4})).node is None
    assert _schedule(scheduler, b.pod("three", limits={"nvidia.com/gpu": 3})).node == "n"


def test_a_holder_listed_before_any_device_keeps_its_deleted_device_counted() -> None:
    """After a restart pods may be listed before ExtendedResources, and the holder's device may
    be gone from that list (found by bench.soak, again `5 used > 4`): the ghost is made before
    the node's other devices are known, and still counts once they are."""
    scheduler = Scheduler(config("config/binpack.yaml"))
    for obj in [b.node("n", gpus=4), b.resource_class("v100", match_labels={"model": "V100"}), _holder_of(0),
                *(b.device("n", i) for i in range(1, 4))]:
        scheduler.apply("ADDED", obj, 0.0)
    assert _used_gpus(scheduler) == 1
    assert _schedule(scheduler, b.pod("four", limits={"nvidia.com/gpu": 4})).node is None
    assert _schedule(scheduler, b.pod("three", limits={"nvidia.com/gpu": 3})).node == "n"


def test_a_holder_on_a_node_without_any_device_left_counts_as_a_gpu() -> None:
    scheduler = Scheduler(config("config/binpack.yaml"))
    for obj in [b.node("n", gpus=4), b.resource_class("v100", match_labels={"model": "V100"}), _holder_of(0)]:
        scheduler.apply("ADDED", obj, 0.0)
    assert _used_gpus(scheduler) == 1
    assert _schedule(scheduler, b.pod("four", limits={"nvidia.com/gpu": 4})).node is None


# --- one physical GPU under two names, or moving node (from a review of the ledger) -------------

def _device_of(run: Run, pod: str) -> tuple[str, str]:
    attempt = run.last(pod)
    assert attempt.node is not None, attempt.message
    containers = ann.decode_devices(attempt.annotations[ann.DEVICES])
    grant = next(g for by_resource in containers.values() for grants in by_resource.values() for g in grants)
    return grant.device, grant.device_id


def _pod_object(run: Run, name: str) -> dict[str, Any]:
    """A copy of the pod's object as the replay last saw it: to edit and feed back, or to list
    in a restart."""
    return copy.deepcopy(run.replay.pods[run.state.pod_by_key(f"default/{name}").uid])


def _one_of_two_gpus_held() -> tuple[Run, dict[str, Any]]:
    """Node n with two V100 devices and their class; pod p holds one: the run and that device's object."""
    run = Run(config(BINPACK))
    devices = [b.device("n", i) for i in range(2)]
    run.add(b.node("n", gpus=2), *devices, b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("p", limits={CLASS: 1}))
    held_name, held_id = _device_of(run, "p")
    held = next(d for d in devices if d["metadata"]["name"] == held_name)
    assert held["spec"]["deviceID"] == held_id
    return run, held


def _renamed(device: dict[str, Any], name: str) -> dict[str, Any]:
    again = copy.deepcopy(device)
    again["metadata"].update(name=name, uid=f"{name}-uid")
    return again


def test_one_device_id_under_two_names_is_given_to_no_pod() -> None:
    """The ledger is keyed by object name; the node agent hands out GPUs by deviceID. Two objects
    naming one GPU (a hand-made one, a change of the agent's naming: it creates new names before it
    deletes old ones) gave that GPU to two pods. Neither can be trusted: both wait, and it is said."""
    run = Run(config(BINPACK))
    d0 = b.device("n", 0)
    run.add(b.node("n", gpus=3), d0, _renamed(d0, "n.renamed"), b.device("n", 1),
            b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("p", limits={CLASS: 1}), b.pod("q", limits={CLASS: 1}))
    placed = [_device_of(run, name)[1] for name in ("p", "q") if run.node_of(name) is not None]
    assert placed == [b.device("n", 1)["spec"]["deviceID"]]
    assert any(f"deviceID {d0['spec']['deviceID']}" in n and "n.renamed" in n for n in run.notices())
    [node] = build_view(run.scheduler, source="simulate", now=0.0).nodes
    renamed = next(gpu for gpu in node.gpus if gpu.device == "n.renamed")
    assert renamed.reason == (f"deviceID {d0['spec']['deviceID']} is also named by {d0['metadata']['name']}: "
                              "neither is given to a pod until one is gone")


def test_a_held_device_published_again_under_a_new_name_is_not_handed_out_again() -> None:
    run, old = _one_of_two_gpus_held()
    held_id = old["spec"]["deviceID"]
    run.feed(b.event("ADDED", _renamed(old, "n.0-renamed")), b.event("DELETED", old))  # sorts first
    run.add(b.pod("q", limits={CLASS: 1}))
    assert _device_of(run, "q")[1] != held_id  # q gets the other GPU
    run.add(b.pod("r", limits={CLASS: 1}))
    assert run.node_of("r") is None  # the renamed one is p's until p is gone


def test_a_held_device_moving_to_another_node_keeps_counting_where_its_holder_runs() -> None:
    run = Run(config(BINPACK))
    device = b.device("a", 0)
    run.add(b.node("a", gpus=1), b.node("b", gpus=1), device, b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("p", limits={CLASS: 1}))
    assert run.node_of("p") == "a"
    moved = copy.deepcopy(device)
    moved["spec"]["nodeName"] = "b"
    moved["metadata"]["uid"] = "new-uid"
    run.feed(b.event("DELETED", device), b.event("ADDED", moved))
    run.add(b.pod("q", limits={"nvidia.com/gpu": 1}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}}))
    assert run.node_of("q") is None  # a's only GPU is p's
    assert any("DeviceMovedWhileHeld" in n or "now names node b" in n for n in run.notices())
    finished = _pod_object(run, "p")
    finished["status"]["phase"] = "Succeeded"
    run.feed(b.event("MODIFIED", finished))  # released: the object is taken in where it now is
    name = device["metadata"]["name"]
    assert run.state.devices[name].node_name == "b" and not run.state.ledger.is_ghost(name)
    assert run.node_of("q") == "a"  # a's GPU is free again (q was retried on the release)


def test_a_late_deleted_event_of_an_older_device_object_does_not_remove_its_successor() -> None:
    run = Run(config(BINPACK))
    device = b.device("n", 0)
    run.add(b.node("n", gpus=1), device, b.resource_class("v100", match_labels={"model": "V100"}))
    again = copy.deepcopy(device)
    again["metadata"]["uid"] = "uid-2"
    run.feed(b.event("ADDED", again), b.event("DELETED", device))
    assert device["metadata"]["name"] in run.state.devices


def test_a_dropped_ghost_no_longer_counts_as_a_matching_device() -> None:
    """A class change while a ghost was held re-indexed the ghost; dropping it later left it in
    the class's matching devices (a class status saying 1 matching device of none)."""
    run = Run(config(BINPACK))
    device = b.device("n", 0)
    run.add(b.node("n", gpus=1), device, b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("p", limits={CLASS: 1}))
    run.feed(b.event("DELETED", device))
    run.add(b.resource_class("other", match_labels={"model": "V100"}))  # a class change while the ghost is held
    finished = _pod_object(run, "p")
    finished["status"]["phase"] = "Succeeded"
    run.feed(b.event("MODIFIED", finished))
    assert not run.state.devices
    assert {s.name: s.matching_devices for s in run.scheduler.class_statuses()} == {"other": 0, "v100": 0}


# --- a held GPU's identity is its deviceID (review findings, each a failing test first) ---------

def _held_ids(annotations: dict[str, str]) -> set[str]:
    decoded = ann.decode_devices(annotations[ann.DEVICES])
    return {grant.device_id for by_resource in decoded.values() for grants in by_resource.values() for grant in grants}


def test_after_a_restart_a_held_gpu_published_under_a_new_name_is_not_handed_out() -> None:
    """Live, the new name of a held GPU (same deviceID) is a duplicate of the held ghost; rebuilt
    from the holder's annotation after a restart, the ghost had no deviceID and the GPU went to a
    second pod."""
    device, other = b.device("n", 0), b.device("n", 1)
    cls, node = b.resource_class("v100", match_labels={"model": "V100"}), b.node("n", gpus=2)
    renamed = copy.deepcopy(device)
    renamed["metadata"]["name"], renamed["metadata"]["uid"] = "n.0-renamed", "uid-renamed"
    run = Run(config(BINPACK))
    run.add(node, device, cls, b.pod("p", limits={CLASS: 1}))
    run.feed(b.event("ADDED", renamed), b.event("DELETED", device), b.event("ADDED", other))
    bound = _pod_object(run, "p")
    held = _held_ids(bound["metadata"]["annotations"])
    for order in ((node, renamed, other, cls, bound), (node, bound, renamed, other, cls)):  # either listing first
        fresh = Scheduler(config(BINPACK))
        for obj in order:
            fresh.apply("ADDED", obj, 0.0)
        fresh.apply("ADDED", b.pod("r", limits={CLASS: 1}), 0.0)
        [attempt] = fresh.schedule_next(0.0) or []
        assert attempt.node == "n" and not _held_ids(attempt.annotations) & held


def test_after_a_restart_a_held_device_listed_on_another_node_counts_where_its_holder_runs() -> None:
    device = b.device("a", 0)
    cls = b.resource_class("v100", match_labels={"model": "V100"})
    node_a, node_b = b.node("a", gpus=1), b.node("b", gpus=1)
    run = Run(config(BINPACK))
    run.add(node_a, node_b, device, cls, b.pod("p", limits={CLASS: 1}))
    assert run.node_of("p") == "a"
    moved = copy.deepcopy(device)
    moved["spec"]["nodeName"], moved["metadata"]["uid"] = "b", "new-uid"
    run.feed(b.event("DELETED", device), b.event("ADDED", moved))
    assert run.state.nodes["a"].used("nvidia.com/gpu") == 1
    bound = _pod_object(run, "p")
    fresh = Scheduler(config(BINPACK))
    for obj in (node_a, node_b, moved, cls, bound):  # the device is listed before its holder
        fresh.apply("ADDED", obj, 0.0)
    assert fresh.state.nodes["a"].used("nvidia.com/gpu") == 1
    fresh.apply("ADDED", b.pod("q", limits={"nvidia.com/gpu": 1},
                               spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}}), 0.0)
    assert (fresh.schedule_next(0.0) or [])[0].node is None
    fresh.apply("DELETED", bound, 0.0)  # released: the object is taken in where it is now
    name = device["metadata"]["name"]
    assert fresh.state.devices[name].node_name == "b" and name not in fresh.state.nodes["a"].devices


def test_a_held_gpu_is_not_handed_out_again_after_its_object_changes_its_device_id() -> None:
    """The ledger charges by ExtendedResource name, the node agent hands GPUs out by deviceID: a
    held object that comes to name another GPU keeps counting as the one its holder has."""
    run = Run(config(BINPACK))
    first = b.device("n", 0)
    run.add(b.node("n", gpus=2), first, b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("p", limits={CLASS: 1}))
    held = _held_ids(run.last("p").annotations)
    changed = copy.deepcopy(first)
    changed["spec"]["deviceID"] = "GPU-other"
    again = copy.deepcopy(first)
    again["metadata"]["name"], again["metadata"]["uid"] = "n.second", "uid-second"
    run.feed(b.event("MODIFIED", changed), b.event("ADDED", again))
    assert any("DeviceIDChangedWhileHeld" in notice for notice in run.notices())
    run.add(b.pod("q", limits={CLASS: 1}))
    assert run.last("q").node is None or not _held_ids(run.last("q").annotations) & held
    bound = _pod_object(run, "p")
    fresh = Scheduler(config(BINPACK))  # a restart after the change: the same objects, listed afresh
    for obj in (b.node("n", gpus=2), changed, again, b.resource_class("v100", match_labels={"model": "V100"}), bound):
        fresh.apply("ADDED", obj, 0.0)
    fresh.apply("ADDED", b.pod("r", limits={CLASS: 1}), 0.0)
    [attempt] = fresh.schedule_next(0.0) or []
    assert attempt.node is None or not _held_ids(attempt.annotations) & held
    run.feed(b.event("DELETED", bound))
    assert run.state.devices[first["metadata"]["name"]].device_id == "GPU-other"  # taken in once released


# --- edits of a held device's object --------------------------------------------------------

def test_a_held_gpu_keeps_counting_under_its_resource_name_when_its_object_changes_it() -> None:
    """Class devices and plain `nvidia.com/gpu` requests share the node's count of the devices'
    resourceName. A held device whose object came to name another resourceName (edited, or
    deleted and created again: a node agent restarted with another `--resource-name`) stopped
    counting against `nvidia.com/gpu` at once, and a plain pod got the GPU its holder still has."""
    for recreated in (False, True):
        run, old = _one_of_two_gpus_held()
        held_name = old["metadata"]["name"]
        edited = copy.deepcopy(old)
        edited["spec"]["resourceName"] = "example.com/gpu"
        if recreated:
            edited["metadata"]["uid"] = "uid-again"
            run.feed(b.event("DELETED", old), b.event("ADDED", edited))
        else:
            run.feed(b.event("MODIFIED", edited))
        assert _used_gpus(run.scheduler) == 1
        assert any(n.startswith("ResourceNameChangedWhileHeld: ") and held_name in n for n in run.notices())
        run.add(b.pod("q", limits={"nvidia.com/gpu": 2}))
        assert run.node_of("q") is None  # one of the two GPUs is p's
        finished = _pod_object(run, "p")
        finished["status"]["phase"] = "Succeeded"
        run.feed(b.event("MODIFIED", finished))  # released: the object is taken in as it is now
        assert run.state.devices[held_name].resource_name == "example.com/gpu"
        assert not run.state.ledger.is_ghost(held_name)
        assert run.node_of("q") == "n"


def _restarted(*listed: dict[str, Any]) -> tuple[Scheduler, list[str]]:
    """A fresh core fed the objects in LIST order, as a restarted (or newly elected) replica is,
    and the notices it gave."""
    fresh = Scheduler(config(BINPACK))
    notices = [f"{n.reason}: {n.message}" for obj in listed for n in fresh.apply("ADDED", obj, 0.0)]
    return fresh, notices


def _plain_fits(scheduler: Scheduler, name: str, gpus: int) -> bool:
    scheduler.apply("ADDED", b.pod(name, limits={"nvidia.com/gpu": gpus}), 0.0)
    [attempt] = scheduler.schedule_next(0.0) or []
    return attempt.node == "n"


def test_a_held_gpu_keeps_its_resource_name_across_a_restart_after_its_object_changes_it() -> None:
    """Found by the adversarial trial (V2): a held GPU's object edited to another resourceName was
    counted under the old name while the replicas ran (`ResourceNameChangedWhileHeld`), but a
    restarted replica read the name from the object as it was then, so the node counted one GPU
    fewer in use and a plain pod got the GPU the holder still has (5 GPUs on a 4-GPU node). The
    holder's annotation records the name each device was counted under, so a replica rebuilt
    from a LIST, in either order, counts it there until the holder is gone."""
    run, old = _one_of_two_gpus_held()
    held_name = old["metadata"]["name"]
    other = next(b.device("n", i) for i in range(2) if b.device("n", i)["metadata"]["name"] != held_name)
    edited = copy.deepcopy(old)
    edited["spec"]["resourceName"] = "example.com/gpu"
    run.feed(b.event("MODIFIED", edited))
    assert any(n.startswith("ResourceNameChangedWhileHeld: ") for n in run.notices())
    bound = _pod_object(run, "p")
    node, cls = b.node("n", gpus=2), b.resource_class("v100", match_labels={"model": "V100"})
    for listed in ((node, edited, other, cls, bound), (node, bound, cls, edited, other),
                   (node, cls, other, bound, edited)):
        fresh, notices = _restarted(*listed)
        assert _used_gpus(fresh) == 1, listed
        assert fresh.state.ledger.is_ghost(held_name)
        assert [n for n in notices if n.startswith("ResourceNameChangedWhileHeld: ")] == [
            f"ResourceNameChangedWhileHeld: ExtendedResource {held_name} now names resourceName example.com/gpu, "
            "but a pod holds it as nvidia.com/gpu: it counts as nvidia.com/gpu on node n, given to no other pod, "
            "until released"]
        assert not _plain_fits(fresh, "q", 2)  # one of the two GPUs is p's
        assert _plain_fits(fresh, "r", 1)
        [view] = build_view(fresh, source="simulate", now=0.0).nodes  # `kubectl tessera nodes`: two rows
        assert [(gpu.device, gpu.state, gpu.resource) for gpu in view.gpus] == [
            (held_name, "ghost", "nvidia.com/gpu"), (other["metadata"]["name"], "counted", "nvidia.com/gpu")]
        fresh.apply("DELETED", bound, 0.0)  # released: the object is taken in as it is now
        assert fresh.state.devices[held_name].resource_name == "example.com/gpu"
        assert not fresh.state.ledger.is_ghost(held_name)


def test_a_resource_name_edited_while_no_replica_runs_is_counted_as_granted() -> None:
    """The same edit made while no replica watches (all of them down): the next one never saw the
    old name on the object, only in the holder's annotation, and counts the GPU there."""
    run, old = _one_of_two_gpus_held()
    held_name = old["metadata"]["name"]
    other = next(b.device("n", i) for i in range(2) if b.device("n", i)["metadata"]["name"] != held_name)
    edited = copy.deepcopy(old)
    edited["spec"]["resourceName"] = "example.com/gpu"
    bound = _pod_object(run, "p")
    node, cls = b.node("n", gpus=2), b.resource_class("v100", match_labels={"model": "V100"})
    for listed in ((node, edited, other, cls, bound), (node, bound, cls, edited, other)):
        fresh, _ = _restarted(*listed)
        assert _used_gpus(fresh) == 1
        assert not _plain_fits(fresh, "q", 2)
    [[[grant]]] = [list(by.values()) for by in ann.decode_devices(bound["metadata"]["annotations"][ann.DEVICES]).values()]
    assert grant.resource_name == "nvidia.com/gpu"  # what the Binding recorded: the pod is the record


def test_a_capacity_lowered_below_the_slices_held_leaves_no_room_live_or_after_a_restart() -> None:
    """Guard (passed at first): slices held over a capacity since lowered are not taken back, and
    nothing more of the device is given out, by slice or whole, nor to a ledger rebuilt from a LIST
    in either order."""
    node, device = b.node("n", gpus=1), b.device("n", 0, memory="16Gi")
    shared = b.resource_class("s", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"})
    run = Run(config(BINPACK))
    run.add(node, device, shared, b.resource_class("v100", match_labels={"model": "V100"}),
            b.pod("p", limits={"class.tessera.dev/s": 12}))
    lowered = copy.deepcopy(device)
    lowered["spec"]["capacity"]["memory"] = "8Gi"
    run.feed(b.event("MODIFIED", lowered))
    run.add(b.pod("q", limits={"class.tessera.dev/s": 1}), b.pod("r", limits={CLASS: 1}))
    assert run.node_of("q") is None and run.node_of("r") is None
    bound = _pod_object(run, "p")
    for order in ((node, lowered, shared, bound), (node, bound, shared, lowered)):
        fresh = Scheduler(config(BINPACK))
        for obj in order:
            fresh.apply("ADDED", obj, 0.0)
        fresh.apply("ADDED", b.pod("q", limits={"class.tessera.dev/s": 1}), 0.0)
        assert (fresh.schedule_next(0.0) or [])[0].node is None


def test_a_second_object_naming_a_held_gpu_is_given_to_no_pod_in_any_listing_order() -> None:
    """Guard (passed at first): another ExtendedResource with the held one's node and deviceID,
    created while the held one stays, is a duplicate live and in every order a restart lists them."""
    node, first, other = b.node("n", gpus=2), b.device("n", 0), b.device("n", 1)
    cls = b.resource_class("v100", match_labels={"model": "V100"})
    second = _renamed(first, "n.second")
    run = Run(config(BINPACK))
    run.add(node, first, cls, b.pod("p", limits={CLASS: 1}))  # p holds `first`, the only GPU yet
    run.add(second, other, b.pod("q", limits={CLASS: 1}), b.pod("r", limits={CLASS: 1}))
    assert [_device_of(run, name)[1] for name in ("q", "r") if run.node_of(name)] == [other["spec"]["deviceID"]]
    bound = _pod_object(run, "p")
    for listed in itertools.permutations((first, second, other, bound)):
        fresh = Scheduler(config(BINPACK))
        for obj in (node, cls, *listed):
            fresh.apply("ADDED", obj, 0.0)
        given: set[str] = set()
        for name in ("q", "r"):
            fresh.apply("ADDED", b.pod(name, limits={CLASS: 1}), 0.0)
            [attempt] = fresh.schedule_next(0.0) or []
            given |= _held_ids(attempt.annotations) if attempt.node else set()
        assert given == {other["spec"]["deviceID"]}, [obj["metadata"]["name"] for obj in listed]


def test_after_a_restart_a_held_gpu_listed_elsewhere_counts_under_its_own_resource_name() -> None:
    """Test first (found by tests/property/test_device_identity_edits.py): a restart that listed
    the holder before the devices made the held GPU a ghost named after the first device of its
    node to arrive (here an NPU), and kept that name when the GPU's own object came, listed on
    another node: the GPU no longer counted against the node's nvidia.com/gpu, and a plain pod got
    it. Listed the other way round, it counted."""
    node_a, node_b = b.node("a", gpus=1), b.node("b", gpus=1, extra={"example.com/npu": "1"})
    gpu, npu = b.device("b", 0), b.device("b", 1, model="NPU", resource_name="example.com/npu")
    cls = b.resource_class("v100", match_labels={"model": "V100"})
    run = Run(config(BINPACK))
    run.add(node_a, node_b, gpu, npu, cls, b.pod("p", limits={CLASS: 1}))
    assert run.node_of("p") == "b"
    moved = copy.deepcopy(gpu)
    moved["spec"]["nodeName"] = "a"
    run.feed(b.event("MODIFIED", moved))
    bound = _pod_object(run, "p")
    plain = b.pod("q", limits={"nvidia.com/gpu": 1}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "b"}})
    for listed in ((moved, npu, bound), (bound, moved, npu), (bound, npu, moved)):
        fresh = Scheduler(config(BINPACK))
        for obj in (node_a, node_b, cls, *listed):
            fresh.apply("ADDED", obj, 0.0)
        assert fresh.state.nodes["b"].used("nvidia.com/gpu") == 1, [obj["metadata"]["name"] for obj in listed]
        fresh.apply("ADDED", plain, 0.0)
        assert (fresh.schedule_next(0.0) or [])[0].node is None  # b's one GPU is p's


def test_a_device_held_only_in_slices_keeps_counting_against_the_node_once_deleted() -> None:
    """A deleted ExtendedResource held in slices (no pod has it whole) is a ghost as one held
    whole is: the slice holder still runs on the GPU, so a plain `nvidia.com/gpu` request never
    gets it. (Found by mutation: making only whole holds keep a deleted device left every replay
    and property test green.)"""
    scheduler = Scheduler(config("config/binpack.yaml"))
    for obj in [b.node("n", gpus=1), b.device("n", 0),
                b.resource_class("slice", match_labels={"model": "V100"},
                                 sharing={"dimension": "memory", "unit": "1Gi"})]:
        scheduler.apply("ADDED", obj, 0.0)
    sliced = b.pod("sliced", limits={"class.tessera.dev/slice": 8})
    placed = _schedule(scheduler, sliced)
    assert placed.node == "n"
    scheduler.apply("MODIFIED", _bound(sliced, placed), 0.0)
    assert _used_gpus(scheduler) == 1

    scheduler.apply("DELETED", b.device("n", 0), 0.0)
    assert _used_gpus(scheduler) == 1
    late = _schedule(scheduler, b.pod("plain", limits={"nvidia.com/gpu": 1}))
    assert late.node is None
    assert _used_gpus(scheduler) == 1

    # once the slice holder is gone, the GPU is free (for its count) again
    scheduler.apply("DELETED", _bound(sliced, placed), 0.0)
    assert _used_gpus(scheduler) == 0
