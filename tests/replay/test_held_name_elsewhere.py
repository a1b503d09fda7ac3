"""A pod holding a GPU by a device name the ledger keeps for another GPU still keeps that GPU.

The ledger keys holds by ExtendedResource name. Found by tests/property/test_listing_orders.py:
pod P1 on node a holds ExtendedResource `a0` (its GPU A); `a0` is edited to name node b and a new
deviceID M (a node agent restarted elsewhere) — held, so the core keeps it a ghost on a and parks
the new object; another actor then binds pod P2 on b to `a0` as the object reads now (GPU M on b).
The core charged P2 to the name `a0` — the ghost on node a — and nothing on b knew that GPU M was
taken: when `a0` was deleted and M published again under a new name `b-new`, `b-new` looked free
and went to the next pod, while P2 holds it. The same for a restarted process that lists both pods
(in any order) before or after the devices.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import orjson

from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from scheduler.view.cluster import build_view
from tests.helpers import BINPACK, config

CLASS = "class.tessera.dev/v100"
Obj = dict[str, Any]


def _er(name: str, node: str, device_id: str, uid: str) -> Obj:
    device = b.device(node, 0)
    device["metadata"].update(name=name, uid=uid, labels={"tessera.dev/node": node})
    device["spec"].update(nodeName=node, deviceID=device_id)
    return device


def _holder(name: str, node: str, device: str, device_id: str) -> Obj:
    grant = {"device": device, "id": device_id, "resourceName": "nvidia.com/gpu"}
    annotation = orjson.dumps({"containers": {"main": {CLASS: [grant]}}, "version": 1}).decode()
    return b.pod(name, scheduler="other", limits={CLASS: 1}, node_name=node, phase="Running",
                 annotations={ann.DEVICES: annotation})


# node b allocates 3 GPUs (b0, b1 and M): the count alone does not keep M from the next pod
BASE = [b.node("a", gpus=2), b.node("b", gpus=3), b.resource_class("v100", match_labels={"model": "V100"}),
        _er("a0", "a", "GPU-A", "u-a0"), _er("a1", "a", "GPU-A1", "u-a1"),
        _er("b0", "b", "GPU-B0", "u-b0"), _er("b1", "b", "GPU-B1", "u-b1")]
P1 = _holder("p1", "a", "a0", "GPU-A")
P2 = _holder("p2", "b", "a0", "GPU-M")  # a0 as its object reads after the move: node b, GPU M
MOVED = _er("a0", "b", "GPU-M", "u-a0")
REPUBLISHED = _er("b-new", "b", "GPU-M", "u-b-new")  # GPU M under a new name, a0 deleted


def _live_after_the_move() -> tuple[Scheduler, Obj]:
    """A live scheduler that saw P1 bound to a0, then a0 move to node b as GPU M (held, so parked),
    then P2 bound on b to a0 as it reads now; and the moved a0 as it saw it."""
    scheduler = Scheduler(config(BINPACK))
    for obj in [*BASE, P1]:
        scheduler.apply("ADDED", copy.deepcopy(obj), 0.0)
    moved = copy.deepcopy(MOVED)
    moved["metadata"]["resourceVersion"] = "20"
    scheduler.apply("MODIFIED", moved, 0.0)
    scheduler.apply("ADDED", copy.deepcopy(P2), 0.0)
    return scheduler, moved


def _restarted_in_every_order() -> Iterator[tuple[Scheduler, list[str]]]:
    """A restarted scheduler that lists the cluster as it is now (a0 gone, GPU M republished as
    b-new, P1 and P2 bound) in each order of nodes, devices, P1 and P2; with the order's names."""
    current = [obj for obj in BASE if obj["metadata"]["name"] != "a0"] + [REPUBLISHED]
    groups = [[obj for obj in current if obj["kind"] == "Node"], [obj for obj in current if obj["kind"] != "Node"],
              [P1], [P2]]
    for order in itertools.permutations(groups):
        scheduler = Scheduler(config(BINPACK))
        for obj in (obj for group in order for obj in group):
            scheduler.apply("ADDED", copy.deepcopy(obj), 0.0)
        yield scheduler, [group[0]["metadata"]["name"] for group in order]


def _three_on_b(scheduler: Scheduler) -> list[str]:
    """What a pod asking for three V100s on node b is given (b has b0, b1 and GPU M, held by P2)."""
    pod = b.pod("three", limits={CLASS: 3}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "b"}})
    scheduler.apply("ADDED", pod, 0.0)
    attempts = scheduler.schedule_next(0.0)
    assert attempts is not None and len(attempts) == 1
    devices = attempts[0].annotations.get(ann.DEVICES)
    return [] if devices is None else [entry["device"] for entry in orjson.loads(devices)["containers"]["main"][CLASS]]


def test_live_a_gpu_held_under_a_name_parked_elsewhere_is_not_given_again() -> None:
    scheduler, moved = _live_after_the_move()
    scheduler.apply("DELETED", copy.deepcopy(moved), 0.0)
    notices = scheduler.apply("ADDED", copy.deepcopy(REPUBLISHED), 0.0)
    assert [(n.key, n.reason, n.message) for n in notices if n.reason == "DuplicateDeviceID"] == [
        ("b-new", "DuplicateDeviceID", "ExtendedResource b-new names deviceID GPU-M, which default/p2 (as a0) on node "
         "b holds by the name of a device held elsewhere: it is not given to a pod until released")]
    assert _three_on_b(scheduler) == []
    assert not scheduler.state.devices["b-new"].schedulable
    view = {node.name: node for node in build_view(scheduler, source="simulate", now=0.0).nodes}
    [row] = [gpu for gpu in view["b"].gpus if gpu.device == "b-new"]
    assert row.reason == "deviceID GPU-M is held by default/p2 (as a0): not given to a pod until released"

    # P2 gone: GPU M is free again under its new name (and nothing else is)
    scheduler.apply("DELETED", copy.deepcopy(P2), 0.0)
    assert scheduler.state.devices["b-new"].schedulable
    assert sorted(_three_on_b(scheduler)) == ["b-new", "b0", "b1"]


def test_restart_a_gpu_held_under_a_name_another_pod_holds_elsewhere_is_not_given_again() -> None:
    for scheduler, listed in _restarted_in_every_order():
        assert _three_on_b(scheduler) == [], listed
        assert not scheduler.state.devices["b-new"].schedulable, listed


def test_a_gpu_held_under_a_name_parked_elsewhere_counts_on_its_node() -> None:
    """Node b allocates 3 GPUs and P2 holds one of them (GPU M): a plain request for 3 on b must
    wait, live and after a restart listing everything in any order."""
    def plain_three_on_b(scheduler: Scheduler) -> str | None:
        pod = b.pod("plain", limits={"nvidia.com/gpu": 3},
                    spec_extra={"nodeSelector": {"kubernetes.io/hostname": "b"}})
        scheduler.apply("ADDED", pod, 0.0)
        attempts = scheduler.schedule_next(0.0)
        assert attempts is not None and len(attempts) == 1
        return attempts[0].node

    live, _ = _live_after_the_move()
    assert plain_three_on_b(live) is None
    assert live.state.nodes["b"].busy == {"nvidia.com/gpu": 1}

    for scheduler, listed in _restarted_in_every_order():
        assert plain_three_on_b(scheduler) is None, listed
