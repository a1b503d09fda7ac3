"""One pod holding more of a shared GPU than the GPU has says why in REASON.

Two or more holders over a capacity read `conflict` (tests/replay/test_slice_overfill_restart.py),
a capacity seen going down beneath its holders reads `slices` with "its memory went down to ...".
A single holder over a capacity is neither (no second holder to conflict with), and before it read
`slices 5Gi/4Gi` with an empty REASON: nothing said the GPU takes no more slices, nor why it is
over. Found so at a start, a listing cannot tell a cut from a slice given beyond the capacity
(`UNTOLD`); seen bound live by a Binding Tessera did not decide, it was given beyond it.
"""

from __future__ import annotations

from scheduler.core.state.ledger import UNTOLD
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from tests.replay.test_slice_overfill_conflict import NODE, SHARED, _bound_elsewhere, _conflicts, _gpu, _slice
from tests.replay.test_slice_overfill_restart import _restart
from tests.helpers import config


def _tries_a_small_pod(replay: Replay) -> str | None:
    list(replay.run([WatchEvent("ADDED", b.pod("small", limits={SHARED: 1}))]))
    return replay.scheduler.state.node_of(b.uid_for("Pod", "default", "small"))


def test_one_holder_over_the_capacity_found_at_a_start_says_why() -> None:
    replay, _ = _restart(device_first=True, memory="4Gi", names=("r1-0",))
    gpu = _gpu(replay)
    assert gpu.state == m.SLICES and gpu.used == "5Gi/4Gi" and _conflicts(replay) == 0
    assert gpu.reason == (f"its slices use 5Gi of its 4Gi memory, held by default/r1-0 alone: {UNTOLD}; no more "
                          "of it is given out until they fit"), gpu.reason
    assert _tries_a_small_pod(replay) is None  # what the REASON says


def test_one_holder_bound_beyond_the_capacity_live_says_it_was_given_beyond_it() -> None:
    device = b.device(NODE, 0, model="T4", memory="4Gi")
    replay = Replay(config(), agent=True)
    list(replay.run(WatchEvent("ADDED", obj) for obj in (
        b.node(NODE, gpus=1), device,
        b.resource_class("t4-shared", match_labels={"model": "T4"}, sharing={"dimension": "memory", "unit": "1Gi"}))))
    _bound_elsewhere(replay, "other", _slice(device, 5))
    gpu = _gpu(replay)
    assert gpu.state == m.SLICES and gpu.used == "5Gi/4Gi" and _conflicts(replay) == 0
    assert gpu.reason == ("its slices use 5Gi of its 4Gi memory, held by default/other alone: given beyond it by a "
                          "Binding Tessera did not decide (another scheduler, or a Binding by hand); no more of it is "
                          "given out until they fit"), gpu.reason
    assert _tries_a_small_pod(replay) is None
