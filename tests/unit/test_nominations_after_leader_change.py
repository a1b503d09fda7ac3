"""Nominations a leader before this one (or this process before a restart) wrote: kube-scheduler
v1.36.3 rebuilds its nominator from `status.nominatedNodeName` as pods enter the queue
(pkg/scheduler/backend/queue/scheduling_queue.go moveToActiveQ -> nominator.addNominatedPod,
nominator.go), and Filter counts every pod nominated to the node with a priority >= the pod's,
the pod itself excepted (framework/runtime/framework.go addGENominatedPods,
RunFilterPluginsWithNominatedPods)."""

from __future__ import annotations

from typing import Any

from scheduler.core.annotations import DEVICES, DeviceGrant, encode_devices
from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from scheduler.sim.replay import WatchEvent
from tests.helpers import BINPACK, Run, config

MARK = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
         "message": "tessera: preempting to accommodate a higher priority pod",
         "lastTransitionTime": "2026-01-01T00:00:10Z"}]
V100 = "class.tessera.dev/v100"


def _running(name: str, node: str, priority: int, gpus: int, **kw: Any) -> dict[str, Any]:
    pod = b.pod(name, requests={"cpu": "1", "memory": "1Gi"}, limits={"nvidia.com/gpu": gpus}, priority=priority,
                node_name=node, phase="Running", **kw)
    pod["status"]["startTime"] = "2026-01-01T00:00:00Z"
    return pod


def _terminating(pod: dict[str, Any]) -> dict[str, Any]:
    """A victim an earlier leader evicted: deleted, marked, still running."""
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:10Z"
    pod["status"]["conditions"] = MARK
    return pod


def _nominated(pod: dict[str, Any], node: str) -> dict[str, Any]:
    pod["status"]["nominatedNodeName"] = node
    return pod


def _new_leader(*listed: dict[str, Any]) -> Run:
    """A fresh core that lists the cluster (every object before its first cycle, as the live
    loop's informers sync before it schedules) and evicts nothing itself."""
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    run.attempts += run.replay.run_listing(WatchEvent("ADDED", obj) for obj in listed)
    return run


def test_a_lower_pod_does_not_take_the_room_an_earlier_leader_nominated_beside_terminating_victims() -> None:
    """Node n has 4 GPUs: 2 held by `low`, which an earlier leader evicted for `a` (4 GPUs,
    nominated to n) and which still terminates; 2 are free. Upstream's new leader has `a` in its
    nominator, so `q` (2 GPUs, lower priority) fails NodeResourcesFit on n (2 + 4 + 2 > 4) and `a`
    gets n once `low` is gone. Tessera's new leader gave `q` the 2 free GPUs: `a` then fit nowhere
    and had to preempt again (q)."""
    run = _new_leader(b.node("n", gpus=4), _terminating(_running("low", "n", 0, 2)),
                      _nominated(b.pod("a", requests={"cpu": "1"}, limits={"nvidia.com/gpu": 4}, priority=100), "n"))
    assert run.last("a").node is None and run.last("a").message.endswith(
        "preemption: not eligible due to a terminating pod on the nominated node.")
    run.add(b.pod("q", requests={"cpu": "1"}, limits={"nvidia.com/gpu": 2}, priority=0))
    assert run.last("q").node is None
    run.feed(b.event("DELETED", _terminating(_running("low", "n", 0, 2))))
    assert run.node_of("a") == "n" and not run.last("a").preempted


def _devices_of(*devices: dict[str, Any]) -> dict[str, str]:
    """The `tessera.dev/devices` annotation of a pod granted these ExtendedResources whole."""
    grants = tuple(DeviceGrant(d["spec"]["deviceID"], d["metadata"]["name"], None) for d in devices)
    return {DEVICES: encode_devices({"main": {V100: grants}})}


def test_a_new_leader_keeps_the_class_devices_a_nominated_pod_was_promised() -> None:
    """The same with GPUs handed out by class (ExtendedResources): `a` was nominated to n for all
    four V100s, two of them still held by its terminating victim. `q` (2 V100s, lower priority)
    must not get the two free ones: the room kept for `a` includes which devices, as the hold an
    earlier leader's preemption made did. (Nothing counts class requests but the device ledger, so
    the rebuilt room must name devices.)"""
    gpus = [b.device("n", i) for i in range(4)]
    low = _terminating(b.pod("low", limits={V100: 2}, priority=0, node_name="n", phase="Running",
                             annotations=_devices_of(*gpus[:2])))
    run = _new_leader(b.node("n", gpus=4), *gpus, b.resource_class("v100", match_labels={"model": "V100"}), low,
                      _nominated(b.pod("a", limits={V100: 4}, priority=100), "n"))
    run.add(b.pod("q", limits={V100: 2}, priority=0))
    assert run.last("q").node is None
    run.feed(b.event("DELETED", low))
    assert run.node_of("a") == "n" and not run.last("a").preempted


