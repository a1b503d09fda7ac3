"""A ghost — an ExtendedResource deleted while a pod holds it — is no device of any class.

The ledger keeps a ghost counted against its node until its last holder is gone, but the class
registry had two minds about it: deleting the device took it off every class, and any later class
change (its own class edited, or an unrelated class created) indexed it again as a match. So a
class whose only device was a ghost told its pods "matches no device in the cluster" before a
class edit and "Insufficient" after one, and a class status subtracted ghosts that placements
counted. The registry now indexes no ghost: one answer, whatever class changed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, assert_real_gpu_counts_within, config

CLASS = "class.tessera.dev/v100"
NO_DEVICE = ("0/1 nodes are available: ResourceClass v100 matches no device in the cluster. "
             "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


def _held_then_deleted() -> tuple[Run, dict[str, Any]]:
    """Node n's only GPU is held by pod p (class v100), and its ExtendedResource is then deleted:
    a ghost. The run and the deleted device's object."""
    run = Run(config(BINPACK))
    device = b.device("n", 0)
    run.add(b.node("n", gpus=1), device, b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("p", limits={CLASS: 1}))
    assert run.node_of("p") == "n"
    run.feed(b.event("DELETED", device))
    assert run.state.ledger.is_ghost(device["metadata"]["name"])
    return run, device


def _attempts_of(run: Run, name: str) -> int:
    return sum(1 for attempt in run.attempts if attempt.pod.key == f"default/{name}")


def _finished(run: Run, name: str) -> dict[str, Any]:
    pod = copy.deepcopy(run.replay.pods[run.state.pod_by_key(f"default/{name}").uid])
    pod["status"]["phase"] = "Succeeded"
    return pod


def _unrelated_class(run: Run) -> None:
    run.add(b.resource_class("a100", match_labels={"model": "A100"}))


def _own_class_edited(run: Run) -> None:
    """v100 edited to another selector of the same devices (a real edit: generation moves)."""
    edited = b.resource_class("v100", expressions=[{"key": "model", "operator": "In", "values": ["V100", "V100S"]}])
    edited["metadata"]["generation"] = 2
    run.feed(b.event("MODIFIED", edited))


@pytest.mark.parametrize("edits", [(_unrelated_class, _own_class_edited), (_own_class_edited, _unrelated_class)],
                         ids=["unrelated-first", "own-first"])
def test_a_class_whose_only_device_is_a_ghost_says_the_same_before_and_after_class_edits(
        edits: tuple[Callable[[Run], None], ...]) -> None:
    run, _ = _held_then_deleted()
    run.add(b.pod("q", limits={CLASS: 1}))
    assert run.last("q").message == NO_DEVICE
    for edit in edits:
        tried = _attempts_of(run, "q")
        edit(run)
        assert _attempts_of(run, "q") > tried, edit.__name__  # retried on the class change ...
        assert run.last("q").message == NO_DEVICE, edit.__name__  # ... and told the same
        assert run.state.classes.matching["v100"] == 0
    assert {s.name: s.matching_devices for s in run.scheduler.class_statuses()} == {"a100": 0, "v100": 0}


def test_after_class_edits_a_ghosts_holder_leaving_frees_the_gpu_for_exactly_one_pod() -> None:
    """The promise across the mend: while the ghost is held, the same GPU published again under
    another name (same deviceID) goes to no pod, class edits or not; once its holder is gone the
    GPU is free, and goes to one pod only."""
    run, device = _held_then_deleted()
    _unrelated_class(run)
    _own_class_edited(run)
    again = copy.deepcopy(device)
    again["metadata"].update(name="n.renamed", uid="renamed-uid")
    run.add(again)
    run.add(b.pod("q", limits={CLASS: 1}))
    assert run.node_of("q") is None  # the GPU is p's
    assert run.state.classes.matching["v100"] == 1  # the new name; the ghost is no match
    run.feed(b.event("MODIFIED", _finished(run, "p")))
    assert not run.state.ledger.ghosts and set(run.state.devices) == {"n.renamed"}
    assert run.node_of("q") == "n"  # retried on the release
    run.add(b.pod("r", limits={CLASS: 1}))
    assert run.node_of("r") is None
    assert run.state.classes.matching["v100"] == 1
    assert_real_gpu_counts_within(run)


@pytest.mark.parametrize("edited_first", [False, True], ids=["no-edit", "unrelated-edit-first"])
def test_a_ghost_does_not_carry_its_resource_name_after_a_class_edit(edited_first: bool) -> None:
    """A ghost is no ExtendedResource carrying its resourceName (`ClassRegistry.carried`), so a
    class may take that name, class edits or not."""
    run = Run(config(BINPACK))
    device = b.device("n", 0, resource_name="example.com/gpu")
    run.add(b.node("n", extra={"example.com/gpu": "1"}), device,
            b.resource_class("v100", match_labels={"model": "V100"}), b.pod("p", limits={CLASS: 1}))
    assert run.node_of("p") == "n"
    run.feed(b.event("DELETED", device))
    assert run.state.ledger.is_ghost(device["metadata"]["name"])
    if edited_first:
        _unrelated_class(run)
    run.add(b.resource_class("mine", match_labels={"model": "V100"}, resource_name="example.com/gpu"))
    assert run.state.classes.error_of("mine") is None
