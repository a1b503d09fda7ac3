"""A scheduling attempt sets the holds of lower-priority nominated pods aside for its look at the
nodes (`Cycle._attempt`, `ClusterState.set_aside_hold`, as upstream's filters add only nominated pods
of priority >= the pod's) and puts back those on nodes it did not take. A hold may be the last holder
of a deleted ExtendedResource (a ghost: docs/operations.md, "counted until its holder ends"); setting
it aside is no end of that hold, so the
ghost must still be the ledger's device when the hold comes back — never a charge on a device the
ledger no longer knows.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import SchedulerConfig
from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config
from tests.replay.test_topology import RACK, rack_nodes, topology_config

WHOLE = "class.tessera.dev/v100"
LOW, MID, HIGH = 0, 500, 1000


def _uid(name: str) -> str:
    return b.uid_for("Pod", "default", name)


def _terminating(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": "2026-01-01T00:00:01Z"}}


def _assert_ledger_knows_its_devices(core: Scheduler) -> None:
    """Every charged device is one the ledger knows (an object or a ghost), on the node its
    charge is on; every ghost is still charged (a ghost no one holds is forgotten)."""
    state = core.state
    for device, use in state.ledger.use.items():
        assert device in state.devices, f"{device} charged to {use.exclusive | set(use.shared)}, but unknown"
        node = state.devices[device].node_name
        assert device in state.nodes[node].devices, f"{device} missing from node {node}'s devices"
    for ghost in state.ledger.ghosts:
        assert ghost in state.ledger.use, f"ghost {ghost} held by no one, yet kept"


def _nominated_with_a_ghost(gang: bool = False, cfg: SchedulerConfig | None = None) -> tuple[Scheduler, str]:
    """Node n (4 CPU, 2 GPUs); `low` (priority 0) takes its 4 CPU; `mid` (500, 2 CPU and one GPU
    of the class; with `gang`, the one member of a gang) preempts `low` and holds 2 CPU and a free
    GPU there while `low` terminates; then that GPU's ExtendedResource is deleted: a ghost only
    `mid`'s hold still holds."""
    core = Scheduler(cfg or config(BINPACK), seed=0)
    devices = [b.device("n", 0), b.device("n", 1)]
    low = b.pod("low", requests={"cpu": "4"}, node_name="n", phase="Running", priority=LOW)
    for obj in (b.node("n", cpu="4", gpus=2), b.resource_class("v100", match_labels={"model": "V100"}),
                *devices, low, b.pod("mid", requests={"cpu": "2"}, limits={WHOLE: 1}, priority=MID,
                                     labels=b.gang_labels("g", 1) if gang else None)):
        core.apply("ADDED", obj, 0.0)
    attempts = core.schedule_next(0.0)
    assert attempts and attempts[0].nominated_node == "n" and [v.meta.name for v in attempts[0].preempted] == ["low"]
    core.apply("MODIFIED", _terminating(low), 0.0)
    hold = core.state.holds[_uid("mid")]
    [ghost] = hold.placement.devices
    core.apply("DELETED", next(d for d in devices if d["metadata"]["name"] == ghost), 0.0)
    assert core.state.ledger.is_ghost(ghost) and set(core.state.ledger.use[ghost].exclusive) == {_uid("mid")}
    _assert_ledger_knows_its_devices(core)
    return core, ghost


def _run_high(core: Scheduler, requests: dict[str, str]) -> list[Attempt]:
    """`high` (priority 1000, preemptionPolicy Never) tries: its attempt sets `mid`'s hold aside."""
    core.apply("ADDED", b.pod("high", requests=requests, priority=HIGH,
                              spec_extra={"preemptionPolicy": "Never"}), 0.0)
    attempts = core.schedule_next(0.0)
    assert attempts and attempts[0].pod.meta.name == "high", attempts
    return attempts


def test_a_hold_set_aside_and_put_back_still_holds_its_ghost() -> None:
    """`high` fits nowhere: `mid`'s hold comes back as it was, its ghost with it."""
    core, ghost = _nominated_with_a_ghost()

    attempts = _run_high(core, {"cpu": "100"})

    assert attempts[0].node is None
    assert _uid("mid") in core.state.holds and ghost in core.state.holds[_uid("mid")].placement.devices
    _assert_ledger_knows_its_devices(core)
    assert core.state.ledger.is_ghost(ghost)


