"""A pod whose Binding is in flight (assumed) keeps its devices through updates of the pending pod.

The watch can show the pod changed before our Binding lands — a label or annotation edit, our own
status write — still without a node. The assumption must stand (the Binding may land at any
moment): were it dropped, the pod would be pending again and its GPU free for another pod, and the
Binding landing afterwards would give that GPU to two pods. (Found by mutation: removing the
"assumption stands" return in `ClusterState._on_pod` left every replay and property test green.)
"""

from __future__ import annotations

import copy
from typing import Any

from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import config

CLASS = "class.tessera.dev/v100"


def _scheduler(devices: int) -> Scheduler:
    scheduler = Scheduler(config("config/binpack.yaml"))
    for obj in [b.node("n", gpus=devices), *(b.device("n", i) for i in range(devices)),
                b.resource_class("v100", match_labels={"model": "V100"})]:
        scheduler.apply("ADDED", obj, 0.0)
    return scheduler


def _with_version(pod: dict[str, Any], version: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["metadata"]["resourceVersion"] = version
    if labels:
        out["metadata"].setdefault("labels", {}).update(labels)
    return out


def test_an_update_of_an_assumed_pod_keeps_its_gpu_from_the_next_pod() -> None:
    scheduler = _scheduler(1)
    first = _with_version(b.pod("first", limits={CLASS: 1}), "10")
    scheduler.apply("ADDED", first, 0.0)
    placed = scheduler.schedule_next(0.0)
    assert placed is not None and placed[0].node == "n"
    assert scheduler.state.placements[first["metadata"]["uid"]].assumed

    # the pod is edited while its Binding is out (still no nodeName)
    scheduler.apply("MODIFIED", _with_version(first, "11", {"team": "a"}), 0.0)
    assert first["metadata"]["uid"] in scheduler.state.placements
    assert scheduler.state.nodes["n"].used("nvidia.com/gpu") == 1

    second = _with_version(b.pod("second", limits={CLASS: 1}), "12")
    scheduler.apply("ADDED", second, 0.0)
    attempts = [attempt for _ in range(3) for attempt in (scheduler.schedule_next(0.0) or [])]
    assert all(attempt.pod.meta.name != "second" or attempt.node is None for attempt in attempts)
    assert all(attempt.pod.meta.name != "first" for attempt in attempts)  # not decided a second time


def test_a_higher_priority_pod_does_not_get_the_gpu_of_an_edited_assumed_pod() -> None:
    """The case the promise is about: a pod that outranks the assumed one is tried first, and
    would be given its GPU; the first pod's Binding then lands on the same GPU."""
    scheduler = _scheduler(1)
    first = _with_version(b.pod("first", limits={CLASS: 1}, priority=0), "10")
    scheduler.apply("ADDED", first, 0.0)
    placed = scheduler.schedule_next(0.0)
    assert placed is not None and placed[0].node == "n"
    device = scheduler.state.placements[first["metadata"]["uid"]].devices

    urgent = _with_version(b.pod("urgent", limits={CLASS: 1}, priority=100), "11")
    scheduler.apply("ADDED", urgent, 0.0)
    scheduler.apply("MODIFIED", _with_version(first, "12", {"team": "a"}), 0.0)
    attempts = [attempt for _ in range(3) for attempt in (scheduler.schedule_next(0.0) or [])]
    given = [attempt for attempt in attempts if attempt.pod.meta.name == "urgent" and attempt.node is not None]
    assert given == [], f"urgent was given {given[0].annotations} while first's Binding for {device} was out"

    # first's Binding lands: one GPU, one holder
    bound = _with_version(first, "13", {"team": "a"})
    bound["spec"]["nodeName"] = "n"
    bound["metadata"]["annotations"] = dict(placed[0].annotations)
    scheduler.apply("MODIFIED", bound, 0.0)
    assert scheduler.state.nodes["n"].used("nvidia.com/gpu") == 1
