"""`union_holds`: what a bound pod whose devices annotation was edited holds (never fewer holds
than either version says)."""

from __future__ import annotations

from scheduler.core.state.cluster import union_holds

R, S = "class.tessera.dev/v100", "class.tessera.dev/v100-shared"


def test_every_device_of_either_list_is_held_once() -> None:
    assert union_holds([("a", None, R, "")], [("b", None, R, ""), ("a", None, R, "")]) == \
        (("a", None, R, ""), ("b", None, R, ""))


def test_a_slice_is_held_at_the_larger_amount_per_resource_and_dimension() -> None:
    assert union_holds([("a", 8, S, "memory"), ("a", 10, S, "cores")], [("a", 4, S, "memory")]) == \
        (("a", 8, S, "memory"), ("a", 10, S, "cores"))
    assert union_holds([("a", 4, S, "memory")], [("a", 16, S, "memory")]) == (("a", 16, S, "memory"),)


def test_a_device_whole_in_either_is_held_whole_only() -> None:
    """A slice beside the pod's own whole hold would be the pod conflicting with itself."""
    assert union_holds([("a", 8, S, "memory")], [("a", None, R, "")]) == (("a", None, R, ""),)
    assert union_holds([("a", None, R, "")], [("a", 8, S, "memory"), ("b", 2, S, "memory")]) == \
        (("a", None, R, ""), ("b", 2, S, "memory"))
