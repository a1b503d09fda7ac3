"""Property: slices a single Tessera placed never read as a conflict, whatever their GPUs' capacity
is lowered to (or raised back to) meanwhile; and it places nothing beyond a capacity as it is now.

Two T4s of one node, a class sharing them by memory in 1Gi slices. Pods left to this core,
deletions and edits of either GPU's `capacity.memory` (4Gi-16Gi), in any order. After every event:

- a GPU the core placed a pod on in that event holds at most its capacity as it is now;
- no GPU reads `conflict` (view, scrape counts) and no DeviceConflict was said: a capacity lowered
  under slices is a cut (their pods keep them), not a GPU given twice;
- a GPU over its capacity reads `slices`, with REASON saying its memory went down.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.quantity import parse_quantity
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from scheduler.view.cluster import build_view, gpu_counts
from tests.helpers import config

SHARED = "class.tessera.dev/t4-shared"
GI = 2**30
NODE = "t4-node-001"


@dataclass(frozen=True)
class Step:
    kind: str  # "ours" (pending for this core), "delete", "capacity" (a GPU's memory edited)
    device: int
    gib: int


steps = st.one_of(
    st.builds(Step, st.just("ours"), st.just(0), st.integers(1, 9)),
    st.builds(Step, st.just("delete"), st.integers(0, 30), st.just(0)),
    st.builds(Step, st.just("capacity"), st.integers(0, 1), st.integers(4, 16)),
)


@settings(max_examples=int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0) or 150, deadline=None,
          database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, min_size=1, max_size=24))
def test_a_lowered_capacity_never_makes_tesseras_own_slices_a_conflict(stream: list[Step]) -> None:
    devices: list[dict[str, Any]] = [b.device(NODE, i, model="T4", memory="16Gi") for i in range(2)]
    replay = Replay(config(), agent=True)
    objs = [b.node(NODE, gpus=2), *devices,
            b.resource_class("t4-shared", match_labels={"model": "T4"}, sharing={"dimension": "memory", "unit": "1Gi"})]
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    state = replay.scheduler.state
    live: list[dict[str, Any]] = []
    version = 10
    for n, step in enumerate(stream):
        before = set(state.placements)
        if step.kind == "delete":
            if not live:
                continue
            list(replay.run([WatchEvent("DELETED", live.pop(step.device % len(live)))]))
        elif step.kind == "capacity":
            version += 1
            changed = copy.deepcopy(devices[step.device])
            changed["spec"]["capacity"]["memory"] = f"{step.gib}Gi"
            changed["metadata"]["resourceVersion"] = str(version)
            devices[step.device] = changed
            list(replay.run([WatchEvent("MODIFIED", changed)]))
        else:
            pod = b.pod(f"p{n}", limits={SHARED: step.gib})
            live.append(pod)
            list(replay.run([WatchEvent("ADDED", pod)]))
        capacity = {d["metadata"]["name"]: parse_quantity(d["spec"]["capacity"]["memory"]) for d in devices}
        totals: dict[str, int] = {}
        for placement in state.placements.values():
            for device, amount, _, _ in placement.grants:
                assert amount is not None
                totals[device] = totals.get(device, 0) + int(amount)
        for uid in set(state.placements) - before:  # placed by this core in this event
            for device, _, _, _ in state.placements[uid].grants:
                assert totals[device] <= capacity[device], (stream[:n + 1], device, totals[device])
        view = build_view(replay.scheduler, source="simulate", now=replay.now)
        [node] = [node for node in view.nodes if node.name == NODE]
        for gpu in node.gpus:
            assert gpu.state != m.CONFLICT, (stream[:n + 1], gpu)
            if totals.get(gpu.device, 0) > capacity[gpu.device]:
                assert gpu.state == m.SLICES and "its memory went down to" in gpu.reason, (stream[:n + 1], gpu)
        counts = gpu_counts(replay.scheduler, now=replay.now)
        assert not any(s == m.CONFLICT for (_, s) in counts.states)
        assert not [notice for notice in replay.stats.notices if notice.reason == "DeviceConflict"], stream[:n + 1]
