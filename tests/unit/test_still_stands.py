"""`Scheduler.still_stands`: whether the problem a notice told of is still in the core's state
(a replica that saw the notice while it did not lead tells it when it leads, only then)."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.core.state import Notice
from scheduler.sim import builders as b

CLASS = "class.tessera.dev/v100"
DEVICE = b.device("n", 0)


def _bound(name: str, containers: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    grant = {"id": DEVICE["spec"]["deviceID"], "device": DEVICE["metadata"]["name"]}
    value = orjson.dumps({"version": ann.VERSION, "containers": {c: {CLASS: [grant]} for c in containers}}).decode()
    return b.pod(name, containers=[b.container(c, limits={CLASS: 1}) for c in containers], node_name="n",
                 phase="Running", annotations={ann.DEVICES: value, ann.PHASE: ann.PHASE_ALLOCATED})


def _core() -> Scheduler:
    core = Scheduler(load_config(None), seed=1)
    for obj in (b.node("n", gpus=2), DEVICE, b.device("n", 1), b.resource_class("v100", match_labels={"model": "V100"})):
        assert core.apply("ADDED", obj, 0.0) == []
    return core


def _only(notices: list[Notice], reason: str) -> Notice:
    [notice] = [notice for notice in notices if notice.reason == reason]
    return notice


def test_a_copied_annotations_conflict_stands_until_the_other_holder_ends() -> None:
    core = _core()
    core.apply("ADDED", _bound("p"), 0.0)
    conflict = _only(core.apply("ADDED", _bound("q"), 0.0), "DeviceConflict")
    assert core.still_stands(conflict)
    core.apply("DELETED", _bound("p"), 0.0)  # q alone holds the GPU now
    assert not core.still_stands(conflict)


def test_a_pods_own_two_containers_conflict_stands_while_it_is_placed() -> None:
    core = _core()
    pod = _bound("p", containers=("a", "b"))
    conflict = _only(core.apply("ADDED", pod, 0.0), "DeviceConflict")
    assert "containers a and b" in conflict.message and core.still_stands(conflict)
    core.apply("DELETED", pod, 0.0)
    assert not core.still_stands(conflict)


def test_a_device_changed_while_held_stands_until_released() -> None:
    core = _core()
    core.apply("ADDED", _bound("p"), 0.0)
    renamed = copy.deepcopy(DEVICE)
    renamed["spec"]["resourceName"] = "example.com/gpu"
    notice = _only(core.apply("MODIFIED", renamed, 0.0), "ResourceNameChangedWhileHeld")
    assert core.still_stands(notice)
    core.apply("DELETED", _bound("p"), 0.0)
    assert not core.still_stands(notice)


def test_a_pod_created_again_under_the_name_is_not_the_one_told_of() -> None:
    core = _core()
    core.apply("ADDED", _bound("p"), 0.0)
    conflict = _only(core.apply("ADDED", _bound("q"), 0.0), "DeviceConflict")
    core.apply("DELETED", _bound("q"), 0.0)
    again = _bound("q")
    again["metadata"]["uid"] = "uid-again"
    core.apply("ADDED", again, 0.0)  # conflicts too, but raises a notice of its own
    assert not core.still_stands(conflict)