def test_a_new_leader_keeps_the_room_of_a_gang_nominated_across_nodes() -> None:
    """A gang (minimum 2) an earlier leader preempted for: g-0 nominated to n1, g-1 to n2, each
    node with a victim still terminating on 2 of its 4 GPUs. Upstream's nominator has both members
    (each pod's own nominatedNodeName), so the lower-priority q1, q2 (2 GPUs each) fit nowhere;
    once the victims are gone the gang takes its two nodes without preempting again."""
    run = _new_leader(b.node("n1", gpus=4), b.node("n2", gpus=4), _terminating(_running("v1", "n1", 0, 2)),
                      _terminating(_running("v2", "n2", 0, 2)),
                      *(_nominated(b.pod(member, limits={"nvidia.com/gpu": 4}, priority=100,
                                         labels=b.gang_labels("g", 2)), node)
                        for member, node in (("g-0", "n1"), ("g-1", "n2"))))
    assert run.last("g-0").message.endswith("preemption: not eligible due to a terminating pod on the nominated node.")
    run.add(b.pod("q1", limits={"nvidia.com/gpu": 2}, priority=0), b.pod("q2", limits={"nvidia.com/gpu": 2}, priority=0))
    assert run.last("q1").node is None and run.last("q2").node is None
    run.feed(b.event("DELETED", _terminating(_running("v1", "n1", 0, 2))),
             b.event("DELETED", _terminating(_running("v2", "n2", 0, 2))))
    assert (run.node_of("g-0"), run.node_of("g-1")) == ("n1", "n2")
    assert not any(a.preempted for a in run.attempts)


def test_a_preemptor_is_not_woken_by_the_room_its_own_failed_attempt_gave_up() -> None:
    """`p` preempted `low` and holds its room on n; then class v100 goes, and p's retry fails in
    PreFilter, which clears its nomination and its hold. That room is given back for the pods it
    kept out (an AssignedPodDelete, as Tessera treats a dropped hold) — but it never kept out p
    itself: upstream's Filter skips the pod's own nomination (addGENominatedPods: `pi.Pod.UID ==
    pod.UID`), and dropping a nomination moves no pod (nominator.go changes no queue). Tessera
    woke p with its own room and ran the same failing attempt a second time at once."""
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    v100 = b.resource_class("v100", match_labels={"model": "V100"})
    run.add(b.node("n", gpus=1), b.device("n", 0), v100)
    run.add(b.pod("low", limits={V100: 1}, priority=0))
    run.add(b.pod("p", limits={V100: 1}, priority=100))
    assert run.last("p").nominated_node == "n" and run.state.holds
    before = len(run.attempts)
    run.feed(b.event("DELETED", v100))
    tries = [a for a in run.attempts[before:] if a.pod.meta.name == "p"]
    assert len(tries) == 1 and tries[0].nominated_node == "" and not run.state.holds


def _drain(core: Scheduler, now: float) -> list[Attempt]:
    out: list[Attempt] = []
    while (attempts := core.schedule_next(now)) is not None:
        out += attempts
    return out


def test_a_nomination_a_higher_priority_pod_built_over_still_keeps_lower_pods_out() -> None:
    """`p` (priority 100, 2 GPUs) preempted `low` for room on n (4 GPUs). Once low is gone, `h`
    (priority 1000) and `q` (priority 0) arrive while p backs off: h takes 2 GPUs of n first — p's
    nomination does not bind a higher pod. Upstream's nominator still has p on n (nothing clears
    a nomination when a higher pod is bound there), so q fails Filter on n: 2 (h) + 2 (p) + 2 > 4,
    and p gets n. Tessera dropped p's room for good when h took the node: q got the last 2 GPUs."""
    core = Scheduler(config(BINPACK))
    core.apply("ADDED", b.node("n", gpus=4), 0.0)
    low = _running("low", "n", 0, 4)
    core.apply("ADDED", low, 0.0)
    core.apply("ADDED", b.pod("p", limits={"nvidia.com/gpu": 2}, priority=100), 0.0)
    [first] = _drain(core, 0.0)
    assert first.nominated_node == "n" and [v.meta.name for v in first.preempted] == ["low"]
    core.apply("DELETED", low, 0.3)  # p backs off until t=1
    core.apply("ADDED", b.pod("h", limits={"nvidia.com/gpu": 2}, priority=1000), 0.3)
    core.apply("ADDED", b.pod("q", limits={"nvidia.com/gpu": 2}, priority=0), 0.3)
    tried = [(a.pod.meta.name, a.node) for a in _drain(core, 0.3)]
    assert tried == [("h", "n"), ("q", None), ("p", "n")]


def test_a_nomination_another_leader_cleared_or_moved_lets_go_of_the_room_it_kept_here() -> None:
    """Adversary round 5: a standby kept the room of pods whose nomination the leader had since
    cleared (or moved to another node) — 30 false `DeviceConflict` Warnings over three minutes
    naming pods never bound, and GPUs a takeover would have kept reserved until the pod's next
    cycle. A nomination that goes away in the watch lets its hold go with it; a nomination written
    to where the hold already is keeps it."""
    a = _nominated(b.pod("a", requests={"cpu": "1"}, limits={"nvidia.com/gpu": 4}, priority=100), "n")
    run = _new_leader(b.node("n", gpus=4), b.node("m", gpus=4), _terminating(_running("low", "n", 0, 2)),
                      _running("big", "m", 1000, 4), a)
    uid = run.state.pod_by_key("default/a").uid
    assert run.state.holds[uid].placement.node == "n"
    moved = _nominated(b.pod("a", requests={"cpu": "1"}, limits={"nvidia.com/gpu": 4}, priority=100), "m")
    run.scheduler.apply("MODIFIED", moved, 20.0)
    hold = run.state.holds.get(uid)
    assert hold is None or hold.placement.node == "m"
    cleared = b.pod("a", requests={"cpu": "1"}, limits={"nvidia.com/gpu": 4}, priority=100)
    run.scheduler.apply("MODIFIED", cleared, 21.0)
    assert uid not in run.state.holds
