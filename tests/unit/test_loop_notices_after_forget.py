"""The live loop tells what the core found while forgetting a pod, when it forgets it.

A Binding refused by the apiserver makes the core forget the pod's assumption; when the pod held
a device whose ExtendedResource was moved to another node meanwhile, the device is taken in there
and may take that node beyond its allocatable (DevicesBeyondAllocatable on the Node). The core
hands such notices out with `take_notices` (no watch event carries them); the loop asks after a
Binding's result as after an event or a cycle, so the Warning is not left for whatever event comes
next (tests/replay/test_surplus_after_move.py has the core's side).
"""

from __future__ import annotations

import copy

from scheduler.api.config import load_config
from scheduler.kube.binder import Binding, BindResult, Outcome
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi

CLASS = "class.tessera.dev/v100"


def test_a_refused_binding_that_takes_a_moved_device_beyond_a_nodes_count_is_reported_at_once() -> None:
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    moving = b.device("a", 0)
    for obj in (b.node("a", gpus=1), moving, b.node("b", gpus=2), *(b.device("b", i) for i in range(2)),
                b.resource_class("v100", match_labels={"model": "V100"}),
                b.pod("p", limits={CLASS: 1}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}})):
        loop._on_event("ADDED", obj)
    [attempt] = loop.core.schedule_next(0.0) or []
    assert attempt.node == "a"  # assumed; its Binding on its way
    moved = copy.deepcopy(moving)
    moved["spec"]["nodeName"] = "b"
    loop._on_event("MODIFIED", moved)
    assert "DevicesBeyondAllocatable" not in {n.reason for n in loop.untold}
    binding = Binding(attempt.pod.uid, "default", "p", "a", attempt.annotations)
    loop._on_bound(BindResult(binding, Outcome.RETRY, "Binding rejected: HTTP 422", 0.01))
    # not leading: kept to be told as a Warning once it leads (a leader records it at once)
    assert [(n.kind, n.key) for n in loop.untold if n.reason == "DevicesBeyondAllocatable"] == [("Node", "b")]
