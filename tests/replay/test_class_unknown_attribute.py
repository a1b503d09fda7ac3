"""A ResourceClass whose selector needs an attribute no ExtendedResource has (`modle` for `model`)
matches nothing; its status says which attribute (test_trial_messages.py), and so does a Warning
`UnknownDeviceAttribute` on the class — once per generation of the class, not on every resync or
device change, as an admin watching `kubectl get events` would want."""

from __future__ import annotations

from typing import Any

from scheduler.core.scheduler import Scheduler
from scheduler.core.state import Notice
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

WARNING = 'UnknownDeviceAttribute: ResourceClass typo matches no device (no device has the attribute "modle")'


def _class(selector: dict[str, str], generation: int) -> dict[str, Any]:
    cls = b.resource_class("typo", match_labels=selector)
    cls["metadata"]["generation"] = generation
    cls["metadata"]["resourceVersion"] = str(generation)
    return cls


def _told(run: Run) -> list[str]:
    return [notice for notice in run.notices() if notice.startswith("UnknownDeviceAttribute: ")]


def test_a_class_naming_an_attribute_no_device_has_is_warned_once_per_generation() -> None:
    run = Run(config(BINPACK))
    gpus = [b.device("n", i) for i in range(2)]
    run.add(b.node("n", gpus=2), *gpus)
    typo = _class({"modle": "V100"}, 1)
    run.add(typo)
    assert _told(run) == [WARNING]
    # a resync, devices changing and a new device: the same generation, no new Warning
    run.feed(b.event("MODIFIED", typo))
    gpus[0]["spec"]["attributes"]["vendor"] = "NVIDIA"
    run.feed(b.event("MODIFIED", gpus[0]), b.event("DELETED", gpus[1]))
    run.add(b.device("n", 2))
    assert _told(run) == [WARNING]
    # an edit that is still wrong is a new generation: told again; one that fixes it is not
    run.feed(b.event("MODIFIED", _class({"modle": "A100"}, 2)))
    assert _told(run) == [WARNING, WARNING]
    run.feed(b.event("MODIFIED", _class({"model": "V100"}, 3)))
    assert len(_told(run)) == 2
    assert run.state.class_status("typo")[2] > 0


def test_a_class_listed_before_any_device_is_warned_when_devices_show_its_attribute_missing() -> None:
    """With no device at all there is nothing to tell a typo by; the first devices do."""
    run = Run(config(BINPACK))
    run.add(_class({"modle": "V100"}, 1))
    assert _told(run) == []
    run.add(b.node("n", gpus=2), b.device("n", 0), b.device("n", 1))
    assert _told(run) == [WARNING]


def test_a_class_whose_attribute_a_device_has_is_not_warned() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0), _class({"model": "A100"}, 1))  # matches nothing, but no typo
    assert _told(run) == []


def test_a_warning_told_late_stands_only_while_the_attribute_is_still_missing() -> None:
    """A replica that saw it while it did not lead tells it when it leads only if it still holds
    (`Scheduler.still_stands`): a device listed later may carry the attribute after all."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=2), b.device("n", 0))
    run.add(_class({"modle": "V100"}, 1))
    scheduler: Scheduler = run.scheduler
    notice = next(n for n in run.replay.stats.notices if n.reason == "UnknownDeviceAttribute")
    assert isinstance(notice, Notice) and scheduler.still_stands(notice)
    run.add(b.device("n", 1, attributes={"modle": "V100"}))
    assert not scheduler.still_stands(notice)
