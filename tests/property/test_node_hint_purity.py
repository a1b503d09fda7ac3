"""Node hints look, they do not touch: after any node hint (`Handle.node_hint(plugin)`) the cluster
state the cycle reads is exactly what it was, and asking never raises.

The hint sets the pod's own hold and the lower-priority holds aside (`ClusterState.set_aside_hold`)
and, for a pod that may preempt, lifts the pods it may evict (`DefaultPreemption.frees_room`), then
puts everything back. Random small clusters where preemptions leave holds standing (the shell's
evictions never happen here, so victims stay and their preemptors stay nominated), whole and
shared GPUs among them (some deleted while held: ghosts), are asked every hint for every queued pod on every node, with plugin
names the profile runs, names it does not, and a name that is no plugin.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.scheduler import Scheduler
from scheduler.core.state import ClusterEvent, ClusterState, EventKind
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config
from tests.property.test_invariants import _settings

NODES = ("n0", "n1", "n2")
SHARED = "shared"  # a class of slices: holds and placements share its GPUs


def snapshot(state: ClusterState) -> dict[str, Any]:
    """Everything a hint's look may touch that the cycle reads. Not the order of the holds or of
    a device's holders: the cycle's own setting aside and putting back reorders them too, and nothing reads it."""
    ledger = state.ledger
    return {
        "holds": dict(state.holds),
        "nominated": set(state.nominated),
        "placements": dict(state.placements),
        "nodes": {name: (set(i.pods), set(i.holders), dict(i.requested), dict(i.held_requested), dict(i.busy),
                         dict(i.held_busy), dict(i.described_ids), dict(i.free_ids), set(i.broken),
                         dict(i.allocating), list(i.devices), i.scoring_cpu, i.scoring_memory, i.over,
                         i.surplus, dict(i.cut_from))
                  for name, i in state.nodes.items()},
        "use": {device: (set(use.exclusive), {uid: dict(held) for uid, held in use.shared.items()},
                        dict(use.by_kind), use.kept) for device, use in ledger.use.items()},
        "ghosts": set(ledger.ghosts),
        "devices": list(ledger.devices),
        "reshaped": set(ledger.reshaped),
        "deferred": list(state.deferred_events),
    }


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A cluster's objects in arrival order: nodes with GPUs, running pods, then pending pods."""
    objects: list[dict[str, Any]] = [
        b.resource_class("v100", {"model": "V100"}),
        b.resource_class(SHARED, {"model": "V100"}, sharing={"dimension": "memory"}),
    ]
    for name in NODES[:draw(st.integers(1, len(NODES)))]:
        gpus = draw(st.integers(0, 2))
        objects.append(b.node(name, cpu=str(draw(st.integers(2, 6))), memory="8Gi", gpus=gpus,
                              unschedulable=draw(st.booleans()) and draw(st.booleans())))
        objects += [b.device(name, i) for i in range(gpus)]
    nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]

    def resources() -> dict[str, Any]:
        kind = draw(st.sampled_from(["cpu", "cpu", "gpu", "class", "slice"]))
        limits: dict[str, Any] = {"cpu": str(draw(st.integers(1, 3)))}
        if kind == "gpu":
            limits["nvidia.com/gpu"] = 1
        elif kind == "class":
            limits["class.tessera.dev/v100"] = 1
        elif kind == "slice":
            limits[f"class.tessera.dev/{SHARED}"] = draw(st.sampled_from(["8Gi", "16Gi"]))
        return {"requests": {"cpu": limits["cpu"]}, "limits": limits}

    for i in range(draw(st.integers(0, 4))):
        objects.append(b.pod(f"r{i}", node_name=draw(st.sampled_from(nodes)), phase="Running",
                             priority=draw(st.sampled_from([0, 100, 500])), **resources()))
    for i in range(draw(st.integers(1, 5))):
        extra = {"preemptionPolicy": "Never"} if draw(st.integers(0, 4)) == 0 else {}
        objects.append(b.pod(f"p{i}", priority=draw(st.sampled_from([100, 500, 1000])), spec_extra=extra,
                             created=f"2026-01-01T00:00:0{i}Z", **resources()))
    return objects


@_settings(150)
@given(clusters(), st.integers(0, 2), st.data())
def test_a_node_hint_leaves_the_state_as_it_found_it(objects: list[dict[str, Any]], rounds: int,
                                                     data: st.DataObject) -> None:
    sched = Scheduler(config(BINPACK))
    now = 0.0
    for obj in objects:
        sched.apply("ADDED", obj, now)
    for _ in range(rounds + 1):  # preemptions nominate; later rounds retry with holds standing
        now += 11.0
        while sched.schedule_next(now) is not None:
            pass
    devices = [obj for obj in objects if obj["kind"] == "ExtendedResource"]
    for gone in data.draw(st.lists(st.sampled_from(devices), unique_by=lambda d: d["metadata"]["name"],
                                   max_size=2) if devices else st.just([])):
        sched.apply("DELETED", gone, now)  # a held device stays as a ghost, its holds' ones too
    state = sched.state
    runtime = sched.profiles["tessera"]
    plugins = [p.name for p in runtime.filters] + ["DefaultPreemption", "NoSuchPlugin"]
    queued = sorted(state.pending)
    for uid in queued:
        for node in list(state.nodes):
            for plugin in plugins:
                before = snapshot(state)
                runtime.node_hint(plugin)(uid, ClusterEvent(EventKind.NODE_UPDATED, node=node))
                after = snapshot(state)
                assert after == before, (f"the {plugin} hint for {state.pods[uid].meta.name} on {node} changed "
                                         f"{[k for k in before if before[k] != after[k]]}")
