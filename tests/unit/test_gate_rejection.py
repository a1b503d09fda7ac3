"""The live loop ends the attempt of a Binding the allocation gate held and then found would no
longer be chosen, as upstream's binding cycle ends when a Permit plugin rejects a waiting pod
(`waitingPod.Reject` → WaitOnPermit's Unschedulable status → handleSchedulingFailure)."""

from __future__ import annotations

from typing import Any

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi

HEARTBEAT = "2026-01-01T00:00:00Z"


def test_a_held_binding_the_gate_decides_again_ends_its_attempt_unschedulable_and_says_why() -> None:
    """Before: the attempt stayed in `_binding_attempts` uncounted (until the pod was placed again,
    which overwrote it), no Event said why the pod was back in the queue, and its condition went on
    reading "waiting for the allocation gate"."""
    api = FakeApi()
    loop = SchedulerLoop(load_config("config/binpack.yaml"), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    loop.is_leader = lambda: True  # type: ignore[method-assign]
    loop.binder.submit = lambda binding: None  # type: ignore[method-assign]
    for obj in [b.node("n", gpus=2), b.device("n", 0, heartbeat=HEARTBEAT), b.device("n", 1, heartbeat=HEARTBEAT),
                b.resource_class("v100", match_labels={"model": "V100"}),
                b.pod("p0", limits={"class.tessera.dev/v100": 1}), b.pod("p1", limits={"class.tessera.dev/v100": 1})]:
        loop.core.apply("ADDED", obj, 0.0)
    cycles: list[list[Attempt]] = []
    while (attempts := loop.core.schedule_next(0.0)) is not None:
        cycles.append(attempts)
        for attempt in attempts:
            loop._handle(attempt, 0.1)
    held = next(a for attempts in cycles for a in attempts if a.deferred)
    device = ann.decode_devices(held.annotations[ann.DEVICES])["main"]["class.tessera.dev/v100"][0].device
    counted: list[tuple[str, str]] = []
    loop.hooks.on_attempt = lambda result, profile, seconds, attempt: counted.append((result, attempt.pod.meta.name))  # type: ignore[method-assign]
    events: list[tuple[str, str, str, str]] = []
    loop.events.record = lambda ref, type_, reason, action, note, related=None, **_: events.append((ref.name, type_, reason, note))  # type: ignore[method-assign]
    statuses: list[tuple[str, str, str]] = []
    loop.statuses.pod_waiting = lambda namespace, name, reason, message, **_: statuses.append((name, reason, message))  # type: ignore[method-assign]

    gone: Any = next(b.device("n", i) for i in range(2) if b.device("n", i)["metadata"]["name"] == device)
    loop._apply("DELETED", gone)
    holder = loop.core.state.pod_by_key(f"default/{'p0' if held.pod.meta.name == 'p1' else 'p1'}")
    assert holder is not None
    allocated = b.pod(holder.meta.name, limits={"class.tessera.dev/v100": 1}, node_name="n",
                      annotations={**holder.meta.annotations, ann.PHASE: ann.PHASE_ALLOCATED})
    allocated["metadata"]["uid"] = holder.uid
    loop._apply("MODIFIED", allocated)  # the gate opens: the held placement is found invalid
    loop._submit_released()

    message = f"the allocation gate held its Binding to node n, and device {device} is gone; it is scheduled again"
    assert counted == [("unschedulable", held.pod.meta.name)]
    assert held.pod.uid not in loop._binding_attempts
    assert (held.pod.meta.name, "Warning", "FailedScheduling", message) in events
    assert statuses == [(held.pod.meta.name, "Unschedulable", message)]
    assert held.pod.uid in loop.core.state.pending  # back in the queue, tried again
