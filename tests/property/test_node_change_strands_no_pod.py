"""A node change that lets a parked pod be placed wakes it: the pod does not wait for the
5-minute UnschedulableTimeout flush (`Handle.node_hint`, each rejector's own rule).

Differential: the same cluster, parked the same way, then one node change (grown, uncordoned,
untainted, labelled, or a new node). In the run under test the queue decides who is retried
(within the backoff, long before the flush); in the reference every parked pod is retried after
the change. A pod the reference places, and the run under test never even tried again after the
change, was stranded. Gangs (a PodGroup, with minResources or not) among them. Victims are never evicted (holds stay), as in test_requeue_hints."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from scheduler.core.queue import UNSCHEDULABLE_TIMEOUT
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config
from tests.property.test_invariants import _settings

TAINT = [{"key": "maintenance", "effect": "NoSchedule"}]
BACKOFF_AT_MOST = 11.0


@st.composite
def parked(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A cluster's objects, and one node change to apply once its pods are parked."""
    nodes = []
    devices = []
    for i in range(draw(st.integers(1, 3))):
        gpus = draw(st.integers(0, 2))
        nodes.append(b.node(f"n{i}", cpu=str(draw(st.integers(1, 4))), memory="8Gi", gpus=gpus,
                            labels={"pool": "train"} if draw(st.booleans()) else None,
                            taints=TAINT if draw(st.booleans()) else None,
                            unschedulable=draw(st.booleans()) and draw(st.booleans())))
        devices += [b.device(f"n{i}", g) for g in range(gpus)]
    objects: list[dict[str, Any]] = [b.resource_class("v100", {"model": "V100"}), *nodes, *devices]

    def gpu() -> dict[str, Any]:
        return {"limits": {"class.tessera.dev/v100": 1}} if draw(st.integers(0, 2)) == 0 else {}
    for i in range(draw(st.integers(0, 3))):
        objects.append(b.pod(f"r{i}", requests={"cpu": str(draw(st.integers(1, 2)))}, phase="Running", **gpu(),
                             node_name=draw(st.sampled_from(nodes))["metadata"]["name"],
                             priority=draw(st.sampled_from([0, 100, 500]))))
    for i in range(draw(st.integers(1, 5))):
        extra: dict[str, Any] = {}
        if draw(st.booleans()):
            extra["nodeSelector"] = {"pool": "train"}
        if draw(st.booleans()):
            extra["tolerations"] = [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}]
        if draw(st.integers(0, 2)) == 0:
            extra["preemptionPolicy"] = "Never"
        objects.append(b.pod(f"p{i}", requests={"cpu": str(draw(st.integers(1, 3)))}, spec_extra=extra, **gpu(),
                             priority=draw(st.sampled_from([100, 500, 1000])), created=f"2026-01-01T00:00:0{i}Z"))
    pending = [o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"].startswith("p")]
    if len(pending) >= 2 and draw(st.booleans()):  # the first two a gang (minResources or not)
        group = b.podgroup("g", 2)
        if draw(st.booleans()):
            group["spec"]["minResources"] = {"cpu": str(draw(st.integers(1, 6)))}
        objects.insert(0, group)
        for member in pending[:2]:
            member["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "g"}
            member["spec"]["priority"] = pending[0]["spec"]["priority"]
    change = draw(st.sampled_from(["grown", "uncordoned", "untainted", "labelled", "added"]))
    if change == "added":
        return objects, b.node("new", cpu=str(draw(st.integers(1, 4))), memory="8Gi", gpus=draw(st.integers(0, 1)),
                               labels={"pool": "train"} if draw(st.booleans()) else None)
    node = copy.deepcopy(draw(st.sampled_from(nodes)))
    if change == "grown":
        node["status"]["allocatable"]["cpu"] = str(int(node["status"]["allocatable"]["cpu"]) + draw(st.integers(1, 3)))
    elif change == "uncordoned":
        node["spec"].pop("unschedulable", None)
    elif change == "untainted":
        node["spec"].pop("taints", None)
    else:
        node["metadata"]["labels"]["pool"] = "train"
    return objects, node


def _parked(objects: list[dict[str, Any]], change: dict[str, Any]) -> tuple[Scheduler, float]:
    sched = Scheduler(config(BINPACK))
    now = 0.0
    for obj in objects:
        sched.apply("ADDED", obj, now)
    for _ in range(3):
        now += BACKOFF_AT_MOST
        while sched.schedule_next(now) is not None:
            pass
    sched.apply("MODIFIED" if change["metadata"]["name"] != "new" else "ADDED", change, now)
    return sched, now


def _placed_after(sched: Scheduler, now: float, until: float) -> tuple[set[str], set[str]]:
    """The pods tried, and those placed, by `until`."""
    tried: set[str] = set()
    placed: set[str] = set()
    while now < until:
        now += BACKOFF_AT_MOST
        while (made := sched.schedule_next(min(now, until))) is not None:
            tried |= {a.pod.meta.name for a in made}
            placed |= {a.pod.meta.name for a in made if a.node is not None}
    return tried, placed


# p1 (Never) parked by r0 and p0's lower-priority hold; n0 grows by what p1 asks (bf0d566's case)
LOWER_HOLD = ([b.node("n0", cpu="2", memory="8Gi"),
               b.pod("r0", requests={"cpu": "2"}, phase="Running", node_name="n0", priority=0),
               b.pod("p0", requests={"cpu": "1"}, priority=100),
               b.pod("p1", requests={"cpu": "1"}, priority=1000, spec_extra={"preemptionPolicy": "Never"})],
              b.node("n0", cpu="3", memory="8Gi"))


@_settings(200)
@given(parked())
@example(LOWER_HOLD)
def test_a_node_change_that_lets_a_parked_pod_in_wakes_it(case: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    objects, change = case
    sched, now = _parked(objects, change)
    parked_before = {sched.state.pods[uid].meta.name for uid, entry in sched.queue.entries.items()
                     if entry.where == "unschedulable"}
    tried, _ = _placed_after(sched, now, now + UNSCHEDULABLE_TIMEOUT - 1)

    reference, at = _parked(objects, change)
    flushed = at + UNSCHEDULABLE_TIMEOUT + 1
    reference.flush_unschedulable(flushed)
    _, placed = _placed_after(reference, flushed, flushed + 2 * BACKOFF_AT_MOST)
    stranded = (parked_before & placed) - tried
    assert not stranded, f"{sorted(stranded)} fit after the change but were not tried again before the flush"
