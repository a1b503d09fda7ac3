"""Property: slices another install binds beyond a shared GPU's capacity are a conflict, and the core
never adds to such a GPU.

Two T4s (16Gi) of one node, a class sharing them by memory in 1Gi slices. Pods bound elsewhere
(the other install's Binding: `spec.nodeName` and a devices annotation naming a slice of either
GPU, whatever it already holds), pods left to this core, and deletions, in any order. After every
event:

- a GPU the core placed a pod on in that event holds at most its 16Gi (its room beside an
  over-full GPU is below none, never wrapped into a big one);
- a GPU reads `conflict` in the view (and in the scrape's counts) exactly when two or more pods
  hold slices of it that together exceed 16Gi; a full one (16Gi) is `slices`.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from scheduler.view.cluster import build_view, gpu_counts
from tests.helpers import config

SHARED = "class.tessera.dev/t4-shared"
GI = 2**30
NODE = "t4-node-001"
CAPACITY = 16 * GI


@dataclass(frozen=True)
class Step:
    kind: str  # "elsewhere" (bound by the other install), "ours" (pending for this core), "delete"
    device: int
    gib: int


steps = st.one_of(
    st.builds(Step, st.just("elsewhere"), st.integers(0, 1), st.integers(1, 9)),
    st.builds(Step, st.just("ours"), st.just(0), st.integers(1, 9)),
    st.builds(Step, st.just("delete"), st.integers(0, 30), st.just(0)),
)


@settings(max_examples=int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0) or 150, deadline=None,
          database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, min_size=1, max_size=20))
def test_over_full_slices_are_a_conflict_and_get_nothing_more(stream: list[Step]) -> None:
    devices = [b.device(NODE, i, model="T4", memory="16Gi") for i in range(2)]
    replay = Replay(config(), agent=True)
    objs = [b.node(NODE, gpus=2), *devices,
            b.resource_class("t4-shared", match_labels={"model": "T4"}, sharing={"dimension": "memory", "unit": "1Gi"})]
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    state = replay.scheduler.state
    live: list[dict] = []  # type: ignore[type-arg]
    ours: set[str] = set()  # uids of the pods left to this core
    for n, step in enumerate(stream):
        before = set(state.placements)
        if step.kind == "delete":
            if not live:
                continue
            pod = live.pop(step.device % len(live))
            list(replay.run([WatchEvent("DELETED", pod)]))
        else:
            pod = b.pod(f"p{n}", limits={SHARED: step.gib})
            live.append(pod)
            if step.kind == "ours":
                ours.add(pod["metadata"]["uid"])
                list(replay.run([WatchEvent("ADDED", pod)]))
            else:
                pod["spec"]["schedulerName"] = "other"  # the other install's pod: this core leaves it
                list(replay.run([WatchEvent("ADDED", pod)]))
                spec = devices[step.device]["spec"]
                grant = ann.DeviceGrant(spec["deviceID"], devices[step.device]["metadata"]["name"], step.gib * GI,
                                        "memory")
                bound = copy.deepcopy(pod)
                bound["spec"]["nodeName"] = NODE
                bound["metadata"]["annotations"] = {ann.DEVICES: ann.encode_devices({"main": {SHARED: (grant,)}}),
                                                    ann.PHASE: ann.PHASE_ALLOCATED}
                bound["metadata"]["resourceVersion"] = "2"
                list(replay.run([WatchEvent("MODIFIED", bound)]))
        totals: dict[str, int] = {}
        holders: dict[str, int] = {}
        for uid, placement in state.placements.items():
            for device, amount, _, _ in placement.grants:
                assert amount is not None
                totals[device] = totals.get(device, 0) + int(amount)
                holders[device] = holders.get(device, 0) + 1
        for uid in (set(state.placements) - before) & ours:  # placed by this core in this event
            for device, _, _, _ in state.placements[uid].grants:
                assert totals[device] <= CAPACITY, (step, device, totals[device])
        view = build_view(replay.scheduler, source="simulate", now=replay.now)
        [node] = [node for node in view.nodes if node.name == NODE]
        expected = {device["metadata"]["name"]:
                    m.CONFLICT if holders.get(device["metadata"]["name"], 0) > 1
                    and totals[device["metadata"]["name"]] > CAPACITY
                    else m.SLICES if device["metadata"]["name"] in totals else m.FREE for device in devices}
        assert {gpu.device: gpu.state for gpu in node.gpus} == expected, (stream[:n + 1], totals)
        counts = gpu_counts(replay.scheduler, now=replay.now)
        conflicts = sum(count for (_, s), count in counts.states.items() if s == m.CONFLICT)
        assert conflicts == sum(1 for s in expected.values() if s == m.CONFLICT)
