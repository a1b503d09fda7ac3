"""ResourceClass bounds a one-character slip would move (mutation round 3): a slice exactly the
size of a GPU fits it, a zero unit is refused, slices are counted rounded down, a resource name's
part after the slash is at most 63 characters. Each test fails with its slip."""

from __future__ import annotations

from typing import Any

from scheduler.core.classes import parse_resource_class, validate_resource_name
from scheduler.core.objects import parse_device
from scheduler.sim import builders as b
from tests.helpers import class_conditions


def test_a_slice_the_size_of_the_whole_gpu_fits_it() -> None:
    """A 32Gi slice of 32Gi GPUs: one slice per GPU, the class is usable (Valid); 33Gi is not."""
    conditions = class_conditions([b.node("n", gpus=1), b.device("n", 0, memory="32Gi"),
                                   b.resource_class("whole", sharing={"dimension": "memory", "unit": "32Gi"}),
                                   b.resource_class("over", sharing={"dimension": "memory", "unit": "33Gi"})])
    assert (conditions["whole"]["status"], conditions["whole"]["reason"]) == ("True", "Valid"), conditions["whole"]
    assert conditions["over"]["status"] == "False", conditions["over"]


def test_a_zero_sharing_unit_is_refused() -> None:
    cls = parse_resource_class(b.resource_class("zero", sharing={"dimension": "memory", "unit": "0"}))
    assert cls.sharing is None
    assert cls.error == "spec.sharing.unit: Invalid value: 0: must be positive"


def test_slices_on_a_gpu_are_counted_rounded_down() -> None:
    """56Gi in 16Gi slices is 3 slices (3.5 rounded down, never up): a fourth would not fit."""
    sharing = parse_resource_class(b.resource_class("s", sharing={"dimension": "memory", "unit": "16Gi"})).sharing
    assert sharing is not None
    counts = [sharing.slices_on(parse_device(b.device("n", 0, memory=memory))) for memory in ("56Gi", "48Gi", "15Gi")]
    assert counts == [3, 3, 0]


def test_a_resource_names_part_after_the_slash_is_at_most_63_characters() -> None:
    assert validate_resource_name("example.com/" + "a" * 63) is None
    problem = validate_resource_name("example.com/" + "a" * 64)
    assert problem is not None and "a" * 64 in problem


def _matches(expression: dict[str, Any], memory: str = "32Gi") -> bool:
    cls = parse_resource_class(b.resource_class("c", expressions=[expression]))
    assert cls.error is None, cls.error
    return cls.matches(parse_device(b.device("n", 0, memory=memory)))


def test_a_selector_key_may_name_a_capacity_as_well_as_an_attribute() -> None:
    """`memory` is a capacity of the device, not an attribute: Exists / DoesNotExist see it, and
    In / NotIn compare it as a quantity (32Gi is 34359738368, however it is written)."""
    assert _matches({"key": "memory", "operator": "Exists"})
    assert not _matches({"key": "memory", "operator": "DoesNotExist"})
    assert _matches({"key": "memory", "operator": "In", "values": ["32Gi"]})
    assert _matches({"key": "memory", "operator": "In", "values": ["34359738368"]})
    assert not _matches({"key": "memory", "operator": "In", "values": ["16Gi"]})
    assert _matches({"key": "memory", "operator": "NotIn", "values": ["16Gi"]})
    assert not _matches({"key": "memory", "operator": "NotIn", "values": ["32768Mi"]})
