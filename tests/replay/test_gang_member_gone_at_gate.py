"""A gang placed in one decision, two members bound, the third's Binding held at the allocation
gate; then its node is deleted (devices first, as the fault harness's node_delete does) and the
gate rejects it (soak seed 55, run seed 55002, soak-3-f0f7596/b-lg0). The member bound to the
deleted node stays bound (as on a real node until PodGC) and still counts toward the gang, so
the rejected member is placed again as soon as a device is free anywhere, and waits (holding
nothing) while none is: the gang stays 2 of 3 only when no room is left, whatever the
scheduler does."""

from __future__ import annotations

from typing import Any

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from tests.helpers import config

HEARTBEAT = "2026-01-01T00:00:00Z"
CLS = "class.tessera.dev/v100"


def _ev(type_: str, obj: dict[str, Any]) -> WatchEvent:
    return WatchEvent(type_, obj)


def _gang_with_a_held_member() -> tuple[Replay, str]:
    """n (2 devices) and m (1 device): the gang fills both; one member on n waits at the gate."""
    replay = Replay(config("config/binpack.yaml"), agent=False)
    objs: list[dict[str, Any]] = [b.node("n", gpus=2), b.node("m", gpus=1),
                                  b.resource_class("v100", match_labels={"model": "V100"})]
    objs += [b.device("n", i, heartbeat=HEARTBEAT) for i in range(2)] + [b.device("m", 0, heartbeat=HEARTBEAT)]
    labels = b.gang_labels("g", 3)
    objs += [b.pod(f"g-{i}", labels=labels, limits={CLS: 1}) for i in range(3)]
    attempts = list(replay.run(_ev("ADDED", o) for o in objs))
    assert sorted(a.pod.meta.name for a in attempts if a.node) == ["g-0", "g-1", "g-2"]  # one decision
    held = replay.scheduler.held()
    assert len(held) == 1 and held[0].node == "n"
    state = replay.scheduler.state
    bound = sorted(p.meta.name for p in state.pods.values() if p.node_name)
    assert len(bound) == 2
    return replay, held[0].pod.meta.name


def _delete_node_n_and_open_its_gate(replay: Replay, held: str) -> None:
    scheduler = replay.scheduler
    for i in range(2):
        replay.take(_ev("DELETED", b.device("n", i, heartbeat=HEARTBEAT)))
    replay.take(_ev("DELETED", b.node("n", gpus=2)))
    # the sibling bound on n reports its allocation: the gate opens and decides the held one again
    sibling = next(p for p in scheduler.state.pods.values() if p.node_name == "n")
    raw = replay.pods[sibling.uid]
    raw["metadata"]["annotations"][ann.PHASE] = ann.PHASE_ALLOCATED
    replay.take(_ev("MODIFIED", raw))
    assert scheduler.take_released() == []  # not released onto a node that is gone
    pod = scheduler.state.pod_by_key(f"default/{held}")
    assert pod is not None and pod.uid in scheduler.state.pending and scheduler.state.node_of(pod.uid) is None


def test_the_rejected_member_waits_while_no_device_is_free() -> None:
    replay, held = _gang_with_a_held_member()
    _delete_node_n_and_open_its_gate(replay, held)
    assert [a.node for a in replay.drain() if a.pod.meta.name == held and a.node] == []
    state = replay.scheduler.state
    assert sum(1 for p in state.pods.values() if p.node_name) == 2  # the gang is 2 of 3: no room anywhere


def test_the_rejected_member_is_placed_again_once_a_device_is_free() -> None:
    replay, held = _gang_with_a_held_member()
    _delete_node_n_and_open_its_gate(replay, held)
    list(replay.drain())
    attempts = list(replay.run([_ev("ADDED", b.node("spare", gpus=1)),
                                _ev("ADDED", b.device("spare", 0, heartbeat=HEARTBEAT))]))
    assert [(a.pod.meta.name, a.node) for a in attempts if a.node] == [(held, "spare")]
    state = replay.scheduler.state
    assert sorted(p.meta.name for p in state.pods.values() if p.node_name) == ["g-0", "g-1", "g-2"]