@pytest.mark.parametrize("gang", [False, True], ids=["pod", "gang member"])
def test_a_nominated_pods_own_hold_put_back_still_holds_its_ghost(gang: bool) -> None:
    """`mid` tries again while `low` still terminates: its attempt sets its own hold aside, fails
    (n's CPU is `low`'s until it is gone), and DefaultPreemption finds it ineligible (a victim of
    its still terminating on its nominated node: upstream's PodEligibleToPreemptOthers), so the
    hold comes back as it was, its ghost with it. A gang's cycle sets its members' holds aside
    the same way (`Cycle._schedule_gang`)."""
    core, ghost = _nominated_with_a_ghost(gang)

    core.flush_unschedulable(301.0)  # the 5-minute flush brings the parked `mid` back
    attempts = core.schedule_next(301.0)

    assert attempts and attempts[0].pod.meta.name == "mid" and attempts[0].node is None, attempts
    assert _uid("mid") in core.state.holds and ghost in core.state.holds[_uid("mid")].placement.devices
    _assert_ledger_knows_its_devices(core)
    assert core.state.ledger.is_ghost(ghost)


def test_a_hold_whose_node_a_higher_priority_pod_took_lets_its_ghost_go() -> None:
    """`low` is gone and `high` (3 CPU) takes n once `mid`'s hold is set aside: that hold ends as
    the cycle does, and the ghost only it held goes with it (`mid` keeps its nomination, and room
    on n is held for it again: `nominations.hold_nominated`, by what it asks, not by that ghost)."""
    core, ghost = _nominated_with_a_ghost()
    core.apply("DELETED", _terminating(b.pod("low", requests={"cpu": "4"}, node_name="n", phase="Running",
                                              priority=LOW)), 0.0)

    attempts = _run_high(core, {"cpu": "3"})

    assert attempts[0].node == "n"
    hold = core.state.holds.get(_uid("mid"))
    assert hold is None or ghost not in hold.placement.devices
    assert not core.state.ledger.is_ghost(ghost) and ghost not in core.state.devices
    _assert_ledger_knows_its_devices(core)


def test_a_nominated_pod_deleted_lets_the_ghost_only_its_hold_held_go() -> None:
    """`mid` is deleted while nominated: its hold ends (`release_hold`), and the ghost only it
    held is forgotten with it, not kept as a device no one holds."""
    core, ghost = _nominated_with_a_ghost()

    core.apply("DELETED", b.pod("mid", requests={"cpu": "2"}, limits={WHOLE: 1}, priority=MID), 0.0)

    assert _uid("mid") not in core.state.holds
    assert not core.state.ledger.is_ghost(ghost) and ghost not in core.state.devices
    _assert_ledger_knows_its_devices(core)


def test_a_hold_a_gangs_topology_plan_set_aside_is_put_back_with_its_ghost() -> None:
    """A gang of priority 1000 asking for one rack plans its domains without `mid`'s
    lower-priority hold (as its members' attempts will find the nodes), and fits no rack (each
    member asks 1000 CPU): the hold comes back as it was, its ghost with it."""
    core, ghost = _nominated_with_a_ghost(cfg=topology_config())
    for obj in rack_nodes({("a", "r1"): 2}):
        core.apply("ADDED", obj, 0.0)
    for i in range(2):
        core.apply("ADDED", b.pod(f"g-{i}", labels=b.gang_labels("g", 2), requests={"cpu": "1000"}, priority=HIGH,
                                  annotations={"tessera.dev/topology-required": RACK},
                                  spec_extra={"preemptionPolicy": "Never"}), 0.0)
    attempts = core.schedule_next(0.0)

    assert attempts and {a.pod.meta.name for a in attempts} == {"g-0", "g-1"}, attempts
    assert all(a.node is None for a in attempts)
    assert _uid("mid") in core.state.holds and ghost in core.state.holds[_uid("mid")].placement.devices
    _assert_ledger_knows_its_devices(core)
    assert core.state.ledger.is_ghost(ghost)
