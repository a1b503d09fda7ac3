"""A ResourceClass whose selector needs an attribute no device has (`modle` for `model`) matches
nothing. Its selector is valid (DESIGN: a class that matches no device yet is not judged: the
devices may come later), so its `Valid` condition stays True; but `kubectl get rcl` read `VALID
True`, `DEVICES 0`, the same as a healthy class on a cluster whose devices are busy being
installed, and the condition's reason was `Valid`. The condition's reason says
`UnknownDeviceAttribute` (the Warning's reason), and the printed columns show the reason beside
VALID."""

from __future__ import annotations

from pathlib import Path

import yaml

from scheduler.sim import builders as b
from tests.helpers import class_conditions

REPO = Path(__file__).resolve().parents[2]


def test_a_class_needing_an_attribute_no_device_has_says_so_in_its_conditions_reason() -> None:
    conditions = class_conditions([b.node("n", gpus=2), b.device("n", 0), b.device("n", 1),
                                   b.resource_class("typo", match_labels={"modle": "V100"}),
                                   b.resource_class("good", match_labels={"model": "V100"}),
                                   b.resource_class("later", match_labels={"model": "A100"}),
                                   b.resource_class("bad", match_labels={"Not A/Valid Label!!": "x"})])
    typo = conditions["typo"]
    assert (typo["status"], typo["reason"]) == ("True", "UnknownDeviceAttribute"), typo
    assert typo["message"] == 'selector and resourceName are valid (no device has the attribute "modle")'
    assert (conditions["good"]["status"], conditions["good"]["reason"]) == ("True", "Valid")
    # a known attribute no device has the value of: devices of that model may come (no typo)
    assert (conditions["later"]["status"], conditions["later"]["reason"]) == ("True", "NoMatchingDevices")
    assert (conditions["bad"]["status"], conditions["bad"]["reason"]) == ("False", "InvalidSpec")


def test_a_class_listed_before_any_device_is_not_judged() -> None:
    conditions = class_conditions([b.resource_class("typo", match_labels={"modle": "V100"})])
    # no typo verdict (nothing to tell one by); it matches nothing, as any class before its devices
    assert (conditions["typo"]["status"], conditions["typo"]["reason"]) == ("True", "NoMatchingDevices")


def test_kubectl_get_rcl_prints_the_valid_conditions_reason_beside_it() -> None:
    for path in ("deploy/crds/resourceclasses.tessera.dev.yaml",
                 "deploy/helm/tessera/crds/resourceclasses.tessera.dev.yaml"):
        crd = yaml.safe_load((REPO / path).read_text())
        [version] = crd["spec"]["versions"]
        columns = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
        assert columns[2:4] == [("Valid", '.status.conditions[?(@.type=="Valid")].status'),
                                ("Reason", '.status.conditions[?(@.type=="Valid")].reason')], (path, columns)


def test_a_valid_class_that_matches_no_device_says_so_in_its_reason_and_stays_valid() -> None:
    """An on-call trial: a class for a model the cluster does not have (`A100` among V100s) read
    VALID True, REASON Valid, DEVICES 0 — the same as a class that works. VALID stays about the
    spec (it is valid, and such devices may come), as upstream conditions are about one thing;
    the reason says `NoMatchingDevices` and the message why pods asking for it wait. No Event:
    a class created before its devices (or whose GPUs are being swapped) is no error."""
    conditions = class_conditions([b.node("n", gpus=2), b.device("n", 0), b.device("n", 1),
                                   b.resource_class("later", match_labels={"model": "A100"}),
                                   b.resource_class("good", match_labels={"model": "V100"})])
    later = conditions["later"]
    assert (later["status"], later["reason"]) == ("True", "NoMatchingDevices"), later
    assert later["message"] == "selector and resourceName are valid (no ExtendedResource matches the selector now)"
    assert (conditions["good"]["status"], conditions["good"]["reason"]) == ("True", "Valid")
    # once a device of the model comes, the class is plain Valid again
    conditions = class_conditions([b.node("n", gpus=2), b.device("n", 0), b.device("n", 1, model="A100"),
                                   b.resource_class("later", match_labels={"model": "A100"})])
    assert (conditions["later"]["status"], conditions["later"]["reason"]) == ("True", "Valid")
