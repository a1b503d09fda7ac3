"""A nominated preemptor's room on a node is kept in devices too, as a new leader rebuilds it
(`core/nominations.py`): from the preemptor's `status.nominatedNodeName` and its victim, still
terminating. A lower-priority pod is never given the victim's GPU — neither while the victim
terminates (it still has it) nor once it is gone (the preemptor's) — and no GPU is ever charged to
two running pods; when the nominated node goes away, the room goes with it."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config
from tests.property.test_invariants import check_state_consistent

WHOLE = "class.tessera.dev/whole"


def _cluster(node: str = "n") -> list[dict[str, Any]]:
    return [b.node(node, gpus=2), b.device(node, 0), b.device(node, 1)]


def _new_leaders_view() -> list[dict[str, Any]]:
    """v0 and v1 each run on one of n's two GPUs; v0 is terminating (an earlier leader's victim)
    and p (priority 100) is nominated to n."""
    first = Run(config(BINPACK))
    first.add(*_cluster(), b.resource_class("whole", match_labels={"model": "V100"}))
    first.add(b.pod("v0", limits={WHOLE: 1}), b.pod("v1", limits={WHOLE: 1}))
    victims = []
    for name in ("v0", "v1"):
        raw = copy.deepcopy(first.replay.pods[first.state.pod_by_key(f"default/{name}").uid])
        raw["status"]["phase"] = "Running"
        victims.append(raw)
    victims[0]["metadata"]["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    preemptor = b.pod("p", limits={WHOLE: 1}, priority=100)
    preemptor["status"]["nominatedNodeName"] = "n"
    return [*_cluster(), b.resource_class("whole", match_labels={"model": "V100"}), *victims, preemptor]


def _listed(reverse: bool) -> Run:
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # victims terminate, but are not gone yet
    run.add(*_new_leaders_view()[::-1 if reverse else 1])
    return run


def _holders(run: Run) -> dict[str, set[str]]:
    state = run.state
    return {device: {state.pods[uid].meta.name for uid in use.exclusive} for device, use in state.ledger.use.items()}


def test_a_lower_priority_pod_never_gets_the_terminating_victims_gpu() -> None:
    for reverse in (False, True):
        run = _listed(reverse)
        assert run.node_of("p") is None
        run.add(b.pod("l", limits={WHOLE: 1}))
        assert run.node_of("l") is None  # v0 still has its GPU, and it is p's next
        check_state_consistent(run.scheduler)
        # v0 goes while p backs off from its last attempt: k (priority 50, new) is tried first,
        # and p's room keeps v0's GPU from it
        scheduler, now = run.scheduler, run.replay.now
        scheduler.apply("DELETED", run.replay.pods[run.state.pod_by_key("default/v0").uid], now)
        scheduler.apply("ADDED", b.pod("k", limits={WHOLE: 1}, priority=50), now)
        [attempt] = scheduler.schedule_next(now)
        assert (attempt.pod.meta.name, attempt.node) == ("k", None)
        assert sorted(map(sorted, _holders(run).values())) == [["k", "v1"], ["p"]]  # k's room beside its victim
        check_state_consistent(run.scheduler)


def test_the_room_goes_with_the_nominated_node() -> None:
    """n is deleted while p's room is held there: p is placed on the next node with a GPU (before
    the lower-priority l), and the room it held on n is not left behind."""
    run = _listed(reverse=False)
    run.feed(b.event("DELETED", b.node("n", gpus=2)))
    run.add(b.pod("l", limits={WHOLE: 1}))
    run.add(b.node("m", gpus=1), b.device("m", 0))
    assert (run.node_of("p"), run.node_of("l")) == ("m", None)
    assert not run.state.holds
    check_state_consistent(run.scheduler)


def test_the_room_goes_once_the_preemptor_is_bound_by_another_leader() -> None:
    """p's room (a hold on v0's GPU) goes once the watch shows p bound — here by a newer leader,
    onto that GPU, after v0 left: p's GPU counts once, not as its room and its placement both.
    (Found by mutation: a hold kept past its pod's Binding left every replay and property test
    green; the node then counted one GPU more in use than its pods have, for p's whole life.)"""
    run = _listed(reverse=False)
    state = run.state
    p_uid = state.pod_by_key("default/p").uid
    [device] = state.holds[p_uid].placement.devices
    scheduler, now = run.scheduler, run.replay.now
    scheduler.apply("DELETED", run.replay.pods[state.pod_by_key("default/v0").uid], now)
    bound = copy.deepcopy(run.replay.pods[p_uid])
    bound["spec"]["nodeName"] = "n"
    bound["metadata"]["annotations"] = {ann.DEVICES: ann.encode_devices(
        {"main": {WHOLE: (ann.DeviceGrant(state.devices[device].device_id, device, None),)}})}
    bound["metadata"]["resourceVersion"] = "900"
    scheduler.apply("MODIFIED", bound, now)
    assert not state.holds
    assert state.nodes["n"].used("nvidia.com/gpu") == 2  # v1 and p
    assert _holders(run)[device] == {"p"}
    check_state_consistent(run.scheduler)
