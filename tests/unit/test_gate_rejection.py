"""The live loop ends the attempt of a Binding the allocation gate held and then found would no
longer be chosen, as upstream's binding cycle ends when a Permit plugin rejects a waiting pod
(`waitingPod.Reject` → WaitOnPermit's Unschedulable status → handleSchedulingFailure)."""

from __future__ import annotations

from typing import Any

import structlog.testing

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi

HEARTBEAT = "2026-01-01T00:00:00Z"


Events = list[tuple[str, str, str, str]]
Statuses = list[tuple[str, str, str]]


def _held_p1(holder_namespace: str) -> tuple[SchedulerLoop, Attempt, Attempt, Events, Statuses]:
    """A leading loop (Bindings sent nowhere) on node `n`, two agent-served V100s, where p0 of
    `holder_namespace` holds the allocation gate and default/p1's Binding is held behind it: the
    loop, p1's attempt and p0's; the Events and PodScheduled conditions the loop writes are
    recorded from the start."""
    api = FakeApi()
    loop = SchedulerLoop(load_config("config/binpack.yaml"), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    loop.is_leader = lambda: True
    loop.binder.submit = lambda binding: None  # type: ignore[method-assign]
    events: Events = []
    loop.events.record = lambda ref, type_, reason, action, note, related=None, **_: events.append((ref.name, type_, reason, note))  # type: ignore[method-assign]
    statuses: Statuses = []
    loop.statuses.pod_waiting = lambda namespace, name, reason, message, **_: statuses.append((name, reason, message))  # type: ignore[method-assign]
    for obj in [b.node("n", gpus=2), b.device("n", 0, heartbeat=HEARTBEAT), b.device("n", 1, heartbeat=HEARTBEAT),
                b.resource_class("v100", match_labels={"model": "V100"}),
                b.pod("p0", namespace=holder_namespace, limits={"class.tessera.dev/v100": 1}),
                b.pod("p1", limits={"class.tessera.dev/v100": 1})]:
        loop.core.apply("ADDED", obj, 0.0)
    cycles: list[list[Attempt]] = []
    while (attempts := loop.core.schedule_next(0.0)) is not None:
        cycles.append(attempts)
        for attempt in attempts:
            loop._handle(attempt, 0.1)
    [holder, held] = [a for attempts in cycles for a in attempts]
    assert (holder.pod.key, holder.deferred, held.pod.key, held.deferred) == (f"{holder_namespace}/p0", False,
                                                                              "default/p1", True)
    return loop, held, holder, events, statuses


def test_a_held_binding_the_gate_decides_again_ends_its_attempt_unschedulable_and_says_why() -> None:
    """Before: the attempt stayed in `_binding_attempts` uncounted (until the pod was placed again,
    which overwrote it), no Event said why the pod was back in the queue, and its condition went on
    reading "waiting for the allocation gate"."""
    loop, held, holder, events, statuses = _held_p1("default")
    device = ann.decode_devices(held.annotations[ann.DEVICES])["main"]["class.tessera.dev/v100"][0].device
    counted: list[tuple[str, str]] = []
    loop.hooks.on_attempt = lambda result, profile, seconds, attempt: counted.append((result, attempt.pod.meta.name))  # type: ignore[method-assign]
    events.clear()
    statuses.clear()

    gone: Any = next(b.device("n", i) for i in range(2) if b.device("n", i)["metadata"]["name"] == device)
    loop._apply("DELETED", gone)
    _open_gate(loop, holder)  # the held placement is found invalid

    message = f"the allocation gate held its Binding to node n, and device {device} is gone; it is scheduled again"
    assert counted == [("unschedulable", held.pod.meta.name)]
    assert held.pod.uid not in loop._binding_attempts
    assert (held.pod.meta.name, "Warning", "FailedScheduling", message) in events
    assert statuses == [(held.pod.meta.name, "Unschedulable", message)]
    assert held.pod.uid in loop.core.state.pending  # back in the queue, tried again


def _open_gate(loop: SchedulerLoop, holder: Attempt) -> None:
    """p0's Binding lands (`holder`: its attempt) and the node agent marks it Allocated: the held
    Binding is let go or redone."""
    allocated = b.pod("p0", namespace=holder.pod.meta.namespace, limits={"class.tessera.dev/v100": 1}, node_name="n",
                      annotations={**holder.annotations, ann.PHASE: ann.PHASE_ALLOCATED})
    loop._apply("MODIFIED", allocated)
    loop._submit_released()


def test_the_gate_names_no_pod_of_another_namespace_on_the_held_pod_and_every_pod_in_the_log() -> None:
    """A re-trial found the held pod's WaitingForAllocation Event and condition naming the pod that
    held the gate, and the redo's FailedScheduling Event and condition naming the pod whose devices
    annotation cannot be read, whatever their namespaces: pods of another namespace are only
    counted there (`scheduler.core.tenants.pods_named`); the log line, operators', names them."""
    loop, held, holder, events, statuses = _held_p1("team-b")
    waits = ("assigned to n; the Binding waits until the node agent has allocated class.tessera.dev/v100 to 1 pod "
             "in another namespace (allocation gate)")
    assert events == [("p1", "Normal", "WaitingForAllocation", waits)]
    assert statuses == [("p1", "WaitingForAllocation", waits)]
    grant = ann.decode_devices(held.annotations[ann.DEVICES])["main"]["class.tessera.dev/v100"][0]
    unreadable = '{"containers": {"main": {"class.tessera.dev/v100": [{"device": "%s", "id": "%s"}]}}}' % (
        grant.device, grant.device_id)  # no "version": not readable
    loop._apply("ADDED", b.pod("secret", namespace="team-c", scheduler="other", limits={"class.tessera.dev/v100": 1},
                               node_name="n", phase="Running", annotations={ann.DEVICES: unreadable}))
    events.clear()
    statuses.clear()
    with structlog.testing.capture_logs() as logs:
        _open_gate(loop, holder)
    redone = ("the allocation gate held its Binding to node n, and {} on the node has an unreadable devices "
              "annotation; it is scheduled again")
    assert ("p1", "Warning", "FailedScheduling", redone.format("1 pod in another namespace")) in events
    assert statuses == [("p1", "Unschedulable", redone.format("1 pod in another namespace"))]
    [logged] = [line for line in logs if line["event"] == "binder.gate_rejected"]
    assert logged["message"] == redone.format("pod team-c/secret")


def test_the_gate_wait_log_line_names_the_pod_holding_the_gate() -> None:
    """`binder.gate_wait` said a Binding waits at the allocation gate, not for whom: it carries the
    gate's message as the log line words it, naming the blocking pod of any namespace (the held
    pod's Event and condition only count it)."""
    with structlog.testing.capture_logs() as logs:
        _held_p1("team-b")
    [waited] = [line for line in logs if line["event"] == "binder.gate_wait"]
    assert (waited["pod"], waited["node"]) == ("default/p1", "n")
    assert waited["message"] == ("assigned to n; the Binding waits until the node agent has allocated "
                                 "class.tessera.dev/v100 to team-b/p0 (allocation gate)")
