"""The fuzz harness's own model of the ledger, on streams written out by hand: where the model
and the ledger's rule once parted (the harness judged a correct ledger wrong), so that the random
streams keep testing the product, not the model."""

from __future__ import annotations

import copy

from scheduler.sim import builders as b
from tests.fuzz.harness import CONFIGS, Harness


def test_the_busy_recount_counts_a_gpu_held_by_a_name_the_ledger_keeps_elsewhere() -> None:
    """A bound pod holding n0's GPU is updated to name another node (n9, no Node object) and back:
    the core keeps the held name as a ghost on n9 and counts the GPU busy on n0 by its deviceID
    (`DeviceLedger.elsewhere`); the harness recounted busy from n0's own devices only (the
    property test's NODE_NAME_AND_BACK, which its model once missed too)."""
    h = Harness(CONFIGS["binpack"])
    h.add(b.node("n0", gpus=1), b.device("n0", 0), b.resource_class("c0", match_labels={"model": "V100"}),
          b.pod("p0", limits={"class.tessera.dev/c0": 1}))
    [uid] = h.state.placements
    bound = copy.deepcopy(h.replay.pods[uid])
    assert bound["spec"]["nodeName"] == "n0"
    moved = copy.deepcopy(bound)
    moved["spec"]["nodeName"] = "n9"
    h.send("MODIFIED", moved)
    h.send("MODIFIED", bound)
    assert h.state.placements[uid].node == "n0"
    assert h.state.ledger.elsewhere.get("n0"), "the stream no longer makes the ledger keep a GPU elsewhere"
    h.check_ledger()
