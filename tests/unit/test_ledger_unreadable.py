"""The device ledger under unreadable input: event sequences that broke the one promise
(never one GPU to two pods, fail closed on what cannot be read).

The first failed before its fix, for the reason its docstring gives.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import config

CLASS = "class.tessera.dev/v100"
# what a newer Tessera (or a hand repair gone wrong) may leave: well-formed JSON this version cannot read
UNREADABLE = '{"containers":{},"version":2}'


def _cluster(gpus: int = 2) -> Scheduler:
    """One node advertising `gpus` nvidia.com/gpu, one ExtendedResource per GPU, class v100."""
    scheduler = Scheduler(config("config/binpack.yaml"))
    for obj in [b.node("n", gpus=gpus), *(b.device("n", i) for i in range(gpus)),
                b.resource_class("v100", match_labels={"model": "V100"})]:
        scheduler.apply("ADDED", obj, 0.0)
    return scheduler


def _grant(index: int, node: str = "n") -> str:
    device = b.device(node, index)
    return ann.encode_devices({"main": {CLASS: (ann.DeviceGrant(device["spec"]["deviceID"],
                                                                device["metadata"]["name"], None),)}})


def _placed(scheduler: Scheduler, pod: dict[str, Any], now: float = 0.0) -> str | None:
    scheduler.apply("ADDED", pod, now)
    attempts = scheduler.schedule_next(now) or []
    [attempt] = [a for a in attempts if a.pod.meta.name == pod["metadata"]["name"]]
    return attempt.node


def _plain_gpu_pods_placed(annotation: str, *, edited_after_binding: bool = False) -> list[str | None]:
    """A running class pod holding one GPU of a 2-GPU node (its annotation as given, or first
    readable and then edited to `annotation`), then two plain `nvidia.com/gpu: 1` pods."""
    scheduler = _cluster(gpus=2)
    holder = b.pod("holder", limits={CLASS: 1}, node_name="n", phase="Running",
                   annotations={ann.DEVICES: _grant(0) if edited_after_binding else annotation})
    holder["metadata"]["resourceVersion"] = "1"
    scheduler.apply("ADDED", holder, 0.0)
    if edited_after_binding:
        edited = copy.deepcopy(holder)
        edited["metadata"]["annotations"][ann.DEVICES] = annotation
        edited["metadata"]["resourceVersion"] = "2"
        scheduler.apply("MODIFIED", edited, 0.0)
    return [_placed(scheduler, b.pod(f"plain{i}", limits={"nvidia.com/gpu": 1})) for i in range(2)]


@pytest.mark.parametrize("edited_after_binding", [False, True], ids=["listed-unreadable", "edited-unreadable"])
def test_a_pod_with_an_unreadable_device_annotation_still_counts_against_the_nodes_gpus(
        edited_after_binding: bool) -> None:
    """A running class pod on a 2-GPU node holds one GPU. With a readable annotation the ledger
    counts it (busy nvidia.com/gpu = 1), so only one plain `nvidia.com/gpu: 1` pod fits beside it.
    With an unreadable annotation — listed so after a restart, or edited so while the pod runs —
    the node is taken out of device scheduling only for *class* requests: the pod's GPU is not
    counted against the node's `nvidia.com/gpu` at all (the edit even uncharges it), and both plain
    pods are placed: three GPUs in use on a 2-GPU node. Failing closed must cover the node's device
    count too (count the broken pod's class requests as busy devices of the node's device
    resource, or keep plain requests of a device resource off a node with broken annotations)."""
    assert _plain_gpu_pods_placed(_grant(0)) == ["n", None]  # the reference: the held GPU counts

    # which GPU the pod holds is unknown: none of the node's counts as free (fail closed), as
    # for class requests, until the annotation is fixed or the pod is gone
    assert _plain_gpu_pods_placed(UNREADABLE, edited_after_binding=edited_after_binding) == [None, None]


def test_plain_gpu_requests_fit_again_once_the_unreadable_annotation_is_fixed() -> None:
    scheduler = _cluster(gpus=2)
    holder = b.pod("holder", limits={CLASS: 1}, node_name="n", phase="Running",
                   annotations={ann.DEVICES: UNREADABLE})
    holder["metadata"]["resourceVersion"] = "1"
    scheduler.apply("ADDED", holder, 0.0)
    assert _placed(scheduler, b.pod("plain0", limits={"nvidia.com/gpu": 1})) is None
    fixed = copy.deepcopy(holder)
    fixed["metadata"]["annotations"][ann.DEVICES] = _grant(0)
    fixed["metadata"]["resourceVersion"] = "2"
    scheduler.apply("MODIFIED", fixed, 0.0)
    scheduler.queue.flush_unschedulable(1e9)
    attempts = scheduler.schedule_next(1.0) or []
    assert [(a.pod.meta.name, a.node) for a in attempts] == [("plain0", "n")]
    assert _placed(scheduler, b.pod("plain1", limits={"nvidia.com/gpu": 1}), 2.0) is None  # 1 held + 1 placed
