"""A plain `nvidia.com/gpu` request is not given a GPU its ExtendedResource marks Healthy=False
(docs/operations.md, Replace a failed GPU: "No new pod gets it"). A day-2 trial: with one of a
node's 8 GPUs unhealthy, an 8-GPU plain pod pinned there was bound, counted on the broken GPU —
the Node's allocatable, which nothing lowered, was all the count followed. On a node with devices,
a count request now takes at most the node's healthy free GPUs (plus any GPUs its allocatable
counts that no ExtendedResource describes); without devices, allocatable alone."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.sim import builders as b
from tests.helpers import Run, config

GPU = "nvidia.com/gpu"
CLASS = "class.tessera.dev/v100"


def _pinned(name: str, limits: dict[str, str | int], node: str = "n") -> dict[str, Any]:
    return b.pod(name, limits=limits, spec_extra={"nodeSelector": {"kubernetes.io/hostname": node}})


def _node(broken: int = 1, allocatable: int = 8, others: int = 0) -> Run:
    """Node n: 8 GPUs, the first `broken` unhealthy; `others` more 8-GPU healthy nodes (so the
    batch filters, not only the per-node ones, decide)."""
    run = Run(config(), explain=True)
    run.add(b.node("n", gpus=allocatable), *(b.device("n", i, healthy=i >= broken) for i in range(8)),
            b.resource_class("v100", match_labels={"model": "V100"}))
    for k in range(others):
        run.add(b.node(f"o{k}", gpus=8), *(b.device(f"o{k}", i) for i in range(8)))
    return run


@pytest.mark.parametrize("others", [0, 40])
def test_a_plain_request_gets_no_unhealthy_gpu(others: int) -> None:
    run = _node(others=others)
    run.add(_pinned("plain8", {GPU: 8}))
    assert run.node_of("plain8") is None
    assert "Insufficient nvidia.com/gpu" in run.last("plain8").message, run.last("plain8").message
    run.add(_pinned("plain7", {GPU: 7}))
    assert run.node_of("plain7") == "n"


@pytest.mark.parametrize("others", [0, 40])
def test_class_and_plain_requests_share_the_healthy_gpus(others: int) -> None:
    """Seven healthy GPUs: a 6-GPU plain pod leaves one; a class pod takes it, then nothing fits."""
    run = _node(others=others)
    run.add(_pinned("plain6", {GPU: 6}))
    run.add(_pinned("one", {CLASS: 1}))
    assert (run.node_of("plain6"), run.node_of("one")) == ("n", "n")
    run.add(_pinned("plain1", {GPU: 1}), _pinned("two", {CLASS: 1}))
    assert run.node_of("plain1") is None and run.node_of("two") is None
    assert "Insufficient nvidia.com/gpu" in run.last("plain1").message
    assert "Insufficient class.tessera.dev/v100" in run.last("two").message, run.last("two").message


def test_allocatable_lowered_for_the_unhealthy_gpu_is_not_counted_twice() -> None:
    """A device plugin that lowers allocatable for the broken GPU (8 -> 7): still 7 for plain pods."""
    run = _node(allocatable=7)
    run.add(_pinned("plain7", {GPU: 7}))
    assert run.node_of("plain7") == "n"


def test_gpus_no_extendedresource_describes_still_count_for_plain_requests() -> None:
    """4 ExtendedResources on an 8-GPU node (the agent has not published them all): 8 as before."""
    run = Run(config())
    run.add(b.node("n", gpus=8), *(b.device("n", i) for i in range(4)), _pinned("plain8", {GPU: 8}))
    assert run.node_of("plain8") == "n"


def test_an_unhealthy_gpu_a_pod_holds_is_not_subtracted_again() -> None:
    """The broken GPU held by a class pod: 7 left, all healthy, all for plain requests."""
    run = Run(config())
    run.add(b.node("n", gpus=8), *(b.device("n", i) for i in range(8)),
            b.resource_class("v100", match_labels={"model": "V100"}), _pinned("holder", {CLASS: 1}))
    assert run.node_of("holder") == "n"
    held = next(name for name, use in run.state.ledger.use.items() if use.busy)
    index = next(i for i in range(8) if b.device("n", i)["metadata"]["name"] == held)
    run.feed(b.event("MODIFIED", b.device("n", index, healthy=False)))
    run.add(_pinned("plain7", {GPU: 7}))
    assert run.node_of("plain7") == "n"


@pytest.mark.parametrize("others", [0, 40])
def test_a_plain_request_gets_no_cordoned_gpu(others: int) -> None:
    """An admin's cordon of one device (`spec.unschedulable`, docs/api.md) keeps it from new pods
    by count as by class: an 8-GPU plain pod does not fit on 7 schedulable GPUs, a 7-GPU one does."""
    run = Run(config(), explain=True)
    run.add(b.node("n", gpus=8), *(b.device("n", i, unschedulable=i == 0) for i in range(8)))
    for k in range(others):
        run.add(b.node(f"o{k}", gpus=8), *(b.device(f"o{k}", i) for i in range(8)))
    run.add(_pinned("plain8", {GPU: 8}))
    assert run.node_of("plain8") is None
    assert "Insufficient nvidia.com/gpu" in run.last("plain8").message, run.last("plain8").message
    run.add(_pinned("plain7", {GPU: 7}))
    assert run.node_of("plain7") == "n"
