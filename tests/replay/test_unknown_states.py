""""Unknown" is no good news: a GPU whose health is unknown goes to no pod, and a pod whose phase
is unknown still has the GPUs it was given. (Found by mutation: reading `Healthy: Unknown`, or the
phase `Unknown`, of an ExtendedResource as healthy, and a pod's phase `Unknown` as finished, left
every replay and property test green.)"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import config

CLASS = "class.tessera.dev/v100"


def _scheduler(device: dict[str, Any]) -> Scheduler:
    scheduler = Scheduler(config("config/binpack.yaml"))
    for obj in [b.node("n", gpus=1), device, b.resource_class("v100", match_labels={"model": "V100"})]:
        scheduler.apply("ADDED", obj, 0.0)
    return scheduler


def _node_of(scheduler: Scheduler, pod: dict[str, Any]) -> str | None:
    scheduler.apply("ADDED", pod, 0.0)
    attempts = scheduler.schedule_next(0.0)
    assert attempts is not None and len(attempts) == 1
    return attempts[0].node


def _unknown_condition() -> dict[str, Any]:
    device = b.device("n", 0)
    device["status"]["conditions"] = [{"type": "Healthy", "status": "Unknown"}]
    return device


def _unknown_phase() -> dict[str, Any]:
    device = b.device("n", 0)
    device["status"]["phase"] = "Unknown"
    return device


@pytest.mark.parametrize("device", [_unknown_condition(), _unknown_phase()], ids=["condition", "phase"])
def test_a_gpu_of_unknown_health_goes_to_no_pod(device: dict[str, Any]) -> None:
    scheduler = _scheduler(device)
    assert _node_of(scheduler, b.pod("cls", limits={CLASS: 1})) is None
    assert _node_of(scheduler, b.pod("plain", limits={"nvidia.com/gpu": 1})) is None


@pytest.mark.parametrize("request_name", [CLASS, "nvidia.com/gpu"])
def test_a_pod_of_unknown_phase_keeps_its_gpu(request_name: str) -> None:
    scheduler = _scheduler(b.device("n", 0))
    first = b.pod("first", limits={request_name: 1})
    scheduler.apply("ADDED", first, 0.0)
    [placed] = scheduler.schedule_next(0.0) or []
    assert placed.node == "n"
    bound = copy.deepcopy(first)
    bound["spec"]["nodeName"] = "n"
    bound["metadata"]["annotations"] = dict(placed.annotations)
    bound["metadata"]["resourceVersion"] = "10"
    scheduler.apply("MODIFIED", bound, 0.0)
    unknown = copy.deepcopy(bound)
    unknown["status"]["phase"] = "Unknown"  # the node stopped reporting: the pod may well still run
    unknown["metadata"]["resourceVersion"] = "11"
    scheduler.apply("MODIFIED", unknown, 0.0)
    assert scheduler.state.nodes["n"].used("nvidia.com/gpu") == 1
    assert _node_of(scheduler, b.pod("second", limits={request_name: 1})) is None
